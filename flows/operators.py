"""Bytewax operators of skillstream, for its own flow and for yours.

The three public composites are what ``skillstream run`` is built from (``flows.memory``), and a
dataflow of your own can put them between its own steps:

* :func:`extract_memories`: validated ``Message`` values -> spans -> extraction ->
  ``SpanResult`` values (and the lifecycle's ``MaintenanceResult`` values);
* :func:`distil_task_skills`: ``Message`` values -> conversation blocks -> task skills
  (``TaskSkillResult`` values);
* :func:`store`: any number of such streams (and ``DeadLetter`` values) into the home's stores.

Example (a flow with its own steps around them)::

    flow = Dataflow("my-flow")
    raw = op.input("in", flow, my_source)
    messages = op.filter_map("to-messages", raw, my_parser)
    results = extract_memories("memories", messages, settings)
    skills = distil_task_skills("skills", messages, settings)
    store("store", results, skills, settings=settings)

The memory ids are the same as a ``skillstream run`` of the same messages with the same settings.

Below them are the stateful logics they use (spans per conversation, extraction per owner shard).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

import bytewax.operators as op
from bytewax.dataflow import Stream, operator
from bytewax.operators import StatefulBatchLogic, StatefulLogic

from skillstream.admit import Admitted, TimeWindow, admit, refusal, refused
from skillstream.embed import TextEmbedder, get_embedder
from skillstream.extract import Executor
from skillstream.flows import progress
from skillstream.flows.distill import distil_task_skills
from skillstream.flows.maintenance import maintenance_clock
from skillstream.flows.shards import per_owner, shard_key, shard_of
from skillstream.memories import OwnerMemories
from skillstream.model import DeadLetter, Message, Span, SpanResult
from skillstream.pipeline import EvictedOwner, MemoryPipeline, OwnerState
from skillstream.settings import Settings
from skillstream.spans import SpanBuilder, SpanState
from skillstream.tokens import get_counter

__all__ = [
    "Admission",
    "AdmitLogic",
    "ExtractLogic",
    "SpanLogic",
    "admit_messages",
    "distil_task_skills",
    "extract_memories",
    "memory_pipeline",
    "per_owner",
    "read_done_spans",
    "shard_of",
    "store",
]

log = logging.getLogger(__name__)


class AdmitLogic(StatefulLogic[Message, Message | DeadLetter, Admitted]):
    """Per conversation: lets a message through, or turns it into a ``DeadLetter`` when the
    conversation does not admit it (``skillstream.admit``: timestamp window, duplicate ids)."""

    def __init__(self, window: TimeWindow, resume: Admitted | None) -> None:
        self.window = window
        self.state = resume.copy() if resume is not None else Admitted()

    def on_item(self, value: Message) -> tuple[Iterable[Message | DeadLetter], bool]:
        reason = refusal(self.window, self.state, value)
        if reason is not None:
            return [refused(value, reason)], StatefulLogic.RETAIN
        admit(self.state, value)
        return [value], StatefulLogic.RETAIN

    def snapshot(self) -> Admitted:
        return self.state.copy()


class SpanLogic(StatefulLogic[Message, Span | DeadLetter, SpanState]):
    """Per-conversation span builder; flushes the open span at end of input.

    A message that the span builder cannot take (its text cannot be tokenised, say) leaves as a
    ``DeadLetter``; the conversation goes on without it.
    """

    def __init__(self, builder: SpanBuilder, resume: SpanState | None) -> None:
        self.builder = builder
        self.state = resume.copy() if resume is not None else SpanState()

    def on_item(self, value: Message) -> tuple[Iterable[Span | DeadLetter], bool]:
        try:  # the builder changes its state only once the message's tokens are counted
            out: list[Span | DeadLetter] = list(self.builder.add(self.state, value))
        except Exception as e:  # noqa: BLE001 - one message must not stop its conversation
            reason = f"could not be added to a span ({type(e).__name__}: {e})"
            return [refused(value, reason, stage="spans")], StatefulLogic.RETAIN
        return out, StatefulLogic.RETAIN

    def on_eof(self) -> tuple[Iterable[Span | DeadLetter], bool]:
        return self.builder.flush(self.state), StatefulLogic.DISCARD

    def snapshot(self) -> SpanState:
        return self.state.copy()


@dataclass(frozen=True)
class Admission:
    """What :func:`admit_messages` returns: the admitted messages and the refused ones."""

    admitted: Stream[Message]
    refused: Stream[DeadLetter]


@operator
def admit_messages(step_id: str, messages: Stream[Message], settings: Settings) -> Admission:
    """Each conversation admits its messages or refuses them (``skillstream.admit``: the
    timestamp window of ``settings`` and unique message ids).

    Put it before :func:`extract_memories` and :func:`distil_task_skills`; give ``refused`` (dead
    letters) to :func:`store`.
    """
    window = settings.spans.time_window
    by_conv = op.key_on("by-conversation", messages, lambda m: m.conversation_id)
    judged = op.stateful("admit", by_conv, lambda resume: AdmitLogic(window, resume))
    split = op.branch("admitted", op.key_rm("unkeyed", judged), _is_message)
    refused_letters = cast("Stream[DeadLetter]", split.falses)
    op.inspect("count-refused", refused_letters, progress.counter("dead_letters"))
    return Admission(cast("Stream[Message]", split.trues), refused_letters)


def _is_message(item: Message | DeadLetter) -> bool:
    return isinstance(item, Message)


def _is_span(item: Span | DeadLetter) -> bool:
    return isinstance(item, Span)


class ExtractLogic(StatefulBatchLogic[Span, SpanResult, dict]):
    """Extraction for one shard of owners.

    A batch holds spans of many owners. Spans are grouped by owner (keeping their order) and the
    groups run on a shared thread pool, so LLM calls of different owners overlap while each owner's
    spans are applied strictly in order. The state is the owners' memories.

    With ``max_owners`` (setting ``owner_state_max``), at most that many owners stay in memory:
    after each batch the least recently seen ones are evicted (``MemoryPipeline.evict``) and read
    back from the store when they return (``MemoryPipeline.rehydrate``), so memory and snapshots
    stay bounded whatever the number of owners.
    """

    def __init__(
        self,
        pipeline: MemoryPipeline,
        pool: ThreadPoolExecutor,
        resume: dict | None,
        max_owners: int = 0,
    ) -> None:
        self.pipeline = pipeline
        self.pool = pool
        self.max_owners = max_owners
        resume = dict(resume or {})
        self.evicted: dict[str, EvictedOwner] = dict(resume.pop(_EVICTED, None) or {})
        self.owners: dict[str, OwnerState] = resume  # least recently seen first

    def on_batch(self, values: list[Span]) -> tuple[Iterable[SpanResult], bool]:
        def run(owner: str, spans: list[Span]) -> tuple[OwnerState, list[SpanResult]]:
            state = self.owners.get(owner)
            if state is None:
                gone = self.evicted.get(owner)
                if gone is not None:
                    state = self.pipeline.rehydrate(owner, gone)
                    progress.bump("owners_rehydrated")
                else:
                    state = self.pipeline.new_state(owner)
            return state, self.pipeline.process_owner(state, spans)

        results: list[SpanResult] = []
        for owner, (state, out) in per_owner(self.pool, values, lambda s: s.owner_id, run):
            self.owners.pop(owner, None)
            self.owners[owner] = state
            self.evicted.pop(owner, None)
            results.extend(out)
        if self.max_owners:
            while len(self.owners) > self.max_owners:
                owner = next(iter(self.owners))
                self.evicted[owner] = self.pipeline.evict(self.owners.pop(owner))
                progress.bump("owners_evicted")
        return results, StatefulBatchLogic.RETAIN

    def snapshot(self) -> dict[str, Any]:
        snap: dict[str, Any] = {owner: st.copy() for owner, st in self.owners.items()}
        if self.evicted:
            snap[_EVICTED] = dict(self.evicted)
        return snap


_EVICTED = "\x00evicted"
"""Key of the evicted owners in an extraction snapshot (no owner id starts with a NUL)."""


def read_done_spans(settings: Settings) -> frozenset[str]:
    """Span ids already in the ledger of the settings' home (read once, before a flow runs; every
    process of a cluster reads a shared catalog's ledger)."""
    from skillstream.storage.catalog import catalog_exists, open_catalog

    if not catalog_exists(settings.storage):
        return frozenset()
    cat = open_catalog(settings.storage, read_only=True)
    try:
        return frozenset(cat.processed_span_ids())
    finally:
        cat.close()


