"""The owner index kept up to date change by change answers exactly what an index built afresh
from the memories answers, over seeded random sequences of inserts, updates, merges, expiry,
decay, archiving, reactivation and deletion (the known people in their order included)."""

from __future__ import annotations

import random
from datetime import timedelta

import numpy as np
import pytest

from skillstream.lifecycle.states import minimal
from skillstream.memories import LIVE, OwnerIndex, OwnerMemories, normalise
from skillstream.model import Memory
from skillstream.vocab import MemoryKind, MemoryStatus, MemoryType
from tests.factories import T0

PEOPLE = ["Caroline", "caroline", "Melanie", "Jon", "user", "assistant", "Ana", None]
WORDS = ["hiking", "paris", "cello", "nurse", "dogs", "painting", "lisbon", "sardines"]
KINDS = [MemoryKind.FACT, MemoryKind.EVENT, MemoryKind.PREFERENCE, MemoryKind.TOPIC]
TYPES = [MemoryType.LONG_TERM, MemoryType.USER, MemoryType.WORKING]
DIM = 8


def _vector(rng: random.Random) -> np.ndarray:
    v = np.asarray([rng.gauss(0, 1) for _ in range(DIM)], dtype=np.float32)
    return v / np.linalg.norm(v)


def _text(rng: random.Random, subject: str | None) -> str:
    return f"{subject or 'Someone'} likes {rng.choice(WORDS)} {rng.choice(WORDS)}."


def _key(rng: random.Random, subject: str | None) -> str | None:
    roll = rng.random()
    if roll < 0.2:
        return None
    if roll < 0.6:
        return f"{(subject or 'x').lower()}|fact|{rng.choice(WORDS)}"
    return f"k{rng.randrange(6)}"


def _new(rng: random.Random, n: int) -> Memory:
    subject = rng.choice(PEOPLE)
    return Memory(
        id=f"mem-{n:04d}",
        owner_id="o1",
        text=_text(rng, subject),
        kind=rng.choice(KINDS),
        memory_type=rng.choice(TYPES),
        key=_key(rng, subject),
        subject=subject,
        created_at=T0 + timedelta(minutes=rng.randrange(10_000)),
        vector=_vector(rng) if rng.random() < 0.9 else None,  # type: ignore[arg-type]
    )


def _change(rng: random.Random, state: OwnerMemories, n: int) -> int:
    """One random change, told to the index the way the product tells it; returns the next n."""
    ids = list(state.items)
    roll = rng.random()
    if not ids or roll < 0.3:  # insert
        state.put(_new(rng, n))
        return n + 1
    m = state.items[rng.choice(ids)]
    if roll < 0.45:  # update: new text, key, subject or vector
        what = rng.choice(["text", "key", "subject", "vector", "all"])
        if what in ("subject", "all"):
            m.subject = rng.choice(PEOPLE)
        if what in ("text", "all"):
            m.text = _text(rng, m.subject)
        if what in ("key", "all"):
            m.key = _key(rng, m.subject)
        if what in ("vector", "all"):
            m.vector = _vector(rng)  # type: ignore[assignment]
        m.version += 1
    elif roll < 0.55 and m.status in LIVE:  # merged into another memory
        m.status = MemoryStatus.MERGED
        m.merged_into = rng.choice(ids)
    elif roll < 0.65 and m.status in (*LIVE, MemoryStatus.ARCHIVED):  # expiry: the minimal row
        m.status = MemoryStatus.EXPIRED
        minimal(m)
    elif roll < 0.72 and m.status in LIVE:  # decay
        m.confidence = round(max(0.0, m.confidence - 0.1), 6)
        m.decay_steps += 1
    elif roll < 0.82 and m.status in LIVE:  # archived (capacity, idleness)
        m.status = MemoryStatus.ARCHIVED
    elif roll < 0.9 and m.status == MemoryStatus.ARCHIVED:  # reactivated
        m.status = MemoryStatus.ACTIVATED
    elif roll < 0.95 and m.status in LIVE:  # deleted
        m.status = MemoryStatus.DELETED
    else:  # activated (used), or the same object put again
        if m.status == MemoryStatus.GENERATED:
            m.status = MemoryStatus.ACTIVATED
        state.put(m.copy())
        return n
    if rng.random() < 0.5:
        state.touch(m)
    else:  # as maintenance does: changed in place, then told in one go
        state.reindex([m])
    return n


