"""Deciding the operations for a span's statements, within the selected memory skills.

``Planner.add`` takes statements in order; ``Planner.ops`` returns the operations. The decision:

* a statement that explicitly cancels or negates something DELETEs the live memory it refers to
  (same key, else the same speaker's memory whose head overlaps) and is INSERTed as the new state;
  when the cancelled thing was said earlier in the same span, that insert is simply dropped;
* a statement whose key belongs to a live memory UPDATEs it when the key is strong (slot,
  preference, plan) or the statement carries a correction cue, and the text differs; the same text
  is INSERTed again, which the apply step turns into a reinforcement;
* a correction with no exact key match is merged into the best-overlapping memory of the speaker;
* everything else is INSERTed; statements of the span with the same key or text fold together.

Only actions of selected skills are produced: without UPDATE a correction is inserted instead, and
without INSERT new information is dropped. The owner's whole live state is consulted through its
keys (built once per span), not only the retrieved list the LLM executor sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from skillstream.memories import LIVE, OwnerMemories, normalise
from skillstream.model import Memory, MemoryOp
from skillstream.rules.classify import Classified, head_overlap, make_key
from skillstream.vocab import MemoryKind, Op

MAX_MERGED = 400
"""A correction merged into an older memory's text is cut back to the new statement past this."""


@dataclass
class Statement:
    """One statement ready for the op decision."""

    text: str
    cls: Classified
    subject: str
    name: str
    source_ids: tuple[str, ...]
    event_ts: datetime | None
    reason: str
    origin: str = "plain"
    """Where the statement came from: ``plain``, ``answer`` (a short answer folded with its
    question), ``photo`` (an image caption), ``suggestion`` (an assistant's suggestion) or
    ``example`` (a sentence the rules drop, kept by a memory skill's examples)."""
    sentence: str = ""
    """The speaker's own words the statement comes from (compared with a skill's examples)."""
    skill: str | None = None
    """The memory skill that kept the statement, when not the one providing its action."""


@dataclass
class _Pending:
    """An operation being built for this span (inserts and updates absorb later statements)."""

    op: Op
    text: str
    kind: str
    key: str | None
    subject: str
    tags: tuple[str, ...]
    event_ts: datetime | None
    source_ids: tuple[str, ...]
    reason: str
    target_id: str | None = None
    dropped: bool = False
    name: str = ""
    """The subject as written on the operation: the speaker's name, "user" or "assistant"."""
    skill: str | None = None

    def absorb(self, st: Statement, text: str | None = None) -> None:
        if text is not None:
            self.text = text
            self.event_ts = st.event_ts or self.event_ts
        self.source_ids = tuple(dict.fromkeys(self.source_ids + st.source_ids))
        self.tags = tuple(dict.fromkeys(self.tags + st.cls.tags))[:8]


