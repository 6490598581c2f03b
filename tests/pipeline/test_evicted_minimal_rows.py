"""An evicted owner keeps the minimal log rows of its expired memories (the catalog holds them,
LanceDB does not): reading it back from the store gives the state it had, without waiting."""

from __future__ import annotations

import time

import numpy as np

from skillstream.lifecycle.states import minimal
from skillstream.memories import OwnerMemories
from skillstream.model import Memory
from skillstream.pipeline import MemoryPipeline, OwnerState, memories_digest
from skillstream.rules.executor import RulesExecutor
from skillstream.vocab import MemoryStatus


def _memory(i: int, status: str = MemoryStatus.ACTIVATED) -> Memory:
    m = Memory(id=f"mem-{i}", owner_id="ann", text=f"Ann likes thing {i}", kind="fact")
    m.status = status
    m.vector = np.ones(4, dtype=np.float32) / 2
    return m


def test_rehydration_brings_back_the_expired_minimal_rows_lancedb_does_not_hold():
    kept = [_memory(1), _memory(2)]
    gone = _memory(3, MemoryStatus.EXPIRED)
    minimal(gone)
    store = {"ann": [m.copy() for m in kept]}  # LanceDB: expired rows are deleted there
    pipeline = MemoryPipeline(
        executor=RulesExecutor(),
        embed=lambda texts: np.zeros((len(texts), 4), dtype=np.float32),
        hydrate=lambda owner: [m.copy() for m in store[owner]],
    )
    mem = OwnerMemories("ann")
    for m in [*kept, gone]:
        mem.put(m.copy())
    evicted = pipeline.evict(OwnerState(mem, pipeline.run_id))

    started = time.monotonic()
    back = pipeline.rehydrate("ann", evicted)
    assert time.monotonic() - started < 1.0  # matched the digest at once: no wait for the sink
    assert sorted(back.memories.items) == ["mem-1", "mem-2", "mem-3"]
    row = back.memories.items["mem-3"]
    assert (row.status, row.text, row.vector) == (MemoryStatus.EXPIRED, "", None)
    assert memories_digest(back.memories.items.values()) == evicted.digest
