"""Maintenance of one owner's memories at an event time: expiry, decay, capacity, summaries.

``maintain_owner(state, at, rules)`` is pure apart from mutating ``state``: given the same memories
and the same time it makes the same changes with the same event ids. The flow calls it on
maintenance ticks (``flows/maintenance.py``: per owner, on fixed event-time boundaries, before the
first span past each boundary); ``skillstream maintain [--now TIME]`` calls it for every owner.

Every step depends only on stored fields and ``at``, and never undoes what a later time would do,
so running maintenance at t1 and then at t2 ends in the same state as running it once at t2, and a
second run at the same time changes nothing:

1. **Session summaries** for sessions closed by ``at`` (``skillstream.lifecycle.summaries``); a
   summary's times are its session's, so the next steps age it as if it had been written then.
2. **Expiry.** A live or archived memory whose ``expires_at`` (set from the policy's default
   expiry, pushed on by reinforcement) is at or before ``at`` becomes ``expired``; its validity
   ends at ``expires_at``.
3. **Decay.** A live memory not created, reinforced or accessed for ``decay_after`` (90 days)
   loses ``decay_step`` (0.1) confidence, and another step for every further ``decay_period``
   (30 days). ``decay_steps`` counts the steps applied since that last touch, so a step is never
   applied twice. At 0 the memory expires (at the time that step fell due).
4. **Capacity.** Over the per-type capacity, or over a policy's ``max_items_per_scope``, the least
   valuable live memories are archived (``skillstream.lifecycle.types``).

Frozen memories are left alone by every step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from skillstream.embed import Embed
from skillstream.lifecycle.contradictions import escalate
from skillstream.lifecycle.params import LifecycleParams
from skillstream.lifecycle.reorganizer import reorganize
from skillstream.lifecycle.states import ChangeLog
from skillstream.lifecycle.summaries import summarize
from skillstream.lifecycle.types import over_capacity, touched_at
from skillstream.memories import LIVE, OwnerMemories
from skillstream.model import MaintenanceResult, Memory
from skillstream.vectors import LaterVectors
from skillstream.vocab import LifecycleEvent, MemoryKind, MemoryStatus


@dataclass(frozen=True)
class MaintenanceTick:
    """A request, in the stream, to maintain one owner's memories at event time ``at``.

    ``close_sessions`` treats every open session as closed (summaries at the end of a backfill).
    ``span_id`` names the span the tick was emitted before: the store commits the tick's changes
    no later than that span's ledger row, so a state read back from the store after that span
    already holds them (the pipeline then skips the tick, as it skips the span).
    """

    owner_id: str
    at: datetime
    close_sessions: bool = False
    span_id: str | None = None


def steps_due(m: Memory, at: datetime, rules: LifecycleParams) -> int:
    """Decay steps that have fallen due for ``m`` by ``at`` since its last touch.

    ``idle`` rule: step k falls due once the memory has been unused for ``decay_after`` plus
    ``k - 1`` periods. ``seed`` rule: the same steps, each due only when the memory has been unused
    for *more* than that (the seed's "lastAccessedAt > 90 days"), and only while its confidence is
    below ``decay_below``.
    """
    touch = touched_at(m)
    if touch is None or rules.decay_step <= 0:
        return 0
    idle = at - touch - rules.decay_after
    if rules.decay_rule == "seed":
        if m.confidence >= rules.decay_below or idle.total_seconds() <= 0:
            return 0
        return math.ceil(idle / rules.decay_period)
    if idle.total_seconds() < 0:
        return 0
    return 1 + math.floor(idle / rules.decay_period)


def _step_time(m: Memory, k: int, rules: LifecycleParams) -> datetime:
    touch = touched_at(m)
    assert touch is not None
    return touch + rules.decay_after + rules.decay_period * (k - 1)


def archive_time(m: Memory, rules: LifecycleParams) -> datetime | None:
    """When ``m`` is archived for idleness (``None``: never, or not a memory that idles)."""
    touch = touched_at(m)
    if rules.archive_after is None or touch is None or m.kind == MemoryKind.TOPIC:
        return None
    return touch + rules.archive_after


def expire_or_decay(log: ChangeLog, m: Memory, at: datetime, rules: LifecycleParams) -> None:
    """Steps 2 to 4 of the module docstring for one memory, in event-time order.

    Decay is applied up to the first of the expiry time and the archive time, then the earlier of
    the two happens, then the other: the same events in the same order as when maintenance ran
    before and after each of those times.
    """
    expires = m.expires_at
    expiring = expires is not None and expires <= at
    archives = archive_time(m, rules) if m.status in LIVE else None
    archiving = archives is not None and archives <= at and (not expiring or archives < expires)  # type: ignore[operator]
    if m.status in LIVE and m.kind != MemoryKind.TOPIC:
        until = min(
            t
            for t in (at, expires if expiring else None, archives if archiving else None)
            if t is not None
        )
        _decay(log, m, until, rules)
    if archiving and m.status in LIVE:
        assert archives is not None
        log.transition(
            m,
            MemoryStatus.ARCHIVED,
            MemoryStatus.ARCHIVED,
            f"unused since {touched_at(m):%Y-%m-%d}",
            archives,
        )
    if m.status in (*LIVE, MemoryStatus.ARCHIVED) and expires is not None and expiring:
        valid_to = expires if m.valid_to is None else min(m.valid_to, expires)
        log.transition(
            m,
            MemoryStatus.EXPIRED,
            MemoryStatus.EXPIRED,
            "expiry time reached",
            expires,
            valid_to=valid_to,
        )
    if m.status == MemoryStatus.ARCHIVED and rules.expire_archived_after is not None:
        since = m.updated_at
        if since is not None and since + rules.expire_archived_after <= at:
            when = since + rules.expire_archived_after
            log.transition(
                m,
                MemoryStatus.EXPIRED,
                MemoryStatus.EXPIRED,
                f"archived since {since:%Y-%m-%d}",
                when,
                valid_to=when if m.valid_to is None else m.valid_to,
            )


def _decay(log: ChangeLog, m: Memory, at: datetime, rules: LifecycleParams) -> None:
    due = steps_due(m, at, rules)
    if due <= m.decay_steps:
        return
    left = round(m.confidence - rules.decay_step * (due - m.decay_steps), 6)
    touch = touched_at(m)
    if left <= 0:
        k0 = m.decay_steps + max(1, math.ceil(round(m.confidence / rules.decay_step, 6)))
        when = _step_time(m, k0, rules)
        log.transition(
            m,
            MemoryStatus.EXPIRED,
            MemoryStatus.EXPIRED,
            f"confidence decayed to 0 (unused since {touch:%Y-%m-%d})",
            when,
            confidence=0.0,
            decay_steps=k0,
            valid_to=when if m.valid_to is None else m.valid_to,
        )
        return
    when = _step_time(m, due, rules)
    old = m.copy()
    lost = round(m.confidence - left, 6)
    m.confidence = left
    m.decay_steps = due
    m.updated_at = max(m.updated_at, when) if m.updated_at else when
    m.version += 1
    log.log(
        m, LifecycleEvent.DECAYED, f"unused since {touch:%Y-%m-%d}: confidence -{lost:g}", when, old
    )


def enforce_capacity(
    log: ChangeLog,
    state: OwnerMemories,
    at: datetime,
    rules: LifecycleParams,
    *,
    live: list[Memory] | None = None,
) -> int:
    """Archive what is over the type capacities and the policies' per-scope maxima.

    ``live`` narrows the check to these live memories (every live memory of the types it covers;
    their order does not matter); by default every live memory of the state is checked.
    """
    archived = 0
    if live is None:
        live = [m for m in state.items.values() if m.status in LIVE and m.kind != MemoryKind.TOPIC]
    by_type: dict[str, list[Memory]] = {}
    for m in live:
        by_type.setdefault(m.memory_type, []).append(m)
    for mtype in sorted(by_type):
        cap = rules.capacity(mtype)
        for m in over_capacity(by_type[mtype], cap):
            log.transition(
                m,
                MemoryStatus.ARCHIVED,
                MemoryStatus.ARCHIVED,
                f"{mtype} over capacity ({cap})",
                at,
            )
            archived += 1
    by_scope: dict[tuple[str, str], list[Memory]] = {}
    for m in live:
        if m.status in LIVE:
            policy = rules.policies.for_agent(m.agent_id)
            if policy.max_items:
                by_scope.setdefault((policy.agent, m.scope), []).append(m)
    for agent, scope in sorted(by_scope):
        cap = rules.policies.for_agent(None if agent == "*" else agent).max_items_for(scope)
        for m in over_capacity(by_scope[(agent, scope)], cap):
            log.transition(
                m,
                MemoryStatus.ARCHIVED,
                MemoryStatus.ARCHIVED,
                f"more than {cap} memories in scope {scope}",
                at,
            )
            archived += 1
    return archived


def maintain_owner(
    state: OwnerMemories,
    at: datetime,
    rules: LifecycleParams,
    *,
    embed: Embed | None = None,
    close_sessions: bool = False,
    actor: str = "maintenance",
    recorded_at: datetime | None = None,
    token_count: Callable[[str], int] | None = None,
    later: LaterVectors | None = None,
) -> MaintenanceResult | None:
    """Maintain one owner's memories at event time ``at``; ``None`` when nothing changed.

    With ``later``, new summaries and topic nodes get their vectors when the caller settles it
    (nothing during maintenance or extraction reads them), not now.
    """
    log = ChangeLog(state.owner_id, "maintenance", None, actor, recorded_at or datetime.now(UTC))
    if rules.summaries:  # first, so a summary of an old session ages like its session did
        summarize(
            log,
            state,
            at,
            rules,
            embed,
            close_all=close_sessions,
            token_count=token_count,
            later=later,
        )
    for m in sorted(state.items.values(), key=lambda m: (m.created_at or at, m.id)):
        expire_or_decay(log, m, at, rules)
    enforce_capacity(log, state, at, rules)
    escalate(log, state, at, rules)
    if rules.reorganize:
        reorganize(log, state, at, rules, embed, later)
    if not log.events:
        return None
    return MaintenanceResult(
        owner_id=state.owner_id,
        at=at,
        memories=list(log.changed.values()),
        events=log.events,
        rows=log.rows,
        actor=actor,
    )


class Maintenance:
    """The pipeline's maintenance hook: runs :func:`maintain_owner` for a ``MaintenanceTick``."""

    def __init__(
        self,
        rules: LifecycleParams,
        embed: Embed | None = None,
        token_count: Callable[[str], int] | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.rules = rules
        self.embed = embed
        self.token_count = token_count
        self.clock = clock

    def __call__(
        self, state: OwnerMemories, tick: MaintenanceTick, later: LaterVectors | None = None
    ) -> MaintenanceResult | None:
        return maintain_owner(
            state,
            tick.at,
            self.rules,
            embed=self.embed,
            close_sessions=tick.close_sessions,
            recorded_at=self.clock(),
            token_count=self.token_count,
            later=later,
        )
