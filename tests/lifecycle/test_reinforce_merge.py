"""Confidence, reinforcement and near-duplicate merging (with the real MiniLM embedder)."""

from __future__ import annotations

import numpy as np

from skillstream.apply import ApplyOptions, apply_ops
from skillstream.lifecycle.reinforce import consolidated_id
from skillstream.memories import OwnerMemories
from skillstream.model import MemoryOp
from skillstream.vocab import Op
from tests.lifecycle.conftest import DAY, T0, lifecycle_params, span


def test_confidence_starts_at_default_and_restating_raises_it_to_the_cap(recorded):
    state = OwnerMemories("o1")
    seen = []
    for d in range(7):
        apply_ops(
            state,
            span(["I like tea"], at=T0 + d * DAY),
            [MemoryOp(Op.INSERT, "User likes tea")],
            recorded,
        )
        (m,) = state.items.values()
        seen.append((m.confidence, m.reinforcement, m.last_reinforced_at))
    assert seen == [
        (0.7, 0, None),
        (0.75, 1, T0 + DAY),
        (0.8, 2, T0 + 2 * DAY),
        (0.85, 3, T0 + 3 * DAY),
        (0.9, 4, T0 + 4 * DAY),
        (0.95, 5, T0 + 5 * DAY),
        (0.95, 6, T0 + 6 * DAY),
    ]
    # an executor cannot set a confidence above the cap either
    apply_ops(
        state, span(["x"], at=T0), [MemoryOp(Op.INSERT, "User is sure", confidence=0.99)], recorded
    )
    assert max(m.confidence for m in state.items.values()) == 0.95


def test_near_duplicates_are_consolidated_into_a_new_version(recorded, embedder):
    older = "Caroline went to an LGBTQ support group yesterday."
    dup = "Caroline went to a LGBTQ support group yesterday evening."
    other = "Caroline adopted a cat named Miso."
    vecs = embedder.encode([older, dup, other])
    assert float(vecs[0] @ vecs[1]) >= 0.92 > float(vecs[0] @ vecs[2])
    options = ApplyOptions(embed=embedder.encode, params=lifecycle_params())
    state = OwnerMemories("o1")
    apply_ops(state, span(["first"], at=T0), [MemoryOp(Op.INSERT, older)], recorded, options)
    (first,) = state.items.values()
    r = apply_ops(
        state,
        span(["second"], at=T0 + DAY),
        [MemoryOp(Op.INSERT, dup), MemoryOp(Op.INSERT, other)],
        recorded,
        options,
    )
    merged = next(m for m in state.items.values() if m.text == dup and m.status == "merged")
    new = state.get(consolidated_id("o1", [first.id, merged.id]))
    cat = next(m for m in state.items.values() if m.text == other)
    assert [(e.event, e.memory_id, e.event_ts) for e in r.events] == [
        ("created", merged.id, T0 + DAY),
        ("merged", first.id, T0 + DAY),
        ("merged", merged.id, T0 + DAY),
        ("consolidated", new.id, T0 + DAY),
        ("created", cat.id, T0 + DAY),
    ]
    # both old versions point to the new one and keep their rows
    assert (first.status, first.merged_into, first.version) == ("merged", new.id, 2)
    assert (merged.status, merged.merged_into, merged.version) == ("merged", new.id, 2)
    # the new version: the more informative text, both sources, one more reinforcement
    assert (new.text, new.status, new.reinforcement, new.confidence) == (dup, "generated", 1, 0.75)
    assert (new.valid_from, new.created_at, new.last_reinforced_at) == (T0, T0 + DAY, T0 + DAY)
    assert new.source_message_ids == [*first.source_message_ids, *merged.source_message_ids]
    assert [(x.source_id, x.target_id, x.relation) for x in r.rows.memory_relations] == [
        (first.id, new.id, "consolidated_into"),
        (merged.id, new.id, "consolidated_into"),
    ]
    assert cat.status == "generated"
    # every changed memory got its vector here (nothing left for the caller to embed)
    assert r.needs_vector == set() and all(
        isinstance(m.vector, np.ndarray) for m in r.changed.values()
    )
    reason = next(e.reason for e in r.events if e.event == "merged")
    assert reason == f"consolidated into {new.id} (cosine {float(vecs[0] @ vecs[1]):.3f})"
    # a third restatement consolidates the new version again
    third = "Caroline went to the LGBTQ support group yesterday evening."
    r3 = apply_ops(
        state, span(["third"], at=T0 + 2 * DAY), [MemoryOp(Op.INSERT, third)], recorded, options
    )
    newer = next(m for m in r3.changed.values() if m.status == "generated")
    assert (new.status, new.merged_into) == ("merged", newer.id)
    assert newer.reinforcement == 2


def test_merging_respects_scope_and_can_be_turned_off(recorded, embedder):
    text, dup = "Melanie paints sunsets by the lake.", "Melanie paints sunsets near the lake."
    vecs = embedder.encode([text, dup])
    assert float(vecs[0] @ vecs[1]) >= 0.92
    for threshold, scopes, expected in [
        (0.92, ("private", "private"), ["merged", "merged", "generated"]),
        (0.92, ("private", "fleet"), ["generated", "generated"]),  # other scope: not a duplicate
        (1.01, ("private", "private"), ["generated", "generated"]),  # merging off
    ]:
        state = OwnerMemories("o1")
        options = ApplyOptions(
            embed=embedder.encode, params=lifecycle_params(merge_threshold=threshold)
        )
        apply_ops(
            state,
            span(["a"], at=T0),
            [MemoryOp(Op.INSERT, text, scope=scopes[0])],
            recorded,
            options,
        )
        apply_ops(
            state,
            span(["b"], at=T0 + DAY),
            [MemoryOp(Op.INSERT, dup, scope=scopes[1])],
            recorded,
            options,
        )
        statuses = [m.status for m in sorted(state.items.values(), key=lambda m: m.created_at)]
        assert statuses == expected, (threshold, scopes)