def read_tombstones(settings: Settings) -> tuple[Any, Any]:
    """What the states of the settings' home hold beyond LanceDB: the expired memories and the
    open contradictions (``storage.tombstones``), read once from the catalog."""
    from skillstream.storage.catalog import catalog_exists, open_catalog
    from skillstream.storage.tombstones import OpenContradictions, Tombstones

    if not catalog_exists(settings.storage):
        return Tombstones(), OpenContradictions()
    cat = open_catalog(settings.storage, read_only=True)
    try:
        return Tombstones.read(cat), OpenContradictions.read(cat)
    finally:
        cat.close()


def memory_pipeline(
    settings: Settings,
    embedder: TextEmbedder | None = None,
    *,
    executor: Executor | None = None,
    done_spans: frozenset[str] | None = None,
) -> MemoryPipeline:
    """The memory pipeline a flow extracts with: owners hydrated from the home's LanceDB table
    (opened on first need) with the minimal rows of their expired memories and their open
    contradictions (read from the catalog now, ``storage.tombstones``), spans of the ledger
    skipped.

    Args:
        settings: The home and every extraction setting.
        embedder: The embedding model (default: the settings' shared one).
        executor: The executor (default: the configured backend's).
        done_spans: Span ids to skip (default: read from the home's ledger now).
    """
    from skillstream.services.pipeline import build_pipeline
    from skillstream.storage.home import open_index
    from skillstream.storage.lance import MemoryIndex

    embedder = embedder or get_embedder(settings.embedding)
    dim = embedder.dim
    cache: dict[str, MemoryIndex] = {}
    expired, contradictions = read_tombstones(settings)

    def hydrate(owner_id: str) -> Any:
        idx = cache.get("idx")
        if idx is None:
            idx = cache["idx"] = open_index(settings, dim)
        state = OwnerMemories(owner_id)
        for m in [*idx.owner_memories(owner_id), *expired.owner(owner_id)]:
            state.put(m)
        return contradictions.fill(state)

    done = read_done_spans(settings) if done_spans is None else done_spans
    return build_pipeline(settings, embedder, executor=executor, hydrate=hydrate, done_spans=done)


