"""States and transitions: every change writes one memory_events row with exact values."""

from __future__ import annotations

import json

import pytest

from skillstream.apply import ApplyOptions, apply_ops
from skillstream.lifecycle import states as st
from skillstream.lifecycle.maintenance import maintain_owner
from skillstream.memories import OwnerMemories
from skillstream.model import MemoryOp
from skillstream.vocab import LifecycleEvent, MemoryStatus, Op
from tests.lifecycle.conftest import DAY, T0, lifecycle_params, span


def test_allowed_and_refused_transitions():
    for src, targets in st.TRANSITIONS.items():
        for to in st.STATUSES:
            if to in targets:
                st.check_transition(src, to)
            else:
                with pytest.raises(st.TransitionError, match=f"cannot become '{to}'"):
                    st.check_transition(src, to)
    assert (
        st.TRANSITIONS[MemoryStatus.DELETED] == frozenset()
        and st.TRANSITIONS[MemoryStatus.MERGED] == frozenset()
    )
    with pytest.raises(st.TransitionError, match="unknown memory status 'gone'"):
        st.check_transition("gone", MemoryStatus.ACTIVATED)


def _one(state, s, ops, recorded, **kw):
    return apply_ops(state, s, ops, recorded, ApplyOptions(**kw))


def test_create_update_delete_events_carry_everything(recorded):
    state = OwnerMemories("o1")
    s1 = span(["I plan a trip to Kyoto"], at=T0)
    a = _one(
        state,
        s1,
        [
            MemoryOp(
                Op.INSERT, "User plans a trip to Kyoto", kind="plan", key="user|plan|trip kyoto"
            )
        ],
        recorded,
    )
    (m,) = state.items.values()
    (ev,) = a.events
    assert (
        ev.event,
        ev.old_status,
        ev.new_status,
        ev.span_id,
        ev.actor,
        ev.event_ts,
        ev.recorded_at,
        ev.version,
    ) == ("created", None, "generated", s1.span_id, "extractor", T0, recorded, 1)
    assert json.loads(ev.new_value) == {
        "text": "User plans a trip to Kyoto",
        "confidence": 0.7,
        "reinforcement": 0,
        "scope": "private",
        "memory_type": "LongTermMemory",
        "valid_from": T0.isoformat(),
        "valid_to": None,
        "expires_at": None,
        "merged_into": None,
    }
    s2 = span(["It will be in April with my sister"], at=T0 + DAY)
    b = _one(
        state,
        s2,
        [
            MemoryOp(
                Op.UPDATE,
                "User plans a trip to Kyoto in April with the user's sister",
                kind="plan",
                target_id=m.id,
                reason="adds the date",
            )
        ],
        recorded,
    )
    (ev,) = b.events
    assert (ev.event, ev.old_status, ev.new_status, ev.reason, ev.version, ev.event_ts) == (
        "updated",
        "generated",
        "generated",
        "adds the date",
        2,
        T0 + DAY,
    )
    assert json.loads(ev.old_value)["text"] == "User plans a trip to Kyoto"
    s3 = span(["I cancelled the Kyoto trip"], at=T0 + 2 * DAY)
    c = _one(state, s3, [MemoryOp(Op.DELETE, target_id=m.id, reason="cancelled")], recorded)
    (ev,) = c.events
    assert (ev.event, ev.old_status, ev.new_status, ev.version) == (
        "deleted",
        "generated",
        "deleted",
        3,
    )
    assert (m.status, m.valid_to, m.version) == ("deleted", T0 + 2 * DAY, 3)


