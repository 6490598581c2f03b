"""The owner index kept up to date span by span decides exactly what a rebuild from the whole
history before every span decides (restatements, keys, near-duplicates, capacity)."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from skillstream.memories import OwnerMemories
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
    for mid, m in kept.items.items():
        other = rebuilt.items[mid]
        assert (m.text, m.version, m.status, m.confidence, m.merged_into) == (
            other.text,
            other.version,
            other.status,
            other.confidence,
            other.merged_into,
        )
        np.testing.assert_array_equal(m.vector, other.vector)
    events = [(e.memory_id, e.event, e.reason) for r in kept_results for e in r.events]
    assert events == [(e.memory_id, e.event, e.reason) for r in rebuilt_results for e in r.events]
