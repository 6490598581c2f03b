"""Applying memory operations to an owner's memories, under the lifecycle parameters (pure).

Order, as in MemSkill: updates, then deletes, then inserts; lessons from outcome records in the
span (``skillstream.lifecycle.lessons``) come last as inserts. Every change keeps provenance (span
id and source message ids) and appends a lifecycle event (``skillstream.lifecycle.states``). Event
time is the span's end time: nothing here reads a clock.

* **INSERT** of a text that restates a live memory (same normalised text) reinforces it; restating
  an archived memory reactivates it; restating a frozen one is refused and logged. A lesson with
  the key of a live lesson confirms (reinforces) it. Otherwise a new memory is created with the
  type its kind and scope call for, the scope the agent's policy allows, and the policy's expiry.
  With an embedder (``ApplyOptions.embed``) a near-duplicate of a live memory is stored as
  ``merged`` into it, and a new memory that contradicts a live one with the same key opens a
  contradiction that is settled by the rules of ``skillstream.lifecycle.contradictions``.
* **UPDATE** restating its target reinforces it; one that contradicts it (a slot's value changes,
  or the statement turns into its opposite) creates a new memory that replaces the target (the
  contradiction is recorded as settled by the update), so the old value keeps its validity
  period; any other update refines the text in place.
* **DELETE** is soft: status ``deleted``, validity ends at the span's time.
* Frozen memories refuse updates and deletes (``refused`` events); writes outside the scopes the
  agent's policy allows, and texts matching a ``reject`` pattern of its policy, are refused.
* After the operations, what exceeds a type's capacity or a scope's maximum is archived.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from skillstream.embed import Embed
from skillstream.ids import prefixed_id
from skillstream.lifecycle import contradictions as ctr
from skillstream.lifecycle.activation import activate
from skillstream.lifecycle.lessons import LESSON_KIND, lesson_ops
from skillstream.lifecycle.maintenance import enforce_capacity_of
from skillstream.lifecycle.params import CONFIDENCE_CAP, REINFORCE_STEP, LifecycleParams
from skillstream.lifecycle.reinforce import (
    NO_MERGE_KINDS,
    clamp_confidence,
    consolidate,
    reinforce,
)
from skillstream.lifecycle.states import (
    ChangeLog,
)
from skillstream.lifecycle.types import memory_type_for
from skillstream.memories import LIVE, OwnerMemories, age_key, normalise
from skillstream.model import Memory, MemoryOp, Span
from skillstream.settings import LifecycleSettings
from skillstream.text import memory_text
from skillstream.vocab import LifecycleEvent, MemoryStatus, Op

__all__ = [
    "CONFIDENCE_CAP",
    "REINFORCE_STEP",
    "Applied",
    "ApplyOptions",
    "OpTexts",
    "apply_ops",
    "normalise",
    "op_texts",
]

log = logging.getLogger(__name__)


@dataclass
class Applied(ChangeLog):
    """The result of applying one span's operations (memories changed, events, extra rows)."""

    needs_vector: set[str] = field(default_factory=set)
    """Ids whose text changed (new or updated) and that have no vector yet (the caller embeds)."""
    refused: list[tuple[str, str]] = field(default_factory=list)
    """(operation, reason) for operations the policy refused and malformed outcome records."""


@dataclass(frozen=True)
class ApplyOptions:
    """How operations are applied.

    Args:
        memory_type: Force this type on every new memory (``None``: by kind and scope).
        actor: Written to the lifecycle events.
        params: The lifecycle parameters (capacities, policies, thresholds; ``default_scope`` for
            new memories when neither the operation nor the agent's policy names a scope,
            ``default_confidence`` when the operation gives no confidence). By default those of
            the default settings.
        embed: Text embedder; with it, new and updated memories get their vectors here and
            near-duplicates merge.
        lessons: Turn outcome records of the span into lessons.
    """

    memory_type: str | None = None
    actor: str = "extractor"
    params: LifecycleParams = field(default_factory=LifecycleParams.defaults)
    embed: Embed | None = None
    lessons: bool = True

    @classmethod
    def from_settings(
        cls, lifecycle: LifecycleSettings, idle_gap: timedelta, embed: Embed | None = None
    ) -> ApplyOptions:
        """Options from the ``lifecycle`` settings group and the session gap ``idle_gap``."""
        return cls(params=LifecycleParams.of(lifecycle, idle_gap), embed=embed)


def apply_ops(
    state: OwnerMemories,
    span: Span,
    ops: list[MemoryOp],
    now: datetime,
    options: ApplyOptions = ApplyOptions(),
    *,
    retrieved: Sequence[str] = (),
) -> Applied:
    """Apply ``ops`` for ``span`` to ``state`` in place and return what changed.

    ``retrieved`` are the ids of the memories the extraction was shown: the ``generated`` ones
    among them are activated (their first use). ``now`` is only written to ``recorded_at``; every
    decision uses the span's end time.
    """
    return _Apply(state, span, now, options).run(ops, retrieved)