def _answers(idx: OwnerIndex, state: OwnerMemories, probes: list[np.ndarray]) -> dict:
    items = state.items.values()
    texts = {normalise(m.text) for m in items}
    keys = {m.key for m in items if m.key}
    subjects = {k.split("|", 1)[0] for k in keys if k.count("|") >= 2}
    return {
        "people": list(idx.known_people().items()),
        "live": {t: sorted(ids) for t, ids in idx.live_by_type.items() if ids},
        "text": {t: [m.id for m in idx.with_text(t)] for t in sorted(texts)},
        "key": {k: [m.id for m in idx.with_key(k)] for k in sorted(keys)},
        "subject": {s: [m.id for m in idx.with_subject(s)] for s in sorted(subjects)},
        "similar": [sorted((m.id, round(s, 5)) for m, s in idx.similar(p, 0.2)) for p in probes],
    }


def _people_by_one_pass(state: OwnerMemories) -> list[tuple[str, str]]:
    """The definition: one pass over the memories in order, the first spelling of each name."""
    out: dict[str, str] = {}
    for m in state.items.values():
        s = m.subject
        if s and s not in ("user", "assistant", "用户", "助手") and m.status in LIVE:
            out.setdefault(s.lower(), s)
    return list(out.items())


@pytest.mark.parametrize("seed", range(6))
def test_kept_index_equals_a_fresh_one_after_random_changes(seed):
    rng = random.Random(seed)
    state = OwnerMemories("o1")
    n = 0
    for _ in range(5):
        state.put(_new(rng, n))
        n += 1
    state.index  # noqa: B018 - built now, then only kept up to date
    probes = [_vector(rng) for _ in range(3)]
    seen_people = set()
    for step in range(400):
        n = _change(rng, state, n)
        if step % 10 == 0 or step > 380:
            kept = _answers(state.index, state, probes)
            fresh = _answers(OwnerIndex(state.items), state, probes)
            assert kept == fresh, f"seed {seed}, step {step}"
            assert kept["people"] == _people_by_one_pass(state)
            seen_people.add(tuple(kept["people"]))
    assert len(seen_people) > 3  # the people changed along the way (the check can fail)


def test_people_follow_the_first_memory_about_them():
    state = OwnerMemories("o1")
    a = Memory(id="a", owner_id="o1", text="Caroline runs.", kind="fact", subject="Caroline")
    b = Memory(id="b", owner_id="o1", text="caroline swims.", kind="fact", subject="caroline")
    c = Memory(id="c", owner_id="o1", text="Jon cooks.", kind="fact", subject="Jon")
    for m in (a, b, c):
        state.put(m)
    assert state.index.known_people() == {"caroline": "Caroline", "jon": "Jon"}
    a.status = MemoryStatus.ARCHIVED
    state.reindex([a])
    assert list(state.index.known_people().items()) == [("caroline", "caroline"), ("jon", "Jon")]
    b.status = MemoryStatus.EXPIRED
    state.touch(b)
    assert state.index.known_people() == {"jon": "Jon"}
    a.status = MemoryStatus.ACTIVATED
    state.touch(a)
    assert list(state.index.known_people().items()) == [("caroline", "Caroline"), ("jon", "Jon")]


def test_reindex_without_a_change_list_drops_the_index():
    state = OwnerMemories("o1")
    state.put(Memory(id="a", owner_id="o1", text="Jon cooks.", kind="fact", subject="Jon"))
    idx = state.index
    state.reindex(None)
    assert state.index is not idx
    idx = state.index
    state.reindex([state.items["a"].copy()])  # not the state's object: rebuilt to be sure
    assert state.index is not idx
