"""The process's Prometheus metrics: one registry, the series every run records, and its text.

Loading this module turns recording on for the process (see :mod:`skillstream.telemetry`); the
run loads it when it serves ``/metrics`` (setting ``metrics_addr``), and the HTTP server mounts
:data:`REGISTRY` at its own ``/metrics`` and adds its series to it. The series are made once, at
import, so any number of runs in one process share them without registering anything twice:
counters count for the process, as Prometheus expects of a counter, and a scrape's ``rate()``
gives the throughput of whichever run is going.

This module does no I/O: :func:`render` gives the text; the edge that serves it (the run's
exposition thread, the server) owns the socket.

Labels take a small closed set of values (a stage, a status, an LLM purpose, a model name, a
Kafka topic and partition), never a message, an owner or a conversation: a label value is a new
series for as long as the process lives, and a scrape is readable by whoever reaches the port.
See docs/observability.md for every series.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from skillstream.model import LLMCall

__all__ = ["REGISTRY", "render"]

REGISTRY = CollectorRegistry(auto_describe=True)
"""Every series of this module (and the server's, which it adds)."""

_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)

MESSAGES = Counter(
    "skillstream_messages",
    "Messages by stage: read from the source, dropped as forgotten (erased), admitted by their "
    "conversation.",
    ["stage"],
    registry=REGISTRY,
)
DEAD_LETTERS = Counter(
    "skillstream_dead_letters",
    "Records refused and kept as dead letters, by the stage that refused them: source (not a "
    "valid message), admit (timestamp window, duplicate or edited id), spans (the span builder "
    "could not take it).",
    ["stage"],
    registry=REGISTRY,
)
SPANS = Counter(
    "skillstream_spans",
    "Spans that left extraction, by status: done, skipped (already in the ledger), failed.",
    ["status"],
    registry=REGISTRY,
)
MEMORY_CHANGES = Counter(
    "skillstream_memory_changes",
    "Memory versions written by span extraction (inserts, updates, lifecycle changes).",
    registry=REGISTRY,
)
OPEN_SPANS = Gauge(
    "skillstream_open_spans",
    "Conversations whose span is open in this process (messages waiting for their span to close).",
    registry=REGISTRY,
)
EXTRACTION_SECONDS = Histogram(
    "skillstream_span_extraction_seconds",
    "Seconds to extract one span (retrieval, memory-skill selection, the executor and its LLM "
    "calls, applying the operations), by status: done or failed.",
    ["status"],
    buckets=_SECONDS,
    registry=REGISTRY,
)
LLM_REQUESTS = Counter(
    "skillstream_llm_requests",
    "LLM requests by purpose (the stage: extract, distill...), model and status: ok, error (an "
    "attempt that failed; each retry counts), cached (answered by the response cache).",
    ["purpose", "model", "status"],
    registry=REGISTRY,
)
LLM_SECONDS = Histogram(
    "skillstream_llm_request_seconds",
    "Seconds of one HTTP attempt at the LLM endpoint, by purpose and model.",
    ["purpose", "model"],
    buckets=_SECONDS,
    registry=REGISTRY,
)
PROMPT_TOKENS = Counter(
    "skillstream_llm_prompt_tokens",
    "Prompt (input) tokens billed by the LLM endpoint, by purpose and model (cached answers "
    "excluded).",
    ["purpose", "model"],
    registry=REGISTRY,
)
COMPLETION_TOKENS = Counter(
    "skillstream_llm_completion_tokens",
    "Completion (output) tokens billed by the LLM endpoint, by purpose and model (cached answers "
    "excluded).",
    ["purpose", "model"],
    registry=REGISTRY,
)
LLM_COST = Counter(
    "skillstream_llm_cost",
    "Cost of the billed tokens at the configured prices (setting llm_prices, per million "
    "tokens, in their currency), by purpose and model; a model without a price has no series.",
    ["purpose", "model"],
    registry=REGISTRY,
)
EMBEDDED_TEXTS = Counter(
    "skillstream_embedding_texts",
    "Texts embedded, by backend (local or openai).",
    ["backend"],
    registry=REGISTRY,
)
EMBEDDING_SECONDS = Counter(
    "skillstream_embedding_seconds",
    "Seconds spent embedding (model batches, or endpoint requests), by backend; summed over the "
    "embedding threads, so it may pass the wall clock.",
    ["backend"],
    registry=REGISTRY,
)
COMMIT_SECONDS = Histogram(
    "skillstream_store_commit_seconds",
    "Seconds to write one batch of results to the stores (LanceDB upsert and the catalog "
    "transaction).",
    buckets=_SECONDS,
    registry=REGISTRY,
)
STORED_MEMORIES = Gauge(
    "skillstream_stored_memories",
    "The home's memories by status, read from the catalog after the run's commits (at most every "
    "few seconds).",
    ["status"],
    registry=REGISTRY,
)

