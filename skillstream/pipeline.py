"""Per-owner span processing: retrieve, select memory skills, execute, apply, embed (no Bytewax).

``MemoryPipeline.process_owner`` takes one owner's state and that owner's spans in order and returns
one ``SpanResult`` per span. The flow calls it from a stateful operator; a plain batch job or a test
can call it directly.

Replays and re-runs:

* When an owner's state is new in this run, it is hydrated from the memory store and spans already
  in the ledger (read when the flow was built) are skipped, with the maintenance ticks emitted
  before them (their changes were committed with those spans): a second run over the same input
  does no work and adds no rows.
* When the state was restored from a Bytewax snapshot, replayed spans are processed again: the state
  is exactly what it was at the snapshot, processing is deterministic (and LLM answers come from the
  response cache), so the same ids and rows come out and the idempotent sinks absorb them.

Idle owners can be evicted (``evict``) and read back when they return (``rehydrate``): the
memories come back from the store, and what the store does not hold (the open contradictions,
the ones escalated, the last span per conversation) is kept in a small ``EvictedOwner``. An owner
evicted in this run must come back exactly as it left: its memories' ids and versions are compared
with the store's (which the sink may still be writing; the read is retried for a while).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np

from skillstream import telemetry
from skillstream.apply import ApplyOptions, apply_ops, op_texts
from skillstream.embed import Embed
from skillstream.errors import SkillstreamError
from skillstream.extract import (
    AllSkills,
    Controller,
    Executor,
    Extraction,
    ExtractionInput,
    MemorySkill,
)
from skillstream.failures import failed_span_row
from skillstream.lifecycle.states import indexed
from skillstream.memories import OwnerMemories
from skillstream.model import Memory, Span, SpanResult, TableRows
from skillstream.spans import render_span
from skillstream.vectors import LaterVectors, Submit, VectorLookup, submit_now

log = logging.getLogger(__name__)

Hydrate = Callable[[str], "list[Memory] | OwnerMemories"]
"""An owner's memories read back from the store (or a whole ``OwnerMemories``, with what only the
catalog keeps, such as open contradictions)."""


@dataclass
class OwnerState:
    """Bytewax state of one owner: its memories and the run (flow build) that created the state.

    A state whose ``run_id`` differs from the pipeline's was restored from a Bytewax snapshot.
    """

    memories: OwnerMemories
    run_id: str

    def copy(self) -> OwnerState:
        return OwnerState(self.memories.copy(), self.run_id)


@dataclass(frozen=True)
class EvictedOwner:
    """What an evicted owner's state keeps in memory: the bookkeeping the store does not hold and
    a digest of its memories (ids and versions), to check the store's copy against."""

    last_span_seq: dict[str, int]
    open_contradictions: dict[str, tuple[str, str, datetime]]
    escalated: frozenset[str]
    digest: str
    run_id: str
    unindexed: tuple[Memory, ...] = ()
    """Its minimal log rows (expired memories): the catalog holds them, LanceDB does not."""
    topic_members: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Its topic nodes' members (``OwnerMemories.topic_members``)."""


def memories_digest(memories: Iterable[Memory]) -> str:
    """A digest of memories' ids, versions and statuses (independent of their order)."""
    h = hashlib.sha256()
    for line in sorted(f"{m.id}\t{m.version}\t{m.status}" for m in memories):
        h.update(line.encode())
        h.update(b"\n")
    return h.hexdigest()


@dataclass
class PrefetchCounts:
    """How the texts embedded up front fared, over every batch of a pipeline (thread-safe)."""

    predicted: int = 0
    """Distinct texts asked for up front."""
    used: int = 0
    """Of those, texts applying asked for."""
    missed: int = 0
    """Texts applying asked for that were not predicted (each went to the model on its own)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, lookup: VectorLookup) -> None:
        with self._lock:
            self.predicted += len(lookup.rows)
            self.used += len(lookup.used)
            self.missed += lookup.missed


PREFETCH_TEXTS = 256
"""Predicted texts handed to the model at a time while a batch's later spans are predicted."""


class MaintenanceHook(Protocol):
    """Lifecycle maintenance of one owner for a tick of the span stream (``lifecycle.Maintenance``
    is one): changes ``state`` in place and returns its result, or ``None`` when nothing changed.
    With ``later``, the vectors of what it writes may be given when the pipeline settles it."""

    def __call__(
        self, state: OwnerMemories, tick: Any, later: LaterVectors | None = None
    ) -> Any: ...


REHYDRATE_WAIT_S = 60.0
"""How long re-hydration waits for the store to hold what an owner evicted in this run had."""


