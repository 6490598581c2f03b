"""A run on a home: the one owner of everything between "here are messages" and "they are stored".

``skillstream run``, ``skillstream.open(home).run`` and ``.add``, ``get_flow`` (for
``python -m bytewax.run``), the LoCoMo evaluation and the benchmarks all run the memory flow
through :class:`Runner`, so they read sources with the same options, admit messages by the same
rules, take the same lock and count the same way:

1. **Source** (:meth:`Runner.source`): a path, glob, list or fsspec URI becomes a ``FileSource``
   with the home's storage options, the message size limit and the sensitive-data redactor; a
   ``kafka://`` URI a Kafka source with the home's librdkafka properties.
2. **Lock** (:meth:`Runner.run`): one run per DuckDB-file home (``storage.lock``); in a cluster
   process 0 holds it for all. A shared catalog takes many writers and has no lock file: a run
   holds a lease there instead (``storage.leases``), which ``forget`` respects.
3. **Reading the home, once** (:meth:`Runner.parts`): the span ledger, the expired memories and
   open contradictions, and the memory-skill bank, in one read-only visit to the catalog; then the
   LanceDB rows the catalog never committed are rolled back. A run scoped to some owners
   (``owners=``, what ``Home.add`` passes) reads and reconciles only theirs, so its cost follows
   its messages, not the home.
4. **Definition** (``flows.memory.build_flow``): wiring only, from the components of step 3.
5. **Execution**: Bytewax's ``cli_main`` (a cluster or a recovery folder) or ``run_main``; the
   run's own :class:`~skillstream.flows.progress.Counters`.
6. **Finish**: the full-text index folds the new rows; a shared catalog is compacted.

Around it all, the run serves the process's Prometheus metrics while it goes on (setting
``metrics_addr``, ``flows.exposition``) and turns OpenTelemetry spans on or off for the process
(setting ``tracing``, ``skillstream.telemetry``).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bytewax.dataflow import Dataflow
from bytewax.inputs import FixedPartitionedSource, Source

from skillstream.embed import TextEmbedder, get_embedder
from skillstream.extract import Executor, MemorySkill
from skillstream.flows.distill import Distillation
from skillstream.flows.live import OpenSpans, Stoppable
from skillstream.flows.memory import FlowParts, build_flow
from skillstream.flows.operators import Extraction
from skillstream.flows.progress import Counters
from skillstream.flows.shards import shard_of
from skillstream.held import BLOCKS, SPANS, OpenState, Wake, open_states
from skillstream.ledger import DoneMessages, content_digest
from skillstream.model import Message
from skillstream.pipeline import MemoryPipeline
from skillstream.quiet import IdleRule, StreamClock
from skillstream.settings import Settings, local_path
from skillstream.spans import SpanBuilder
from skillstream.storage.erasure import ErasedMessages
from skillstream.tokens import get_counter

if TYPE_CHECKING:
    from skillstream.storage.tombstones import OpenContradictions, Tombstones, TopicMembers

log = logging.getLogger(__name__)

__all__ = ["Cluster", "HomeRead", "Runner", "Summary", "open_source"]


@dataclass(frozen=True)
class Cluster:
    """Where this process sits in a Bytewax cluster (one process, one worker by default)."""

    process_id: int | None = None
    addresses: tuple[str, ...] = ()
    workers_per_process: int = 1

    @property
    def processes(self) -> int:
        return max(1, len(self.addresses))

    @property
    def workers(self) -> int:
        """Workers of the whole cluster."""
        return self.workers_per_process * self.processes

    @property
    def first(self) -> bool:
        """Whether this is process 0 (or the only process)."""
        return self.process_id in (None, 0)


@dataclass
class HomeRead:
    """What a run reads from the home before its flow is defined, in one visit to the catalog."""

    done_spans: frozenset[str]
    """Span ids in the ledger (their spans are not extracted again)."""
    expired: Tombstones
    """The minimal rows of expired memories (LanceDB no longer holds them)."""
    contradictions: OpenContradictions
    """Open and escalated contradictions, per owner."""
    memory_skills: list[MemorySkill]
    """The memory-skill bank's active skills."""
    done_messages: DoneMessages = field(default_factory=DoneMessages)
    """Messages inside done spans (a span cut differently drops them)."""
    held: dict[str, dict[tuple[str, str], OpenState]] = field(default_factory=dict)
    """Open spans and blocks held in the home: stage -> (owner id, conversation id) -> state."""
    erased: ErasedMessages = field(default_factory=ErasedMessages)
    """Tombstones of forgotten messages (a replay does not bring them back)."""
    topic_members: TopicMembers | None = None
    """The members of each owner's topic nodes at their last versions (``None``: a new home)."""

    def __post_init__(self) -> None:
        open_ = self.held.get(SPANS, {}).values()
        self._held_messages = DoneMessages(
            (m.owner_id, m.conversation_id, m.message_id, content_digest(m))
            for state in open_
            for m in state.messages
        )

    def edited(self, message: Message) -> bool:
        """Whether the home holds a message of the same owner, conversation and id (in a done
        span, or held open) that says something else."""
        return self.done_messages.edited(message) or self._held_messages.edited(message)


