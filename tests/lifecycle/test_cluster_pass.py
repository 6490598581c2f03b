"""The reorganizer's clustering pass, kept between ticks, gives exactly the clusters of a full pass
over the same candidates, whatever changed in between: new memories at the end, memories gone or
given a new vector anywhere, memories inserted in the middle, another threshold."""

from __future__ import annotations

import random
from datetime import timedelta

import numpy as np
import pytest

from skillstream.lifecycle.reorganizer import ClusterPass, cluster
from skillstream.model import Memory
from tests.factories import T0

DIM = 16


def _vector(rng: random.Random, centre: np.ndarray, noise: float = 0.35) -> np.ndarray:
    v = centre + np.asarray([rng.gauss(0, noise) for _ in range(DIM)], dtype=np.float32)
    return (v / np.linalg.norm(v)).astype(np.float32)


def _memory(rng: random.Random, n: int, centres: list[np.ndarray]) -> Memory:
    return Memory(
        id=f"mem-{n:05d}",
        owner_id="o1",
        text=f"memory {n}",
        kind="fact",
        created_at=T0 + timedelta(minutes=n),
        vector=_vector(rng, rng.choice(centres)),  # type: ignore[arg-type]
    )


def _ids(groups: list[list[Memory]]) -> list[list[str]]:
    return [[m.id for m in g] for g in groups]


@pytest.mark.parametrize("seed", range(5))
def test_a_kept_pass_clusters_like_a_full_pass(seed):
    rng = random.Random(seed)
    centres = [_vector(rng, np.zeros(DIM, dtype=np.float32) + 0.1 * i) for i in range(6)]
    items = [_memory(rng, n, centres) for n in range(40)]
    n = len(items)
    kept = ClusterPass(0.8)
    resumed_from_the_start = 0
    for _ in range(60):
        roll = rng.random()
        if roll < 0.5:  # new memories come last (the usual tick)
            for _ in range(rng.randrange(1, 8)):
                items.append(_memory(rng, n, centres))
                n += 1
        elif roll < 0.65 and items:  # a memory leaves the candidates (archived, expired, merged)
            items.pop(rng.randrange(len(items)))
        elif roll < 0.8 and items:  # a memory's text changed: a new vector object
            m = items[rng.randrange(len(items))]
            m.vector = _vector(rng, rng.choice(centres))  # type: ignore[assignment]
        elif roll < 0.9:  # a late memory, older than some candidates
            at = rng.randrange(len(items) + 1)
            items.insert(at, _memory(rng, n, centres))
            n += 1
        else:  # nothing changed
            pass
        before = len(kept.items)
        got = kept.run(items)
        assert _ids(got) == _ids(cluster(items, 0.8))
        assert kept.items == items
        resumed_from_the_start += before == 0
    assert resumed_from_the_start == 1  # only the first run started from nothing
    assert len(cluster(items, 0.8)) > 3


def test_the_same_candidates_reuse_their_nodes():
    rng = random.Random(7)
    centres = [_vector(rng, np.zeros(DIM, dtype=np.float32), 1.0) for _ in range(3)]
    items = [_memory(rng, n, centres) for n in range(30)]
    for m in items:  # tight clusters
        m.vector = _vector(rng, centres[int(m.id[-2:]) % 3], 0.05)  # type: ignore[assignment]
    kept = ClusterPass(0.8)
    kept.start_tick()
    first = [kept.node("o1", g) for g in kept.run(items) if len(g) >= 3]
    kept.end_tick()
    assert len(first) == 3
    kept.start_tick()
    again = [kept.node("o1", g) for g in kept.run(items) if len(g) >= 3]
    kept.end_tick()
    assert [n.text for n, _, _ in again] == [n.text for n, _, _ in first]
    assert all(a is not b for (a, _, _), (b, _, _) in zip(again, first))  # copies handed out
    # a member at a new version builds its node again
    group = next(g for g in kept.run(items) if len(g) >= 3)
    group[0].version += 1
    group[0].text = "memory changed"
    kept.start_tick()
    rebuilt, ranked, _ = kept.node("o1", group)
    kept.end_tick()
    assert group[0].id in {m.id for m, _ in ranked}
    assert rebuilt.source_message_ids == [] and rebuilt.version == 1
