"""The owner index kept up to date span by span decides exactly what a rebuild from the whole
history before every span decides (restatements, keys, near-duplicates, capacity)."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from skillstream.memories import OwnerIndex, OwnerMemories
from skillstream.pipeline import OwnerState
from skillstream.services.pipeline import build_pipeline
from skillstream.settings import Settings
from tests.factories import T0, make_span

TURNS = [
    "I live in Lisbon and I work as a nurse.",
    "My favourite food is grilled sardines.",
    "I moved to Porto last month, I don't live in Lisbon anymore.",
    "I work as a nurse at the city hospital.",
    "My favourite food is grilled sardines!",
    "I started learning the cello this year.",
    "Actually my favourite food is now bacalhau.",
    "I am learning to play the cello this year.",
    "My sister Ana lives in Braga with her two dogs.",
    "I stopped learning the cello.",
]


def _spans() -> list:
    spans = []
    for i in range(3 * len(TURNS)):
        turn = TURNS[(i * 3) % len(TURNS)]
        spans.append(
            make_span(
                [("user", turn), ("assistant", "Got it."), ("user", TURNS[i % len(TURNS)])],
                ts=T0 + timedelta(hours=i),
            )
        )
    return spans


def _run(embedder, tmp_path, rebuild: bool, caps: dict) -> tuple[OwnerMemories, list]:
    settings = Settings.from_keys(
        home=str(tmp_path / ("rebuild" if rebuild else "kept")), memory_capacities=caps
    )
    pipeline = build_pipeline(settings, embedder, maintenance=False)
    state = OwnerState(OwnerMemories("c1"), pipeline.run_id)
    results = []
    for span in _spans():
        if rebuild:
            state.memories.forget_index()
        results += pipeline.process_owner(state, [span])
    return state.memories, results


def _same(kept: OwnerMemories, rebuilt: OwnerMemories, fields: tuple[str, ...]) -> None:
    """Both states hold the same memories, equal in ``fields``."""
    assert sorted(kept.items) == sorted(rebuilt.items)
    for mid, m in kept.items.items():
        other = rebuilt.items[mid]
        assert [getattr(m, f) for f in fields] == [getattr(other, f) for f in fields], mid


@pytest.mark.parametrize(
    ("caps", "expected"),
    [
        ({}, {"merged", "consolidated", "updated", "deleted", "reinforced"}),
        # small capacities: archiving over capacity
        ({"LongTermMemory": 2, "UserMemory": 2}, {"archived", "updated", "deleted"}),
    ],
)
def test_incremental_index_decides_like_a_rebuild_every_span(embedder, tmp_path, caps, expected):
    kept, kept_results = _run(embedder, tmp_path, False, caps)
    rebuilt, rebuilt_results = _run(embedder, tmp_path, True, caps)
    assert sorted(kept.items) == sorted(rebuilt.items)
    happened = {str(e.event) for r in kept_results for e in r.events}
    assert expected <= happened
    _same(kept, rebuilt, ("text", "version", "status", "confidence", "merged_into"))
    for mid, m in kept.items.items():
        np.testing.assert_array_equal(m.vector, rebuilt.items[mid].vector)
    events = [(e.memory_id, e.event, e.reason) for r in kept_results for e in r.events]
    assert events == [(e.memory_id, e.event, e.reason) for r in rebuilt_results for e in r.events]


def _run_with_ticks(embedder, tmp_path, rebuild: bool) -> tuple[OwnerMemories, list]:
    from skillstream.lifecycle.maintenance import MaintenanceTick

    settings = Settings.from_keys(
        home=str(tmp_path / ("rebuild-ticks" if rebuild else "kept-ticks")),
        memory_capacities={"LongTermMemory": 6},
        reorganize_min_members=2,
        decay_rule="idle",
        expire_archived_after_s=60 * 86400.0,
    )
    pipeline = build_pipeline(settings, embedder)
    assert pipeline.maintenance is not None
    state = OwnerState(OwnerMemories("c1"), pipeline.run_id)
    items: list = []
    for i, span in enumerate(_spans()):
        items.append(span)
        if i % 4 == 3:  # ticks far apart: summaries, decay, expiry and archiving all happen
            at = span.messages[-1].ts + timedelta(days=40 * (i // 4 + 1))
            items.append(MaintenanceTick("c1", at, close_sessions=i % 8 == 7))
    results = []
    for item in items:
        if rebuild:
            state.memories.forget_index()
        results += pipeline.process_owner(state, [item])
    return state.memories, results


def test_index_kept_through_maintenance_decides_like_a_rebuild(embedder, tmp_path):
    kept, kept_results = _run_with_ticks(embedder, tmp_path, False)
    rebuilt, rebuilt_results = _run_with_ticks(embedder, tmp_path, True)
    happened = {str(e.event) for r in kept_results for e in r.events}
    assert {"decayed", "expired", "archived", "created", "updated"} <= happened, happened
    assert any(m.kind == "summary" for m in kept.items.values())
    assert sorted(kept.items) == sorted(rebuilt.items)
    _same(kept, rebuilt, ("text", "version", "status", "confidence", "key"))
    events = [(e.memory_id, str(e.event), e.version) for r in kept_results for e in r.events]
    assert events == [
        (e.memory_id, str(e.event), e.version) for r in rebuilt_results for e in r.events
    ]
    assert kept.index.known_people() == OwnerIndex(kept.items).known_people()
