"""Memory types, capacities, and archiving (never deleting) what goes over them."""

from __future__ import annotations

import pytest

from skillstream.apply import ApplyOptions, apply_ops
from skillstream.errors import ConfigError
from skillstream.lifecycle.params import LifecycleParams
from skillstream.lifecycle.types import DEFAULT_CAPACITIES, capacities, memory_type_for
from skillstream.memories import OwnerMemories
from skillstream.model import MemoryOp, Op
from skillstream.settings import Settings
from tests.lifecycle.conftest import DAY, T0, lifecycle_params, span


def test_types_by_kind_scope_and_request():
    assert DEFAULT_CAPACITIES == {
        "WorkingMemory": 20,
        "LongTermMemory": 1500,
        "UserMemory": 480,
        "SkillMemory": 500,
    }
    assert [
        memory_type_for(k, s, r)
        for k, s, r in [
            ("fact", "private", None),
            ("event", "fleet", None),
            ("preference", "private", None),
            ("opinion", "private", None),
            ("fact", "session", None),
            ("preference", "session", None),
            ("task_skill", "private", None),
            ("fact", "private", "UserMemory"),
            ("fact", "private", "Bogus"),
        ]
    ] == [
        "LongTermMemory",
        "LongTermMemory",
        "UserMemory",
        "UserMemory",
        "WorkingMemory",
        "WorkingMemory",
        "SkillMemory",
        "UserMemory",
        "LongTermMemory",
    ]


def test_capacities_are_configurable_and_checked(tmp_path):
    s = Settings.load(home=str(tmp_path), memory_capacities={"WorkingMemory": 5, "UserMemory": 0})
    r = LifecycleParams.from_settings(s)
    assert (
        r.capacity("WorkingMemory"),
        r.capacity("UserMemory"),
        r.capacity("LongTermMemory"),
    ) == (5, None, 1500)
    with pytest.raises(ConfigError, match="unknown memory type 'ShortTerm'"):
        capacities({"ShortTerm": 3})
    with pytest.raises(ConfigError, match="expected a whole number >= 0, got -1"):
        capacities({"WorkingMemory": -1})


def test_over_capacity_the_least_valuable_oldest_are_archived(recorded):
    small = lifecycle_params(memory_capacities={"WorkingMemory": 3})
    options = ApplyOptions(params=small)
    state = OwnerMemories("o1")
    for d, text in enumerate(["step one", "step two", "step three"]):
        apply_ops(
            state,
            span([text], at=T0 + d * DAY),
            [MemoryOp(Op.INSERT, f"Working on {text}", scope="session")],
            recorded,
            options,
        )
    # "step one" is restated: it is now worth more than "step two", the next oldest
    apply_ops(
        state,
        span(["again"], at=T0 + 3 * DAY),
        [MemoryOp(Op.INSERT, "Working on step one", scope="session")],
        recorded,
        options,
    )
    r = apply_ops(
        state,
        span(["four"], at=T0 + 4 * DAY),
        [
            MemoryOp(Op.INSERT, "Working on step four", scope="session"),
            MemoryOp(Op.INSERT, "The user likes green tea", kind="preference"),
        ],
        recorded,
        options,
    )
    by_text = {m.text: m for m in state.items.values()}
    assert {t: (m.memory_type, m.status) for t, m in by_text.items()} == {
        "Working on step one": ("WorkingMemory", "generated"),
        "Working on step two": ("WorkingMemory", "archived"),
        "Working on step three": ("WorkingMemory", "generated"),
        "Working on step four": ("WorkingMemory", "generated"),
        "The user likes green tea": ("UserMemory", "generated"),
    }
    ev = r.events[-1]
    assert (ev.event, ev.memory_id, ev.reason, ev.event_ts, ev.new_status) == (
        "archived",
        by_text["Working on step two"].id,
        "WorkingMemory over capacity (3)",
        T0 + 4 * DAY,
        "archived",
    )
    assert by_text["Working on step two"].valid_to is None  # archived for space, not disbelieved


def test_policy_maximum_per_scope(recorded):
    capped = lifecycle_params(policies={"bot": {"max_items_per_scope": {"fleet": 2}}})
    options = ApplyOptions(params=capped)
    state = OwnerMemories("o1")
    for d in range(4):
        apply_ops(
            state,
            span([f"fact {d}"], at=T0 + d * DAY, agent="bot"),
            [
                MemoryOp(Op.INSERT, f"Shared fact number {d}", scope="fleet"),
                MemoryOp(Op.INSERT, f"Private fact number {d}"),
            ],
            recorded,
            options,
        )
    live = sorted(m.text for m in state.items.values() if m.status in ("generated", "activated"))
    assert live == [
        "Private fact number 0",
        "Private fact number 1",
        "Private fact number 2",
        "Private fact number 3",
        "Shared fact number 2",
        "Shared fact number 3",
    ]
    archived = [m for m in state.items.values() if m.status == "archived"]
    assert sorted(m.text for m in archived) == ["Shared fact number 0", "Shared fact number 1"]
