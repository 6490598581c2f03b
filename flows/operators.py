"""Bytewax operators of skillstream, for its own flow and for yours.

The public composites are what ``skillstream run`` is built from (``flows.memory.build_flow``),
and a dataflow of your own can put them between its own steps:

* :func:`admit_messages`: each conversation admits its messages (time window, unique ids) or
  refuses them as dead letters;
* :func:`extract_memories`: admitted ``Message`` values -> spans -> extraction -> ``SpanResult``
  values (and the lifecycle's ``MaintenanceResult`` values);
* :func:`distil_task_skills` (``flows.distill``): admitted messages -> conversation blocks -> task
  skills (``TaskSkillResult`` values);
* :func:`store`: any number of such streams (and ``DeadLetter`` values) into the home's stores.

They take components, not settings: the runner (``flows.runner.Runner``) reads the home once and
builds them (``Runner.parts()``), so defining a flow does no I/O. Example (your own dataflow
``flow``, with its own steps around them)::

    parts = Runner(Settings.load(home="my-home")).parts()
    messages = op.filter_map("to-messages", op.input("in", flow, my_source), my_parser)
    admission = admit_messages("admit", messages, parts.window, counters=parts.counters)
    results = extract_memories("memories", admission.admitted, parts.extraction)
    skills = distil_task_skills("skills", admission.admitted, parts.distillation)
    store("store", results, skills, admission.refused, sink=parts.sink)

The memory ids are the same as a ``skillstream run`` of the same messages with the same settings.

Below them are the stateful logics they use (admission and spans per conversation, extraction per
owner shard).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, cast

import bytewax.operators as op
from bytewax.dataflow import Stream, operator
from bytewax.operators import StatefulBatchLogic, StatefulLogic

from skillstream import telemetry
from skillstream.admit import Admitted, TimeWindow, admit, refusal, refused
from skillstream.flows.distill import Distillation, distil_task_skills
from skillstream.flows.live import OpenLogic, OpenSpans, conversation_of
from skillstream.flows.maintenance import maintenance_clock
from skillstream.flows.progress import Counters
from skillstream.flows.shards import per_owner, shard_key, shard_of
from skillstream.held import SPANS, OpenState, Wake
from skillstream.model import DeadLetter, Message, Span, SpanResult
from skillstream.pipeline import EvictedOwner, MemoryPipeline, OwnerState
from skillstream.quiet import IdleRule
from skillstream.spans import SpanBuilder, SpanState

__all__ = [
    "Admission",
    "AdmitLogic",
    "Distillation",
    "ExtractLogic",
    "Extraction",
    "SpanLogic",
    "admit_messages",
    "distil_task_skills",
    "extract_memories",
    "per_owner",
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


class SpanLogic(OpenLogic[SpanState]):
    """Per-conversation span builder (``skillstream.spans``) with the open-state rules of
    ``flows.live``: a quiet conversation's span closes on a live stream, an open span is held in
    the home when the input ends that way, and a closed span drops the messages that are already
    inside a done span.

    A message that the span builder cannot take (its text cannot be tokenised, say) leaves as a
    ``DeadLetter``; the conversation goes on without it.

    While its conversation has an open span, the logic counts one in the process's
    ``skillstream_open_spans`` gauge (when the process records metrics).
    """

    stage = SPANS
    _counted = False

    def __init__(
        self, builder: SpanBuilder, resume: SpanState | None, live: OpenSpans | None = None
    ) -> None:
        self.builder = builder
        super().__init__(
            resume, live if live is not None else OpenSpans(IdleRule(builder.idle_gap))
        )

    def on_item(self, value: Any) -> tuple[Iterable[Any], bool]:
        return self._gauged(super().on_item(value))

    def on_notify(self) -> tuple[Iterable[Any], bool]:
        return self._gauged(super().on_notify())

    def on_eof(self) -> tuple[Iterable[Any], bool]:
        return self._gauged(super().on_eof())

    def _gauged(self, out: tuple[Iterable[Any], bool]) -> tuple[Iterable[Any], bool]:
        """Move the open-spans gauge when this conversation's span opened or closed."""
        state = self.state
        is_open = out[1] == StatefulLogic.RETAIN and state is not None and bool(state.messages)
        if is_open != self._counted:
            m = telemetry.metrics()
            if m is not None:
                m.OPEN_SPANS.inc() if is_open else m.OPEN_SPANS.dec()
                self._counted = is_open
        return out

    def copy(self, state: SpanState) -> SpanState:
        return state.copy()

    def fresh(self, now: float) -> SpanState:
        return SpanState(last_seen=now)

    def give_back(self, held: OpenState, messages: list[Message], last_seen: float) -> SpanState:
        return self.builder.resume(messages, held.seq, last_seen)

    def accept(self, state: SpanState, message: Message) -> list[Any]:
        try:  # the builder changes its state only once the message's tokens are counted
            spans = self.builder.add(state, message)
        except Exception as e:  # noqa: BLE001 - one message must not stop its conversation
            reason = f"could not be added to a span ({type(e).__name__}: {e})"
            return [refused(message, reason, stage="spans")]
        return self._final(spans)

    def close(self, state: SpanState) -> list[Any]:
        return self._final(self.builder.flush(state))

    def _final(self, spans: list[Span]) -> list[Any]:
        """Spans as they leave: a span already in the ledger whole (the extraction skips it),
        any other without the messages that are already inside a done span."""
        live = self.live
        if not len(live.done):
            return list(spans)
        out: list[Any] = []
        for span in spans:
            if span.span_id in live.done_spans:
                out.append(span)
                continue
            trimmed = self.builder.trim(span, live.is_done)
            if trimmed is not None:
                out.append(trimmed)
        return out