@dataclass
class Summary:
    """What a finished run did (the CLI prints it; ``--json`` gives these keys)."""

    counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    home: str = ""
    stopped: bool = False
    """The run was stopped (a signal) before its input ended; its open spans are held."""

    def as_dict(self) -> dict[str, Any]:
        c = self.counts
        return {
            "messages": c.get("messages", 0),
            "dead_letters": c.get("dead_letters", 0),
            "spans_processed": c.get("spans_done", 0),
            "spans_already_processed": c.get("spans_skipped", 0),
            "spans_failed": c.get("spans_failed", 0),
            "memory_changes": c.get("memory_changes", 0),
            "seconds": round(self.seconds, 2),
            "home": self.home,
            "stopped": self.stopped,
        }

    def line(self) -> str:
        """The summary in one line of words (what ``skillstream run`` prints)."""
        c = self.as_dict()
        return (
            f"read {c['messages']} messages ({c['dead_letters']} dead letters); "
            f"spans: {c['spans_processed']} processed, {c['spans_already_processed']} already "
            f"processed, {c['spans_failed']} failed; {c['memory_changes']} memory changes in "
            f"{c['seconds']} s; home {c['home']}"
        )

    @property
    def all_rejected(self) -> bool:
        """Every record of the input was refused (dead letters, and not one message)."""
        return self.counts.get("messages", 0) == 0 and self.counts.get("dead_letters", 0) > 0


RESUME = (
    "run the same command again to go on: spans already stored are skipped and the open spans "
    "held in the home are taken up again"
)
"""How to go on after a run that was stopped or interrupted (every face says it the same way)."""


def dead_letters_command(home: str) -> str:
    """The command that lists a home's latest dead letters, with their reasons."""
    query = "select source, position, reason from dead_letters order by recorded_at desc limit 20"
    return f'skillstream --home {home} sql "{query}"'


def open_source(
    settings: Settings,
    source: str | Path | Sequence[str | Path],
    *,
    format: str = "auto",
    mapping: Mapping[str, str] | None = None,
    kafka_config: Mapping[str, str] | None = None,
    tail: bool | None = None,
    owner: str | None = None,
) -> Source:
    """The Bytewax source for a path, glob, list of them, fsspec URI or ``kafka://`` URI, with
    every option a run applies (message size limit, redaction, storage options).

    ``owner``: the owner of every message of the files, in place of their ``user_id`` (and of
    its default, the conversation id): for chat exports whose owner is the account.

    Raises:
        InputError: a bad source or option (``owner`` with a Kafka topic, whose records name
            their owners).
    """
    from skillstream.errors import InputError
    from skillstream.redact import redactor_for

    if isinstance(source, str) and source.startswith("kafka://"):
        from skillstream.connectors.kafka import kafka_source

        if owner is not None:
            raise InputError("--owner applies to files; a Kafka record names its owner (user_id)")

        return kafka_source(source, settings, config=kafka_config or {}, tail=tail)
    from skillstream.connectors.files import FileSource
    from skillstream.storage.home import storage_options

    paths: str | list[str | Path]
    if isinstance(source, str | Path):
        paths = str(source)
    else:
        paths = [str(p) for p in source]
    return FileSource(
        paths,
        format=format,
        mapping=dict(mapping) if mapping else None,
        max_chars=settings.spans.max_message_chars,
        redactor=redactor_for(settings.lifecycle.policies),
        owner_id=owner,
        storage_options=storage_options(settings),
    )