def test_frozen_memories_refuse_updates_deletes_and_restatements_and_log_it(recorded):
    state = OwnerMemories("o1")
    _one(
        state,
        span(["My report grade is A"], at=T0),
        [MemoryOp(Op.INSERT, "The user's report grade is A")],
        recorded,
    )
    (m,) = state.items.values()
    log = st.ChangeLog("o1", "cli", None, "cli", recorded)
    log.transition(m, MemoryStatus.FROZEN, MemoryStatus.FROZEN, "compliance record", T0 + DAY)
    assert (m.status, m.version) == ("frozen", 2)
    before = m.copy()
    r = _one(
        state,
        span(["Change it"], at=T0 + 2 * DAY),
        [
            MemoryOp(Op.UPDATE, "The user's report grade is B", target_id=m.id),
            MemoryOp(Op.DELETE, target_id=m.id),
            MemoryOp(Op.INSERT, "The user's report grade is A"),
        ],
        recorded,
    )
    assert [(e.event, e.reason, e.old_status, e.new_status, e.version) for e in r.events] == [
        ("refused", "update refused: the memory is frozen", "frozen", "frozen", 2),
        ("refused", "delete refused: the memory is frozen", "frozen", "frozen", 2),
        ("refused", "restated, but the memory is frozen", "frozen", "frozen", 2),
    ]
    assert r.changed == {} and m.row() == before.row()
    # maintenance leaves frozen memories alone, however old they get
    assert maintain_owner(state, T0 + 2000 * DAY, lifecycle_params(session_summaries=False)) is None
    log.transition(m, MemoryStatus.ACTIVATED, LifecycleEvent.UNFROZEN, "released", T0 + 3 * DAY)
    assert [e.event for e in log.events] == ["frozen", "unfrozen"] and m.status == "activated"


def test_archived_memories_are_reactivated_by_restating(recorded):
    state = OwnerMemories("o1")
    small = lifecycle_params(memory_capacities={"LongTermMemory": 1})
    _one(
        state,
        span(["I like jazz"], at=T0),
        [MemoryOp(Op.INSERT, "User likes jazz", kind="fact")],
        recorded,
        params=small,
    )
    first = next(iter(state.items.values()))
    r = _one(
        state,
        span(["I own a red bike"], at=T0 + DAY),
        [MemoryOp(Op.INSERT, "User owns a red bike")],
        recorded,
        params=small,
    )
    assert [(e.event, e.memory_id, e.reason) for e in r.events][1] == (
        "archived",
        first.id,
        "LongTermMemory over capacity (1)",
    )
    assert first.status == "archived" and first.valid_to is None
    r = _one(
        state,
        span(["I like jazz, really"], at=T0 + 2 * DAY),
        [MemoryOp(Op.INSERT, "User likes jazz")],
        recorded,
        params=small,
    )
    # restating the archived memory brings it back (and the least valuable other one goes)
    assert [(e.event, e.new_status) for e in r.events] == [
        ("reactivated", "activated"),
        ("reinforced", "activated"),
        ("archived", "archived"),
    ]
    assert (first.status, first.reinforcement, first.confidence, first.version) == (
        "activated",
        1,
        0.75,
        4,
    )


def test_the_latest_event_of_each_memory_names_its_status(recorded):
    state = OwnerMemories("o1")
    events = []
    for i, (ops, at) in enumerate(
        [
            (
                [
                    MemoryOp(Op.INSERT, "User lives in Oslo", key="user|fact|home"),
                    MemoryOp(
                        Op.INSERT, "User likes tea", kind="preference", key="user|preference|tea"
                    ),
                ],
                T0,
            ),
            ([MemoryOp(Op.INSERT, "User lives in Bergen", key="user|fact|home")], T0 + DAY),
            ([MemoryOp(Op.INSERT, "User likes tea")], T0 + 2 * DAY),
        ]
    ):
        events += _one(state, span([f"turn {i}"], at=at), ops, recorded).events
    r = maintain_owner(
        state, T0 + 400 * DAY, lifecycle_params(decay_rule="idle"), recorded_at=recorded
    )
    events += r.events
    latest = {}
    for e in events:
        if e.event != "refused" and (
            e.memory_id not in latest or e.version >= latest[e.memory_id].version
        ):
            latest[e.memory_id] = e
    assert {i: e.new_status for i, e in latest.items()} == {
        i: m.status for i, m in state.items.items()
    }
    # Oslo lost to Bergen; Bergen, tea and the session's summary were not used for 398+ days
    assert sorted((m.kind, m.status) for m in state.items.values()) == [
        ("fact", "archived"),
        ("fact", "expired"),
        ("preference", "expired"),
        ("summary", "expired"),
    ]
    assert sorted(e.event for e in events) == [
        "created",
        "created",
        "created",
        "created",
        "expired",
        "expired",
        "expired",
        "invalidated",
        "reinforced",
    ]