def _describe(op: MemoryOp) -> str:
    target = f" {op.target_id}" if op.target_id else ""
    return f"{op.op.value}{target}: {op.text[:120]!r}"


@dataclass(frozen=True)
class OpTexts:
    """A span's operations in the order they apply, with the texts they would store."""

    ops: list[MemoryOp]
    """Updates, then deletes, then inserts; the span's lessons (when on) are among the inserts."""
    texts: list[str | None]
    """Per operation, the cleaned text an insert or update stores (``None``: a delete, an empty
    text, or a text the agent's policy refuses)."""
    problems: list[tuple[str, str]]
    """(outcome record, why) for outcome records of the span that make no lesson."""
    refused: list[tuple[MemoryOp, str]]
    """(operation, why) for texts refused by the agent's policy."""

    @property
    def embedded(self) -> list[str]:
        """The distinct texts applying these operations embeds up front, in order."""
        return list(dict.fromkeys(t for t in self.texts if t))


def op_texts(span: Span, ops: Sequence[MemoryOp], options: ApplyOptions) -> OpTexts:
    """The operations ``apply_ops`` applies for ``span`` and the texts it stores (pure).

    Applying calls this, and so does the pipeline when it predicts which texts a batch of spans
    will embed: both clean the texts the same way, so a prediction cannot drift from the real pass.
    """
    ops = list(ops)
    problems: list[tuple[str, str]] = []
    if options.lessons:
        extra, problems = lesson_ops(span, options.params.lesson_confidence)
        ops.extend(extra)
    ordered = (
        [o for o in ops if o.op is Op.UPDATE]
        + [o for o in ops if o.op is Op.DELETE]
        + [o for o in ops if o.op is Op.INSERT]
    )
    agent = span.messages[0].agent_id if span.messages else None
    policy = options.params.policy_set.for_agent(agent)
    texts: list[str | None] = []
    refused: list[tuple[MemoryOp, str]] = []
    for o in ordered:
        if o.op not in (Op.INSERT, Op.UPDATE):
            texts.append(None)
            continue
        text = memory_text(o.text)
        if policy.redactor is not None and text:
            text, _hits, rejected = policy.redactor.check(text)
            if rejected:
                names = ", ".join(sorted(set(rejected)))
                why = f"matches sensitive pattern(s) {names} of policy {policy.agent!r}"
                refused.append((o, why))
                texts.append(None)
                continue
        texts.append(text)
    return OpTexts(ordered, texts, list(problems), refused)