class Runner:
    """One run of the memory flow on the home of ``settings``.

    Args:
        settings: The home and every setting of the run.
        executor: The executor (default: the configured backend's).
        embedder: The embedding model (default: the settings' shared one).
        cluster: Where this process sits in a Bytewax cluster.
        recovery_dir: Bytewax recovery folder; a rerun resumes from it.
        events_to: ``kafka://HOST:PORT/TOPIC`` for memory change events.
        owners: Only these owners' messages are run (``Home.add``): the home is read and
            reconciled for them alone.
        flow_id: The Bytewax flow id (recovery snapshots are kept per flow id).
        lock: Take the home's run lock while the flow runs (a DuckDB-file home, process 0).
        signals: Stop cleanly on SIGTERM and SIGINT, as the command line does: the source stops
            reading, the open spans are held in the home, what is in flight is written, and
            the run returns (``stop_timeout_s`` bounds it). Runs with Bytewax's ``cli_main``.
        live: Close a quiet conversation's open span in processing time (``skillstream.quiet``);
            default: for a source that never ends (a Kafka topic followed).
        hold: Hold open spans in the home at the input's end instead of closing them, except
            those whose conversation is already quiet (``Home.add``).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        executor: Executor | None = None,
        embedder: TextEmbedder | None = None,
        cluster: Cluster | None = None,
        recovery_dir: str | Path | None = None,
        events_to: str | None = None,
        owners: Sequence[str] | None = None,
        flow_id: str = "skillstream-memory",
        lock: bool = True,
        signals: bool = False,
        live: bool | None = None,
        hold: bool = False,
    ) -> None:
        self.settings = settings
        self.executor = executor
        self.cluster = cluster or Cluster()
        self.recovery_dir = Path(recovery_dir) if recovery_dir else None
        self.events_to = events_to
        self.owners = sorted(set(owners)) if owners is not None else None
        self.flow_id = flow_id
        self.lock = lock
        self.signals = signals
        self.live = live
        self.hold = hold
        self.stopping = threading.Event()
        """Set when the run was asked to stop (a signal, or :meth:`stop`)."""
        self.started = time.time()
        self.counters = Counters()
        """This run's counters (the progress bar reads them while the run goes on)."""
        self.metrics_url: str | None = None
        """Where the run's metrics are served while it runs (setting ``metrics_addr``)."""
        self.collect: Callable[[Any], None] | None = None
        """Called with every span and task-skill result of the run (``Home.add`` keeps them)."""
        self._embedder = embedder

    # ------------------------------------------------------------------ parts
    @property
    def embedder(self) -> TextEmbedder:
        if self._embedder is None:
            self._embedder = get_embedder(self.settings.embedding)
        return self._embedder

    def source(self, source: str | Path | Sequence[str | Path], **options: Any) -> Source:
        """:func:`open_source` with this run's settings."""
        return open_source(self.settings, source, **options)

    def prepare(self) -> None:
        """Create the home's local folders (a remote home needs none)."""
        storage = self.settings.storage
        if not storage.remote:
            local_path(storage.home).mkdir(parents=True, exist_ok=True)
        if not storage.shared_catalog:
            Path(storage.catalog).parent.mkdir(parents=True, exist_ok=True)

    def read_home(self) -> HomeRead:
        """The ledger, tombstones and memory-skill bank of the run's owners (all without
        ``owners``), in one read-only visit to the catalog."""
        from skillstream.memskill.bank import MemorySkillBank
        from skillstream.memskill.seeds import PRIMITIVES
        from skillstream.storage.catalog import catalog_exists, open_catalog
        from skillstream.storage.tombstones import (
            OpenContradictions,
            Tombstones,
            TopicMembers,
            node_members,
        )

        if not catalog_exists(self.settings.storage):
            return HomeRead(frozenset(), Tombstones(), OpenContradictions(), list(PRIMITIVES))
        cat = open_catalog(self.settings.storage, read_only=True)
        try:
            return HomeRead(
                frozenset(cat.processed_span_ids(self.owners)),
                Tombstones.read(cat, owner_ids=self.owners),
                OpenContradictions.read(cat, owner_ids=self.owners),
                MemorySkillBank(cat).active_skills(),
                DoneMessages(cat.done_messages(self.owners)),
                open_states(cat.open_messages(self.owners)),
                ErasedMessages.read(cat),
                TopicMembers(node_members(cat, owner_ids=self.owners)),
            )
        finally:
            cat.close()

    def memory_pipeline(self) -> MemoryPipeline:
        """:meth:`pipeline` over a fresh :meth:`read_home` (a pipeline outside a flow)."""
        return self.pipeline(self.read_home())

    def pipeline(self, read: HomeRead) -> MemoryPipeline:
        """The memory pipeline of the run: owners hydrated from LanceDB (opened on first need)
        with their expired memories and open contradictions from ``read``."""
        from skillstream.services.pipeline import build_pipeline, store_hydrate

        settings = self.settings
        hydrate = store_hydrate(
            settings, self.embedder.dim, read.expired, read.contradictions, read.topic_members
        )
        return build_pipeline(
            settings,
            self.embedder,
            executor=self.executor,
            hydrate=hydrate,
            done_spans=read.done_spans,
            bank=read.memory_skills,
        )

    def parts(self) -> FlowParts:
        """Read the home once, reconcile it, and build the flow's components."""
        from skillstream.storage.sinks import ResultSink

        settings, cluster = self.settings, self.cluster
        embedder = self.embedder
        read = self.read_home()
        pipeline = self.pipeline(read)
        workers, flow = cluster.workers, settings.flow
        shards = flow.shards or max(1, workers)
        sink = ResultSink(
            settings,
            embedder.dim,
            shards=shards,
            shard=lambda owner: shard_of(owner, shards),
            cluster=(cluster.process_id or 0, cluster.processes, cluster.workers_per_process),
            checkpoint=self.owners is None,
        )
        self._reconcile(sink)
        counter = get_counter(settings.embedding.model)
        gap = settings.spans.idle_gap
        spans = SpanBuilder(counter.count, settings.spans.span_tokens, gap)
        rule = IdleRule(gap, live=bool(self.live) or self.hold)
        clock = StreamClock()
        floor = 0.0 if self.hold else self.started

        def open_spans(stage: str, done: DoneMessages, done_spans: frozenset[str]) -> OpenSpans:
            held = dict(read.held.get(stage, {}))
            return OpenSpans(rule, clock, held, done, done_spans, self.stopping, self.hold, floor)

        extraction = Extraction(
            pipeline,
            spans,
            workers=workers,
            shards=flow.shards,
            concurrency=flow.concurrency,
            max_owners=flow.owner_state_max,
            counters=self.counters,
            live=open_spans(SPANS, read.done_messages, read.done_spans),
            snapshots=self.recovery_dir is not None,
        )
        distillation = None
        if settings.distillation.enabled:
            from skillstream.services.distillation import build_distiller

            distillation = Distillation(
                build_distiller(settings, embedder),
                settings.spans.idle_gap,
                workers=workers,
                shards=flow.shards,
                concurrency=flow.concurrency,
                counters=self.counters,
                live=open_spans(BLOCKS, DoneMessages(), frozenset()),
            )
        stages = [SPANS, BLOCKS] if distillation is not None else [SPANS]
        now, quiet = time.time(), gap.total_seconds()
        wakes = sorted(
            {
                Wake(owner, conversation)
                for stage in stages
                for (owner, conversation), state in read.held.get(stage, {}).items()
                # holding: only those that may close now; a conversation of the input's own
                # messages takes its state back when they come
                if state.messages and (not self.hold or now - state.last_seen > quiet)
            },
            key=lambda w: (w.owner_id, w.conversation_id),
        )
        events = None
        if self.events_to:
            from skillstream.connectors.kafka import memory_events_sink

            events = memory_events_sink(self.events_to, settings)
        return FlowParts(
            window=replace(settings.spans.time_window, edited=read.edited),
            erased=read.erased,
            extraction=extraction,
            sink=sink,
            distillation=distillation,
            events=events,
            counters=self.counters,
            collect=self.collect,
            wakes=wakes,
        )

    def _reconcile(self, sink: Any) -> None:
        """Roll back LanceDB rows the catalog never committed: every owner of a DuckDB file (in
        process 0), or the owners this process's partitions write on a shared catalog; only the
        run's owners when it has some."""
        from skillstream.storage.reconcile import reconcile_home

        storage = self.settings.storage
        if storage.shared_catalog:
            # Create the shared catalog's tables now, before the store partitions open it at once.
            from skillstream.storage.catalog import open_catalog

            open_catalog(storage).close()
        elif not self.cluster.first:
            return
        mine = sink.owns(self.cluster.process_id or 0) if storage.shared_catalog else None
        reconcile_home(
            self.settings, self.embedder.dim, self.embedder.encode, owners=mine, only=self.owners
        )

    def dataflow(self, source: Source) -> Dataflow:
        """The memory dataflow of this run over ``source`` (reads the home; see :meth:`parts`)."""
        if self.live is None:
            self.live = bool(getattr(source, "tail", False))
        self.prepare()
        return build_flow(self.parts(), source, flow_id=self.flow_id)

    # ------------------------------------------------------------------ running
    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the home's run lock (a DuckDB-file home, process 0), or a run lease on a shared
        catalog (``storage.leases``: other writers may run, ``forget`` waits for none)."""
        storage = self.settings.storage
        if not self.lock or not self.cluster.first:
            with nullcontext():
                yield
            return
        if storage.shared_catalog:  # many writers: the run only announces itself
            from skillstream.storage.leases import run_lease

            with run_lease(storage):
                yield
            return
        from skillstream.storage.lock import run_lock

        self.prepare()
        with run_lock(storage.catalog, storage.home):
            yield

    def run(self, source: Source) -> Summary:
        """Lock the home, read it, run the flow over ``source`` and finish; the run's summary.

        Its metrics are served on setting ``metrics_addr`` while it runs; spans are emitted
        when setting ``tracing`` is on."""
        from skillstream import telemetry
        from skillstream.flows.exposition import serving

        telemetry.set_tracing(self.settings.telemetry.tracing)
        with serving(self.settings.telemetry) as self.metrics_url, self.locked():
            if self.live is None:
                self.live = bool(getattr(source, "tail", False))
            if self.signals and isinstance(source, FixedPartitionedSource):
                source = Stoppable(source, self.stopping)
            flow = self.dataflow(source)
            t0 = time.perf_counter()
            with self._stop_on_signals():
                self.execute(flow)
            seconds = time.perf_counter() - t0
            self.finish()
        return self.summary(seconds)

    def summary(self, seconds: float | None = None) -> Summary:
        """The run's summary now: its counts, ``seconds`` (default: since the runner was made),
        the home, and whether it was stopped."""
        return Summary(
            self.counters.snapshot(),
            time.time() - self.started if seconds is None else seconds,
            self.settings.storage.home,
            stopped=self.stopping.is_set(),
        )

    def refused_all(self) -> str:
        """Why a run read no message at all from an input of records (see
        ``Summary.all_rejected``): the reason most of its dead letters give, and how to see them.
        """
        from datetime import UTC, datetime

        from skillstream.storage.catalog import catalog_exists, open_catalog

        storage, since = self.settings.storage, datetime.fromtimestamp(self.started, UTC)
        top = None
        if catalog_exists(storage):
            with open_catalog(storage, read_only=True) as cat:
                top = cat.con.execute(
                    "SELECT reason, count(*) FROM dead_letters WHERE recorded_at >= ? "
                    "GROUP BY reason ORDER BY 2 DESC, 1 LIMIT 1",
                    [since],
                ).fetchone()
        dead = self.counters.snapshot().get("dead_letters", 0)
        why = f"; the commonest reason ({top[1]} of {dead}): {top[0]}" if top else ""
        return (
            f"every record of the input was refused: {dead} dead letters and not one message"
            f"{why}; check --format and --map against the input; see the dead letters with: "
            f"{dead_letters_command(storage.home)}"
        )

    def stop(self) -> None:
        """Ask the run to stop cleanly (what SIGTERM does): its source stops reading, open spans
        are held in the home, and what is in flight is written."""
        self.stopping.set()

    @contextmanager
    def _stop_on_signals(self) -> Iterator[None]:
        """SIGTERM and SIGINT stop the run cleanly (:meth:`stop`); if it has not stopped
        ``stop_timeout_s`` later, the process exits with code 1 (what was written stays written,
        and the next run goes on from the ledger and the held spans). A second signal stops at
        once."""
        if not self.signals or threading.current_thread() is not threading.main_thread():
            yield
            return
        timeout = self.settings.flow.stop_timeout_s

        def overdue() -> None:
            log.error(
                "the run did not stop within %.0f s (setting stop_timeout_s); exiting now: "
                "the next run goes on from what was written",
                timeout,
            )
            logging.shutdown()
            os._exit(1)

        def handle(signum: int, frame: Any) -> None:
            if self.stopping.is_set():
                signal.signal(signal.SIGINT, signal.default_int_handler)
                raise KeyboardInterrupt
            log.warning(
                "%s: stopping (open spans are held in the home; at most %.0f s)",
                signal.Signals(signum).name,
                timeout,
            )
            self.stop()
            watchdog = threading.Timer(timeout, overdue)
            watchdog.daemon = True
            watchdog.start()

        previous = {s: signal.signal(s, handle) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for s, h in previous.items():
                signal.signal(s, h)

    def execute(self, flow: Dataflow) -> None:
        """Run ``flow`` with Bytewax: ``cli_main`` for the command line, a cluster or a recovery
        folder; else ``cluster_main`` for several workers or ``run_main`` in this thread."""
        cluster = self.cluster
        if self.signals or cluster.addresses or self.recovery_dir:
            from bytewax.recovery import RecoveryConfig
            from bytewax.run import cli_main

            recovery = None
            if self.recovery_dir is not None:
                recovery = RecoveryConfig(str(ensure_recovery(self.recovery_dir)))
            cli_main(
                flow,
                workers_per_process=cluster.workers_per_process,
                process_id=cluster.process_id,
                addresses=list(cluster.addresses) or None,
                epoch_interval=timedelta(seconds=self.settings.flow.epoch_interval_s),
                recovery_config=recovery,
            )
            return
        from bytewax.testing import cluster_main, run_main

        epoch = timedelta(seconds=self.settings.flow.epoch_interval_s)
        if cluster.workers_per_process > 1:
            cluster_main(
                flow, [], 0, worker_count_per_proc=cluster.workers_per_process, epoch_interval=epoch
            )
        else:
            run_main(flow, epoch_interval=epoch)

    def finish(self) -> None:
        """Fold new rows into the full-text index and compact a shared catalog (process 0; a run
        scoped to some owners leaves both to the next whole run, and a one-process run that
        stored nothing leaves them to the next run that does: its start-up stays small)."""
        if not self.cluster.first or self.owners is not None:
            return
        counts = self.counters.snapshot()
        if self.cluster.processes == 1 and not (
            counts.get("spans_done", 0) or counts.get("memory_changes", 0)
        ):
            return
        try:
            from skillstream.storage.home import open_index

            open_index(self.settings, self.embedder.dim).optimize()
        except Exception as e:  # noqa: BLE001 - an index refresh must not fail a finished run
            log.warning("could not optimise the memory index: %s", e)
        if self.settings.storage.shared_catalog:
            try:
                from skillstream.storage.catalog import open_catalog

                with open_catalog(self.settings.storage) as catalog:
                    files = catalog.compact()
                log.info("shared catalog compacted: %s", files)
            except Exception as e:  # noqa: BLE001 - upkeep must not fail a finished run
                log.warning("could not compact the shared catalog: %s", e)


def ensure_recovery(path: Path, partitions: int = 4) -> Path:
    """Create and initialise a recovery folder on first use."""
    from bytewax.recovery import init_db_dir

    path.mkdir(parents=True, exist_ok=True)
    if not any(path.glob("part-*.sqlite3")):
        init_db_dir(path, partitions)
    return path
