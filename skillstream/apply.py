"""Applying memory operations to an owner's memories (pure).

Order, as in MemSkill: updates, then deletes, then inserts. Each change keeps provenance (span id
and source message ids) and appends a lifecycle event. An INSERT that restates a live memory
(same normalised text or same key and text) reinforces it instead of creating a duplicate.
Deletes are soft: the memory's status becomes ``deleted`` and its validity ends at the span's time.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime

from skillstream.ids import prefixed_id
from skillstream.memories import OwnerMemories
from skillstream.model import Memory, MemoryEvent, MemoryOp, Op, Span

CONFIDENCE_CAP = 0.95
REINFORCE_STEP = 0.05

_NORM = re.compile(r"[^\w]+", re.UNICODE)


def normalise(text: str) -> str:
    return _NORM.sub(" ", text.lower()).strip()


@dataclass
class Applied:
    """The result of applying one span's operations."""

    changed: dict[str, Memory] = field(default_factory=dict)
    events: list[MemoryEvent] = field(default_factory=list)
    needs_vector: set[str] = field(default_factory=set)
    """Ids whose text changed (new or updated): the caller embeds them."""


@dataclass(frozen=True)
class ApplyOptions:
    scope: str = "private"
    memory_type: str = "LongTermMemory"
    confidence: float = 0.7
    actor: str = "extractor"


def _event(
    m: Memory, span: Span, event: str, reason: str, seq: int, now: datetime,
    actor: str, old: Memory | None = None,
) -> MemoryEvent:
    return MemoryEvent(
        event_id=prefixed_id("evt", m.id, span.span_id, event, seq),
        memory_id=m.id,
        owner_id=m.owner_id,
        event=event,
        reason=reason,
        old_value=json.dumps({"text": old.text, "confidence": old.confidence}) if old else None,
        new_value=json.dumps({"text": m.text, "confidence": m.confidence}),
        old_status=old.status if old else None,
        new_status=m.status,
        span_id=span.span_id,
        actor=actor,
        event_ts=span.end_ts,
        recorded_at=now,
    )


def apply_ops(
    state: OwnerMemories,
    span: Span,
    ops: list[MemoryOp],
    now: datetime,
    options: ApplyOptions = ApplyOptions(),
) -> Applied:
    """Apply ``ops`` for ``span`` to ``state`` in place and return what changed."""
    out = Applied()
    t = span.end_ts
    seq = 0
    ordered = (
        [o for o in ops if o.op is Op.UPDATE]
        + [o for o in ops if o.op is Op.DELETE]
        + [o for o in ops if o.op is Op.INSERT]
    )
    live_text = {normalise(m.text): m.id for m in state.live()}
    for i, op in enumerate(ordered):
        seq += 1
        if op.op is Op.UPDATE:
            cur = state.get(op.target_id or "")
            if cur is None or cur.status != "activated" or not op.text.strip():
                continue
            if normalise(op.text) == normalise(cur.text):
                _reinforce(state, cur, span, op, t, now, seq, options, out)
                continue
            old = cur.copy()
            cur.text = op.text.strip()
            cur.kind = op.kind or cur.kind
            cur.tags = sorted(set(cur.tags) | set(op.tags))
            cur.event_ts = op.event_ts or cur.event_ts
            cur.updated_at = t
            cur.version += 1
            cur.span_id = span.span_id
            cur.source_message_ids = _merge_ids(cur.source_message_ids, op.source_message_ids)
            out.changed[cur.id] = cur
            out.needs_vector.add(cur.id)
            out.events.append(_event(cur, span, "updated", op.reason or "refined", seq, now, options.actor, old))
            live_text[normalise(cur.text)] = cur.id
        elif op.op is Op.DELETE:
            cur = state.get(op.target_id or "")
            if cur is None or cur.status != "activated":
                continue
            old = cur.copy()
            cur.status = "deleted"
            cur.valid_to = t
            cur.updated_at = t
            cur.version += 1
            out.changed[cur.id] = cur
            out.events.append(_event(cur, span, "deleted", op.reason or "cancelled", seq, now, options.actor, old))
            live_text.pop(normalise(cur.text), None)
        elif op.op is Op.INSERT:
            text = op.text.strip()
            if not text:
                continue
            dup_id = live_text.get(normalise(text))
            if dup_id is not None:
                _reinforce(state, state.items[dup_id], span, op, t, now, seq, options, out)
                continue
            m = Memory(
                id=prefixed_id("mem", state.owner_id, span.span_id, i, text),
                owner_id=state.owner_id,
                agent_id=span.messages[0].agent_id,
                conversation_id=span.conversation_id,
                text=text,
                kind=op.kind,
                key=op.key,
                subject=op.subject,
                tags=sorted(set(op.tags)),
                scope=options.scope,
                memory_type=options.memory_type,
                confidence=op.confidence if op.confidence is not None else options.confidence,
                event_ts=op.event_ts or t,
                valid_from=op.event_ts or t,
                created_at=t,
                updated_at=t,
                source_message_ids=list(op.source_message_ids) or span.message_ids,
                span_id=span.span_id,
                lang=span.lang,
            )
            state.put(m)
            live_text[normalise(text)] = m.id
            out.changed[m.id] = m
            out.needs_vector.add(m.id)
            out.events.append(_event(m, span, "created", op.reason or "new information", seq, now, options.actor))
    return out


def _merge_ids(a: list[str], b: tuple[str, ...]) -> list[str]:
    seen = dict.fromkeys(a)
    seen.update(dict.fromkeys(b))
    return list(seen)


def _reinforce(
    state: OwnerMemories, cur: Memory, span: Span, op: MemoryOp, t: datetime, now: datetime,
    seq: int, options: ApplyOptions, out: Applied,
) -> None:
    old = cur.copy()
    cur.reinforcement += 1
    cur.confidence = min(CONFIDENCE_CAP, round(cur.confidence + REINFORCE_STEP, 6))
    cur.last_reinforced_at = t
    cur.updated_at = t
    cur.version += 1
    cur.source_message_ids = _merge_ids(cur.source_message_ids, op.source_message_ids)
    out.changed[cur.id] = cur
    out.events.append(_event(cur, span, "reinforced", "restated", seq, now, options.actor, old))
