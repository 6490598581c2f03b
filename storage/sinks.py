"""Writing span results to the stores, from a Bytewax flow or a plain batch job.

:func:`write_results` is the whole write path; :class:`StoreSink` runs it inside a dataflow.

Order of a write (one call, any number of results):

1. every memory the results touched, de-duplicated by id (highest ``version`` wins), in one
   LanceDB upsert;
2. one DuckDB transaction: ``memory_meta`` upsert, ``memory_events`` insert-if-new,
   ``llm_calls`` upsert, the ``extras`` tables (contradictions, summaries...), ``dead_letters``, and
   last the span ledger (``spans``).

The ledger row is the span's commit marker. A crash before the transaction commits leaves no
ledger row, so the span is processed again and its rows are written again under the same
deterministic ids: upserts make the replay a no-op. Results with ``status == "skipped"`` (the
span was already in the ledger) write nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bytewax.outputs import FixedPartitionedSink, StatefulSinkPartition

from skillstream.config import Settings
from skillstream.errors import InputError
from skillstream.model import DeadLetter, MaintenanceResult, Memory, SpanResult
from skillstream.storage import task_skill_sink
from skillstream.storage.home import Stores, open_stores
from skillstream.storage.rows import as_dict, latest_indices

PARTITION = "store"


@dataclass
class WriteSummary:
    """What one :func:`write_results` call wrote (rows before the stores' own de-duplication)."""

    spans: int = 0
    memories: int = 0
    events: int = 0
    llm_calls: int = 0
    dead_letters: int = 0
    extras: dict[str, int] = field(default_factory=dict)


def ledger_row(result: SpanResult) -> dict[str, Any]:
    """The ``spans`` ledger row for a result."""
    span = result.span
    return {
        "span_id": span.span_id,
        "owner_id": span.owner_id,
        "conversation_id": span.conversation_id,
        "session_id": span.session_id,
        "seq": span.seq,
        "start_ts": span.start_ts if span.messages else None,
        "end_ts": span.end_ts if span.messages else None,
        "message_ids": span.message_ids,
        "n_tokens": span.n_tokens,
        "lang": span.lang,
        "status": result.status,
        "extractor": result.extractor,
        "memory_skills": list(result.memory_skills),
        "n_ops": result.n_ops,
        "memory_ids": [m.id for m in result.memories],
        "error": result.error,
        "attempts": result.attempts,
        "processed_at": result.processed_at or datetime.now(UTC),
    }


def latest_memories(memories: Iterable[Memory]) -> list[Memory]:
    """One memory per id: the highest ``version``, then the last seen."""
    items = list(memories)
    keep = latest_indices([m.id for m in items], [m.version for m in items])
    return [items[i] for i in keep]


def _meta_row(memory: Memory) -> dict[str, Any]:
    row = memory.row()
    row.pop("vector", None)
    return row


def write_results(stores: Stores, items: Iterable[Any]) -> WriteSummary:
    """Write span results and dead letters to LanceDB and the catalog.

    Args:
        stores: Open, writable stores.
        items: ``SpanResult`` and ``DeadLetter`` values, or ``(key, value)`` pairs of them.

    Returns:
        Counts of what was written.

    Raises:
        InputError: for an item of another type, or an ``extras`` table that is not registered.
    """
    results: list[SpanResult] = []
    maintained: list[MaintenanceResult] = []
    dead: list[DeadLetter] = []
    task_skills: list[Any] = []  # TaskSkillResult
    for item in items:
        if isinstance(item, tuple) and len(item) == 2:
            item = item[1]
        if isinstance(item, SpanResult):
            if item.status != "skipped":
                results.append(item)
        elif isinstance(item, DeadLetter):
            dead.append(item)
        elif isinstance(item, MaintenanceResult):  # lifecycle maintenance: no ledger row
            maintained.append(item)
        elif task_skill_sink.is_result(item):
            task_skills.append(item)
        else:
            raise InputError(
                "the store sink writes SpanResult and DeadLetter values (and MaintenanceResult "
                f"from lifecycle maintenance), not {type(item).__name__}"
            )
    summary = WriteSummary()
    if not results and not dead and not maintained and not task_skills:
        return summary

    changes: list[SpanResult | MaintenanceResult] = [*results, *maintained]
    memories = latest_memories(m for r in changes for m in r.memories)
    summary.memories = stores.index.upsert(memories)
    stored_skills = task_skill_sink.write_lance(stores, task_skills)

    events = [e for r in changes for e in r.events]
    calls = [c for r in results for c in r.llm_calls]
    extras: dict[str, list[Any]] = {}
    for r in changes:
        for table, rows in r.extras.items():
            extras.setdefault(table, []).extend(rows)
    calls += [c for r in task_skills for c in r.llm_calls]
    for table, rows in task_skill_sink.catalog_rows(task_skills, stored_skills).items():
        extras.setdefault(table, []).extend(rows)

    cat = stores.catalog
    with cat.transaction():
        cat.upsert("memory_meta", [_meta_row(m) for m in memories], version="version")
        summary.events = cat.insert_ignore("memory_events", [as_dict(e) for e in events])
        summary.llm_calls = cat.upsert("llm_calls", [as_dict(c) for c in calls])
        for table, rows in extras.items():
            summary.extras[table] = cat.upsert(table, rows)
        summary.dead_letters = cat.upsert("dead_letters", [as_dict(d) for d in dead])
        summary.spans = cat.upsert("spans", [ledger_row(r) for r in results])
    return summary


class StoreSink(FixedPartitionedSink):
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