class _Apply:
    def __init__(
        self, state: OwnerMemories, span: Span, now: datetime, options: ApplyOptions
    ) -> None:
        self.state = state
        self.span = span
        self.t = span.end_ts
        self.o = options
        self.params = options.params
        self.agent = span.messages[0].agent_id if span.messages else None
        self.policy = self.params.policy_set.for_agent(self.agent)
        self.out = Applied(state.owner_id, span.span_id, span.span_id, options.actor, now)
        self.vectors: dict[str, np.ndarray] = {}
        # The owner's index lives in its state and follows every change: nothing is rebuilt here.
        self.index = state.index

    # ------------------------------------------------------------------ bookkeeping
    def _index(self, m: Memory) -> None:
        self.state.touch(m)

    def _restated(self, text: str) -> Memory | None:
        """The memory a text restates: live first, then frozen, then archived (not invalidated)."""
        found = self.index.with_text(normalise(text))
        for statuses in (LIVE, (MemoryStatus.FROZEN,), (MemoryStatus.ARCHIVED,)):
            for m in found:
                if m.status in statuses and (
                    m.status != MemoryStatus.ARCHIVED or m.valid_to is None
                ):
                    return m
        return None

    def _refuse_op(self, op: MemoryOp, reason: str) -> None:
        self.out.refused.append((_describe(op), reason))
        log.info("span %s: refused %s: %s", self.span.span_id, _describe(op), reason)

    def _vector(self, text: str) -> np.ndarray | None:
        return self.vectors.get(text)

    def _similarity(self, m: Memory, text: str) -> float | None:
        v = self._vector(text)
        if v is None or m.vector is None:
            return None
        return round(float(np.dot(np.asarray(m.vector, dtype=np.float32), v)), 6)

    # ------------------------------------------------------------------ the run
    def run(self, ops: list[MemoryOp], retrieved: Sequence[str] = ()) -> Applied:
        prepared = op_texts(self.span, ops, self.o)
        for what, why in prepared.problems:
            self.out.refused.append((what, why))
            log.warning("span %s: %s skipped: %s", self.span.span_id, what, why)
        for op, why in prepared.refused:
            self._refuse_op(op, why)
        ordered, texts = prepared.ops, prepared.texts
        if self.o.embed is not None:
            todo = prepared.embedded
            if todo:
                for text, vec in zip(todo, self.o.embed(todo)):
                    self.vectors[text] = np.asarray(vec, dtype=np.float32)
                if self.params.merge_threshold <= 1:  # the near-duplicate checks, in one product
                    self.index.prepare_similar(
                        self.vectors.values(), self.params.merge_threshold - 1e-6
                    )
        for i, (op, cleaned) in enumerate(zip(ordered, texts)):
            if op.op is Op.UPDATE and cleaned:
                self._update(i, op, cleaned)
            elif op.op is Op.DELETE:
                self._delete(op)
            elif op.op is Op.INSERT and cleaned:
                self._insert(i, op, cleaned)
        used = [m for m in (self.state.get(i) for i in retrieved) if m is not None]
        activate(
            self.out, used, self.t, f"retrieved for the extraction of span {self.span.span_id}"
        )
        self._enforce_capacity()
        for c in self.out.rows.contradictions:
            if c.resolution == ctr.UNRESOLVED and c.detected_at is not None:
                self.state.open_contradictions[c.contradiction_id] = (
                    c.memory_a,
                    c.memory_b,
                    c.detected_at,
                )
        self._finish_vectors()
        for m in self.out.changed.values():
            self.state.touch(m)
        return self.out

    def _enforce_capacity(self) -> None:
        """Archive what is over capacity. Only this span's changes can have pushed a type over its
        capacity, and the index counts live memories by type (``enforce_capacity_of``)."""
        for m in self.out.changed.values():
            self.state.touch(m)
        enforce_capacity_of(self.out, self.state, self.t, self.params)

    def _nearest(self, m: Memory) -> tuple[Memory, float] | None:
        """The live memory of ``m``'s scope most similar to ``m`` at or above the merge threshold
        (ties: the older one), from the owner's vector matrix."""
        threshold = self.params.merge_threshold
        if threshold > 1 or m.kind in NO_MERGE_KINDS:
            return None
        best: tuple[float, tuple[datetime, str], Memory] | None = None
        for c, sim in self.index.similar(m.vector, threshold - 1e-6):  # type: ignore[arg-type]
            if c.id == m.id or c.status not in LIVE or c.scope != m.scope:
                continue
            if c.kind in NO_MERGE_KINDS:
                continue
            s = round(sim, 6)
            key = age_key(c)
            if best is None or s > best[0] or (s == best[0] and key < best[1]):
                best = (s, key, c)
        return None if best is None else (best[2], best[0])

    def _finish_vectors(self) -> None:
        if self.o.embed is None:
            return
        missing = [
            i
            for i in sorted(self.out.needs_vector)
            if self._vector(self.out.changed[i].text) is None
        ]
        if missing:
            for i, vec in zip(missing, self.o.embed([self.out.changed[i].text for i in missing])):
                self.vectors[self.out.changed[i].text] = np.asarray(vec, dtype=np.float32)
        for i in sorted(self.out.needs_vector):
            self.out.changed[i].vector = self.vectors[self.out.changed[i].text]  # type: ignore[assignment]
        self.out.needs_vector.clear()

    # ------------------------------------------------------------------ operations
    def _new(
        self,
        i: int,
        op: MemoryOp,
        text: str,
        *,
        kind: str,
        key: str | None,
        scope: str,
        memory_type: str | None,
        subject: str | None,
        tags: Sequence[str],
        reason: str,
    ) -> Memory:
        ts = op.event_ts or self.t
        expiry = self.policy.default_expiry
        confidence = op.confidence if op.confidence is not None else self.params.default_confidence
        m = Memory(
            id=prefixed_id("mem", self.state.owner_id, self.span.span_id, i, text),
            owner_id=self.state.owner_id,
            agent_id=self.agent,
            conversation_id=self.span.conversation_id,
            text=text,
            kind=kind,
            key=key,
            subject=subject,
            tags=sorted(set(tags)),
            scope=scope,
            memory_type=memory_type
            or memory_type_for(kind, scope, op.memory_type or self.o.memory_type),
            confidence=clamp_confidence(confidence, self.params),
            event_ts=ts,
            valid_from=ts,
            created_at=self.t,
            updated_at=self.t,
            expires_at=self.t + expiry if expiry is not None else None,
            source_message_ids=list(op.source_message_ids) or self.span.message_ids,
            span_id=self.span.span_id,
            lang=self.span.lang,
            session_id=self.span.session_id,
        )
        vec = self._vector(text)
        if vec is not None:
            m.vector = vec  # type: ignore[assignment]
        self.state.put(m)
        self._index(m)
        self.out.log(m, LifecycleEvent.CREATED, reason, self.t)
        if m.vector is None:
            self.out.needs_vector.add(m.id)
        return m

    def _reinforce(self, m: Memory, op: MemoryOp, reason: str) -> None:
        reinforce(
            self.out,
            m,
            self.t,
            self.params,
            reason,
            expiry=self.policy.default_expiry,
            source_ids=op.source_message_ids,
        )

    def _update(self, i: int, op: MemoryOp, text: str) -> None:
        cur = self.state.get(op.target_id or "")
        if cur is None or cur.status not in (*LIVE, MemoryStatus.FROZEN):
            return
        if cur.status == MemoryStatus.FROZEN:
            self.out.refuse(cur, "update refused: the memory is frozen", self.t)
            return
        if not self.policy.can_write(cur.scope):
            self._refuse_op(op, f"policy {self.policy.agent!r} may not write scope {cur.scope!r}")
            return
        if normalise(text) == normalise(cur.text):
            self._reinforce(cur, op, "restated")
            return
        key = cur.key or op.key
        kind = op.kind or cur.kind
        described = ctr.conflict(cur, text, kind, key, self._similarity(cur, text))
        if described:
            new = self._new(
                i,
                op,
                text,
                kind=kind,
                key=key,
                scope=cur.scope,
                memory_type=cur.memory_type,
                subject=op.subject or cur.subject,
                tags=[*cur.tags, *op.tags],
                reason=op.reason or f"supersedes {cur.id}",
            )
            ctr.settle(self.out, cur, new, described, self.t, self.params, updated=True)
            return
        old = cur.copy()
        cur.text = text
        cur.kind = kind
        cur.tags = sorted(set(cur.tags) | set(op.tags))
        cur.event_ts = op.event_ts or cur.event_ts
        cur.updated_at = self.t
        cur.version += 1
        cur.span_id = self.span.span_id
        cur.source_message_ids = list(
            dict.fromkeys([*cur.source_message_ids, *op.source_message_ids])
        )
        self._index(cur)
        self.out.log(cur, LifecycleEvent.UPDATED, op.reason or "refined", self.t, old)
        self.out.needs_vector.add(cur.id)

    def _delete(self, op: MemoryOp) -> None:
        cur = self.state.get(op.target_id or "")
        if cur is None or cur.status not in (*LIVE, MemoryStatus.FROZEN):
            return
        if cur.status == MemoryStatus.FROZEN:
            self.out.refuse(cur, "delete refused: the memory is frozen", self.t)
            return
        if not self.policy.can_write(cur.scope):
            self._refuse_op(op, f"policy {self.policy.agent!r} may not write scope {cur.scope!r}")
            return
        self.out.transition(
            cur,
            MemoryStatus.DELETED,
            MemoryStatus.DELETED,
            op.reason or "cancelled",
            self.t,
            valid_to=self.t,
        )

    def _insert(self, i: int, op: MemoryOp, text: str) -> None:
        if op.kind == LESSON_KIND and op.key:
            same = [m for m in self.index.with_key(op.key) if m.status in LIVE]
            if same:
                self._reinforce(same[0], op, "lesson confirmed by a new outcome")
                return
        hit = self._restated(text)
        if hit is not None:
            if hit.status == MemoryStatus.FROZEN:
                self.out.refuse(hit, "restated, but the memory is frozen", self.t)
            else:
                if hit.status == MemoryStatus.ARCHIVED:
                    self.out.transition(
                        hit,
                        MemoryStatus.ACTIVATED,
                        LifecycleEvent.REACTIVATED,
                        "restated after being archived",
                        self.t,
                    )
                    self._index(hit)
                self._reinforce(hit, op, "restated")
            return
        scope = self.policy.scope_for(op.scope, self.params.default_scope)
        if not self.policy.can_write(scope):
            self._refuse_op(op, f"policy {self.policy.agent!r} may not write scope {scope!r}")
            return
        m = self._new(
            i,
            op,
            text,
            kind=op.kind,
            key=op.key,
            scope=scope,
            memory_type=None,
            subject=op.subject,
            tags=op.tags,
            reason=op.reason or "new information",
        )
        if m.vector is not None:
            found = self._nearest(m)
            if found is not None:
                new = consolidate(
                    self.out,
                    m,
                    found[0],
                    found[1],
                    self.t,
                    self.params,
                    expiry=self.policy.default_expiry,
                )
                self.state.put(new)
                return
        if m.key:
            for c in self.index.with_key(m.key):
                if c.id == m.id or c.status not in LIVE:
                    continue
                described = ctr.conflict(c, m.text, m.kind, m.key, self._similarity(c, m.text))
                if described:
                    ctr.settle(self.out, c, m, described, self.t, self.params)
                    if m.status not in LIVE:
                        break