@dataclass(frozen=True)
class Admission:
    """What :func:`admit_messages` returns: the admitted messages and the refused ones."""

    admitted: Stream[Message]
    refused: Stream[DeadLetter]


@operator
def admit_messages(
    step_id: str,
    messages: Stream[Message],
    window: TimeWindow,
    *,
    counters: Counters | None = None,
) -> Admission:
    """Each conversation admits its messages or refuses them (``skillstream.admit``: the
    timestamp window and unique message ids).

    Put it before :func:`extract_memories` and :func:`distil_task_skills`; give ``refused`` (dead
    letters) to :func:`store`.

    Args:
        step_id: Unique id of this step in your flow.
        messages: ``skillstream.model.Message`` values.
        window: The timestamps a message may carry (``Settings.spans.time_window``).
        counters: The run's counters (refused messages count as ``dead_letters``).
    """
    by_conv = op.key_on("by-conversation", messages, conversation_of)
    judged = op.stateful("admit", by_conv, lambda resume: AdmitLogic(window, resume))
    split = op.branch("admitted", op.key_rm("unkeyed", judged), _is_message)
    refused_letters = cast("Stream[DeadLetter]", split.falses)
    if counters is not None:
        op.inspect(
            "count-refused", refused_letters, counters.counter("dead_letters", stage="admit")
        )
        op.inspect("count-admitted", split.trues, counters.counter("admitted"))
    return Admission(cast("Stream[Message]", split.trues), refused_letters)


def _is_message(item: Message | DeadLetter) -> bool:
    return isinstance(item, Message)


def _is_span(item: Any) -> bool:
    return isinstance(item, Span)


def _is_dead_letter(item: Any) -> bool:
    return isinstance(item, DeadLetter)


