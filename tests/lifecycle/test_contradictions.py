"""Contradictions: detection, the automatic rules, validity times, and later settlement."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, timedelta

import pytest

from skillstream.apply import ApplyOptions, apply_ops
from skillstream.lifecycle import contradictions as ctr
from skillstream.memories import OwnerMemories
from skillstream.model import MaintenanceResult, Memory, MemoryOp, Op
from skillstream.services.home_lifecycle import maintain_home, set_status
from skillstream.settings import Settings
from skillstream.storage.home import open_stores
from skillstream.storage.writer import write_results
from tests.lifecycle.conftest import DAY, T0, lifecycle_params, span


@pytest.mark.parametrize(
    "old,new,key,expected",
    [
        (
            "User lives in Oslo",
            "User lives in Bergen",
            "user|fact|home",
            "home changed: oslo -> bergen",
        ),
        (
            "Melanie is vegetarian.",
            "Melanie is vegan.",
            "melanie|fact|diet",
            "diet changed: vegetarian -> vegan",
        ),
        (
            "Caroline likes hiking",
            "Caroline does not like hiking anymore",
            "caroline|preference|hiking",
            "opposite statements: 'Caroline likes hiking' "
            "vs 'Caroline does not like hiking anymore'",
        ),
        (
            "用户喜欢咖啡。",
            "用户不喜欢咖啡。",
            "user|preference|咖啡",
            "opposite statements: '用户喜欢咖啡。' vs '用户不喜欢咖啡。'",
        ),
        # not contradictions: a refinement, an idiom, reported speech, a long statement, an event
        ("Caroline is a nurse.", "Caroline is a nurse at St. Mary's.", "caroline|fact|job", None),
        (
            "Andrew looks forward to hiking with them.",
            "Andrew can't wait to go hiking with them.",
            "andrew|plan|hiking",
            None,
        ),
        (
            "Maria said great job.",
            "Maria is sorry to hear about John's job.",
            "maria|fact|job",
            None,
        ),
        (
            "John got promoted at work.",
            "It feels like all the hard work John has put in has paid off now that "
            "John is an assistant manager at the company.",
            "john|fact|job",
            None,
        ),
        ("User lives in Oslo", "User lives in Bergen", None, None),
    ],
)
def test_conflict_rules(old, new, key, expected):
    assert (
        ctr.conflict(Memory(id="a", owner_id="o", text=old, kind="fact"), new, "fact", key, None)
        == expected
    )


def test_event_kinds_never_conflict():
    a = Memory(id="a", owner_id="o", text="User went to Oslo", kind="event")
    assert ctr.conflict(a, "User went to Bergen", "event", "user|event|home", None) is None


def _home_state(recorded):
    state = OwnerMemories("o1")
    apply_ops(
        state,
        span(["I live in Oslo"], at=T0),
        [MemoryOp(Op.INSERT, "User lives in Oslo", key="user|fact|home")],
        recorded,
    )
    return state, next(iter(state.items.values()))


def test_the_newer_fact_wins_and_the_older_keeps_its_validity(recorded):
    state, oslo = _home_state(recorded)
    s = span(["I moved"], at=T0 + 30 * DAY)
    r = apply_ops(
        state,
        s,
        [MemoryOp(Op.INSERT, "User lives in Bergen", key="user|fact|home", event_ts=T0 + 28 * DAY)],
        recorded,
    )
    bergen = next(m for m in state.items.values() if m.id != oslo.id)
    assert [(e.event, e.memory_id, e.reason) for e in r.events] == [
        ("created", bergen.id, "new information"),
        ("invalidated", oslo.id, f"contradicted by {bergen.id} (newer)"),
    ]
    assert (oslo.status, oslo.valid_to) == ("archived", T0 + 28 * DAY)
    assert (bergen.status, bergen.valid_from, bergen.valid_to) == ("generated", T0 + 28 * DAY, None)
    assert [asdict(x) for x in r.rows.contradictions] == [
        {
            "contradiction_id": ctr.row(
                oslo,
                bergen,
                "",
                "",
                None,
                detected_at=T0,
                detected_by="",
                span_id=None,
                recorded_at=recorded,
            ).contradiction_id,
            "owner_id": "o1",
            "memory_a": oslo.id,
            "memory_b": bergen.id,
            "key": "user|fact|home",
            "description": "home changed: oslo -> bergen",
            "detected_at": T0 + 30 * DAY,
            "detected_by": "extractor",
            "span_id": s.span_id,
            "resolution": "keep-b",
            "rule": "newer",
            "winner_id": bergen.id,
            "resolved_at": T0 + 30 * DAY,
            "recorded_at": recorded,
        }
    ]


def _reinforce(state, text, days, recorded):
    for d in days:
        apply_ops(
            state, span([f"again {d}"], at=T0 + d * DAY), [MemoryOp(Op.INSERT, text)], recorded
        )


def test_an_older_claim_loses_on_confidence_or_stays_unresolved(recorded):
    # the existing fact was confirmed five more times (0.95); a claim dated before it arrives (0.6)
    state, oslo = _home_state(recorded)
    _reinforce(state, "User lives in Oslo", range(1, 6), recorded)
    r = apply_ops(
        state,
        span(["Back then"], at=T0 + 10 * DAY),
        [
            MemoryOp(
                Op.INSERT,
                "User lives in Bergen",
                key="user|fact|home",
                event_ts=T0 - 100 * DAY,
                confidence=0.6,
            )
        ],
        recorded,
    )
    bergen = next(m for m in state.items.values() if m.id != oslo.id)
    (row,) = [asdict(x) for x in r.rows.contradictions]
    assert (row["resolution"], row["rule"], row["winner_id"]) == ("keep-a", "confidence", oslo.id)
    # the older claim held until the newer fact began
    assert (bergen.status, bergen.valid_from, bergen.valid_to) == ("archived", T0 - 100 * DAY, T0)
    assert (oslo.status, oslo.confidence) == ("generated", 0.95)

    # with confidences 0.7 and 0.7 no rule decides: both stay, the row says unresolved
    state, oslo = _home_state(recorded)
    r = apply_ops(
        state,
        span(["Back then"], at=T0 + 10 * DAY),
        [
            MemoryOp(
                Op.INSERT, "User lives in Bergen", key="user|fact|home", event_ts=T0 - 100 * DAY
            )
        ],
        recorded,
    )
    (row,) = [asdict(x) for x in r.rows.contradictions]
    assert (row["resolution"], row["rule"], row["winner_id"], row["resolved_at"]) == (
        "unresolved",
        None,
        None,
        None,
    )
    assert sorted(m.status for m in state.items.values()) == ["generated", "generated"]


def test_what_did_we_believe_on_date_x_and_later_settlement(tmp_path, recorded, embedder):
    settings = Settings.load(home=str(tmp_path / "home"))
    options = ApplyOptions(embed=embedder.encode, params=lifecycle_params(session_summaries=False))
    state = OwnerMemories("o1")
    results = []
    for at, op in [
        (T0, MemoryOp(Op.INSERT, "User lives in Oslo", key="user|fact|home")),
        (T0 + 30 * DAY, MemoryOp(Op.INSERT, "User lives in Bergen", key="user|fact|home")),
        (T0 + 40 * DAY, MemoryOp(Op.INSERT, "User is vegetarian", key="user|fact|diet")),
        (
            T0 + 50 * DAY,
            MemoryOp(Op.INSERT, "User is vegan", key="user|fact|diet", event_ts=T0 + 20 * DAY),
        ),
    ]:
        r = apply_ops(state, span([op.text], at=at), [op], recorded, options)
        results.append(MaintenanceResult("o1", at, list(r.changed.values()), r.events, r.rows))
    with open_stores(settings, embedder.dim) as stores:
        write_results(stores, results)

        def believed(x: datetime) -> list[str]:
            return [
                r["text"]
                for r in stores.catalog.sql(
                    "SELECT text FROM memory_meta WHERE owner_id = ? AND status <> 'merged' "
                    "AND valid_from <= ? AND (valid_to IS NULL OR valid_to > ?) ORDER BY text",
                    ["o1", x, x],
                ).to_pylist()
            ]

        assert believed(T0 + 10 * DAY) == ["User lives in Oslo"]
        assert believed(T0 + 45 * DAY) == [
            "User is vegan",
            "User is vegetarian",
            "User lives in Bergen",
        ]
        unresolved = stores.catalog.sql(
            "SELECT memory_a, memory_b FROM contradictions WHERE resolution = 'unresolved'"
        ).to_pylist()
        vegetarian = next(m for m in state.items.values() if m.text == "User is vegetarian")
        assert unresolved == [
            {
                "memory_a": vegetarian.id,
                "memory_b": next(m.id for m in state.items.values() if m.text == "User is vegan"),
            }
        ]
        # the user forgets the vegetarian memory: maintenance settles the contradiction for the
        # other side
        set_status(
            stores, [vegetarian.id], "deleted", at=T0 + 60 * DAY, reason="forgotten on request"
        )
        report = maintain_home(stores, lifecycle_params(session_summaries=False), now=T0 + 61 * DAY)
        assert dict(report.contradictions) == {"keep-b": 1}
        row = stores.catalog.sql(
            "SELECT resolution, rule, resolved_at FROM contradictions WHERE memory_a = ?",
            [vegetarian.id],
        ).to_pylist()[0]
        assert row == {"resolution": "keep-b", "rule": "lifecycle", "resolved_at": T0 + 61 * DAY}
        assert believed(T0 + 61 * DAY + timedelta(seconds=1)) == [
            "User is vegan",
            "User lives in Bergen",
        ]
