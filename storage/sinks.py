"""The Bytewax sink of the memory flow: span results into the home's stores.

The only module of ``storage`` that imports Bytewax; the write itself is
:func:`skillstream.storage.writer.write_results`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any

from bytewax.outputs import FixedPartitionedSink, StatefulSinkPartition

from skillstream import telemetry
from skillstream.model import DeadLetter, MaintenanceResult, SpanResult
from skillstream.settings import Settings
from skillstream.storage.home import Stores, open_stores
from skillstream.storage.writer import write_results

log = logging.getLogger(__name__)

PARTITION = "store"
"""The one partition of a DuckDB-file catalog; a shared catalog has ``store-<shard>`` ones."""

WRITES_AHEAD = 2
"""Batches handed to a store partition's writer that may wait for it (the flow then waits)."""

COUNT_MEMORIES_EVERY_S = 5.0
"""Least seconds between two reads of the memories by status for ``skillstream_stored_memories``
(one grouped count of ``memory_meta``, on the writer's own catalog connection)."""

Shard = Callable[[str], str]
"""An owner id's shard (the flow's ``shard_of``: a decimal number below the shard count)."""


def part_name(shard: int) -> str:
    """The partition of an owner shard (zero-padded, so names sort as the numbers do)."""
    return f"{PARTITION}-{shard:05d}"


class ResultSink(FixedPartitionedSink):
    """Bytewax sink writing ``(key, SpanResult | DeadLetter)`` items to the home's stores.

    **A DuckDB file** (the default) takes one writing process, so the sink has a single partition
    (``"store"``): however many workers and processes run the flow, exactly one of them opens the
    stores and writes, and items from other workers are routed to it.

    **A shared catalog** (DuckLake, ``settings.storage.shared_catalog``) takes concurrent writers,
    so the sink has one partition per owner shard (``store-00000`` ...), spread over every worker
    of every process (:meth:`shards_of`). An item's key is its owner's shard (:meth:`route` makes
    it), so each owner, and therefore each memory id, has exactly one writer: no two writers race
    on a new LanceDB id. Before the cluster starts, each process rolls back the uncommitted LanceDB
    rows of the owners its partitions write (``flows.runner.Runner``); other owners' rows are
    left to their own process. Commits that meet another writer's are run again, in LanceDB and in
    the catalog.

    Delivery guarantee: at-least-once, like Bytewax recovery. Every row has a deterministic id and
    every write is an upsert (or insert-if-new for the lifecycle log), so items replayed after a
    crash leave the stores as if written once: effectively once. The sink keeps no resume state
    (``snapshot`` returns ``None``).

    Args:
        settings: Where the stores are.
        dim: Embedding width of the memories table.
        optimize_every: Fold new rows into LanceDB's full-text index after this many memory
            writes (and when the flow ends); ``0`` turns it off.
        shards: Owner shards of the flow (``SKILLSTREAM_SHARDS`` or the worker count); the
            partition count of a shared catalog.
        shard: Owner id -> shard, the same function that keys extraction.
        cluster: ``(process_id, processes, workers_per_process)`` of a shared catalog's run, so
            the partitions are dealt out over every worker of every process (Bytewax gives a
            partition that several workers list to the lowest of them). Without it every worker
            lists every partition and the first worker writes them all.
        checkpoint: Checkpoint the catalog when a partition closes (see ``Catalog.close``); a
            run of a few messages (``Home.add``) leaves its writes in DuckDB's log instead.
    """

    def __init__(
        self,
        settings: Settings,
        dim: int,
        *,
        optimize_every: int = 10_000,
        shards: int = 1,
        shard: Shard | None = None,
        cluster: tuple[int, int, int] | None = None,
        checkpoint: bool = True,
    ) -> None:
        self.settings = settings
        self.checkpoint = checkpoint
        self.dim = dim
        self.optimize_every = optimize_every
        self.shared = settings.storage.shared_catalog
        if self.shared and cluster is not None and max(1, shards) < cluster[1] * cluster[2]:
            log.warning(
                "%d owner shards for %d store workers: some workers write nothing "
                "(set SKILLSTREAM_SHARDS to a multiple of the worker count)",
                shards,
                cluster[1] * cluster[2],
            )
        self.shards = max(1, shards)
        self.shard = shard or _crc_shard(self.shards)
        self.cluster = cluster
        self._slots: dict[int, int] = {}
        self._lock = threading.Lock()

    def list_parts(self) -> list[str]:
        if not self.shared:
            return [PARTITION]
        if self.cluster is None:
            return [part_name(i) for i in range(self.shards)]
        process, processes, workers = self.cluster
        with self._lock:  # each worker thread of this process gets a slot of its own
            slot = self._slots.setdefault(threading.get_ident(), len(self._slots)) % workers
        mine, every = process * workers + slot, max(1, processes * workers)
        return [part_name(i) for i in range(self.shards) if i % every == mine]

    def shards_of(self, process: int) -> set[int]:
        """The owner shards whose partitions a process of the cluster writes (all of them
        without ``cluster``, or on a DuckDB file)."""
        if not self.shared or self.cluster is None:
            return set(range(self.shards))
        _, processes, workers = self.cluster
        every = max(1, processes * workers)
        return {
            i
            for i in range(self.shards)
            if process * workers <= i % every < (process + 1) * workers
        }

    def owns(self, process: int) -> Callable[[str], bool]:
        """Owner id -> whether a process's partitions write it (for its reconcile)."""
        mine = {str(i) for i in self.shards_of(process)}
        return lambda owner: self.shard(owner) in mine

    def part_fn(self, item_key: str) -> int:
        if not self.shared:
            return 0
        return int(item_key) if item_key.isdigit() else zlib.crc32(item_key.encode("utf-8"))

    def route(self, value: Any) -> tuple[str, Any]:
        """``(key, value)`` for the sink: the owner's shard on a shared catalog (dead letters
        by their id), else ``"store"``."""
        if not self.shared:
            return (PARTITION, value)
        return (self.shard(owner_of(value)), value)

    def build_part(self, step_id: str, for_part: str, resume_state: None) -> _StorePartition:
        return _StorePartition(
            open_stores(self.settings, self.dim), self.optimize_every, self.checkpoint
        )


