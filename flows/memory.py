"""The streaming memory dataflow.

    source (files | kafka) -> parse + validate ---------------------------> dead letters
                           -> admit_messages (per conversation: time window, ids) -> dead letters
                           -> extract_memories: key by conversation -> spans (stateful)
                                                -> key by owner shard -> extract (stateful)
                           -> distil_task_skills (when distillation is on)
                           -> store (LanceDB memories, catalog): one writer for a DuckDB
                              file, one partition per owner shard for a shared catalog

The flow is built from the public operators of ``skillstream.flows.operators``; a flow of your own
can use the same ones between its own steps. Run it with the CLI (``skillstream run``) or with
Bytewax directly::

    python -m bytewax.run "skillstream.flows.memory:get_flow('data/sample')" -w 2

``get_flow`` reads the settings from the environment and ``<home>/skillstream.toml``.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.inputs import Source

from skillstream.embed import get_embedder
from skillstream.extract import Executor
from skillstream.flows import progress
from skillstream.flows.operators import (
    admit_messages,
    distil_task_skills,
    extract_memories,
    memory_pipeline,
    read_done_spans,
    store,
)
from skillstream.model import DeadLetter, Message
from skillstream.settings import Settings

__all__ = ["FlowParts", "build_flow", "default_sample", "get_flow", "read_done_spans"]

log = logging.getLogger(__name__)


@dataclass
class FlowParts:
    """What ``build_flow`` wired, for callers that need to look inside (CLI, tests)."""

    flow: Dataflow
    done_spans: frozenset[str]
    dim: int


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
    workers_per_process)``) deals the partitions out over every worker of every process;
    ``workers`` is then the cluster's worker count.
    """
    embedder = get_embedder(settings.embedding)
    done = read_done_spans(settings)
    pipeline = memory_pipeline(settings, embedder, executor=executor, done_spans=done)

    flow = Dataflow(flow_id)
    items = op.input("read", flow, source)
    split = op.branch("valid", items, lambda x: isinstance(x, Message))
    messages = split.trues
    dead = op.filter("dead", split.falses, lambda x: isinstance(x, DeadLetter))
    op.inspect("count-messages", messages, progress.counter("messages"))
    op.inspect("count-dead", dead, progress.counter("dead_letters"))
    admission = admit_messages("admit", messages, settings)
    messages = admission.admitted
    results = extract_memories("memories", messages, settings, workers=workers, pipeline=pipeline)
    streams = [results, dead, admission.refused]
    if settings.distillation.enabled:
        streams.append(
            distil_task_skills(
                "task-skills", messages, settings, embedder=embedder, workers=workers
            )
        )
    store(
        "store",
        *streams,
        settings=settings,
        dim=embedder.dim,
        reconcile=reconcile,
        workers=workers,
        cluster=cluster,
    )
    if events_to:
        from skillstream.connectors.kafka import memory_events_sink

        changes = op.filter("changes", results, lambda r: not isinstance(r, DeadLetter))
        op.output("events", changes, memory_events_sink(events_to, settings))
    return FlowParts(flow, done, embedder.dim)


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
