"""The per-owner memory state used during extraction (pure, picklable).

Holds the owner's memories by id with a key index and a vector matrix for retrieval. The flow keeps
one ``OwnerMemories`` per owner in Bytewax state, so what the extractor sees for a span is exactly
what earlier spans of that owner left, also after a crash and resume.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache

import numpy as np

from skillstream.model import Memory
from skillstream.vocab import MemoryKind, MemoryStatus

LIVE: tuple[MemoryStatus, ...] = (MemoryStatus.GENERATED, MemoryStatus.ACTIVATED)
"""Live statuses: new (``generated``) or used (``activated``); extraction sees these memories."""
NOT_RETRIEVED = frozenset({MemoryKind.SUMMARY, MemoryKind.TOPIC})
"""Kinds the extractor is not shown: session summaries and topic nodes restate other memories."""
_NO_TIME = datetime.min.replace(tzinfo=UTC)
_NORM = re.compile(r"[^\w]+", re.UNICODE)


@lru_cache(maxsize=1 << 16)
def normalise(text: str) -> str:
    """Lower case, punctuation and runs of space folded (the key of a verbatim restatement).

    Cached: every span re-indexes the owner's memories by it.
    """
    return _NORM.sub(" ", text.lower()).strip()


def _changed(m: Memory) -> datetime:
    return m.updated_at or m.created_at or _NO_TIME


def age_key(m: Memory) -> tuple[datetime, str]:
    """Oldest first, then by id: the one order every lifecycle rule iterates in."""
    return (m.created_at or _NO_TIME, m.id)


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

    def __setstate__(self, state: dict) -> None:
        # states snapshotted before the two fields above existed get them empty
        self.__dict__.update({"open_contradictions": {}, "escalated": set(), **state})

    def put(self, memory: Memory) -> None:
        if memory.vector is not None and not isinstance(memory.vector, np.ndarray):
            memory.vector = np.asarray(memory.vector, dtype=np.float32)  # type: ignore[assignment]
        self.items[memory.id] = memory

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
        live = [m for m in self.live() if m.kind not in NOT_RETRIEVED]
        if not live or k <= 0:
            return []
        with_vec = [m for m in live if m.vector is not None]
        if query is None or not with_vec:
            live.sort(key=lambda m: (m.updated_at or m.created_at, m.id), reverse=True)
            return live[:k]
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
        )