def owner_of(value: Any) -> str:
    """The owner an item is written for (a dead letter: its own id, which spreads them)."""
    if isinstance(value, SpanResult):
        return value.span.owner_id
    if isinstance(value, DeadLetter):
        return value.id
    if isinstance(value, MaintenanceResult):
        return value.owner_id
    owner = getattr(value, "owner_id", None)  # a task-skill result
    return str(owner) if owner is not None else ""


def _crc_shard(shards: int) -> Shard:
    def shard(owner: str) -> str:
        return str(zlib.crc32(owner.encode("utf-8")) % shards)

    return shard


class _StorePartition(StatefulSinkPartition):
    """One store partition. Its writes run on a thread of their own, in the order the batches
    came, so the flow extracts the next batch while the last one is written (the stores' writes
    run outside Python's GIL). ``snapshot`` (the end of an epoch, before Bytewax records it) and
    ``close`` wait until every batch handed in is written, so what an epoch's snapshot says is
    stored is stored. A write that fails stops the writing: the batches after it are not written
    (a later ledger row must not commit before an earlier span's rows), and the error is raised at
    the next ``write_batch``, ``snapshot`` or ``close``, which fails the flow as a write of its own
    would have.

    When the process records metrics, each write is timed into ``skillstream_store_commit_seconds``
    and the home's memories are counted by status after it (at most every
    ``COUNT_MEMORIES_EVERY_S``, and once at the close); with tracing on, a write is one
    ``update_memory`` span."""

    def __init__(self, stores: Stores, optimize_every: int, checkpoint: bool = True) -> None:
        self.stores = stores
        self.checkpoint = checkpoint
        self.optimize_every = optimize_every
        self._since_optimize = 0
        self._counted_at = 0.0
        self._queue: queue.Queue[list[Any] | None] = queue.Queue(maxsize=WRITES_AHEAD)
        self._error: BaseException | None = None
        self._reported = False
        self._writer = threading.Thread(target=self._write_all, name="store-writer", daemon=True)
        self._writer.start()

    def write_batch(self, values: list[Any]) -> None:
        self._raise()
        self._queue.put(values)

    def snapshot(self) -> None:
        self._queue.join()
        self._raise()
        return None

    def close(self) -> None:
        try:
            self._queue.join()
            self._queue.put(None)
            self._writer.join()
            self._raise()
            if self.optimize_every and self._since_optimize:
                self.stores.index.optimize()
            self._count_memories(force=True)
        finally:
            self.stores.close(checkpoint=self.checkpoint)

    def _raise(self) -> None:
        """Raise a failed write's error, once (a close after the flow failed must not raise it
        again: Bytewax closes partitions while it unwinds)."""
        if self._error is not None and not self._reported:
            self._reported = True
            raise self._error

    def _write_all(self) -> None:
        while True:
            values = self._queue.get()
            try:
                if values is None:
                    return
                if self._error is None:
                    self._write(values)
            except BaseException as e:  # noqa: BLE001 - handed to the flow's thread
                self._error = e
            finally:
                self._queue.task_done()

    def _write(self, values: list[Any]) -> None:
        g = telemetry.GEN_AI
        t0 = time.perf_counter()
        with telemetry.span(
            "update_memory memories", {g["operation"]: "update_memory", g["store"]: "memories"}
        ) as traced:
            summary = write_results(self.stores, values)
            if traced is not None:
                traced.set_attribute("skillstream.memory.records", summary.memories)
                traced.set_attribute("skillstream.spans", summary.spans)
        m = telemetry.metrics()
        if m is not None:
            m.COMMIT_SECONDS.observe(time.perf_counter() - t0)
            self._count_memories()
        self._since_optimize += summary.memories
        if self.optimize_every and self._since_optimize >= self.optimize_every:
            self.stores.index.optimize()
            self._since_optimize = 0

    def _count_memories(self, force: bool = False) -> None:
        """Set ``skillstream_stored_memories`` from the catalog (metrics recorded, and the last
        count ``COUNT_MEMORIES_EVERY_S`` ago or ``force``)."""
        m = telemetry.metrics()
        now = time.monotonic()
        if m is None or (not force and now - self._counted_at < COUNT_MEMORIES_EVERY_S):
            return
        self._counted_at = now
        try:
            rows = self.stores.catalog.sql(
                "SELECT status, count(*) AS n FROM memory_meta GROUP BY 1"
            ).to_pylist()
        except Exception as e:  # noqa: BLE001 - a gauge must not fail the writes
            log.warning("could not count the memories by status: %s", e)
            return
        m.stored_memories({str(r["status"]): int(r["n"]) for r in rows})
