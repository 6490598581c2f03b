"""Writing span results to the stores, from a Bytewax flow or a plain batch job.

:func:`write_results` is the whole write path (no Bytewax here); ``storage.sinks.ResultSink`` runs
it inside a dataflow, and the CLI, the task-skill API and lifecycle maintenance call it directly.

Order of a write (one call, any number of results):

1. the task skills' new versions into LanceDB ``task_skills``; then every memory the results
   touched, with each stored task skill's ``SkillMemory`` item (``distill.memory_item``),
   de-duplicated by id (highest ``version`` wins), in one LanceDB upsert, except expired
   memories: their LanceDB rows are deleted, so neither the full-text nor the vector index holds
   anything of them (``lifecycle.states.indexed``);
2. one catalog transaction (run again on a shared catalog when its commit meets another
   writer's): ``memory_meta`` upsert, ``memory_events`` insert-if-new, (the earlier
   events of expired memories lose their old and new values: only the minimal ``memory_meta`` row
   and the ``expired`` event stay), ``llm_calls`` upsert, the typed ``rows`` of the results (each
   row class to its table, see ``skillstream.tables``) and the task-skill tables,
   ``dead_letters``, the open spans' held messages (``open_messages``: written for ``Held``
   records, deleted for ``Released`` records and for the messages of the done spans of this
   write), and last the span ledger (``spans``).

An expired memory lives on only as its minimal ``memory_meta`` row and its events; readers of an
owner's state add those rows back from the catalog (``storage.tombstones``), and the crash
reconciliation leaves them out of LanceDB.

The ledger row is the span's commit marker. A crash before the transaction commits leaves no
ledger row, so the span is processed again and its rows are written again under the same
deterministic ids: upserts make the replay a no-op. Results with ``status == "skipped"`` (the
span was already in the ledger) write nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from skillstream.errors import InputError
from skillstream.held import SPANS, Held, Released, held_rows, open_id, unowned_open_id
from skillstream.ledger import content_digest
from skillstream.lifecycle.querylog import TABLE as QUERIES_TABLE
from skillstream.lifecycle.states import indexed
from skillstream.model import DeadLetter, MaintenanceResult, Memory, QueryRow, SpanResult
from skillstream.storage import filters, task_skill_writer
from skillstream.storage.home import Stores
from skillstream.storage.rows import as_dict, latest_indices
from skillstream.tables import table_of
from skillstream.vocab import LifecycleEvent, MemoryStatus

OPEN_TABLE = "open_messages"


@dataclass
class WriteSummary:
    """What one :func:`write_results` call wrote (rows before the stores' own de-duplication)."""

    spans: int = 0
    memories: int = 0
    events: int = 0
    llm_calls: int = 0
    dead_letters: int = 0
    tables: dict[str, int] = field(default_factory=dict)
    """Rows offered to the other catalog tables, by table."""


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
        "controller": result.controller,
        "n_ops": result.n_ops,
        "memory_ids": [m.id for m in result.memories],
        "error": result.error,
        "attempts": result.attempts,
        "processed_at": result.processed_at or datetime.now(UTC),
        "message_digests": [content_digest(m) for m in span.messages],
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
        InputError: for an item of another type.
    """
    results: list[SpanResult] = []
    maintained: list[MaintenanceResult] = []
    dead: list[DeadLetter] = []
    task_skills: list[Any] = []  # TaskSkillResult
    held: list[Held] = []
    released: list[str] = []  # open_messages keys
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
        elif task_skill_writer.is_result(item):
            task_skills.append(item)
        elif isinstance(item, Held):
            held.append(item)
        elif isinstance(item, Released):
            released += _open_ids(item.stage, item.owner_id, item.conversation_id, item.message_ids)
        else:
            raise InputError(
                "the store sink writes SpanResult and DeadLetter values (and MaintenanceResult "
                f"from lifecycle maintenance), not {type(item).__name__}"
            )
    summary = WriteSummary()
    if not results and not dead and not maintained and not task_skills:
        if held or released:
            stores.catalog.run_transaction(lambda cat: _write_open(cat, held, released))
        return summary
    done = [r.span for r in results if r.status == "done"]

    changes: list[SpanResult | MaintenanceResult] = [*results, *maintained]
    stored_skills = task_skill_writer.write_lance(stores, task_skills)
    memories = latest_memories(
        [*(m for r in changes for m in r.memories), *task_skill_writer.memory_items(stored_skills)]
    )
    expired = [m.id for m in memories if m.status == MemoryStatus.EXPIRED]
    summary.memories = stores.index.upsert([m for m in memories if indexed(m)])
    stores.index.delete([m.id for m in memories if not indexed(m)])

    events = [e for r in changes for e in r.events]
    events += task_skill_writer.memory_events(task_skills)
    calls = [{**as_dict(c), "owner_id": r.span.owner_id} for r in results for c in r.llm_calls]
    by_table: dict[str, list[Any]] = {}
    for r in changes:
        for row in r.rows.all():
            by_table.setdefault(table_of(row), []).append(row)
    calls += [{**as_dict(c), "owner_id": r.owner_id} for r in task_skills for c in r.llm_calls]
    for table, rows in task_skill_writer.catalog_rows(task_skills, stored_skills).items():
        by_table.setdefault(table, []).extend(rows)

    def commit(cat: Any) -> None:
        cat.sign(f"store: {len(results)} spans, {len(memories)} memories")
        cat.upsert("memory_meta", [_meta_row(m) for m in memories], version="version")
        summary.events = cat.insert_ignore("memory_events", [as_dict(e) for e in events])
        if expired:  # an expired memory keeps a minimal log: no text in its earlier events
            placeholders = ", ".join("?" for _ in expired)
            cat.con.execute(
                "UPDATE memory_events SET old_value = NULL, new_value = NULL "
                f"WHERE memory_id IN ({placeholders}) AND event <> ?",
                [*expired, LifecycleEvent.EXPIRED],
            )
        summary.llm_calls = cat.upsert("llm_calls", calls)
        for table, rows in by_table.items():
            summary.tables[table] = cat.upsert(table, rows)
        summary.dead_letters = cat.upsert("dead_letters", [as_dict(d) for d in dead])
        _write_open(cat, held, released, done)
        summary.spans = cat.upsert("spans", [ledger_row(r) for r in results])

    # One transaction; on a shared catalog it runs again if its commit meets another writer's.
    stores.catalog.run_transaction(commit)
    return summary


def _write_open(
    cat: Any, held: list[Held], released: list[str], done: list[Any] | None = None
) -> None:
    """Keep the held open states and forget the released messages and the messages of the
    ``done`` spans (``skillstream.held``). With nothing held in the home (a backfill), the done
    spans cost one query, not a key per message."""
    if held:
        at = datetime.now(UTC)
        cat.upsert(OPEN_TABLE, [row for h in held for row in held_rows(h, at)])
    if not cat.has(OPEN_TABLE):
        return
    if done and cat.con.execute(f"SELECT 1 FROM {OPEN_TABLE} LIMIT 1").fetchone():
        for span in done:
            released += _open_ids(SPANS, span.owner_id, span.conversation_id, span.message_ids)
    if released:
        present = cat.con.execute(
            f"SELECT open_id FROM {OPEN_TABLE} WHERE open_id IN (SELECT unnest(?::VARCHAR[]))",
            [released],
        ).fetchall()
        if present:
            cat.con.execute(
                f"DELETE FROM {OPEN_TABLE} WHERE open_id IN (SELECT unnest(?::VARCHAR[]))",
                [[r[0] for r in present]],
            )


def _open_ids(
    stage: str, owner_id: str, conversation_id: str, message_ids: Iterable[str]
) -> list[str]:
    """The ``open_messages`` keys of these messages, under both key forms (a home written before
    keys named their owner may still hold rows under the older one)."""
    out: list[str] = []
    for m in message_ids:
        out.append(open_id(stage, owner_id, conversation_id, m))
        out.append(unowned_open_id(stage, conversation_id, m))
    return out


def record_query(
    catalog: Any,
    index: Any,
    row: QueryRow,
    at: datetime | None,
    activated: MaintenanceResult | None = None,
) -> None:
    """Write a ``queries`` row (``lifecycle.querylog.query_row``), the hits' access times and the
    memories the search activated (``activated``: their new states and ``activated`` events).

    The catalog transaction first, then LanceDB.
    """
    record_queries(catalog, index, [(row, at, activated)])


def record_queries(
    catalog: Any,
    index: Any,
    searches: Sequence[tuple[QueryRow, datetime | None, MaintenanceResult | None]],
) -> None:
    """``record_query`` for several searches at once, in their order: one catalog transaction,
    then one LanceDB update of access times per distinct search time and one upsert of the
    activated memories (a memory is activated by the first search of the batch that found it)."""
    if not searches:
        return
    accessed: dict[datetime, list[str]] = {}
    for row, at, _ in searches:
        if at is not None and row.result_ids:
            accessed.setdefault(at, []).extend(row.result_ids)
    activated = [m for _, _, a in searches if a is not None for m in a.memories]

    def commit(cat: Any) -> None:
        cat.upsert(QUERIES_TABLE, [row for row, _, _ in searches])
        if activated:
            cat.upsert("memory_meta", [_meta_row(m) for m in activated], version="version")
            events = [as_dict(e) for _, _, a in searches if a is not None for e in a.events]
            cat.insert_ignore("memory_events", events)
        for at, ids in accessed.items():
            unique = list(dict.fromkeys(ids))
            placeholders = ", ".join("?" for _ in unique)
            cat.con.execute(
                "UPDATE memory_meta SET last_accessed_at = ?, decay_steps = 0 "
                f"WHERE id IN ({placeholders}) AND "
                "(last_accessed_at IS NULL OR last_accessed_at < ?)",
                [at, *unique, at],
            )

    catalog.run_transaction(commit)
    if index is not None and index.table.exists:
        for at, ids in accessed.items():
            where = filters.where_all(
                filters.is_in("id", list(dict.fromkeys(ids))),
                f"last_accessed_at IS NULL OR last_accessed_at < {filters.literal(at)}",
            )
            index.table.update(where, {"last_accessed_at": at, "decay_steps": 0})
        if activated:
            index.upsert(activated)