@dataclass
class MemoryPipeline:
    """Everything needed to turn spans into memory changes."""

    executor: Executor
    embed: Embed
    hydrate: Hydrate | None = None
    controller: Controller = field(default_factory=AllSkills)
    memory_skills: Sequence[MemorySkill] = ()
    done_spans: frozenset[str] = frozenset()
    retrieve_k: int = 20
    options: ApplyOptions = ApplyOptions()
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    maintenance: MaintenanceHook | None = None
    """Lifecycle maintenance for ``MaintenanceTick`` items in the span stream."""
    observe: Callable[[Span, Extraction, list[Memory]], None] | None = None
    """Training only: told, after each span is applied, what the executor proposed and which
    memories changed (rollouts of the memory-skill trainer). ``None`` at inference."""
    submit: Submit | None = None
    """Hands texts to the model and returns at once (``Embedder.submit``), so the model works
    while spans are applied; ``None`` embeds with ``embed`` when asked."""
    prefetch: bool = True
    """Ask the model for the texts a batch of spans is predicted to store before applying them
    (``predicts``)."""
    cut_span: Callable[[Span], list[tuple[str, int]]] | None = None
    """How a span is cut into pieces the model reads whole, with their token counts
    (``spans.span_pieces``); a span's vector pools its pieces' vectors. ``None``: a span's vector
    is of its whole text as the model reads it (the first ``max_tokens`` tokens)."""
    prefetched: PrefetchCounts = field(default_factory=PrefetchCounts)

    @property
    def shows_retrieved(self) -> bool:
        """Whether the executor is shown the owner's memories most similar to the span (an LLM
        executor lists them in its prompt). The offline executor reads the owner's memories by key
        and is shown none: its extractions retrieve nothing and activate nothing."""
        return bool(getattr(self.executor, "reads_retrieved", True))

    @property
    def retrieves(self) -> bool:
        """Whether a span's memories are retrieved: for the executor, or for the controller's
        state (a Top-K or trained controller)."""
        return self.shows_retrieved or bool(getattr(self.controller, "needs_span_vector", False))

    @property
    def needs_span_vector(self) -> bool:
        """Spans are embedded when anything retrieves by them (the executor's context, the
        controller's state) or the executor looks at the vector; memories are then embedded span
        by span, so the next span retrieves them."""
        return bool(self.executor.needs_span_vector or self.retrieves)

    @property
    def predicts(self) -> bool:
        """Whether ``process_owner`` predicts and embeds a batch's texts up front.

        Only for an executor that is ``predictable`` (cheap, no side effects: it may run twice
        for a span), with the plain controller (no span vector, no exploration to disturb), and
        when applying embeds (near-duplicate merging on): then each span's apply would otherwise
        call the model for its own few texts.
        """
        return bool(
            self.prefetch
            and getattr(self.executor, "predictable", False)
            and isinstance(self.controller, AllSkills)
            and not self.needs_span_vector
            and self.options.embed is not None
        )

    def new_state(self, owner_id: str) -> OwnerState:
        got = self.hydrate(owner_id) if self.hydrate is not None else []
        if isinstance(got, OwnerMemories):
            return OwnerState(got, self.run_id)
        mem = OwnerMemories(owner_id)
        for m in got:
            mem.put(m)
        return OwnerState(mem, self.run_id)

    def evict(self, state: OwnerState) -> EvictedOwner:
        """What to keep of ``state`` when its memories leave (to come back from the store)."""
        mem = state.memories
        return EvictedOwner(
            dict(mem.last_span_seq),
            dict(mem.open_contradictions),
            frozenset(mem.escalated),
            memories_digest(mem.items.values()),
            state.run_id,
            tuple(m.copy() for m in mem.items.values() if not indexed(m)),
            dict(mem.topic_members),
        )

    def rehydrate(self, owner_id: str, evicted: EvictedOwner) -> OwnerState:
        """The state of an evicted owner: its memories read back from the store.

        For an owner evicted in this run, the store must hold exactly the memories it had (the sink
        may still be writing the last ones: the read is retried for ``REHYDRATE_WAIT_S``). An
        owner evicted before a restore comes back as the store has it now, which is what a new run
        would see (spans already in the ledger are skipped, as for a new state).
        """
        if self.hydrate is None:
            raise SkillstreamError(f"owner {owner_id!r} was evicted but there is no store to read")
        deadline = time.monotonic() + REHYDRATE_WAIT_S
        while True:
            # The store's copy of the indexed memories, with the minimal rows kept at eviction.
            got = self.hydrate(owner_id)
            found = got.items.values() if isinstance(got, OwnerMemories) else got
            read = {m.id: m for m in found}
            read.update({m.id: m.copy() for m in getattr(evicted, "unindexed", ())})
            memories = list(read.values())
            if evicted.run_id != self.run_id or memories_digest(memories) == evicted.digest:
                break
            if time.monotonic() > deadline:
                raise SkillstreamError(
                    f"owner {owner_id!r} was evicted, but after {REHYDRATE_WAIT_S:g} s the store "
                    "still does not hold its memories as they were; raise owner_state_max"
                )
            time.sleep(0.05)
        mem = OwnerMemories(owner_id)
        for m in memories:
            mem.put(m)
        mem.last_span_seq = dict(evicted.last_span_seq)
        mem.open_contradictions = dict(evicted.open_contradictions)
        mem.escalated = set(evicted.escalated)
        mem.topic_members = dict(getattr(evicted, "topic_members", {}))
        return OwnerState(mem, self.run_id)

    def process_owner(self, state: OwnerState, spans: Iterable[Span]) -> list[SpanResult]:
        """Process ``spans`` of one owner in order, mutating ``state``.

        The model is asked for vectors as early as they are known: the texts the spans are
        predicted to store (``predicts``) before the first span is applied, a tick's summaries when
        the tick runs (they get their vectors at the end, ``LaterVectors``), so
        the model works on them while the spans are applied.
        """
        results = []
        pending: dict[str, Memory] = {}
        defer = not self.needs_span_vector
        spans = list(spans)
        submit = self.submit or submit_now(self.embed)
        lookup = self._prefetch(state, spans, submit) if self.predicts else None
        options = (
            self.options if lookup is None else dataclasses.replace(self.options, embed=lookup)
        )
        # the deferred memory vectors come from the lookup too when they are the same model's
        embed: Embed = lookup if lookup is not None and self.embed == lookup.embed else self.embed
        later = LaterVectors(submit)
        for span in spans:
            restored = state.run_id != self.run_id
            if not isinstance(span, Span):  # a MaintenanceTick (skillstream.lifecycle)
                before = getattr(span, "span_id", None)
                if not restored and before is not None and before in self.done_spans:
                    continue  # committed with its span: the hydrated state already holds it
                done = self.maintenance(state.memories, span, later) if self.maintenance else None
                if done is not None:  # changed in place: re-index what it says it changed
                    state.memories.reindex(getattr(done, "memories", None))
                    results.append(done)
                continue
            if self._skipped(state, span):
                results.append(
                    SpanResult(span=span, status="skipped", extractor=self.executor.name)
                )
                continue
            results.append(self._timed(state, span, pending, defer, options, embed))
        if pending:
            self._embed_into(list(pending.values()), embed)
            for m in pending.values():
                state.memories.touch(m)
        for m in later.settle():
            if state.memories.get(m.id) is m:
                state.memories.touch(m)
        if lookup is not None:
            self.prefetched.add(lookup)
        # Results leave the operator: hand out copies so later spans cannot change them in flight.
        for r in results:
            r.memories = [m.copy() for m in r.memories]
        return results

    def _skipped(self, state: OwnerState, span: Span) -> bool:
        """A span already in the ledger, for an owner not restored from a snapshot."""
        return state.run_id == self.run_id and span.span_id in self.done_spans

    def _prefetch(self, state: OwnerState, items: list[Any], submit: Submit) -> VectorLookup:
        """Predict the texts ``items``' spans will store and ask the model for them now.

        Each span is extracted against the state as it is now (nothing is applied), and its texts
        are cleaned as applying cleans them; every ``PREFETCH_TEXTS`` texts go to the model at
        once, so it starts while later spans are still predicted. Spans that change the state make
        later predictions miss (an update of a memory the batch created, a text an earlier span
        already stored): those texts go to the model when they are applied, as without
        prefetching. A span whose prediction fails predicts nothing; the real pass decides what
        becomes of it.
        """
        model = self.options.embed
        assert model is not None  # ``predicts`` requires it
        lookup = VectorLookup(model, submit)
        texts: list[str] = []
        for span in items:
            if not isinstance(span, Span) or self._skipped(state, span):
                continue
            try:
                # what ``_one`` does for a span, short of applying (``predicts`` holds only for an
                # executor that is shown nothing and the plain controller: nothing is retrieved)
                skills = list(self.memory_skills)
                retrieved: list[Memory] = []
                if skills:
                    retrieved_vecs = [m for m in retrieved if m.vector is not None]
                    skills = self.controller.select(None, retrieved_vecs, skills)
                extraction = self.executor.execute(
                    ExtractionInput(
                        span, render_span(span), retrieved, skills, state.memories, None, self.embed
                    )
                )
                texts.extend(op_texts(span, extraction.ops, self.options).embedded)
            except Exception as e:  # noqa: BLE001 - the real pass reports the span's failure
                log.debug("span %s: no prediction: %s", span.span_id, e)
            if len(texts) >= PREFETCH_TEXTS:
                lookup.add(texts)
                texts = []
        lookup.add(texts)
        return lookup

    def _timed(
        self,
        state: OwnerState,
        span: Span,
        pending: dict[str, Memory],
        defer: bool,
        options: ApplyOptions,
        embed: Embed,
    ) -> SpanResult:
        """:meth:`_one`, in a trace span of its own (its LLM and embedding calls nest inside),
        timed into ``skillstream_span_extraction_seconds``."""
        attributes = {
            "skillstream.span.id": span.span_id,
            "skillstream.span.messages": len(span.messages),
            "skillstream.span.tokens": span.n_tokens,
            "skillstream.extractor": self.executor.name,
        }
        t0 = time.perf_counter()
        with telemetry.span("extract span", attributes) as traced:
            result = self._one(state, span, pending, defer, options, embed)
            if traced is not None:
                traced.set_attribute("skillstream.span.status", result.status)
                traced.set_attribute("skillstream.memory.changes", len(result.memories))
        m = telemetry.metrics()
        if m is not None:
            m.EXTRACTION_SECONDS.labels(result.status).observe(time.perf_counter() - t0)
        return result

    def _one(
        self,
        state: OwnerState,
        span: Span,
        pending: dict[str, Memory],
        defer: bool,
        options: ApplyOptions,
        embed: Embed,
    ) -> SpanResult:
        now = self.clock()
        skills = list(self.memory_skills)
        try:
            text = render_span(span)
            span_vec = self._span_vector(span, text) if self.needs_span_vector else None
            retrieved = state.memories.retrieve(span_vec, self.retrieve_k) if self.retrieves else []
            if skills:
                retrieved_vecs = [m for m in retrieved if m.vector is not None]
                skills = self.controller.select(span_vec, retrieved_vecs, skills)
            shown = retrieved if self.shows_retrieved else []
            # The executor reads the state; only apply_ops below changes it.
            extraction = self.executor.execute(
                ExtractionInput(span, text, shown, skills, state.memories, span_vec, self.embed)
            )
        except Exception as e:  # noqa: BLE001 - one span's failure must not end the run
            if not isinstance(e, SkillstreamError):  # not a known failure: say what it was
                e = SkillstreamError(f"{type(e).__name__}: {e}")
            log.warning("span %s failed: %s", span.span_id, e)
            calls = list(getattr(e, "calls", []) or [])
            attempts = getattr(e, "attempts", 1)
            # The span's messages go to failed_spans so `skillstream retry-failed` can redo it.
            payload = failed_span_row(span, self.executor.name, str(e), attempts, now)
            return SpanResult(
                span=span,
                status="failed",
                extractor=self.executor.name,
                llm_calls=calls,
                memory_skills=[s.name for s in skills],
                controller=getattr(self.controller, "version", None),
                error=str(e)[:2000],
                attempts=attempts,
                processed_at=now,
                rows=TableRows(failed_spans=[payload]),
            )
        for op_text, reason in extraction.rejected:
            log.info("span %s: rejected operation %s: %s", span.span_id, op_text, reason)
        applied = apply_ops(
            state.memories,
            span,
            extraction.ops,
            now,
            options,
            retrieved=[m.id for m in shown],
        )
        changed = list(applied.changed.values())
        need = [applied.changed[i] for i in sorted(applied.needs_vector)]
        if defer:
            for m in need:
                pending[m.id] = m
        else:
            self._embed_into(need, embed)
        if self.observe is not None:
            self.observe(span, extraction, changed)
        return SpanResult(
            span=span,
            status="done",
            extractor=self.executor.name,
            memories=changed,
            events=applied.events,
            llm_calls=extraction.llm_calls,
            memory_skills=extraction.memory_skills or [s.name for s in skills],
            controller=getattr(self.controller, "version", None),
            n_ops=len(extraction.ops),
            processed_at=now,
            rows=applied.rows,
        )

    def _span_vector(self, span: Span, text: str) -> np.ndarray:
        """The span's vector: of its whole text when the model reads it whole, else the mean of
        its pieces' vectors weighted by their tokens (``cut_span``), made unit length again."""
        pieces = self.cut_span(span) if self.cut_span is not None else []
        if len(pieces) <= 1:
            return np.asarray(self.embed([text])[0], dtype=np.float32)
        vectors = np.asarray(self.embed([p for p, _ in pieces]), dtype=np.float32)
        weights = np.asarray([max(n, 1) for _, n in pieces], dtype=np.float32)
        pooled = (vectors * weights[:, None]).sum(axis=0)
        norm = float(np.linalg.norm(pooled))
        return pooled / norm if norm > 0 else vectors[0]

    def _embed_into(self, memories: list[Memory], embed: Embed) -> None:
        if not memories:
            return
        vecs = embed([m.text for m in memories])
        for m, v in zip(memories, vecs):
            m.vector = v
