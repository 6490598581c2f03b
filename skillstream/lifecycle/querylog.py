"""The query log (``queries`` table) and access times of search hits.

Every recorded search adds one row: who asked (owner, agent, session), the query text (redacted
like every stored text), the strategy (``keyword``, ``semantic`` or ``hybrid``), the result ids in
rank order and the event time it ran at. Its hits get ``last_accessed_at`` set to that time (never
moved back) and their decay restarts (``decay_steps`` = 0), in LanceDB and in ``memory_meta``.

These writes need the catalog: they happen only when no running flow holds it (DuckDB allows one
writing process). While a flow runs, search still answers but records nothing, and says so in the
log; the flow would otherwise overwrite the access times with its own copy of the memories.
The write itself is ``storage.writer.record_query``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from skillstream.ids import prefixed_id
from skillstream.lifecycle.policy import Reader
from skillstream.model import QueryRow
from skillstream.redact import Redactor

TABLE = "queries"
STRATEGIES = ("keyword", "semantic", "hybrid")


def query_row(
    reader: Reader,
    query: str,
    strategy: str,
    k: int,
    result_ids: Sequence[str],
    executed_at: datetime | None,
    recorded_at: datetime,
    redactor: Redactor,
) -> QueryRow:
    """One ``queries`` row; a query matching a ``reject`` pattern is stored as its pattern names."""
    text, _, rejected = redactor.check(query)
    if rejected:
        text = " ".join(f"[REJECTED:{n}]" for n in sorted(set(rejected)))
    return QueryRow(
        query_id=prefixed_id(
            "qry",
            reader.owner_id,
            reader.agent_id,
            reader.session_id,
            text,
            strategy,
            executed_at,
            recorded_at,
        ),
        owner_id=reader.owner_id,
        agent_id=reader.agent_id,
        session_id=reader.session_id,
        query=text,
        strategy=strategy,
        k=k,
        result_ids=list(result_ids),
        n_results=len(result_ids),
        executed_at=executed_at,
        recorded_at=recorded_at,
    )
