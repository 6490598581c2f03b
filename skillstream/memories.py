"""The per-owner memory state used during extraction (pure, picklable).

Holds the owner's memories by id with a key index and a vector matrix for retrieval. The flow keeps
one ``OwnerMemories`` per owner in Bytewax state, so what the extractor sees for a span is exactly
what earlier spans of that owner left, also after a crash and resume.

``OwnerMemories.index`` is the lookup structure applying a span needs (memories by normalised text,
by key, and a matrix of their vectors for the near-duplicate check). It is built once, from the
memories, when first asked for, and then kept up to date by every ``put`` and ``touch``: a span
costs what its own changes cost, not a rebuild over the owner's history. It is derived data: never
pickled into a snapshot, rebuilt after a restore. Work that changes memories in place (lifecycle
maintenance) tells it which ones afterwards (``reindex``).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import TypeVar

import numpy as np

from skillstream.model import Memory
from skillstream.vocab import MemoryKind, MemoryStatus

LIVE: tuple[MemoryStatus, ...] = (MemoryStatus.GENERATED, MemoryStatus.ACTIVATED)
"""Live statuses: new (``generated``) or used (``activated``); extraction sees these memories."""
NOT_RETRIEVED = frozenset({MemoryKind.SUMMARY, MemoryKind.TOPIC})
"""Kinds the extractor is not shown: session summaries and topic nodes restate other memories."""
NOT_PEOPLE = frozenset({"user", "assistant", "用户", "助手"})
"""Subjects that are roles, not named people (``OwnerIndex.known_people`` leaves them out)."""
_NO_TIME = datetime.min.replace(tzinfo=UTC)
T = TypeVar("T")
PREPARE_ROWS = 1024
"""Below this many rows, ``prepare_similar`` leaves each ``similar`` to its own product."""
_NARROW = 1e-4
"""Margin of the float32 pass of ``OwnerIndex.similar`` (its rounding error is far smaller)."""
_NORM = re.compile(r"[^\w]+", re.UNICODE)


@lru_cache(maxsize=1 << 16)
def normalise(text: str) -> str:
    """Lower case, punctuation and runs of space folded (the key of a verbatim restatement).

    Cached: every span re-indexes the owner's memories by it.
    """
    return _NORM.sub(" ", text.lower()).strip()


def _changed(m: Memory) -> datetime:
    return m.updated_at or m.created_at or _NO_TIME


def person(m: Memory) -> str | None:
    """The lower-case name of the person a live memory is about (``None``: not live, no subject,
    or a role such as ``user``)."""
    s = m.subject
    if s and s not in NOT_PEOPLE and m.status in LIVE:
        return s.lower()
    return None


def _recency(m: Memory) -> tuple[datetime, str]:
    return (m.updated_at or m.created_at or _NO_TIME, m.id)


class _Desc:
    """Reverses the order of a key, so the heap (smallest first) pops the largest key first."""

    __slots__ = ("key",)

    def __init__(self, key: tuple[datetime, str]) -> None:
        self.key = key

    def __lt__(self, other: _Desc) -> bool:
        return self.key > other.key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.key == other.key


def age_key(m: Memory) -> tuple[datetime, str]:
    """Oldest first, then by id: the one order every lifecycle rule iterates in."""
    return (m.created_at or _NO_TIME, m.id)


class OwnerIndex:
    """Memories of one owner by normalised text, by key, and their vectors as one matrix.

    Entries are only ever added: a memory whose text, key or status changed keeps its old entries,
    and every lookup re-reads the memory by id and checks it, so a stale entry costs a check and
    never a wrong answer. Candidates come back oldest first (``age_key``), the order a rebuild from
    the whole history would give.
    """

    def __init__(self, items: dict[str, Memory]) -> None:
        self.items = items
        self.by_text: dict[str, dict[str, None]] = {}
        self.by_key: dict[str, dict[str, None]] = {}
        self.by_subject: dict[str, dict[str, None]] = {}  # of ``subject|kind|head`` keys
        # the vectors of the live memories, one matrix row each (rows of memories that stop being
        # live are freed and reused)
        self.rows: dict[str, int] = {}
        self.ids: list[str] = []
        self.vectors: list[object] = []  # the array each row was copied from (change detection)
        self.mat: np.ndarray | None = None
        self.live_by_type: dict[str, dict[str, None]] = {}
        """Live memories (not topic nodes) by type, exactly (capacity checks read it)."""
        self._counted: dict[str, str] = {}  # id -> the type it is counted live under
        # Named people: each memory's place in ``items`` (insertion order), the person each live
        # memory is counted under, and per person a heap of (place, id) whose top, once entries
        # no longer counted are dropped, is the first memory about that person in ``items``.
        self._place: dict[str, int] = {mid: i for i, mid in enumerate(items)}
        self._person: dict[str, str] = {}
        self._about: dict[str, list[tuple[int, str]]] = {}
        self._known: dict[str, str] | None = None
        # ``prepare_similar``: per vector (by object), the rows that may reach its floor, found
        # when ``_prepared`` rows existed; rows rewritten since must be checked too
        self._prepared: dict[int, tuple[object, float, np.ndarray]] = {}
        self._prepared_rows = 0
        self._rewritten: set[int] = set()
        self._free_rows: list[int] = []
        self.changed: dict[str, None] = {}
        """Memories indexed since the last ``take_changed`` (all of them at first)."""
        self.topics: dict[str, None] = {}
        """Topic nodes, whatever their status."""
        # live memories the extractor may be shown, newest first (``recent``); entries are only
        # added, and one whose memory changed or left is dropped when it comes up
        self._recent: list[tuple[_Desc, str]] = []
        for m in sorted(items.values(), key=age_key):
            self.add(m)

    def add(self, m: Memory) -> None:
        """Index ``m`` under its current text, key, status and vector (idempotent)."""
        self.changed[m.id] = None
        if m.kind == MemoryKind.TOPIC:
            self.topics[m.id] = None
        if m.status in LIVE and m.kind not in NOT_RETRIEVED:
            heapq.heappush(self._recent, (_Desc(_recency(m)), m.id))
        was = self._counted.pop(m.id, None)
        if was is not None:
            self.live_by_type[was].pop(m.id, None)
        if m.status in LIVE and m.kind != MemoryKind.TOPIC:
            self._counted[m.id] = m.memory_type
            self.live_by_type.setdefault(m.memory_type, {})[m.id] = None
        self._count_person(m)
        self.by_text.setdefault(normalise(m.text), {})[m.id] = None
        if m.key:
            self.by_key.setdefault(m.key, {})[m.id] = None
            if m.key.count("|") >= 2:
                self.by_subject.setdefault(m.key.split("|", 1)[0], {})[m.id] = None
        row = self.rows.get(m.id)
        if m.vector is None or m.status not in LIVE:  # only live memories are near-duplicates
            if row is not None and m.status not in LIVE:
                self._free(m.id, row)
            return
        if row is not None and self.vectors[row] is m.vector:
            return
        v = np.asarray(m.vector, dtype=np.float32).reshape(-1)
        if row is None:
            if self._free_rows:
                row = self._free_rows.pop()
                self.ids[row], self.vectors[row] = m.id, m.vector
                self._rewritten.add(row)
            else:
                row = len(self.ids)
                if self.mat is None:
                    self.mat = np.empty((64, v.shape[0]), dtype=np.float32)
                elif row == self.mat.shape[0]:  # grow by doubling: adding stays amortised O(1)
                    self.mat = np.concatenate([self.mat, np.empty_like(self.mat)])
                self.ids.append(m.id)
                self.vectors.append(m.vector)
            self.rows[m.id] = row
        else:
            self.vectors[row] = m.vector
            self._rewritten.add(row)
        self.mat[row] = v  # type: ignore[index]

    def take_changed(self) -> list[str]:
        """The ids indexed since the last call (every id after a rebuild), and forget them."""
        out, self.changed = list(self.changed), {}
        return out

    def recent(self, k: int) -> list[Memory]:
        """The ``k`` live memories the extractor may be shown that changed last (update time,
        else creation time; ties: the larger id first), newest first."""
        heap, seen = self._recent, set()
        out: list[Memory] = []
        taken: list[tuple[_Desc, str]] = []
        while heap and len(out) < k:
            entry = heapq.heappop(heap)
            mid = entry[1]
            m = self.items.get(mid)
            if (
                m is None
                or mid in seen
                or m.status not in LIVE
                or m.kind in NOT_RETRIEVED
                or _recency(m) != entry[0].key
            ):
                continue  # stale: the memory changed, left or is already taken
            seen.add(mid)
            out.append(m)
            taken.append(entry)
        for entry in taken:
            heapq.heappush(heap, entry)
        if len(heap) > 4 * (len(self._counted) + 64):  # mostly stale: start again from the live
            self._recent = [
                (_Desc(_recency(m)), m.id)
                for m in self.items.values()
                if m.status in LIVE and m.kind not in NOT_RETRIEVED
            ]
            heapq.heapify(self._recent)
        return out

    def _free(self, memory_id: str, row: int) -> None:
        """Give up ``row`` of a memory that is no longer live (a new live memory reuses it)."""
        del self.rows[memory_id]
        self.ids[row], self.vectors[row] = "", None
        self.mat[row] = 0.0  # type: ignore[index]
        self._free_rows.append(row)

    def _count_person(self, m: Memory) -> None:
        place = self._place.get(m.id)
        if place is None:  # new in ``items``: it went in last
            place = self._place[m.id] = len(self._place)
        was, now = self._person.get(m.id), person(m)
        if was is not None and (was != now or self._first(was) == m.id):
            self._known = None  # left a person, or is the first memory about its person
        if now is None:
            self._person.pop(m.id, None)
            return
        self._person[m.id] = now
        if was != now:
            heapq.heappush(self._about.setdefault(now, []), (place, m.id))
            if self._first(now) == m.id:
                self._known = None

    def _first(self, name: str) -> str | None:
        """The first memory in ``items`` counted under person ``name`` (``None``: none is)."""
        heap = self._about.get(name)
        while heap and self._person.get(heap[0][1]) != name:
            heapq.heappop(heap)  # no longer about ``name`` (it may come back: pushed again then)
        if not heap:
            self._about.pop(name, None)
            return None
        return heap[0][1]

    def known_people(self) -> dict[str, str]:
        """Named people the live memories are about: lower-case name -> the name as the first such
        memory in ``items`` writes it, in the order of those first memories (what one pass over
        ``items`` in order would collect)."""
        if self._known is None:
            firsts = [(n, f) for n in list(self._about) if (f := self._first(n)) is not None]
            firsts.sort(key=lambda nf: self._place[nf[1]])
            self._known = {n: self.items[f].subject for n, f in firsts}  # type: ignore[misc]
        return dict(self._known)

    def _resolve(self, ids: dict[str, None]) -> list[Memory]:
        found = [m for m in (self.items.get(i) for i in ids) if m is not None]
        return sorted(found, key=age_key)

    def live_of_type(self, memory_type: str) -> list[Memory]:
        """The live memories of ``memory_type`` (topic nodes aside)."""
        return [self.items[i] for i in self.live_by_type.get(memory_type, {})]

    def with_text(self, norm: str) -> list[Memory]:
        """Memories whose normalised text is ``norm`` now, oldest first."""
        return [m for m in self._resolve(self.by_text.get(norm, {})) if normalise(m.text) == norm]

    def with_key(self, key: str) -> list[Memory]:
        """Memories whose key is ``key`` now, oldest first."""
        return [m for m in self._resolve(self.by_key.get(key, {})) if m.key == key]

    def with_subject(self, subject: str) -> list[Memory]:
        """Memories whose key is ``subject|kind|head`` now, oldest first."""
        return [
            m
            for m in self._resolve(self.by_subject.get(subject, {}))
            if m.key and m.key.count("|") >= 2 and m.key.split("|", 1)[0] == subject
        ]

    def prepare_similar(self, vectors: Iterable[np.ndarray], floor: float) -> None:
        """Narrow the rows for ``similar`` of each of ``vectors`` in one matrix product.

        A span asks ``similar`` once per new memory; each float32 pass reads the owner's whole
        matrix. Prepared, the matrix is read once for all of them, and ``similar`` of a prepared
        vector (the same object) checks the rows found here and the rows added or rewritten since.
        """
        vectors = list(vectors)
        self._prepared, self._prepared_rows, self._rewritten = {}, len(self.ids), set()
        if not vectors or self.mat is None or len(self.ids) < PREPARE_ROWS:
            return
        block = np.stack([np.asarray(v, dtype=np.float32).reshape(-1) for v in vectors])
        hits = self.mat[: len(self.ids)] @ block.T >= floor - _NARROW
        for j, v in enumerate(vectors):
            self._prepared[id(v)] = (v, floor, np.flatnonzero(hits[:, j]))

    def similar(self, vector: np.ndarray, floor: float) -> list[tuple[Memory, float]]:
        """Live memories whose vector's dot product with ``vector`` is at least ``floor``, with it.

        The products that decide are computed in float64: a float32 product's last bits depend
        on where its row sits in the matrix (the order rows were added), and an index kept since
        the first span and one rebuilt after a restore must answer alike. The float32 pass only
        narrows the rows down, with a margin far above its rounding error (``prepare_similar``
        does it for many vectors at once).
        """
        if self.mat is None or not self.ids:
            return []
        v = np.asarray(vector, dtype=np.float32).reshape(-1)
        prepared = self._prepared.get(id(vector))
        if prepared is not None and prepared[0] is vector and prepared[1] <= floor:
            since = np.arange(self._prepared_rows, len(self.ids))
            rewritten = np.fromiter(self._rewritten, dtype=np.int64, count=len(self._rewritten))
            near = np.unique(np.concatenate([prepared[2], since, rewritten]))
        else:
            near = np.flatnonzero(self.mat[: len(self.ids)] @ v >= floor - _NARROW)
        if near.size == 0:
            return []
        sims = self.mat[near].astype(np.float64) @ v.astype(np.float64)
        out = []
        for i, sim in zip(near.tolist(), sims.tolist()):
            if sim < floor:
                continue
            m = self.items.get(self.ids[i])
            if m is not None and m.vector is self.vectors[i]:
                out.append((m, sim))
        return out


@dataclass
class OwnerMemories:
    """All memories of one owner, with lookups the extractors need."""

    owner_id: str
    items: dict[str, Memory] = field(default_factory=dict)
    last_span_seq: dict[str, int] = field(default_factory=dict)
    """Per conversation, the seq of the last span applied (guards against re-applying a span)."""
    open_contradictions: dict[str, tuple[str, str, datetime]] = field(default_factory=dict)
    """Unresolved contradictions: id -> (memory_a, memory_b, detected_at), for escalation."""
    escalated: set[str] = field(default_factory=set)
    """Contradictions already escalated (each is escalated once)."""
    topic_members: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Per topic node, its members at its last version (the reorganizer writes what changed)."""

    def __getstate__(self) -> dict:
        # the index and the rest derived from the memories: snapshots leave them out, a restore
        # rebuilds them
        return {k: v for k, v in self.__dict__.items() if k not in ("_index", "_derived")}

    def __setstate__(self, state: dict) -> None:
        # states snapshotted before the fields above existed get them empty (a node whose members
        # are not known gets a whole listing at its next version)
        self.__dict__.update(
            {"open_contradictions": {}, "escalated": set(), "topic_members": {}, **state}
        )

    def put(self, memory: Memory) -> None:
        if memory.vector is not None and not isinstance(memory.vector, np.ndarray):
            memory.vector = np.asarray(memory.vector, dtype=np.float32)  # type: ignore[assignment]
        self.items[memory.id] = memory
        self.touch(memory)

    @property
    def index(self) -> OwnerIndex:
        """The lookup index of these memories (built on first use, then kept up to date)."""
        idx: OwnerIndex | None = self.__dict__.get("_index")
        if idx is None:
            idx = self.__dict__["_index"] = OwnerIndex(self.items)
        return idx

    def derived(self, name: str, make: Callable[[], T]) -> T:
        """Data derived from these memories and kept with them between spans and ticks (as the
        index is), made by ``make`` on first use. Never pickled into a snapshot: a restored state
        makes it again. Whoever keeps it checks it against the memories before trusting it."""
        store = self.__dict__.setdefault("_derived", {})
        if name not in store:
            store[name] = make()
        return store[name]  # type: ignore[no-any-return]

    def keep(self, name: str, value: T) -> T:
        """Replace the derived data ``name`` by ``value`` (see ``derived``)."""
        self.__dict__.setdefault("_derived", {})[name] = value
        return value

    def touch(self, memory: Memory) -> None:
        """Tell the index that ``memory`` (already in ``items``) got a new text, key or vector."""
        idx: OwnerIndex | None = self.__dict__.get("_index")
        if idx is not None:
            idx.add(memory)

    def reindex(self, changed: Iterable[Memory] | None) -> None:
        """Tell the index about memories ``changed`` in place (lifecycle maintenance lists every
        memory it changed); ``None`` (not known what changed) drops the index instead."""
        if changed is None:
            self.forget_index()
            return
        for m in changed:
            if self.items.get(m.id) is m:
                self.touch(m)
            else:  # not the state's own object: only a rebuild is sure to see the change
                self.forget_index()
                return

    def forget_index(self) -> None:
        """Drop the index (after memories were changed in place without ``touch``)."""
        self.__dict__.pop("_index", None)

    def get(self, memory_id: str) -> Memory | None:
        return self.items.get(memory_id)

    def live(self) -> list[Memory]:
        """Live memories (``generated`` or ``activated``), the ones extraction sees, oldest first.

        The order (creation time, then id) does not depend on how the state was built (in one
        run, or hydrated from the store), so rules that scan it decide the same either way.
        """
        return sorted((m for m in self.items.values() if m.status in LIVE), key=age_key)

    def with_status(self, *statuses: str) -> list[Memory]:
        """Memories in any of ``statuses``, oldest first."""
        return sorted((m for m in self.items.values() if m.status in statuses), key=age_key)

    def by_key(self, key: str) -> Memory | None:
        """The live memory with this key, if any (the newest when several; ties: the larger id)."""
        best = None
        for m in self.live():
            if m.key == key and (best is None or _changed(m) >= _changed(best)):
                best = m
        return best

    def retrieve(self, query: np.ndarray | None, k: int) -> list[Memory]:
        """Top-``k`` live memories by cosine similarity to ``query`` (most similar first).

        Without a query vector the ``k`` most recently updated live memories are returned.
        Ties are broken by id so the order is deterministic.
        """
        if k <= 0:
            return []
        idx = self.index
        if query is None:
            return idx.recent(k)
        # every order below ends on the id, so the candidates' order does not matter
        live = [
            m
            for ids in idx.live_by_type.values()
            for m in (self.items[i] for i in ids)
            if m.kind not in NOT_RETRIEVED
        ]
        if not live:
            return []
        with_vec = [m for m in live if m.vector is not None]
        if query is None or not with_vec:
            return heapq.nlargest(k, live, key=lambda m: (m.updated_at or m.created_at, m.id))
        with_vec.sort(key=age_key)  # the matrix in one fixed row order, for the same bits
        mat = np.asarray([m.vector for m in with_vec], dtype=np.float32)
        scores = mat @ np.asarray(query, dtype=np.float32)
        order = sorted(range(len(with_vec)), key=lambda i: (-float(scores[i]), with_vec[i].id))
        return [with_vec[i] for i in order[:k]]

    def copy(self) -> OwnerMemories:
        return OwnerMemories(
            self.owner_id,
            {k: v.copy() for k, v in self.items.items()},
            dict(self.last_span_seq),
            dict(self.open_contradictions),
            set(self.escalated),
            dict(self.topic_members),
        )
