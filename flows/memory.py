"""The streaming memory dataflow.

    source (files | kafka | api) -> parse + validate --------------------------> dead letters
                           -> admit_messages (per conversation: time window, ids) -> dead letters
                           -> extract_memories: key by conversation -> spans (stateful)
                                                -> key by owner shard -> extract (stateful)
                           -> distil_task_skills (when distillation is on)
                           -> store (LanceDB memories, catalog): one writer for a DuckDB
                              file, one partition per owner shard for a shared catalog

:func:`build_flow` wires the public operators of ``skillstream.flows.operators`` from a run's
components (:class:`FlowParts`) and does no I/O; ``flows.runner.Runner`` reads the home, builds the
components and runs the flow, and is what the CLI, the Python API and the evaluation use. Run it
with Bytewax directly through :func:`get_flow`::

    python -m bytewax.run "skillstream.flows.memory:get_flow('data/sample')" -w 2

``get_flow`` reads the settings from the environment and ``<home>/skillstream.toml``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import bytewax.operators as op
from bytewax.dataflow import Dataflow, Stream
from bytewax.inputs import Source
from bytewax.outputs import Sink

from skillstream.admit import TimeWindow
from skillstream.flows.distill import Distillation, distil_task_skills
from skillstream.flows.live import WakeSource
from skillstream.flows.operators import Extraction, admit_messages, extract_memories, store
from skillstream.flows.progress import Counters
from skillstream.held import Held, Released, Wake
from skillstream.model import DeadLetter, Message
from skillstream.storage.erasure import ErasedMessages

if TYPE_CHECKING:
    from skillstream.flows.runner import Runner

__all__ = ["FlowParts", "build_flow", "default_sample", "get_flow"]


@dataclass(frozen=True)
class FlowParts:
    """The components a memory flow is wired from (``Runner.parts()`` builds them).

    Attributes:
        window: The timestamps a conversation admits.
        erased: Tombstones of forgotten messages, dropped before admission.
        extraction: Spans and extraction (pipeline, span builder, shards).
        sink: The store sink.
        distillation: Task-skill distillation, or ``None`` when it is off.
        events: A sink for memory change events (``--events-to``), or ``None``.
        counters: The run's counters.
        collect: Called with every span and task-skill result (``Home.add`` keeps them).
        wakes: A ``Wake`` per conversation with an open span or block held in the home.
    """

    window: TimeWindow
    extraction: Extraction
    sink: Any
    distillation: Distillation | None = None
    events: Sink | None = None
    counters: Counters = field(default_factory=Counters)
    collect: Callable[[Any], None] | None = None
    wakes: list[Wake] = field(default_factory=list)
    erased: ErasedMessages = field(default_factory=ErasedMessages)


def build_flow(parts: FlowParts, source: Source, flow_id: str = "skillstream-memory") -> Dataflow:
    """Wire the memory dataflow for ``source`` from ``parts``; nothing is read or written here."""
    counters = parts.counters
    flow = Dataflow(flow_id)
    items = op.input("read", flow, source)
    split = op.branch("valid", items, lambda x: isinstance(x, Message))
    messages = split.trues
    dead = op.filter("dead", split.falses, lambda x: isinstance(x, DeadLetter))
    op.inspect("count-messages", messages, counters.counter("messages"))
    op.inspect("count-dead", dead, counters.counter("dead_letters", stage="source"))
    messages = not_erased(messages, parts.erased, counters)
    admission = admit_messages("admit", messages, parts.window, counters=counters)
    messages = admission.admitted
    wakes = op.input("held", flow, WakeSource(parts.wakes))
    results = extract_memories("memories", messages, parts.extraction, wakes)
    streams = [results, dead, admission.refused]
    if parts.distillation is not None:
        streams.append(distil_task_skills("task-skills", messages, parts.distillation, wakes))
    collect = parts.collect
    if collect is not None:
        for i, stream in enumerate([results, *streams[2:]]):  # not the source's dead letters
            op.inspect(f"collect-{i}", stream, lambda _step, r: collect(r))
    store("store", *streams, sink=parts.sink)
    if parts.events is not None:
        changes = op.filter(
            "changes", results, lambda r: not isinstance(r, DeadLetter | Held | Released)
        )
        op.output("events", changes, parts.events)
    return flow


def not_erased(
    messages: Stream[Message], erased: ErasedMessages, counters: Counters
) -> Stream[Message]:
    """The messages that were not forgotten (``storage/erasure.py``); a forgotten one is dropped
    and counted as ``erased``, never stored again."""
    if not erased.hashes:
        return messages
    split = op.branch("not-erased", messages, erased.admits)
    op.inspect("count-erased", split.falses, counters.counter("erased"))
    return split.trues


def get_flow(source: str | None = None, format: str = "auto", **overrides: Any) -> Dataflow:
    """Entry point for ``python -m bytewax.run``: settings from the environment and config file.

    The runner reads the home and reconciles it when the flow is defined (in each process, for
    the owners its store partitions write); the run lock is not taken, as Bytewax owns the run:
    keep other runs off the home while it runs, or use ``skillstream run``. Under
    ``python -m bytewax.run``, the run's summary is printed on standard error when the process
    ends (each process its own), as ``skillstream run`` prints it.
    """
    import atexit
    import os
    import sys

    from skillstream.flows.runner import Runner
    from skillstream.settings import Settings

    settings = Settings.load(**overrides)
    runner = Runner(settings)
    src = source or os.environ.get("SKILLSTREAM_SOURCE") or str(default_sample())
    flow = runner.dataflow(runner.source(src, format=format))
    main = getattr(sys.modules.get("__main__"), "__spec__", None)
    if getattr(main, "name", None) == "bytewax.run":  # not when a program runs the flow itself
        atexit.register(_print_summary, runner)
    return flow


def _print_summary(runner: Runner) -> None:
    """The summary of a run that ``python -m bytewax.run`` ran, on standard error."""
    import sys

    from skillstream.flows.runner import RESUME

    summary = runner.summary()
    print(f"skillstream: {summary.line()}", file=sys.stderr, flush=True)
    if summary.all_rejected:
        print(f"skillstream: {runner.refused_all()}", file=sys.stderr, flush=True)
    elif summary.stopped:
        print(f"skillstream: stopped before the input ended; {RESUME}", file=sys.stderr)


def default_sample() -> Path:
    """The bundled sample conversations (``data/sample`` in the repository)."""
    return Path(__file__).resolve().parent.parent / "data" / "sample"