@dataclass(frozen=True)
class Extraction:
    """What :func:`extract_memories` runs: the pipeline, the span builder and how owners are
    spread (``Runner.parts()`` builds it from the settings).

    Attributes:
        pipeline: The memory pipeline (executor, memory skills, controller, lifecycle).
        spans: Cuts a conversation's messages into spans (token budget, idle gap, session).
        workers: Bytewax workers of the flow, the whole cluster's.
        shards: Owner shards (setting ``shards``; 0: one per worker).
        concurrency: Owners of a shard extracted at once (setting ``concurrency``).
        max_owners: Owners kept in memory per shard (setting ``owner_state_max``; 0: all).
        counters: The run's counters.
        live: Open spans across time and runs (``flows.live``): the quiet close of a live
            stream, spans held in the home, messages already done. Default: spans close on
            event time and at the input's end only.
        snapshots: Whether the flow keeps Bytewax snapshots (a recovery folder is set). Without
            one, Bytewax still asks for a snapshot at every epoch and drops it, so extraction
            hands it nothing instead of copying every owner's memories.
    """

    pipeline: MemoryPipeline
    spans: SpanBuilder
    workers: int = 1
    shards: int = 0
    concurrency: int = 4
    max_owners: int = 0
    counters: Counters = field(default_factory=Counters)
    live: OpenSpans | None = None
    snapshots: bool = True

    @property
    def shard_count(self) -> int:
        return self.shards or max(1, self.workers)


class ExtractLogic(StatefulBatchLogic[Span, SpanResult, dict]):
    """Extraction for one shard of owners.

    A batch holds spans of many owners. Spans are grouped by owner (keeping their order) and the
    groups run on a shared thread pool, so LLM calls of different owners overlap while each owner's
    spans are applied strictly in order. The state is the owners' memories.

    With ``max_owners`` (setting ``owner_state_max``), at most that many owners stay in memory:
    after each batch the least recently seen ones are evicted (``MemoryPipeline.evict``) and read
    back from the store when they return (``MemoryPipeline.rehydrate``), so memory and snapshots
    stay bounded whatever the number of owners.

    An owner restored from a snapshot is read again from the store when the replay cuts one of
    its spans differently from the run before the crash (a span ``trimmed`` of messages already
    inside done spans): the snapshot's state lacks what those done spans gave.
    """

    def __init__(
        self,
        pipeline: MemoryPipeline,
        pool: ThreadPoolExecutor,
        resume: dict | None,
        max_owners: int = 0,
        counters: Counters | None = None,
        snapshots: bool = True,
    ) -> None:
        self.pipeline = pipeline
        self.pool = pool
        self.max_owners = max_owners
        self.counters = counters if counters is not None else Counters()
        self.snapshots = snapshots
        resume = dict(resume or {})
        self.evicted: dict[str, EvictedOwner] = dict(resume.pop(_EVICTED, None) or {})
        self.owners: dict[str, OwnerState] = resume  # least recently seen first

    def on_batch(self, values: list[Span]) -> tuple[Iterable[SpanResult], bool]:
        def run(owner: str, spans: list[Span]) -> tuple[OwnerState, list[SpanResult]]:
            state = self.owners.get(owner)
            if state is not None and state.run_id != self.pipeline.run_id:
                if any(getattr(s, "trimmed", False) for s in spans):
                    # restored from a snapshot, and the replay cut a span differently: the
                    # snapshot's state lacks what the done spans gave, the store has it
                    state = None
                    self.counters.bump("owners_read_again")
            if state is None:
                gone = self.evicted.get(owner)
                if gone is not None:
                    state = self.pipeline.rehydrate(owner, gone)
                    self.counters.bump("owners_rehydrated")
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
                self.counters.bump("owners_evicted")
        return results, StatefulBatchLogic.RETAIN

    def snapshot(self) -> dict[str, Any]:
        if not self.snapshots:  # no recovery: the snapshot is dropped, so copy nothing
            return {}
        snap: dict[str, Any] = {owner: st.copy() for owner, st in self.owners.items()}
        if self.evicted:
            snap[_EVICTED] = dict(self.evicted)
        return snap


_EVICTED = "\x00evicted"
"""Key of the evicted owners in an extraction snapshot (no owner id starts with a NUL)."""