class Planner:
    """Turns statements into operations, in statement order, honouring the allowed actions."""

    def __init__(self, allowed: dict[str, str], state: OwnerMemories) -> None:
        self.allowed = allowed
        self.state = state
        self._keyed: dict[str, Memory | None] = {}
        self._subjects: dict[str, list[tuple[Memory, str, str]]] = {}
        self.pending: list[_Pending] = []
        self.by_key: dict[str, _Pending] = {}
        self.by_text: dict[str, _Pending] = {}
        self.updates: dict[str, _Pending] = {}
        self.deletes: set[str] = set()

    # Lookups go through the owner's index (``OwnerMemories.index``), one key or subject at a
    # time, so planning a span reads what its statements name, not the owner's whole history.
    # A key's memory follows ``OwnerMemories.by_key``'s tie rule (the newest by update or creation
    # time; on a tie the later one in age order).
    def _live_with_key(self, key: str) -> Memory | None:
        if key not in self._keyed:
            best = None
            for m in self.state.index.with_key(key):
                if m.status in LIVE and (best is None or _stamp(m)[0] >= _stamp(best)[0]):
                    best = m
            self._keyed[key] = best
        return self._keyed[key]

    def _subject_memories(self, subject: str) -> list[tuple[Memory, str, str]]:
        """Live memories with a ``subject|kind|head`` key of ``subject``, newest first."""
        rows = self._subjects.get(subject)
        if rows is None:
            rows = []
            for m in self.state.index.with_subject(subject):
                if m.status in LIVE and m.key:
                    subj, _, head = m.key.split("|", 2)
                    rows.append((m, subj, head))
            rows.sort(key=lambda r: (_stamp(r[0]), r[0].id), reverse=True)
            self._subjects[subject] = rows
        return rows

    def _fuzzy(self, subject: str, head: str) -> tuple[_Pending | None, Memory | None]:
        """The pending insert, else the live memory, of ``subject`` whose head best overlaps."""
        for p in reversed(self.pending):
            if not p.dropped and p.op is Op.INSERT and p.subject == subject and p.key:
                if head_overlap(head, p.key.split("|", 2)[2]):
                    return p, None
        best: tuple[int, Memory] | None = None
        for m, subj, mhead in self._subject_memories(subject):
            if subj != subject or m.id in self.deletes or not head_overlap(head, mhead):
                continue
            score = len(set(head.split()) & set(mhead.split())) or 1
            if best is None or score > best[0]:
                best = (score, m)
        return None, (best[1] if best else None)

    def _existing(self, key: str | None) -> tuple[_Pending | None, Memory | None]:
        if key is None:
            return None, None
        p = self.by_key.get(key)
        if p is not None and not p.dropped:
            return p, None
        m = self._live_with_key(key)
        if m is not None and m.id not in self.deletes:
            return None, m
        return None, None

    def add(self, st: Statement) -> None:
        cls = st.cls
        key = make_key(st.subject, cls.kind, cls.head)
        if cls.negated:
            self._negation(st, key)
            return
        pend, mem = self._existing(key)
        if pend is not None:
            if cls.strong or cls.correction or normalise(pend.text) == normalise(st.text):
                pend.absorb(st, st.text)
                self.by_text[normalise(st.text)] = pend
            else:
                self._insert(st, key)
            return
        if mem is not None:
            if normalise(mem.text) == normalise(st.text):
                if not self._insert(st, key):
                    self._update(mem, st, st.text, "restated")
            elif cls.strong or cls.correction:
                if not self._update(mem, st, st.text, f"refines {mem.key}"):
                    self._insert(st, key)
            else:
                self._insert(st, key)
            return
        if cls.correction and cls.head:
            pend, mem = self._fuzzy(st.subject, cls.head)
            if pend is not None:
                pend.absorb(st, _merge(pend.text, st.text))
                return
            if mem is not None and self._update(
                mem, st, _merge(mem.text, st.text), f"corrects {mem.key}", kind=mem.kind
            ):
                return
        self._insert(st, key)

    def _negation(self, st: Statement, key: str | None) -> None:
        cls = st.cls
        target_p: _Pending | None = None
        target_m: Memory | None = None
        if cls.head:
            for kind in dict.fromkeys(
                (
                    cls.kind,
                    MemoryKind.PLAN,
                    MemoryKind.FACT,
                    MemoryKind.PREFERENCE,
                    MemoryKind.EVENT,
                )
            ):
                target_p, target_m = self._existing(make_key(st.subject, kind, cls.head))
                if target_p or target_m:
                    break
            if target_p is None and target_m is None:
                target_p, target_m = self._fuzzy(st.subject, cls.head)
        if target_p is not None:
            target_p.dropped = True  # said and withdrawn within the span: never stored
        elif target_m is not None and Op.DELETE in self.allowed:
            self.deletes.add(target_m.id)
            self.pending.append(
                _Pending(
                    Op.DELETE,
                    st.text,
                    target_m.kind,
                    target_m.key,
                    st.subject,
                    (),
                    None,
                    st.source_ids,
                    f"{st.name} cancelled or negated {target_m.key}",
                    target_id=target_m.id,
                    name=_op_subject(st.name),
                )
            )
        self._insert(st, key)

    def _insert(self, st: Statement, key: str | None) -> bool:
        if Op.INSERT not in self.allowed:
            return False
        norm = normalise(st.text)
        same = self.by_text.get(norm)
        if same is not None and not same.dropped:
            same.absorb(st)
            return True
        p = _Pending(
            Op.INSERT,
            st.text,
            st.cls.kind,
            key,
            st.subject,
            st.cls.tags,
            st.event_ts,
            st.source_ids,
            st.reason,
            name=_op_subject(st.name),
            skill=st.skill,
        )
        self.pending.append(p)
        self.by_text[norm] = p
        if key is not None:
            self.by_key[key] = p
        return True

    def _update(
        self, mem: Memory, st: Statement, text: str, reason: str, kind: str | None = None
    ) -> bool:
        if Op.UPDATE not in self.allowed:
            return False
        cur = self.updates.get(mem.id)
        if cur is not None:
            cur.absorb(st, text)
            return True
        p = _Pending(
            Op.UPDATE,
            text,
            kind or st.cls.kind,
            mem.key,
            st.subject,
            st.cls.tags,
            st.event_ts,
            st.source_ids,
            reason,
            target_id=mem.id,
            name=_op_subject(st.name),
        )
        self.pending.append(p)
        self.updates[mem.id] = p
        return True

    def ops(self) -> list[MemoryOp]:
        out = []
        for p in self.pending:
            if p.dropped:
                continue
            action = p.op.value
            out.append(
                MemoryOp(
                    op=p.op,
                    text=p.text,
                    kind=p.kind,
                    key=p.key,
                    subject=p.name or p.subject,
                    tags=p.tags,
                    event_ts=p.event_ts,
                    target_id=p.target_id,
                    source_message_ids=p.source_ids,
                    reason=p.reason,
                    memory_skill=p.skill or self.allowed.get(action),
                )
            )
        return out


def _op_subject(name: str) -> str:
    """The subject written on an operation: the speaker's name, or "user"/"assistant"."""
    if name in ("用户", "助手"):
        return "user" if name == "用户" else "assistant"
    return name[4:] if name.startswith("the ") else name


def _stamp(m: Memory) -> tuple[float, str]:
    t = m.updated_at or m.created_at
    return (t.timestamp() if t else 0.0, m.id)


def _merge(old: str, new: str) -> str:
    if normalise(new) in normalise(old):
        return old
    merged = f"{old.rstrip()} {new.strip()}"
    return merged if len(merged) <= MAX_MERGED else new
