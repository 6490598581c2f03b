"""The server's own series, in the process's registry (``skillstream.metrics``): requests by
route and status and their latency; and at each scrape, the home's memories by status
(``skillstream_stored_memories``, the series a run keeps up to date).

Labels carry route templates (``/v1/memories/{id}``), methods and status codes only: never an id,
an owner or a query.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import Counter, Histogram

from skillstream import metrics

REQUESTS = Counter(
    "skillstream_http_requests",
    "HTTP requests answered by the server, by route template, method and status code.",
    ["route", "method", "status"],
    registry=metrics.REGISTRY,
)
LATENCY = Histogram(
    "skillstream_http_request_seconds",
    "Seconds from a request's arrival to the end of its answer, by route template.",
    ["route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=metrics.REGISTRY,
)


def observe_request(route: str, method: str, status: int, started: float) -> None:
    REQUESTS.labels(route, method, str(status)).inc()
    LATENCY.labels(route).observe(time.perf_counter() - started)


def render(home: Any) -> tuple[bytes, str]:
    """The process's metrics, with the home's memories by status read now (left as they were
    while another process holds a DuckDB catalog file)."""
    from skillstream.server.home import Busy

    try:
        rows = home.read(
            lambda cat: cat.sql(
                "SELECT status, count(*) AS n FROM memory_meta GROUP BY 1 ORDER BY 1"
            ).to_pylist()
        )
    except Busy:
        rows = None
    if rows is not None:
        metrics.stored_memories({str(r["status"]): int(r["n"]) for r in rows})
    return metrics.render()
