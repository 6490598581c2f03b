"""The server's own Prometheus metrics: requests by route and status, their latency, and the
home's memories by status read at each scrape.

Labels carry route templates (``/v1/memories/{id}``), methods and status codes only: never an id,
an owner or a query.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

REGISTRY = CollectorRegistry(auto_describe=True)
"""The server's registry (rendered at ``/metrics`` after the process's run metrics)."""

REQUESTS = Counter(
    "skillstream_http_requests",
    "HTTP requests answered by the server, by route template, method and status code.",
    ["route", "method", "status"],
    registry=REGISTRY,
)
LATENCY = Histogram(
    "skillstream_http_request_seconds",
    "Seconds from a request's arrival to the end of its answer, by route template.",
    ["route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)


def observe_request(route: str, method: str, status: int, started: float) -> None:
    REQUESTS.labels(route, method, str(status)).inc()
    LATENCY.labels(route).observe(time.perf_counter() - started)


class HomeCollector:
    """``skillstream_memories`` by status, read from the home's catalog at each scrape (left out
    while a run holds a DuckDB catalog file)."""

    def __init__(self, home: Any) -> None:
        self.home = home

    def collect(self) -> Any:
        from skillstream.server.home import Busy

        family = GaugeMetricFamily(
            "skillstream_memories", "Memories in the home, by status.", labels=["status"]
        )
        try:
            rows = self.home.read(
                lambda cat: cat.sql(
                    "SELECT status, count(*) AS n FROM memory_meta GROUP BY 1 ORDER BY 1"
                ).to_pylist()
            )
        except Busy:
            return
        for r in rows or []:
            family.add_metric([str(r["status"])], float(r["n"]))
        yield family

    def describe(self) -> list[Any]:
        return []


def render(home: Any) -> tuple[bytes, str]:
    """The Prometheus text of the server's metrics and the home's memories."""
    own = generate_latest(REGISTRY)
    scraped = CollectorRegistry(auto_describe=False)
    scraped.register(HomeCollector(home))
    return own + generate_latest(scraped), CONTENT_TYPE_LATEST
