from dataclasses import asdict
from datetime import UTC, datetime

from skillstream.apply import ApplyOptions, apply_ops
from skillstream.lifecycle.params import LifecycleParams
from skillstream.memories import OwnerMemories
from skillstream.model import MemoryOp
from skillstream.vocab import Op
from tests.factories import make_span

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def test_insert_update_delete_order_and_provenance():
    state = OwnerMemories("c1")
    s1 = make_span([("user", "I like tea"), ("user", "I live in Oslo")])
    a = apply_ops(
        state,
        s1,
        [
            MemoryOp(
                Op.INSERT,
                "User likes tea",
                kind="preference",
                key="user|preference|tea",
                source_message_ids=("c1-m0",),
            ),
            MemoryOp(
                Op.INSERT, "User lives in Oslo", key="user|fact|home", source_message_ids=("c1-m1",)
            ),
        ],
        NOW,
    )
    assert len(a.changed) == 2 and a.needs_vector == set(a.changed)
    tea = state.by_key("user|preference|tea")
    oslo = state.by_key("user|fact|home")
    assert tea.source_message_ids == ["c1-m0"] and tea.version == 1 and tea.confidence == 0.7
    assert tea.created_at == s1.end_ts and tea.span_id == s1.span_id

    s2 = make_span(
        [("user", "I moved to Bergen and stopped drinking tea")],
        ts=datetime(2024, 6, 1, tzinfo=UTC),
    )
    # an insert listed before the update must still be applied after it
    b = apply_ops(
        state,
        s2,
        [
            MemoryOp(Op.INSERT, "User moved to Bergen in June 2024", key="user|event|move"),
            MemoryOp(Op.DELETE, target_id=tea.id, reason="stopped"),
            MemoryOp(
                Op.UPDATE,
                "User lives in Oslo near the harbour",
                target_id=oslo.id,
                source_message_ids=("c1-m0",),
            ),
        ],
        NOW,
    )
    assert [e.event for e in b.events] == ["updated", "deleted", "created"]
    assert state.get(tea.id).status == "deleted" and state.get(tea.id).valid_to == s2.end_ts
    # a refinement (the old words are all still there) updates in place
    assert (
        state.get(oslo.id).text == "User lives in Oslo near the harbour"
        and state.get(oslo.id).version == 2
    )
    assert state.get(oslo.id).source_message_ids == ["c1-m1", "c1-m0"]
    assert b.needs_vector == {oslo.id, state.by_key("user|event|move").id}


def test_restating_reinforces_instead_of_duplicating():
    state = OwnerMemories("o")
    s1 = make_span([("user", "I like tea")])
    apply_ops(state, s1, [MemoryOp(Op.INSERT, "User likes tea")], NOW)
    s2 = make_span([("user", "I really like tea")], conversation_id="c2")
    r = apply_ops(
        state, s2, [MemoryOp(Op.INSERT, "user likes tea!", source_message_ids=("c2-m0",))], NOW
    )
    assert len(state.items) == 1
    (m,) = state.items.values()
    assert (m.reinforcement, m.confidence, m.version) == (1, 0.75, 2)
    assert m.source_message_ids == ["c1-m0", "c2-m0"]
    assert [e.event for e in r.events] == ["reinforced"] and not r.needs_vector


def test_confidence_capped():
    state = OwnerMemories("o")
    for i in range(10):
        apply_ops(
            state, make_span([("user", f"tea {i}")]), [MemoryOp(Op.INSERT, "User likes tea")], NOW
        )
    (m,) = state.items.values()
    assert m.confidence == 0.95 and m.reinforcement == 9


def test_invalid_targets_are_ignored_and_ids_deterministic():
    s = make_span([("user", "x")])
    st1, st2 = OwnerMemories("o"), OwnerMemories("o")
    ops = [
        MemoryOp(Op.UPDATE, "t", target_id="missing"),
        MemoryOp(Op.DELETE, target_id="missing"),
        MemoryOp(Op.INSERT, "  "),
        MemoryOp(Op.INSERT, "A fact"),
    ]
    fleet = LifecycleParams.defaults().with_keys(default_scope="fleet")
    a = apply_ops(st1, s, ops, NOW, ApplyOptions(params=fleet))
    b = apply_ops(st2, s, ops, NOW)
    assert list(a.changed) == list(b.changed) and len(a.changed) == 1
    assert next(iter(st1.items.values())).scope == "fleet"


def test_update_that_changes_a_slot_value_supersedes_instead_of_overwriting():
    # lifecycle: the old value keeps its validity period; a contradiction row is written
    state = OwnerMemories("c1")
    s1 = make_span([("user", "I live in Oslo")])
    apply_ops(state, s1, [MemoryOp(Op.INSERT, "User lives in Oslo", key="user|fact|home")], NOW)
    oslo = state.by_key("user|fact|home")
    s2 = make_span([("user", "I live in Bergen now")], ts=datetime(2024, 6, 1, tzinfo=UTC))
    b = apply_ops(state, s2, [MemoryOp(Op.UPDATE, "User lives in Bergen", target_id=oslo.id)], NOW)
    assert [(e.event, e.new_status) for e in b.events] == [
        ("created", "generated"),
        ("invalidated", "archived"),
    ]
    bergen = state.by_key("user|fact|home")
    assert bergen.text == "User lives in Bergen" and bergen.valid_from == s2.end_ts
    assert (oslo.status, oslo.valid_to, oslo.version, oslo.text) == (
        "archived",
        s2.end_ts,
        2,
        "User lives in Oslo",
    )
    (row,) = [asdict(r) for r in b.rows.contradictions]
    assert (row["memory_a"], row["memory_b"], row["resolution"], row["rule"], row["winner_id"]) == (
        oslo.id,
        bergen.id,
        "keep-b",
        "updated",
        bergen.id,
    )
    assert row["description"] == "home changed: oslo -> bergen"
    assert b.needs_vector == {bergen.id}
