"""Memory states, the transitions between them, and the lifecycle events every change writes.

States:

==========  ================================================================================
generated   live and new: extractors see it, search finds it, nothing has used it yet
activated   live and used: a search returned it, or an extraction retrieved it
archived    out of the way but kept: over capacity, or the loser of a contradiction (then its
            ``valid_to`` says until when it was believed); restating it can reactivate it
merged      folded with its near-duplicates into a new consolidated version (``merged_into``
            names it)
expired     past its expiry (policy TTL), decayed to zero confidence, or archived too long;
            ``valid_to`` is set; text, tags, key, subject and vector are dropped and the store
            deletes it from the vector and full-text indexes: only a minimal log row stays
deleted     soft-deleted (an explicit cancellation, or ``maintain --forget``); ``valid_to`` is set
frozen      locked: updates, deletes and reinforcements are refused and logged (``refused``)
==========  ================================================================================

Event names (the ``event`` column of ``memory_events``; stable, Kafka consumers read them):
``created``, ``activated`` (first use), ``consolidated`` (a new version written from merged
memories), ``escalated`` (an unresolved contradiction needs a human), ``updated``, ``reinforced``,
``merged``, ``archived``, ``invalidated`` (lost a contradiction: archived with ``valid_to``),
``reactivated``, ``decayed``, ``expired``, ``deleted``, ``frozen``, ``unfrozen``, ``refused``. Each
row holds the reason, old and new values (JSON), old and new status, the span id (none for
maintenance), the actor, the event time and the memory's version after the change, so the latest
event of a memory always names its current status.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from skillstream.errors import InputError
from skillstream.ids import prefixed_id
from skillstream.memories import LIVE
from skillstream.model import Memory, MemoryEvent, TableRows
from skillstream.vocab import LifecycleEvent, MemoryStatus

STATUSES: tuple[MemoryStatus, ...] = tuple(MemoryStatus)
SEARCHABLE = (*LIVE, MemoryStatus.FROZEN)
"""Statuses search returns by default (frozen memories are locked, not hidden)."""
WITH_ARCHIVED = (*SEARCHABLE, MemoryStatus.ARCHIVED)
"""Statuses search returns when asked for archived memories too."""

EVENTS: tuple[LifecycleEvent, ...] = tuple(LifecycleEvent)

TRANSITIONS: dict[str, frozenset[str]] = {
    MemoryStatus.GENERATED: frozenset(
        {
            MemoryStatus.ACTIVATED,
            MemoryStatus.ARCHIVED,
            MemoryStatus.MERGED,
            MemoryStatus.EXPIRED,
            MemoryStatus.DELETED,
            MemoryStatus.FROZEN,
        }
    ),
    MemoryStatus.ACTIVATED: frozenset(
        {
            MemoryStatus.ARCHIVED,
            MemoryStatus.MERGED,
            MemoryStatus.EXPIRED,
            MemoryStatus.DELETED,
            MemoryStatus.FROZEN,
        }
    ),
    MemoryStatus.ARCHIVED: frozenset(
        {MemoryStatus.ACTIVATED, MemoryStatus.EXPIRED, MemoryStatus.DELETED, MemoryStatus.FROZEN}
    ),
    MemoryStatus.FROZEN: frozenset({MemoryStatus.ACTIVATED}),
    MemoryStatus.EXPIRED: frozenset({MemoryStatus.DELETED}),
    MemoryStatus.MERGED: frozenset(),
    MemoryStatus.DELETED: frozenset(),
}
"""Allowed status changes; anything else raises ``TransitionError``."""


class TransitionError(InputError):
    """A status change the lifecycle does not allow."""


def check_transition(current: str, to: str) -> None:
    """Raise ``TransitionError`` unless ``current -> to`` is allowed."""
    allowed = TRANSITIONS.get(current)
    if allowed is None:
        raise TransitionError(f"unknown memory status {current!r}; known: {', '.join(STATUSES)}")
    if to not in allowed:
        can = ", ".join(sorted(allowed)) or "nothing (final state)"
        raise TransitionError(
            f"a memory in status {current!r} cannot become {to!r}; it can become: {can}"
        )


def snapshot(m: Memory) -> str:
    """The values an event records for a memory, as JSON text."""
    return json.dumps(
        {
            "text": m.text,
            "confidence": m.confidence,
            "reinforcement": m.reinforcement,
            "scope": m.scope,
            "memory_type": m.memory_type,
            "valid_from": _iso(m.valid_from),
            "valid_to": _iso(m.valid_to),
            "expires_at": _iso(m.expires_at),
            "merged_into": m.merged_into,
        },
        ensure_ascii=False,
    )


def minimal(m: Memory) -> Memory:
    """Drop what an expired memory said (text, tags, key, subject, vector), in place.

    What stays is the minimal log of the seed: id, owner, kind, type, scope, status, times,
    confidence and sources (message ids, not their content).
    """
    m.text = ""
    m.tags = []
    m.key = None
    m.subject = None
    m.vector = None
    return m


def indexed(m: Memory) -> bool:
    """Whether ``m`` belongs in the search indexes (LanceDB): not once it is a minimal log row.

    An expired memory is only its minimal row from then on, also when it is deleted later.
    """
    if m.status == MemoryStatus.EXPIRED:
        return False
    return not (m.status == MemoryStatus.DELETED and not m.text and m.vector is None)


UNINDEXED_SQL = (
    f"status = '{MemoryStatus.EXPIRED.value}' OR "
    f"(status = '{MemoryStatus.DELETED.value}' AND coalesce(text, '') = '')"
)
"""SQL over ``memory_meta``: the rows :func:`indexed` keeps out of LanceDB (minimal log rows)."""


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t is not None else None


@dataclass
class ChangeLog:
    """Collects the memories changed and the events written by one span or maintenance pass.

    Args:
        owner_id: The owner whose memories change.
        origin: The span id, or ``maintenance``; part of the event ids.
        span_id: The span behind the changes (``None`` for maintenance).
        actor: Who changes things (``extractor``, ``maintenance``, ``cli``).
        recorded_at: Processing time written to ``recorded_at`` (never used for decisions).
    """

    owner_id: str
    origin: str
    span_id: str | None
    actor: str
    recorded_at: datetime
    changed: dict[str, Memory] = field(default_factory=dict)
    events: list[MemoryEvent] = field(default_factory=list)
    rows: TableRows = field(default_factory=TableRows)
    """Rows for the catalog's other tables, written with the changes."""
    seq: int = 0

    def log(
        self,
        m: Memory,
        event: str,
        reason: str,
        at: datetime | None,
        old: Memory | None = None,
        actor: str | None = None,
        *,
        changed: bool = True,
    ) -> MemoryEvent:
        """Append one event for ``m`` (already changed) and, unless told not to, mark it changed."""
        self.seq += 1
        if self.span_id is not None:
            event_id = prefixed_id("evt", m.id, self.span_id, event, self.seq)
        else:
            event_id = prefixed_id("evt", m.id, self.origin, event, m.version, self.seq)
        ev = MemoryEvent(
            event_id=event_id,
            memory_id=m.id,
            owner_id=m.owner_id,
            event=event,
            reason=reason,
            old_value=snapshot(old) if old is not None else None,
            new_value=snapshot(m),
            old_status=old.status if old is not None else None,
            new_status=m.status,
            span_id=self.span_id,
            actor=actor or self.actor,
            event_ts=at,
            recorded_at=self.recorded_at,
            version=m.version,
        )
        self.events.append(ev)
        if changed:
            self.changed[m.id] = m
        return ev

    def transition(
        self,
        m: Memory,
        to: str,
        event: str,
        reason: str,
        at: datetime,
        *,
        actor: str | None = None,
        **fields: Any,
    ) -> Memory:
        """Move ``m`` to status ``to`` (checked), set ``fields``, bump the version, log ``event``.

        Returns:
            The memory as it was before the change.
        """
        check_transition(m.status, to)
        old = m.copy()
        m.status = to
        for name, value in fields.items():
            setattr(m, name, value)
        m.updated_at = max(at, m.updated_at) if m.updated_at is not None else at
        m.version += 1
        logged = old
        if to == MemoryStatus.EXPIRED:  # the seed's minimal log: no content in the event either
            minimal(m)
            logged = minimal(old.copy())
        self.log(m, event, reason, at, logged, actor)
        return old

    def refuse(self, m: Memory, reason: str, at: datetime) -> None:
        """Log a refused change of a frozen memory (the memory itself is not changed)."""
        self.log(m, LifecycleEvent.REFUSED, reason, at, m.copy(), changed=False)