@operator
def extract_memories(
    step_id: str,
    messages: Stream[Message],
    extraction: Extraction,
    wakes: Stream[Wake] | None = None,
) -> Stream[Any]:
    """Spans and memory extraction for a stream of admitted messages.

    Messages are keyed by conversation and cut into spans (``extraction.spans``); spans are keyed
    by owner shard, get the lifecycle's maintenance ticks, and are extracted with owners of a
    shard running concurrently and each owner's spans in order.

    Args:
        step_id: Unique id of this step in your flow.
        messages: ``skillstream.model.Message`` values (one conversation's messages in order).
        extraction: The pipeline, span builder and shards (``Runner.parts().extraction``).
        wakes: A ``Wake`` per conversation whose open span is held in the home
            (``Runner.parts().wakes``), so that it closes even if the conversation sends nothing.

    Returns:
        ``SpanResult`` values, one per span (``status`` ``done``, ``skipped`` or ``failed``),
        ``MaintenanceResult`` values, a ``DeadLetter`` for a message the span builder could
        not take, and the ``Held`` and ``Released`` records of open spans; give them to
        :func:`store`.
    """
    core = extraction.pipeline
    builder = extraction.spans
    counters = extraction.counters
    workers, shards = max(1, extraction.workers), extraction.shard_count
    pool = ThreadPoolExecutor(
        max_workers=max(1, extraction.concurrency), thread_name_prefix="extract"
    )
    live = extraction.live
    arriving: Stream[Any] = messages
    if wakes is not None:
        arriving = op.merge("with-wakes", messages, wakes)
    by_conv = op.key_on("by-conversation", arriving, conversation_of)
    keyed_spans = op.stateful("spans", by_conv, lambda resume: SpanLogic(builder, resume, live))
    # a message the span builder cannot take (its text cannot be tokenised) is a dead letter;
    # held and released open spans go to the store as they are
    built = op.branch("built", op.key_rm("spans-unkeyed", keyed_spans), _is_span)
    spans = cast("Stream[Span]", built.trues)
    refused_letters = op.filter("refused", built.falses, _is_dead_letter)
    op.inspect("count-refused", refused_letters, counters.counter("dead_letters", stage="spans"))
    by_shard = op.key_on(
        "by-owner-shard", spans, lambda s: shard_key(shard_of(s.owner_id, shards), workers)
    )
    by_shard = maintenance_clock(
        "maintenance-clock", by_shard, core.options.params.maintenance_interval
    )
    keyed_results = op.stateful_batch(
        "extract",
        by_shard,
        lambda resume: ExtractLogic(
            core, pool, resume, extraction.max_owners, counters, extraction.snapshots
        ),
    )
    results = op.key_rm("results-unkeyed", keyed_results)

    def count(step_id: str, r: SpanResult) -> None:
        counters.bump(f"spans_{r.status}")
        counters.bump("memory_changes", len(r.memories))

    op.inspect("count-spans", results, count)
    return op.merge("with-refused", results, built.falses)


@operator
def store(step_id: str, *ups: Stream[Any], sink: Any) -> None:
    """Write results into the home's stores (LanceDB and the catalog).

    Takes the outputs of :func:`extract_memories` and :func:`distil_task_skills` and
    ``DeadLetter`` values; every write is an upsert under deterministic ids, so a replay after a
    crash stores nothing twice. A DuckDB file has one writer (one sink partition); a shared
    catalog has one partition per owner shard, dealt out over every worker of every process
    (``storage.sinks.ResultSink``).

    Args:
        step_id: Unique id of this step in your flow.
        *ups: The streams to store.
        sink: The store sink (``Runner.parts().sink``); it keys each value by its ``route``.
    """
    keyed = [op.map(f"key-{i}", up, sink.route) for i, up in enumerate(ups)]
    merged = keyed[0] if len(keyed) == 1 else op.merge("merge", *keyed)
    op.output("sink", merged, sink)
