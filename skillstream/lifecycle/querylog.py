"""The query log (``queries`` table) and access times of search hits.

Every recorded search adds one row: who asked (owner, agent, session), the query text (redacted
like every stored text), the strategy (``keyword``, ``semantic`` or ``hybrid``), the result ids in
rank order and the event time it ran at. Its hits get ``last_accessed_at`` set to that time (never
moved back) and their decay restarts (``decay_steps`` = 0), in LanceDB and in ``memory_meta``.

These writes need the catalog: they happen only when no running flow holds it (DuckDB allows one
writing process). While a flow runs, search still answers but records nothing, and says so in the
log; the flow would otherwise overwrite the access times with its own copy of the memories.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pyarrow as pa

from skillstream.ids import prefixed_id
from skillstream.lifecycle.policy import Reader
from skillstream.redact import Redactor
from skillstream.schema import STR_LIST, TS, _schema, register_table
from skillstream.storage import filters

TABLE = "queries"
STRATEGIES = ("keyword", "semantic", "hybrid")
QUERIES = _schema(
    [
        pa.field("query_id", pa.string(), nullable=False),
        pa.field("owner_id", pa.string()),
        pa.field("agent_id", pa.string()),
        pa.field("session_id", pa.string()),
        pa.field("query", pa.string(), nullable=False),
        pa.field("strategy", pa.string(), nullable=False),
        pa.field("k", pa.int32()),
        pa.field("result_ids", STR_LIST),
        pa.field("n_results", pa.int32()),
        pa.field("executed_at", TS),
        pa.field("recorded_at", TS),
    ],
    "query_id",
    "Every recorded memory search: who asked, what (redacted), how (keyword, semantic, hybrid), "
    "which memories came back in rank order, and the event time it ran at.",
)
register_table(TABLE, QUERIES)


def query_row(
    reader: Reader,
    query: str,
    strategy: str,
    k: int,
    result_ids: Sequence[str],
    executed_at: datetime | None,
    recorded_at: datetime,
    redactor: Redactor,
) -> dict[str, Any]:
    """One ``queries`` row; a query matching a ``reject`` pattern is stored as its pattern names."""
    text, _, rejected = redactor.check(query)
    if rejected:
        text = " ".join(f"[REJECTED:{n}]" for n in sorted(set(rejected)))
    return {
        "query_id": prefixed_id(
            "qry",
            reader.owner_id,
            reader.agent_id,
            reader.session_id,
            text,
            strategy,
            executed_at,
            recorded_at,
        ),
        "owner_id": reader.owner_id,
        "agent_id": reader.agent_id,
        "session_id": reader.session_id,
        "query": text,
        "strategy": strategy,
        "k": k,
        "result_ids": list(result_ids),
        "n_results": len(result_ids),
        "executed_at": executed_at,
        "recorded_at": recorded_at,
    }


def record(catalog: Any, index: Any, row: dict[str, Any], at: datetime | None) -> None:
    """Write the query row and the hits' access times (catalog transaction, then LanceDB)."""
    ids = list(row["result_ids"])
    with catalog.transaction():
        catalog.upsert(TABLE, [row])
        if ids and at is not None:
            placeholders = ", ".join("?" for _ in ids)
            catalog.con.execute(
                "UPDATE memory_meta SET last_accessed_at = ?, decay_steps = 0 "
                f"WHERE id IN ({placeholders}) AND "
                f"(last_accessed_at IS NULL OR last_accessed_at < ?)",
                [at, *ids, at],
            )
    if ids and at is not None and index is not None and index.table.exists:
        where = filters.where_all(
            filters.is_in("id", ids),
            f"last_accessed_at IS NULL OR last_accessed_at < {filters.literal(at)}",
        )
        index.table.table.update(where=where, values={"last_accessed_at": at, "decay_steps": 0})