@operator
def extract_memories(
    step_id: str,
    messages: Stream[Message],
    settings: Settings,
    *,
    workers: int = 1,
    executor: Executor | None = None,
    pipeline: MemoryPipeline | None = None,
) -> Stream[Any]:
    """Spans and memory extraction for a stream of validated messages.

    Messages are keyed by conversation and cut into spans (token budget and idle gap of
    ``settings``); spans are keyed by owner shard, get the lifecycle's maintenance ticks, and are
    extracted with owners of a shard running concurrently and each owner's spans in order.

    Args:
        step_id: Unique id of this step in your flow.
        messages: ``skillstream.model.Message`` values (one conversation's messages in order).
        settings: The home (its ledger and memories) and the extraction settings.
        workers: Bytewax workers of the flow (the default number of owner shards).
        executor: The executor to extract with (default: the configured backend's).
        pipeline: A ready pipeline (default: :func:`memory_pipeline` for ``settings``).

    Returns:
        ``SpanResult`` values, one per span (``status`` ``done``, ``skipped`` or ``failed``),
        ``MaintenanceResult`` values, and a ``DeadLetter`` for a message the span builder could
        not take; give them to :func:`store`.
    """
    if pipeline is None:
        pipeline = memory_pipeline(settings, executor=executor)
    counter = get_counter(settings.embedding.model)
    builder = SpanBuilder(counter.count, settings.spans.span_tokens, settings.spans.idle_gap)
    shards = settings.flow.shards or max(1, workers)
    pool = ThreadPoolExecutor(
        max_workers=max(1, settings.flow.concurrency), thread_name_prefix="extract"
    )
    core = pipeline
    by_conv = op.key_on("by-conversation", messages, lambda m: m.conversation_id)
    keyed_spans = op.stateful("spans", by_conv, lambda resume: SpanLogic(builder, resume))
    # a message the span builder cannot take (its text cannot be tokenised) is a dead letter
    built = op.branch("built", op.key_rm("spans-unkeyed", keyed_spans), _is_span)
    spans = cast("Stream[Span]", built.trues)
    op.inspect("count-refused", built.falses, progress.counter("dead_letters"))
    by_shard = op.key_on(
        "by-owner-shard", spans, lambda s: shard_key(shard_of(s.owner_id, shards), workers)
    )
    by_shard = maintenance_clock(
        "maintenance-clock", by_shard, core.options.rules.maintenance_interval
    )
    keyed_results = op.stateful_batch(
        "extract",
        by_shard,
        lambda resume: ExtractLogic(core, pool, resume, settings.flow.owner_state_max),
    )
    results = op.key_rm("results-unkeyed", keyed_results)
    op.inspect("count-spans", results, _count_result)
    return op.merge("with-refused", results, built.falses)


