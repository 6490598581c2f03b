"""The Bytewax sink of the memory flow: span results into the home's stores.

The only module of ``storage`` that imports Bytewax; the write itself is
:func:`skillstream.storage.writer.write_results`.
"""

from __future__ import annotations

from typing import Any

from bytewax.outputs import FixedPartitionedSink, StatefulSinkPartition

from skillstream.settings import Settings
from skillstream.storage.home import Stores, open_stores
from skillstream.storage.writer import write_results

PARTITION = "store"


class ResultSink(FixedPartitionedSink):
    """Bytewax sink writing ``(key, SpanResult | DeadLetter)`` items to the home's stores.

    It has a single partition (``"store"``): however many workers and processes run the flow,
    exactly one of them opens the stores and writes, since a DuckDB file takes one writer process
    and LanceDB upserts of one key must not race. Items from other workers are routed to it.

    Delivery guarantee: at-least-once, like Bytewax recovery. Every row has a deterministic id and
    every write is an upsert (or insert-if-new for the lifecycle log), so items replayed after a
    crash leave the stores as if written once: effectively once. The sink keeps no resume state
    (``snapshot`` returns ``None``).

    Args:
        settings: Where the stores are.
        dim: Embedding width of the memories table.
        optimize_every: Fold new rows into LanceDB's full-text index after this many memory
            writes (and when the flow ends); ``0`` turns it off.
    """

    def __init__(self, settings: Settings, dim: int, *, optimize_every: int = 10_000) -> None:
        self.settings = settings
        self.dim = dim
        self.optimize_every = optimize_every

    def list_parts(self) -> list[str]:
        return [PARTITION]

    def part_fn(self, item_key: str) -> int:
        return 0

    def build_part(self, step_id: str, for_part: str, resume_state: None) -> _StorePartition:
        return _StorePartition(open_stores(self.settings, self.dim), self.optimize_every)


class _StorePartition(StatefulSinkPartition):
    def __init__(self, stores: Stores, optimize_every: int) -> None:
        self.stores = stores
        self.optimize_every = optimize_every
        self._since_optimize = 0

    def write_batch(self, values: list[Any]) -> None:
        summary = write_results(self.stores, values)
        self._since_optimize += summary.memories
        if self.optimize_every and self._since_optimize >= self.optimize_every:
            self.stores.index.optimize()
            self._since_optimize = 0

    def snapshot(self) -> None:
        return None

    def close(self) -> None:
        try:
            if self.optimize_every and self._since_optimize:
                self.stores.index.optimize()
        finally:
            self.stores.close()