for _stage in ("read", "erased", "admitted"):
    MESSAGES.labels(_stage)
for _stage in ("source", "admit", "spans"):
    DEAD_LETTERS.labels(_stage)
for _status in ("done", "skipped", "failed"):
    SPANS.labels(_status)


class KafkaLag(Collector):
    """``skillstream_kafka_consumer_lag``: Bytewax's own consumer-lag gauge
    (``bytewax_kafka_consumer_lag``, set from librdkafka's statistics every second while a
    partition is read: the partition's last stable offset minus the next offset to read), by
    topic and partition. Bytewax registers it in ``prometheus_client``'s default registry, which
    only its own dataflow API serves; this collector reads it at each scrape, so it is 0 once a
    run has read everything produced."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "skillstream_kafka_consumer_lag",
            "Records produced to a Kafka partition and not yet read by the run, by topic and "
            "partition (Bytewax's consumer-lag gauge).",
            labels=["topic", "partition"],
        )
        kafka = sys.modules.get("bytewax.connectors.kafka")
        gauge = getattr(kafka, "BYTEWAX_CONSUMER_LAG_GAUGE", None)
        lags: dict[tuple[str, str], float] = {}
        for metric in gauge.collect() if gauge is not None else []:
            for sample in metric.samples:
                key = (str(sample.labels.get("topic")), str(sample.labels.get("partition")))
                # one series per source step; two flows of one process reading one partition
                # report the one further behind
                lags[key] = max(lags.get(key, sample.value), sample.value)
        for (topic, partition), lag in sorted(lags.items()):
            family.add_metric([topic, partition], lag)
        yield family

    def describe(self) -> list[GaugeMetricFamily]:
        return []


REGISTRY.register(KafkaLag())


def render() -> tuple[bytes, str]:
    """The registry in Prometheus text format, and its content type."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


# ---------------------------------------------------------------------------- recording
def llm_call(call: LLMCall, cost: float | None) -> None:
    """One ``LLMCall`` row (an HTTP attempt or a cached answer) with its cost, if priced."""
    purpose, model = call.purpose, call.model
    LLM_REQUESTS.labels(purpose, model, call.status).inc()
    if call.cached:
        return
    LLM_SECONDS.labels(purpose, model).observe(call.latency_ms / 1000.0)
    PROMPT_TOKENS.labels(purpose, model).inc(call.prompt_tokens)
    COMPLETION_TOKENS.labels(purpose, model).inc(call.completion_tokens)
    if cost is not None:
        LLM_COST.labels(purpose, model).inc(cost)


def embedded(backend: str, texts: int, seconds: float) -> None:
    """``texts`` embedded by ``backend`` in ``seconds``."""
    EMBEDDED_TEXTS.labels(backend).inc(texts)
    EMBEDDING_SECONDS.labels(backend).inc(seconds)


def stored_memories(counts: Mapping[str, int]) -> None:
    """The home's memories by status now; a status seen before and absent now is 0."""
    seen = {labels[0] for labels in _children(STORED_MEMORIES)}
    for status in seen | set(counts):
        STORED_MEMORIES.labels(status).set(counts.get(status, 0))


def _children(metric: Gauge) -> list[tuple[str, ...]]:
    for family in metric.collect():
        return [tuple(s.labels.values()) for s in family.samples]
    return []
