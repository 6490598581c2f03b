"""Maintenance of one owner's memories at an event time: expiry, decay, capacity, summaries.

``maintain_owner(state, at, params)`` is pure apart from mutating ``state``: given the same memories
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

import heapq
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from skillstream.embed import Embed
from skillstream.lifecycle import summaries
from skillstream.lifecycle.contradictions import escalate
from skillstream.lifecycle.params import LifecycleParams
from skillstream.lifecycle.reorganizer import reorganize
from skillstream.lifecycle.states import ChangeLog
from skillstream.lifecycle.summaries import summarize
from skillstream.lifecycle.types import eviction_key, over_capacity, touched_at
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


def steps_due(m: Memory, at: datetime, params: LifecycleParams) -> int:
    """Decay steps that have fallen due for ``m`` by ``at`` since its last touch.

    ``idle`` rule: step k falls due once the memory has been unused for ``decay_after`` plus
    ``k - 1`` periods. ``seed`` rule: the same steps, each due only when the memory has been unused
    for *more* than that (the seed's "lastAccessedAt > 90 days"), and only while its confidence is
    below ``decay_below``.
    """
    touch = touched_at(m)
    if touch is None or params.decay_step <= 0:
        return 0
    idle = at - touch - params.decay_after
    if params.decay_rule == "seed":
        if m.confidence >= params.decay_below or idle.total_seconds() <= 0:
            return 0
        return math.ceil(idle / params.decay_period)
    if idle.total_seconds() < 0:
        return 0
    return 1 + math.floor(idle / params.decay_period)


def _step_time(m: Memory, k: int, params: LifecycleParams) -> datetime:
    touch = touched_at(m)
    assert touch is not None
    return touch + params.decay_after + params.decay_period * (k - 1)


def archive_time(m: Memory, params: LifecycleParams) -> datetime | None:
    """When ``m`` is archived for idleness (``None``: never, or not a memory that idles)."""
    touch = touched_at(m)
    if params.archive_after is None or touch is None or m.kind == MemoryKind.TOPIC:
        return None
    return touch + params.archive_after


def expire_or_decay(log: ChangeLog, m: Memory, at: datetime, params: LifecycleParams) -> None:
    """Steps 2 to 4 of the module docstring for one memory, in event-time order.

    Decay is applied up to the first of the expiry time and the archive time, then the earlier of
    the two happens, then the other: the same events in the same order as when maintenance ran
    before and after each of those times.
    """
    expires = m.expires_at
    expiring = expires is not None and expires <= at
    archives = archive_time(m, params) if m.status in LIVE else None
    archiving = archives is not None and archives <= at and (not expiring or archives < expires)  # type: ignore[operator]
    if m.status in LIVE and m.kind != MemoryKind.TOPIC:
        until = min(
            t
            for t in (at, expires if expiring else None, archives if archiving else None)
            if t is not None
        )
        _decay(log, m, until, params)
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
    if m.status == MemoryStatus.ARCHIVED and params.expire_archived_after is not None:
        since = m.updated_at
        if since is not None and since + params.expire_archived_after <= at:
            when = since + params.expire_archived_after
            log.transition(
                m,
                MemoryStatus.EXPIRED,
                MemoryStatus.EXPIRED,
                f"archived since {since:%Y-%m-%d}",
                when,
                valid_to=when if m.valid_to is None else m.valid_to,
            )


def _decay(log: ChangeLog, m: Memory, at: datetime, params: LifecycleParams) -> None:
    due = steps_due(m, at, params)
    if due <= m.decay_steps:
        return
    left = round(m.confidence - params.decay_step * (due - m.decay_steps), 6)
    touch = touched_at(m)
    if left <= 0:
        k0 = m.decay_steps + max(1, math.ceil(round(m.confidence / params.decay_step, 6)))
        when = _step_time(m, k0, params)
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
    when = _step_time(m, due, params)
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
    params: LifecycleParams,
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
        cap = params.capacity(mtype)
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
            policy = params.policy_set.for_agent(m.agent_id)
            if policy.max_items:
                by_scope.setdefault((policy.agent, m.scope), []).append(m)
    for agent, scope in sorted(by_scope):
        cap = params.policy_set.for_agent(None if agent == "*" else agent).max_items_for(scope)
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


def next_change(m: Memory, params: LifecycleParams) -> datetime | None:
    """The earliest event time at which :func:`expire_or_decay` may change ``m`` (``None``: never,
    unless ``m`` changes first). Never later than the real time: maintenance that looks at a memory
    a little early finds nothing to do and looks again at the next tick."""
    times: list[datetime] = []
    live = m.status in LIVE
    if (live or m.status == MemoryStatus.ARCHIVED) and m.expires_at is not None:
        times.append(m.expires_at)
    if live:
        archives = archive_time(m, params)
        if archives is not None:
            times.append(archives)
        touch = touched_at(m)
        if m.kind != MemoryKind.TOPIC and touch is not None and params.decay_step > 0:
            if params.decay_rule != "seed" or m.confidence < params.decay_below:
                times.append(touch + params.decay_after + params.decay_period * m.decay_steps)
    if m.status == MemoryStatus.ARCHIVED and params.expire_archived_after is not None:
        if m.updated_at is not None:
            times.append(m.updated_at + params.expire_archived_after)
    return min(times) if times else None


class Upkeep:
    """What maintenance keeps about one owner's memories between ticks, so that a tick costs what
    is due and what changed, not the owner's whole history (derived data of the state, made again
    after a restore or when the state's index is rebuilt):

    * when each memory next falls due for expiry, archiving or decay (``next_change``), in a heap;
    * the memories of each session, and the sessions that may still need a summary or a newer one.

    It learns what changed from the owner's index (``OwnerIndex.take_changed``), which every change
    of a memory goes through.
    """

    def __init__(self, state: OwnerMemories, params: LifecycleParams) -> None:
        self.index = state.index
        self.params = params
        self._heap: list[tuple[datetime, str]] = []
        self._when: dict[str, datetime] = {}
        self.members: dict[str, dict[str, None]] = {}
        """Session id -> ids of the memories written in it (whatever they became since)."""
        self.open: set[str] = set()
        """Sessions ``summarize`` must look at: the others are up to date whatever the time."""
        self._evict: dict[str, list[tuple[tuple, str]]] = {}  # per memory type, by eviction key
        self.index.take_changed()
        self.note(state.items.values())  # everything, once

    @classmethod
    def of(cls, state: OwnerMemories, params: LifecycleParams) -> Upkeep:
        """The state's upkeep, made afresh when its index or the parameters are not the ones it
        knew."""
        got = state.derived("upkeep", lambda: cls(state, params))
        if got.index is not state.index or (got.params is not params and got.params != params):
            got = state.keep("upkeep", cls(state, params))
        got.catch_up(state)
        return got

    def catch_up(self, state: OwnerMemories) -> None:
        """Take every change the index saw since the last call."""
        self.note(m for m in map(state.get, self.index.take_changed()) if m is not None)

    def note(self, memories: Iterable[Memory]) -> None:
        """Learn what ``memories`` are now: when they next fall due, and their sessions."""
        for m in memories:
            t = next_change(m, self.params)
            if t is None:
                self._when.pop(m.id, None)
            elif self._when.get(m.id) != t:
                self._when[m.id] = t
                heapq.heappush(self._heap, (t, m.id))
            if m.session_id:
                if m.kind != MemoryKind.SUMMARY:
                    self.members.setdefault(m.session_id, {})[m.id] = None
                self.open.add(m.session_id)
            if m.status in LIVE and m.kind != MemoryKind.TOPIC:
                heapq.heappush(self._evict.setdefault(m.memory_type, []), (eviction_key(m), m.id))

    def over_capacity(
        self, state: OwnerMemories, memory_type: str, cap: int | None
    ) -> list[Memory]:
        """``over_capacity`` of the live memories of ``memory_type`` (topic nodes aside), from a
        heap by eviction order instead of sorting them all."""
        excess = len(state.index.live_by_type.get(memory_type, {})) - (cap or 0)
        if not cap or excess <= 0:
            return []
        heap = self._evict.get(memory_type, [])
        out: list[Memory] = []
        taken: list[tuple[tuple, str]] = []
        while heap and len(out) < excess:
            key, mid = entry = heapq.heappop(heap)
            m = state.get(mid)
            if (
                m is None
                or m.status not in LIVE
                or m.kind == MemoryKind.TOPIC
                or m.memory_type != memory_type
                or eviction_key(m) != key
                or any(x is m for x in out)
            ):
                continue  # stale: the memory changed or left since this entry
            out.append(m)
            taken.append(entry)
        for entry in taken:  # still live until the caller archives them
            heapq.heappush(heap, entry)
        live = state.index.live_by_type.get(memory_type, {})
        if len(heap) > 4 * len(live) + 64:  # mostly stale entries: start again from the live
            self._evict[memory_type] = heap = [
                (eviction_key(m), m.id)
                for m in map(state.get, live)
                if m is not None and m.kind != MemoryKind.TOPIC
            ]
            heapq.heapify(heap)
        return out

    def due(self, state: OwnerMemories, at: datetime) -> list[Memory]:
        """The memories that may change at ``at``, in the order maintenance goes through them."""
        out: dict[str, Memory] = {}
        heap = self._heap
        while heap and heap[0][0] <= at:
            t, mid = heapq.heappop(heap)
            if self._when.get(mid) == t:
                del self._when[mid]
                m = state.get(mid)
                if m is not None:
                    out[mid] = m
        return sorted(out.values(), key=lambda m: (m.created_at or at, m.id))

    def sessions(self) -> dict[str, Iterable[str]]:
        """The open sessions with their memories' ids (``summarize(only=...)``)."""
        return {sid: self.members.get(sid, {}) for sid in self.open}

    def close(self, state: OwnerMemories) -> None:
        """After ``summarize``: forget the open sessions that are up to date whatever the time."""
        found = summaries.sessions(state, self.sessions())
        self.open = {
            sid for sid in self.open if not summaries.up_to_date(state, sid, found.get(sid, []))
        }


def enforce_capacity_of(
    log: ChangeLog, state: OwnerMemories, at: datetime, params: LifecycleParams
) -> None:
    """:func:`enforce_capacity` without looking at every live memory: the index counts the live
    memories of each type, and ``Upkeep`` keeps them in eviction order, so a type over its capacity
    costs the memories it archives (every live memory is looked at when a policy caps a scope).
    The index must know every change made so far."""
    policies = params.policy_set
    if any(p.max_items for _, p in policies.policies) or policies.default.max_items:
        enforce_capacity(log, state, at, params)
        return
    counts = state.index.live_by_type
    over = [t for t in sorted(counts) if len(counts[t]) > (params.capacity(t) or 1 << 62)]
    if not over:
        return
    upkeep = Upkeep.of(state, params)
    for mtype in over:
        cap = params.capacity(mtype)
        for m in upkeep.over_capacity(state, mtype, cap):
            log.transition(
                m,
                MemoryStatus.ARCHIVED,
                MemoryStatus.ARCHIVED,
                f"{mtype} over capacity ({cap})",
                at,
            )


def maintain_owner(
    state: OwnerMemories,
    at: datetime,
    params: LifecycleParams,
    *,
    embed: Embed | None = None,
    close_sessions: bool = False,
    actor: str = "maintenance",
    recorded_at: datetime | None = None,
    token_count: Callable[[str], int] | None = None,
    later: LaterVectors | None = None,
) -> MaintenanceResult | None:
    """Maintain one owner's memories at event time ``at``; ``None`` when nothing changed.

    With ``later``, new summaries get their vectors when the caller settles it
    (nothing during maintenance or extraction reads them), not now.
    """
    log = ChangeLog(state.owner_id, "maintenance", None, actor, recorded_at or datetime.now(UTC))
    upkeep = Upkeep.of(state, params)
    if params.session_summaries:  # first, so a summary of an old session ages like its session did
        summarize(
            log,
            state,
            at,
            params,
            embed,
            close_all=close_sessions,
            token_count=token_count,
            later=later,
            only=upkeep.sessions(),
        )
        upkeep.close(state)
        upkeep.note(log.changed.values())  # a summary of an old session may fall due at once
    due = upkeep.due(state, at)
    for m in due:
        expire_or_decay(log, m, at, params)
    upkeep.note(due)
    for m in log.changed.values():  # the index follows, for the capacity and the reorganizer
        state.touch(m)
    enforce_capacity_of(log, state, at, params)
    escalate(log, state, at, params)
    if params.reorganize:
        for m in log.changed.values():
            state.touch(m)
        reorganize(log, state, at, params)
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
        params: LifecycleParams,
        embed: Embed | None = None,
        token_count: Callable[[str], int] | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.params = params
        self.embed = embed
        self.token_count = token_count
        self.clock = clock

    def __call__(
        self, state: OwnerMemories, tick: MaintenanceTick, later: LaterVectors | None = None
    ) -> MaintenanceResult | None:
        return maintain_owner(
            state,
            tick.at,
            self.params,
            embed=self.embed,
            close_sessions=tick.close_sessions,
            recorded_at=self.clock(),
            token_count=self.token_count,
            later=later,
        )
