"""The streaming memory dataflow.

    source (files | kafka) -> parse + validate ---------------------------> dead letters
                           -> key by conversation -> spans (stateful)
                           -> key by owner shard -> extract (stateful, owners concurrent)
                           -> store sink (LanceDB memories, catalog): one writer for a
                              DuckDB file, one partition per owner shard for a shared catalog

Run it with the CLI (``skillstream run``) or with Bytewax directly::

    python -m bytewax.run "skillstream.flows.memory:get_flow('data/sample')" -w 2

``get_flow`` reads the settings from the environment and ``<home>/skillstream.toml``.
"""

from __future__ import annotations

import functools
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.inputs import Source

from skillstream.embed import get_embedder
from skillstream.extract import Executor
from skillstream.flows import progress
from skillstream.flows.maintenance import maintenance_clock
from skillstream.flows.operators import ExtractLogic, SpanLogic, shard_of
from skillstream.model import DeadLetter, Message, SpanResult
from skillstream.services.pipeline import build_pipeline, make_executor
from skillstream.settings import Settings
from skillstream.spans import SpanBuilder
from skillstream.tokens import get_counter

log = logging.getLogger(__name__)


@dataclass
class FlowParts:
    """What ``build_flow`` wired, for callers that need to look inside (CLI, tests)."""

    flow: Dataflow
    done_spans: frozenset[str]
    dim: int


def read_done_spans(settings: Settings) -> frozenset[str]:
    """Span ids already in the ledger (read once, before the flow runs; every process of a
    cluster reads a shared catalog's ledger)."""
    from skillstream.storage.catalog import catalog_exists, open_catalog

    if not catalog_exists(settings.storage):
        return frozenset()
    cat = open_catalog(settings.storage, read_only=True)
    try:
        return frozenset(cat.processed_span_ids())
    finally:
        cat.close()


def build_flow(
    settings: Settings,
    source: Source,
    *,
    workers: int = 1,
    executor: Executor | None = None,
    flow_id: str = "skillstream-memory",
    events_to: str | None = None,
    reconcile: bool = True,
    cluster: tuple[int, int, int] | None = None,
) -> FlowParts:
    """Wire the memory dataflow for ``source`` with ``settings``.

    With ``reconcile`` (the default), LanceDB rows that the catalog never committed (a run that
    stopped between the sink's two writes) are rolled back first; in a cluster with a DuckDB file
    only the process that owns the store sink (process 0) should do it, before it joins the
    cluster. With a shared catalog every process does it for the owners its store partitions write
    (so every process passes ``reconcile``), and ``cluster`` (``(process_id, processes,
    workers_per_process)``) deals its partitions out over every worker of every process.
    """
    from skillstream.storage.lance import MemoryIndex

    embedder = get_embedder(settings.embedding)
    counter = get_counter(settings.embedding.model)
    executor = executor or make_executor(settings)
    done = read_done_spans(settings)
    pool = ThreadPoolExecutor(
        max_workers=max(1, settings.flow.concurrency), thread_name_prefix="extract"
    )
    index_cache: dict[str, Any] = {}

    def index() -> MemoryIndex:
        idx = index_cache.get("idx")
        if idx is None:
            idx = index_cache["idx"] = MemoryIndex(
                settings.storage.lancedb, embedder.dim, settings.storage.storage_options
            )
        return idx

    shards = settings.flow.shards or max(1, workers)
    from skillstream.storage.sinks import ResultSink

    sink = ResultSink(
        settings,
        embedder.dim,
        shards=shards,
        shard=functools.partial(shard_of, shards=shards),
        cluster=cluster or (0, 1, max(1, workers)),
    )
    if settings.storage.shared_catalog:
        # Create the shared catalog's tables now, before the store partitions open it at once.
        from skillstream.storage.catalog import open_catalog

        open_catalog(settings.storage).close()
    if reconcile:
        from skillstream.storage.reconcile import reconcile_home

        # A DuckDB file: every owner (one writer). A shared catalog: the owners this process's
        # store partitions write; no worker of the cluster runs before every process has done it.
        owners = sink.owns((cluster or (0, 1, 1))[0]) if settings.storage.shared_catalog else None
        reconcile_home(settings, embedder.dim, embedder.encode, owners=owners)

    def hydrate(owner_id: str):
        return index().owner_memories(owner_id)

    pipeline = build_pipeline(
        settings, embedder, executor=executor, hydrate=hydrate, done_spans=done
    )
    builder = SpanBuilder(counter.count, settings.spans.span_tokens, settings.spans.idle_gap)
    flow = Dataflow(flow_id)
    items = op.input("read", flow, source)
    split = op.branch("valid", items, lambda x: isinstance(x, Message))
    messages = split.trues
    dead = op.filter("dead", split.falses, lambda x: isinstance(x, DeadLetter))
    op.inspect("count-messages", messages, progress.counter("messages"))
    op.inspect("count-dead", dead, progress.counter("dead_letters"))
    by_conv = op.key_on("by-conversation", messages, lambda m: m.conversation_id)
    keyed_spans = op.stateful("spans", by_conv, lambda resume: SpanLogic(builder, resume))
    spans = op.key_rm("spans-unkeyed", keyed_spans)
    by_shard = op.key_on("by-owner-shard", spans, lambda s: shard_of(s.owner_id, shards))
    by_shard = maintenance_clock(
        "maintenance-clock", by_shard, pipeline.options.rules.maintenance_interval
    )
    keyed_results = op.stateful_batch(
        "extract", by_shard, lambda resume: ExtractLogic(pipeline, pool, resume)
    )
    results = op.key_rm("results-unkeyed", keyed_results)
    op.inspect("count-spans", results, _count_result)
    to_store = op.merge(
        "to-store",
        op.map("results-to-store", results, lambda r: ("store", r)),
        op.map("dead-to-store", dead, lambda d: ("store", d)),
        *_task_skills(settings, messages, embedder, workers),
    )
    op.output("store", op.map("by-store-partition", to_store, sink.route), sink)
    if events_to:
        from skillstream.connectors.kafka import memory_events_sink

        op.output("events", results, memory_events_sink(events_to, settings))
    return FlowParts(flow, done, embedder.dim)


def _task_skills(settings: Settings, messages, embedder, workers: int) -> list:
    """Task-skill distillation as a stream for the store sink, when distillation is enabled."""
    if not settings.distillation.enabled:
        return []
    from skillstream.flows.distill import attach_distill

    return [attach_distill(settings, messages, embedder, workers=workers)]


def _count_result(step_id: str, r: SpanResult) -> None:
    progress.bump(f"spans_{r.status}")
    progress.bump("memory_changes", len(r.memories))


def get_flow(source: str | None = None, format: str = "auto", **overrides: Any) -> Dataflow:
    """Entry point for ``python -m bytewax.run``: settings from the environment and config file."""
    from skillstream.connectors.files import FileSource

    settings = Settings.load(**overrides)
    src = source or os.environ.get("SKILLSTREAM_SOURCE") or str(default_sample())
    from skillstream.redact import redactor_for

    return build_flow(
        settings, FileSource(src, format=format, redactor=redactor_for(settings.lifecycle.policies))
    ).flow


def default_sample() -> Path:
    """The bundled sample conversations (``data/sample`` in the repository)."""
    return Path(__file__).resolve().parent.parent / "data" / "sample"
