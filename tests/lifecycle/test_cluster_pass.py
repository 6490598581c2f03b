"""The reorganizer's clustering pass, kept between ticks, gives exactly the clusters of the
definition run over the same candidates from scratch, whatever changed in between: new memories at
the end, memories gone or given a new vector anywhere (the one that started a cluster among them),
memories inserted in the middle; and a replay compares few candidates with every centre again."""

from __future__ import annotations

import random
from datetime import timedelta

import numpy as np
import pytest

from skillstream.lifecycle import clusters
from skillstream.lifecycle.clusters import ClusterPass, unit
from skillstream.lifecycle.reorganizer import Kept, cluster, cluster_key
from skillstream.model import Memory
from tests.factories import T0

DIM = 16


def reference(items: list[Memory], threshold: float) -> list[list[str]]:
    """The definition, written plainly: in order, join the most similar centre (float32 sums of
    the members, normalised; float64 cosine) from ``threshold`` on, else start a cluster."""
    sums: list[np.ndarray] = []
    groups: list[list[str]] = []
    for m in items:
        v = np.asarray(m.vector, dtype=np.float32)
        best = -1
        if sums:
            centres = np.stack([unit(s) for s in sums]).astype(np.float64)
            sims = centres @ v.astype(np.float64)
            i = int(np.argmax(sims))
            if sims[i] >= threshold - 1e-6:
                best = i
        if best < 0:
            sums.append(v.copy())
            groups.append([m.id])
        else:
            sums[best] = sums[best] + v
            groups[best].append(m.id)
    return groups


def _vector(rng: random.Random, centre: np.ndarray, noise: float) -> np.ndarray:
    v = centre + np.asarray([rng.gauss(0, noise) for _ in range(DIM)], dtype=np.float32)
    return (v / np.linalg.norm(v)).astype(np.float32)


def _memory(rng: random.Random, n: int, centres: list[np.ndarray], noise: float) -> Memory:
    return Memory(
        id=f"mem-{n:05d}",
        owner_id="o1",
        text=f"memory {n}",
        kind="fact",
        created_at=T0 + timedelta(minutes=n),
        vector=_vector(rng, rng.choice(centres), noise),  # type: ignore[arg-type]
    )


def _ids(groups: list[list[Memory]]) -> list[list[str]]:
    return [[m.id for m in g] for g in groups]


@pytest.mark.parametrize(
    ("seed", "noise", "threshold"),
    [(s, 0.3, 0.8) for s in range(4)] + [(s, 0.2, 0.9) for s in range(4, 7)] + [(7, 0.5, 0.5)],
)
def test_a_kept_pass_clusters_like_the_definition(seed, noise, threshold, monkeypatch):
    rng = random.Random(seed)
    centres = [_vector(rng, np.zeros(DIM, dtype=np.float32), 1.0) for _ in range(8)]
    items = [_memory(rng, n, centres, noise) for n in range(60)]
    n = len(items)
    compared = {"full": 0, "replayed": 0}
    full = ClusterPass._compare

    def counting(self, v):
        compared["full"] += 1
        return full(self, v)

    monkeypatch.setattr(ClusterPass, "_compare", counting)
    kept = ClusterPass(threshold)
    for step in range(50):
        roll = rng.random()
        if roll < 0.45:  # new memories come last (the usual tick)
            for _ in range(rng.randrange(1, 6)):
                items.append(_memory(rng, n, centres, noise))
                n += 1
        elif roll < 0.65 and items:  # a memory leaves the candidates (archived, expired, merged)
            items.pop(rng.randrange(len(items) // 2 + 1))
        elif roll < 0.75 and items:  # a memory's text changed: a new vector object
            m = items[rng.randrange(len(items))]
            m.vector = _vector(rng, rng.choice(centres), noise)  # type: ignore[assignment]
        elif roll < 0.85:  # a late memory, older than some candidates
            at = rng.randrange(len(items) + 1)
            items.insert(at, _memory(rng, n, centres, noise))
            n += 1
        elif roll < 0.9 and kept.anchor:  # the memory that started the first cluster leaves
            starter = kept.items[kept.anchor[0]]
            at = next((i for i, m in enumerate(items) if m is starter), None)
            if at is not None:
                items.pop(at)
        before = len(kept.items)
        same = next(
            (i for i, (a, b) in enumerate(zip(items, kept.items)) if a is not b),
            min(before, len(items)),
        )
        got = kept.run(items)
        assert _ids(got) == reference(items, threshold), f"step {step}"
        assert kept.items == items
        compared["replayed"] += max(0, min(before, len(items)) - same)
        assert _ids(cluster(items, threshold)) == reference(items, threshold)
    assert len(reference(items, threshold)) > 3
    if threshold == 0.8:
        # most replayed candidates were decided from their record, not compared with every centre
        assert compared["replayed"] > 500


def test_a_replay_compares_few_candidates_again(monkeypatch):
    rng = random.Random(11)
    centres = [_vector(rng, np.zeros(DIM, dtype=np.float32), 1.0) for _ in range(10)]
    items = [_memory(rng, n, centres, 0.25) for n in range(400)]
    kept = ClusterPass(0.8)
    kept.run(items)
    counted = []
    full = ClusterPass._compare
    monkeypatch.setattr(ClusterPass, "_compare", lambda self, v: counted.append(1) or full(self, v))
    for k in range(10):  # an old memory leaves, two new ones come, ten times
        items.pop(20 + 3 * k)
        items += [_memory(rng, 1000 + 2 * k + i, centres, 0.25) for i in range(2)]
        assert _ids(kept.run(items)) == reference(items, 0.8)
    assert len(counted) < 0.1 * 10 * 380, len(counted)  # the replays hardly compared at all


def test_the_same_candidates_reuse_their_nodes():
    rng = random.Random(7)
    centres = [_vector(rng, np.zeros(DIM, dtype=np.float32), 1.0) for _ in range(3)]
    items = [_memory(rng, n, centres, 0.05) for n in range(30)]
    for m in items:  # tight clusters
        m.vector = _vector(rng, centres[int(m.id[-2:]) % 3], 0.05)  # type: ignore[assignment]
    kept = Kept(0.8)
    kept.start_tick()
    first = [kept.node("o1", g, cluster_key(g)) for g in kept.clusters.run(items) if len(g) >= 3]
    kept.end_tick()
    assert len(first) == 3
    kept.start_tick()
    again = [kept.node("o1", g, cluster_key(g)) for g in kept.clusters.run(items) if len(g) >= 3]
    kept.end_tick()
    assert [n.text for n, _, _ in again] == [n.text for n, _, _ in first]
    assert all(a is not b for (a, _, _), (b, _, _) in zip(again, first))  # copies handed out
    group = next(g for g in kept.clusters.run(items) if len(g) >= 3)
    kept_before = kept.nodes[cluster_key(group)]
    group[1].vector = group[1].vector.copy()  # the same values in a new array: built again
    kept.start_tick()
    kept.node("o1", group, cluster_key(group))
    kept.end_tick()
    assert kept.nodes[cluster_key(group)] is not kept_before
    assert kept.nodes[cluster_key(group)][1][1] is group[1].vector
    group[0].version += 1  # a member at a new version builds its node again
    group[0].text = "memory changed"
    kept.start_tick()
    rebuilt, ranked, _ = kept.node("o1", group, cluster_key(group))
    kept.end_tick()
    assert group[0].id in {m.id for m, _ in ranked}
    assert rebuilt.source_message_ids == [] and rebuilt.version == 1


def test_the_margin_is_far_above_the_rounding_of_a_cosine():
    assert 1e-12 < clusters.MARGIN < 1e-6