@operator
def store(
    step_id: str,
    *ups: Stream[Any],
    settings: Settings,
    dim: int | None = None,
    reconcile: bool = True,
    workers: int = 1,
    cluster: tuple[int, int, int] | None = None,
) -> None:
    """Write results into the home's stores (LanceDB and the catalog).

    Takes the outputs of :func:`extract_memories` and :func:`distil_task_skills` and
    ``DeadLetter`` values; every write is an upsert under deterministic ids, so a replay after a
    crash stores nothing twice. A DuckDB file has one writer (one sink partition); a shared
    catalog (``settings.storage.shared_catalog``) has one partition per owner shard, dealt out
    over every worker of every process (``storage.sinks.ResultSink``).

    Args:
        step_id: Unique id of this step in your flow.
        *ups: The streams to store.
        settings: The home.
        dim: Embedding width (default: the settings' embedding model's).
        reconcile: First roll back LanceDB rows that the catalog never committed (a run that
            stopped between the two writes). In a cluster on a DuckDB file only process 0
            should; on a shared catalog every process does, for the owners it writes.
        workers: Bytewax workers of the flow, the whole cluster's (the default number of owner
            shards; the same as :func:`extract_memories` was given).
        cluster: ``(process_id, processes, workers_per_process)`` of a run on a shared catalog.
    """
    from skillstream.storage.sinks import ResultSink

    shards = settings.flow.shards or max(1, workers)
    if dim is None or reconcile:
        embedder = get_embedder(settings.embedding)
        dim = dim or embedder.dim
    sink = ResultSink(
        settings,
        dim,
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
        process = (cluster or (0, 1, 1))[0]
        owners = sink.owns(process) if settings.storage.shared_catalog else None
        reconcile_home(settings, dim, embedder.encode, owners=owners)
    keyed = [op.map(f"key-{i}", up, sink.route) for i, up in enumerate(ups)]
    merged = keyed[0] if len(keyed) == 1 else op.merge("merge", *keyed)
    op.output("sink", merged, sink)


def _count_result(step_id: str, r: SpanResult) -> None:
    progress.bump(f"spans_{r.status}")
    progress.bump("memory_changes", len(r.memories))
