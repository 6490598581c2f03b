"""Decay and expiry by event time: exact values, idempotence, and the same end state by any path."""

from __future__ import annotations

from datetime import timedelta

from skillstream.apply import ApplyOptions, apply_ops
from skillstream.lifecycle.maintenance import maintain_owner, steps_due
from skillstream.memories import OwnerMemories
from skillstream.model import MemoryOp
from skillstream.vocab import Op
from tests.lifecycle.conftest import DAY, T0, lifecycle_params, span

NO_SUMMARY = lifecycle_params(session_summaries=False, decay_rule="idle")
"""Today's alternative decay rule: every memory unused for 90 days decays."""
SEED = lifecycle_params(session_summaries=False)
"""The default (seed) decay rule: only memories unused for more than 90 days AND below 0.3."""


NO_SUMMARY_OPTIONS = ApplyOptions(params=NO_SUMMARY)


def _state(recorded, texts=("User likes tea", "User owns a bike"), options=NO_SUMMARY_OPTIONS):
    state = OwnerMemories("o1")
    apply_ops(
        state, span(["hello"], at=T0), [MemoryOp(Op.INSERT, t) for t in texts], recorded, options
    )
    return state


def test_decay_steps_fall_due_by_event_time(recorded):
    state = _state(recorded)
    tea = next(m for m in state.items.values() if "tea" in m.text)
    assert [steps_due(tea, T0 + d * DAY, NO_SUMMARY) for d in (0, 89, 90, 119, 120, 150, 240)] == [
        0,
        0,
        1,
        1,
        2,
        3,
        6,
    ]
    assert maintain_owner(state, T0 + 89 * DAY, NO_SUMMARY, recorded_at=recorded) is None
    r = maintain_owner(state, T0 + 150 * DAY, NO_SUMMARY, recorded_at=recorded)
    assert (tea.confidence, tea.decay_steps, tea.version, tea.status) == (0.4, 3, 2, "generated")
    ev = next(e for e in r.events if e.memory_id == tea.id)
    # one event for the three steps, dated when the last of them fell due
    assert (ev.event, ev.event_ts, ev.reason, ev.actor, ev.span_id) == (
        "decayed",
        T0 + 150 * DAY,
        "unused since 2024-01-01: confidence -0.3",
        "maintenance",
        None,
    )
    # again at the same time: nothing to do
    assert maintain_owner(state, T0 + 150 * DAY, NO_SUMMARY, recorded_at=recorded) is None
    # at 0 the memory expires, when the zeroing step fell due (touch + 90d + 3 * 30d)
    r = maintain_owner(state, T0 + 400 * DAY, NO_SUMMARY, recorded_at=recorded)
    assert (tea.status, tea.confidence, tea.decay_steps, tea.valid_to) == (
        "expired",
        0.0,
        7,
        T0 + 270 * DAY,
    )
    assert [e.event for e in r.events if e.memory_id == tea.id] == ["expired"]


def test_reinforcement_and_access_restart_decay(recorded):
    state = _state(recorded)
    tea = next(m for m in state.items.values() if "tea" in m.text)
    bike = next(m for m in state.items.values() if "bike" in m.text)
    maintain_owner(state, T0 + 120 * DAY, NO_SUMMARY, recorded_at=recorded)
    assert (tea.confidence, tea.decay_steps) == (0.5, 2)
    apply_ops(
        state,
        span(["I like tea"], at=T0 + 121 * DAY),
        [MemoryOp(Op.INSERT, "User likes tea")],
        recorded,
        ApplyOptions(params=NO_SUMMARY),
    )
    assert (tea.confidence, tea.decay_steps, tea.reinforcement) == (0.55, 0, 1)
    bike.last_accessed_at = T0 + 121 * DAY  # what a search hit writes
    bike.decay_steps = 0
    assert maintain_owner(state, T0 + 210 * DAY, NO_SUMMARY, recorded_at=recorded) is None
    maintain_owner(state, T0 + 211 * DAY, NO_SUMMARY, recorded_at=recorded)
    assert (tea.confidence, bike.confidence) == (0.45, 0.4)


def test_ttl_from_the_policy_expires_and_reinforcement_extends_it(recorded):
    policy = lifecycle_params(session_summaries=False, policies={"*": {"default_expiry": "30d"}})
    options = ApplyOptions(params=policy)
    state = _state(recorded, texts=("User is in Paris this week",), options=options)
    (m,) = state.items.values()
    assert m.expires_at == T0 + 30 * DAY
    apply_ops(
        state,
        span(["Still in Paris"], at=T0 + 10 * DAY),
        [MemoryOp(Op.INSERT, "User is in Paris this week")],
        recorded,
        options,
    )
    assert m.expires_at == T0 + 40 * DAY
    assert (
        maintain_owner(state, T0 + 40 * DAY - timedelta(seconds=1), policy, recorded_at=recorded)
        is None
    )
    r = maintain_owner(state, T0 + 45 * DAY, policy, recorded_at=recorded)
    (ev,) = r.events
    assert (ev.event, ev.event_ts, ev.reason, ev.old_status, ev.new_status) == (
        "expired",
        T0 + 40 * DAY,
        "expiry time reached",
        "generated",
        "expired",
    )
    assert (m.status, m.valid_to) == ("expired", T0 + 40 * DAY)


def _fields(state):
    # not the version: grouped decay steps count as one change in a catch-up, several when daily
    return sorted(
        (
            m.id,
            m.status,
            m.confidence,
            m.decay_steps,
            m.valid_to,
            m.expires_at,
            m.reinforcement,
            m.text,
        )
        for m in state.items.values()
    )


def test_maintaining_daily_or_once_ends_in_the_same_state(recorded):
    """The backfill promise: ticks every day, or one catch-up at the end, give the same memories."""
    policy = lifecycle_params(
        policies={"*": {"default_expiry": "200d"}}, idle_gap_s=3600, decay_rule="idle"
    )
    options = ApplyOptions(params=policy)

    def build():
        state = OwnerMemories("o1")
        apply_ops(
            state,
            span(["a"], at=T0),
            [MemoryOp(Op.INSERT, "User likes tea"), MemoryOp(Op.INSERT, "User owns a bike")],
            recorded,
            options,
        )
        apply_ops(
            state,
            span(["b"], at=T0 + 100 * DAY, session="s2"),
            [MemoryOp(Op.INSERT, "User likes tea"), MemoryOp(Op.INSERT, "User plays chess")],
            recorded,
            options,
        )
        return state

    daily = build()
    events_daily = []
    for d in range(100, 501):
        r = maintain_owner(daily, T0 + d * DAY, policy, recorded_at=recorded)
        events_daily += r.events if r else []
    once = build()
    r = maintain_owner(once, T0 + 500 * DAY, policy, recorded_at=recorded)
    assert _fields(daily) == _fields(once)
    assert sorted(m.status for m in once.items.values()) == ["expired"] * 5
    # the same transitions happened, at the same event times (decay steps are grouped in a catch-up)

    def final(evs):
        return sorted((e.memory_id, e.event, e.event_ts) for e in evs if e.event != "decayed")

    assert final(events_daily) == final(r.events)
