"""Ingest throughput against the embedding bound of the same texts, and its flatness over history.

    python benchmarks/ingest.py --data ../shared/data/locomo/locomo-dev.json \
        --json benchmarks/results/ingest.json

Three measurements, from one run, with the model loaded and the store libraries imported first:

1. **Flow.** The whole memory flow (Bytewax, rules backend, LanceDB + DuckDB sinks) over every
   message of ``--data`` into a fresh temporary home: ``turns_per_s``. Every text the flow hands to
   the embedding model is recorded (memories, summaries, task-skill texts, queries: everything).
2. **Embedding bound.** The same recorded texts embedded alone, in the model's optimal batches
   (length-sorted, ``embed_batch`` at a time): what the flow would cost if it did nothing but
   embed. ``embed_bound_ratio`` = bound seconds / flow seconds: 1.0 means the flow spends all its
   time in the model. ``turns_ratio`` is the older figure: the turn texts alone embedded against
   the flow (it ignores that the flow embeds more than the turns).

   Where the difference goes is counted in CPU seconds: the process's CPU during the flow
   (``flow_cpu_seconds``; ``flow_cpu_share`` = that / (cores x flow seconds), 1.0 when no core
   ever waited), the part of it spent inside model batches (``flow_model_cpu_seconds``, each
   batch's thread CPU) and the rest (``flow_other_cpu_seconds``: extraction, applying, the
   stores, Bytewax), against the bound's own model CPU (``bound_model_cpu_seconds``;
   ``model_batch_efficiency`` = bound / flow model CPU, 1.0 when the flow's batches cost what
   the bound's do; above 1.0 when they cost less, as when the bound's threads, all busy at
   once, slow each other down on cores that share caches). ``embed_bound_ratio_at_full_use`` =
   bound seconds / (flow CPU seconds / cores) is the ratio the flow would reach with the work it
   does if no core ever waited: the ratio is short of 1.0 by the work other than the model (and
   batches less full than the bound's) and by the cores' waits, and these keys tell the two
   apart.

   Flow and bound are measured interleaved (flow, bound, turns, flow, bound, turns, ...;
   ``--rounds``, at least three) and reported as medians with their min and max, so that a change
   of load on a shared machine shows as spread instead of moving one side only.
3. **History.** The messages of ``--data`` rewritten to belong to one owner and cut into ten
   consecutive tenths, which one flow run takes in turn: a tenth goes in once the flow has done
   everything the last one gave it (no operator has run for ``QUIET_S``). A tenth's time runs from
   handing it in to the flow's last activity on it; its turns are those of the spans extracted in
   that time (a conversation's last span waits for its next message, so it is extracted with the
   next tenth). ``history_turns_per_s`` per tenth and ``history_flatness`` = last tenth / first
   tenth (1.0: an owner's growing history costs a span nothing).
   The tenths differ in content too (other sessions, other maintenance ticks), so each tenth is
   also run alone the same way into an empty home: ``history_fresh_turns_per_s`` and
   ``history_fresh_flatness``; ``history_cost_by_tenth`` = fresh turns/s / in-history turns/s of
   each tenth (1.0: that tenth paid nothing for the history before it; ``null`` for a tenth in
   which no span finished during the history run, as in a dataset too small for tenths).
   One history run measures each tenth once, and a tenth lasts a few seconds: the history run and
   the tenths alone are repeated ``--history-rounds`` times (at least three), interleaved, and
   each tenth's turns/s is the median of its rounds; ``history_flatness`` is the median of the
   rounds' own flatness, with its spread (``history_flatness_spread``), and so is the fresh one.
   What a tenth asks of the model is counted too: the characters of the texts the flow hands to
   it while the tenth is worked on, in history and alone (``history_embedded_chars_by_tenth``,
   ``history_fresh_embedded_chars_by_tenth``), and ``history_text_growth`` = last tenth / first
   tenth in history. With the model as the bottleneck, a tenth's time follows the text it
   embeds, so flatness follows 1 / ``history_text_growth`` (times the tenths' ratio of turns).
   Each round also runs the history with the reorganizer off (``reorganize = false``: no topic
   nodes, whose upkeep grows with the clusters):
   ``history_turns_per_s_without_topic_nodes``, ``history_flatness_without_topic_nodes`` and
   ``history_embedded_chars_without_topic_nodes``, to tell the cost of the nodes from the rest.
   What restarting costs is measured apart: each tenth as a run of its own into one home, as a
   backfill in daily pieces runs (every run reads the owner's memories back from the store):
   ``history_runs_turns_per_s`` and ``history_runs_flatness``, with the same rounds (a home of
   its own per round, interleaved with the rest): each tenth's median and the median of the
   rounds' own flatness, with its spread (``history_runs_flatness_spread``).
   Data whose conversations each end within a tenth (one short session each, as STAR's dialogues)
   has no history figures: a conversation's last span waits for its next message, so nothing is
   extracted before the input ends.

Results go to ``--json``, a markdown table beside it (``.md``) and the history curves as a PNG
(``.png``: turns/s and characters embedded by tenth).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent
LONG_OWNER = "long-lived-owner"


class Recorder:
    """Wraps the shared embedder's ``submit`` (every other entry point goes through it) to keep
    every text the flow hands to the model."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.inner = embedder.submit
        self.texts: list[str] = []
        embedder.submit = self.submit

    def submit(self, texts: Sequence[str]) -> Any:
        self.texts.extend(texts)
        return self.inner(texts)


class ModelClock:
    """Sums the CPU time the model's threads spend inside model batches (``Embedder._compute``,
    wrapped on the instance; ``time.thread_time`` of the thread running the batch). Another
    embedder (a remote API) has no such batches: ``seconds`` stays 0."""

    def __init__(self, embedder: Any) -> None:
        self.seconds = 0.0
        self._lock = threading.Lock()
        inner = getattr(embedder, "_compute", None)
        if inner is None:
            return

        def timed(batch: Any) -> Any:
            t0 = time.thread_time()
            try:
                return inner(batch)
            finally:
                spent = time.thread_time() - t0
                with self._lock:
                    self.seconds += spent

        embedder._compute = timed

    def take(self) -> float:
        """The seconds summed since the last ``take``."""
        with self._lock:
            spent, self.seconds = self.seconds, 0.0
        return spent


def cpu_seconds() -> float:
    """CPU seconds of this process so far (user and system, every thread)."""
    t = os.times()
    return t.user + t.system


def read_records(path: str, fmt: str) -> list[Any]:
    from skillstream.connectors.files import FileSource, read_all

    return [m for m in read_all(FileSource(path, format=fmt)) if hasattr(m, "text")]


def run_flow(settings: Any, source: Any) -> tuple[float, dict[str, int], int]:
    """One flow run; returns its seconds, its progress counters and the memories stored."""
    from skillstream.flows.runner import Runner
    from skillstream.storage.home import open_index

    runner = Runner(settings)
    t0 = time.perf_counter()
    runner.execute(runner.dataflow(source))
    seconds = time.perf_counter() - t0
    return seconds, runner.counters.snapshot(), open_index(settings, runner.embedder.dim).count()


def bound_seconds(embedder: Any, texts: list[str]) -> float:
    """Seconds the model takes for ``texts`` in optimal batches (``forward`` sorts by length)."""
    t0 = time.perf_counter()
    embedder.forward(list(texts))
    return time.perf_counter() - t0


def spread(values: list[float], digits: int = 3) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
    }


def long_history(records: list[Any], folder: Path, slices: int = 10) -> list[Path]:
    """The records as one owner's history, in ``slices`` consecutive JSONL files."""
    ordered = sorted(records, key=lambda m: (m.ts, m.conversation_id, m.position or 0))
    paths = []
    slices = max(1, min(slices, len(ordered)))
    bounds = [len(ordered) * i // slices for i in range(slices + 1)]
    for i in range(slices):
        path = folder / f"history-{i:02d}.jsonl"
        with path.open("w", encoding="utf-8") as f:
            for m in ordered[bounds[i] : bounds[i + 1]]:
                row = {
                    "conversation_id": f"{LONG_OWNER}:{m.conversation_id}",
                    "user_id": LONG_OWNER,
                    "session_id": m.session_id,
                    "message_id": m.message_id,
                    "role": m.role,
                    "name": m.speaker,
                    "content": m.text,
                    "timestamp": m.ts.isoformat(),
                }
                f.write(json.dumps(row) + "\n")
        paths.append(path)
    return paths


QUIET_S = 0.15
"""A tenth is done once no operator of the flow has run for this long."""


class Activity:
    """When the flow's working operators last ran, and the turns of the spans it extracted: the
    span builder, extraction, distillation and the store sink are wrapped for one flow run."""

    def __init__(self) -> None:
        self.last = time.perf_counter()
        self.turns = 0
        self._undo: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> Activity:
        from skillstream.flows.distill import DistillLogic
        from skillstream.flows.operators import ExtractLogic, SpanLogic
        from skillstream.storage.sinks import _StorePartition

        self._wrap(SpanLogic, "on_item")
        self._wrap(ExtractLogic, "on_batch", count=True)
        self._wrap(DistillLogic, "on_batch")
        self._wrap(_StorePartition, "write_batch")
        return self

    def __exit__(self, *exc: Any) -> None:
        for cls, name, f in self._undo:
            setattr(cls, name, f)

    def _wrap(self, cls: Any, name: str, count: bool = False) -> None:
        from skillstream.model import Span

        inner = getattr(cls, name)
        self._undo.append((cls, name, inner))
        activity = self

        def wrapped(obj: Any, values: Any, *a: Any, **k: Any) -> Any:
            if count:
                activity.turns += sum(len(v.messages) for v in values if isinstance(v, Span))
            try:
                return inner(obj, values, *a, **k)
            finally:
                activity.last = time.perf_counter()

        setattr(cls, name, wrapped)


def run_tenths(
    settings: Any, tenths: list[list[Any]], recorder: Recorder | None = None
) -> tuple[list[float], list[int]]:
    """One flow run that takes ``tenths`` in turn (see the module docstring): the turns/s of each
    tenth, and the characters of the texts handed to the model in the same time (with a
    ``recorder``; else none)."""
    from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition

    from skillstream.flows.runner import Runner

    rates: list[float] = []
    chars: list[int] = []
    activity = Activity()

    class Partition(StatefulSourcePartition[Any, None]):
        def __init__(self) -> None:
            self.next = 0
            self.started = 0.0
            self.turns = 0
            self.texts = 0  # the recorder's texts when the tenth was handed in

        def next_batch(self) -> list[Any]:
            now = time.perf_counter()
            if self.next and now - activity.last < QUIET_S:
                return []  # the tenth handed in last is still being worked on
            if self.next:
                seconds = activity.last - self.started
                rates.append((activity.turns - self.turns) / seconds)
                if recorder is not None:
                    chars.append(sum(map(len, recorder.texts[self.texts :])))
            if self.next == len(tenths):
                raise StopIteration()
            batch = tenths[self.next]
            self.next += 1
            self.started, self.turns = time.perf_counter(), activity.turns
            self.texts = len(recorder.texts) if recorder is not None else 0
            activity.last = self.started
            return batch

        def next_awake(self) -> datetime | None:
            return datetime.now(UTC) + timedelta(milliseconds=5)

        def snapshot(self) -> None:
            return None

    class Tenths(FixedPartitionedSource[Any, None]):
        def list_parts(self) -> list[str]:
            return ["history"]

        def build_part(self, step_id: str, for_part: str, resume_state: None) -> Partition:
            return Partition()

    with activity:
        runner = Runner(settings)
        runner.execute(runner.dataflow(Tenths()))
    return rates, chars


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=str(ROOT / "data" / "sample"))
    p.add_argument("--format", default="auto")
    p.add_argument("--json", dest="out", required=True, help="results file (and .md beside it)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (at least 3)")
    p.add_argument(
        "--history-rounds", type=int, default=3, help="history runs, each tenth's median taken"
    )
    p.add_argument("--skip-history", action="store_true")
    args = p.parse_args(argv)
    if args.rounds < 3:
        p.error("--rounds must be at least 3: the ratio is a median of interleaved rounds")
    if args.history_rounds < 3:
        p.error("--history-rounds must be at least 3: a tenth's rate is a median of rounds")

    import duckdb  # noqa: F401  (the store libraries are imported before timing)
    import lancedb  # noqa: F401

    import skillstream.storage.sinks  # noqa: F401
    from skillstream.connectors.files import FileSource
    from skillstream.embed import get_embedder, usable_cpus
    from skillstream.settings import Settings

    embedder = get_embedder(Settings.from_keys().embedding)
    embedder.encode(["warm up"])
    records = read_records(args.data, args.format)
    turns = [m.text for m in records]
    recorder = Recorder(embedder)
    clock = ModelClock(embedder)
    cores = usable_cpus()

    flow_s: list[float] = []
    bound_s: list[float] = []
    turns_s: list[float] = []
    flow_cpu: list[float] = []  # the process's CPU seconds during the flow
    flow_model: list[float] = []  # of them, inside model batches
    bound_model: list[float] = []  # CPU seconds inside model batches during the bound
    counts: dict[str, int] = {}
    memories = 0
    for _ in range(args.rounds):
        recorder.texts = []
        clock.take()
        with tempfile.TemporaryDirectory(prefix="ss-bench-") as home:
            cpu0 = cpu_seconds()
            seconds, counts, memories = run_flow(
                Settings.from_keys(home=home), FileSource(args.data, format=args.format)
            )
            flow_cpu.append(cpu_seconds() - cpu0)
        flow_s.append(seconds)
        flow_model.append(clock.take())
        embedded = list(recorder.texts)
        bound_s.append(bound_seconds(embedder, embedded))
        bound_model.append(clock.take())
        turns_s.append(bound_seconds(embedder, turns))

    histories: list[list[float]] = []  # per round, turns/s of each tenth
    freshes: list[list[float]] = []
    history_chars: list[list[int]] = []  # per round, characters embedded in each tenth
    no_nodes: list[list[float]] = []  # the same history without topic nodes
    no_nodes_chars: list[list[int]] = []
    fresh_chars: list[list[int]] = []
    runs: list[list[float]] = []  # per round, turns/s of each tenth run on its own
    if not args.skip_history:
        from skillstream.connectors.files import read_all

        with tempfile.TemporaryDirectory(prefix="ss-bench-history-") as tmp:
            paths = long_history(records, Path(tmp))
            tenths = [list(read_all(FileSource(str(p), format="jsonl"))) for p in paths]
            for r in range(args.history_rounds):
                settings = Settings.from_keys(home=str(Path(tmp) / f"home-{r}"))
                rates, chars = run_tenths(settings, tenths, recorder)
                histories.append(rates)
                history_chars.append(chars)
                bare = Settings.from_keys(home=str(Path(tmp) / f"bare-{r}"), reorganize=False)
                rates, chars = run_tenths(bare, tenths, recorder)
                no_nodes.append(rates)
                no_nodes_chars.append(chars)
                fresh_round: list[float] = []
                fresh_round_chars: list[int] = []
                for i, tenth in enumerate(tenths):
                    alone = Settings.from_keys(home=str(Path(tmp) / f"fresh-{r}-{i:02d}"))
                    rates, chars = run_tenths(alone, [tenth], recorder)
                    fresh_round += rates
                    fresh_round_chars += chars
                freshes.append(fresh_round)
                fresh_chars.append(fresh_round_chars)
                restarted = Settings.from_keys(home=str(Path(tmp) / f"runs-{r}"))
                runs_round: list[float] = []
                for path, tenth in zip(paths, tenths, strict=True):
                    seconds, _, _ = run_flow(restarted, FileSource(str(path), format="jsonl"))
                    runs_round.append(len(tenth) / seconds)
                runs.append(runs_round)

    history = _per_tenth(histories)
    history_text = _per_tenth(history_chars)
    fresh = _per_tenth(freshes)
    flat, fresh_flat, bare_flat, runs_flat = map(_flatness, (histories, freshes, no_nodes, runs))
    n = len(turns)
    ratios = [b / f for b, f in zip(bound_s, flow_s, strict=True)]
    old = [t / f for t, f in zip(turns_s, flow_s, strict=True)]
    used = [c / (cores * f) for c, f in zip(flow_cpu, flow_s, strict=True)]
    at_full_use = [b / (c / cores) for b, c in zip(bound_s, flow_cpu, strict=True)]
    other = [c - m for c, m in zip(flow_cpu, flow_model, strict=True)]
    efficiency = [b / m for b, m in zip(bound_model, flow_model, strict=True) if m > 0]
    result: dict[str, Any] = {
        "data": str(args.data),
        "turns": n,
        "memories": memories,
        "spans": counts.get("spans_done", 0),
        "embedded_texts": len(embedded),
        "rounds": args.rounds,
        "turns_per_s": round(n / statistics.median(flow_s), 1),
        "embed_bound_ratio": round(statistics.median(ratios), 3),
        "turns_ratio": round(statistics.median(old), 3),
        "embed_bound_ratio_spread": spread(ratios),
        "turns_ratio_spread": spread(old),
        "flow_seconds": spread(flow_s, 2),
        "bound_seconds": spread(bound_s, 2),
        "turns_seconds": spread(turns_s, 2),
        "flow_cpu_seconds": spread(flow_cpu, 2),
        "flow_cpu_share": spread(used),
        "flow_model_cpu_seconds": spread(flow_model, 2),
        "flow_other_cpu_seconds": spread(other, 2),
        "bound_model_cpu_seconds": spread(bound_model, 2),
        "model_batch_efficiency": spread(efficiency) if efficiency else None,
        "embed_bound_ratio_at_full_use": spread(at_full_use),
        "history_turns_per_s": [round(x, 1) for x in history],
        "history_flatness": _median(flat),
        "history_flatness_spread": spread(flat) if flat else None,
        "history_rounds": len(histories),
        "history_turns_per_s_by_round": [[round(x, 1) for x in h] for h in histories],
        "history_fresh_turns_per_s": [round(x, 1) for x in fresh],
        "history_fresh_flatness": _median(fresh_flat),
        "history_fresh_flatness_spread": spread(fresh_flat) if fresh_flat else None,
        "history_cost_by_tenth": [  # one per tenth; None where no span finished in history
            round(f / h, 3) if h > 0 else None for f, h in zip(fresh, history, strict=True)
        ],
        "history_embedded_chars_by_tenth": [round(x) for x in history_text],
        "history_fresh_embedded_chars_by_tenth": [round(x) for x in _per_tenth(fresh_chars)],
        "history_text_growth": (
            round(history_text[-1] / history_text[0], 3)
            if history_text and history_text[0]
            else None
        ),
        "history_turns_per_s_without_topic_nodes": [round(x, 1) for x in _per_tenth(no_nodes)],
        "history_flatness_without_topic_nodes": _median(bare_flat),
        "history_flatness_without_topic_nodes_spread": spread(bare_flat) if bare_flat else None,
        "history_embedded_chars_without_topic_nodes": [
            round(x) for x in _per_tenth(no_nodes_chars)
        ],
        "history_runs_turns_per_s": [round(x, 1) for x in _per_tenth(runs)],
        "history_runs_flatness": _median(runs_flat),
        "history_runs_flatness_spread": spread(runs_flat) if runs_flat else None,
        "history_runs_turns_per_s_by_round": [[round(x, 1) for x in r] for r in runs],
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "machine": f"{platform.machine()} {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    rows = [
        ("flow turns/s (median)", result["turns_per_s"]),
        ("texts the flow embedded", result["embedded_texts"]),
        ("embed_bound_ratio (bound s / flow s)", _fmt(result["embed_bound_ratio_spread"])),
        ("turns_ratio (turns-only embedding s / flow s)", _fmt(result["turns_ratio_spread"])),
        ("flow CPU seconds (every thread)", _fmt(result["flow_cpu_seconds"])),
        ("flow_cpu_share (CPU s / (cores x flow s))", _fmt(result["flow_cpu_share"])),
        ("of the flow's CPU, in model batches (s)", _fmt(result["flow_model_cpu_seconds"])),
        ("of the flow's CPU, everything else (s)", _fmt(result["flow_other_cpu_seconds"])),
        ("the bound's CPU in model batches (s)", _fmt(result["bound_model_cpu_seconds"])),
        (
            "model_batch_efficiency (bound / flow model CPU)",
            _fmt_or(result["model_batch_efficiency"]),
        ),
        (
            "embed_bound_ratio_at_full_use (bound s / (flow CPU s / cores))",
            _fmt(result["embed_bound_ratio_at_full_use"]),
        ),
        (
            f"history turns/s by tenth (median of {result['history_rounds']} runs)",
            ", ".join(map(str, result["history_turns_per_s"])),
        ),
        ("history_flatness (last / first tenth)", _fmt_or(result["history_flatness_spread"])),
        ("each tenth alone, turns/s", ", ".join(map(str, result["history_fresh_turns_per_s"]))),
        (
            "history_fresh_flatness (alone: last / first)",
            _fmt_or(result["history_fresh_flatness_spread"]),
        ),
        (
            "history cost by tenth (alone / in history)",
            ", ".join("-" if c is None else str(c) for c in result["history_cost_by_tenth"]),
        ),
        (
            "each tenth a run of its own, turns/s",
            ", ".join(map(str, result["history_runs_turns_per_s"])),
        ),
        (
            "history_runs_flatness (restarts: last / first)",
            _fmt_or(result["history_runs_flatness_spread"]),
        ),
        (
            "characters handed to the model by tenth, in history",
            ", ".join(map(str, result["history_embedded_chars_by_tenth"])),
        ),
        (
            "characters handed to the model by tenth, alone",
            ", ".join(map(str, result["history_fresh_embedded_chars_by_tenth"])),
        ),
        (
            "history_text_growth (in history: last / first tenth)",
            _or_dash(result["history_text_growth"]),
        ),
        (
            "history turns/s by tenth without topic nodes (`reorganize = false`)",
            ", ".join(map(str, result["history_turns_per_s_without_topic_nodes"])),
        ),
        (
            "history_flatness_without_topic_nodes",
            _fmt_or(result["history_flatness_without_topic_nodes_spread"]),
        ),
        (
            "characters handed to the model by tenth, without topic nodes",
            ", ".join(map(str, result["history_embedded_chars_without_topic_nodes"])),
        ),
        ("peak RSS (MB)", result["peak_rss_mb"]),
        ("load average (1, 5, 15 min) at the end", result["load_average"]),
    ]
    out.with_suffix(".md").write_text(
        "# Ingest throughput\n\n"
        f"Data: `{result['data']}` ({n} turns, {result['spans']} spans, {memories} memories), "
        f"{args.rounds} interleaved rounds, {result['machine']}, {result['measured_at']}.\n\n"
        "| measure | value |\n|---|---|\n" + "".join(f"| {k} | {v} |\n" for k, v in rows)
    )
    if histories:
        plot_history(result, out.with_suffix(".png"))
    json.dump(result, sys.stdout, indent=2)
    print()
    return result


def plot_history(result: dict[str, Any], path: Path) -> None:
    """The history curves: turns/s by tenth (in one owner's history, with the rounds' range; each
    tenth alone; the history without topic nodes), and the characters the flow handed to the
    model in each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (rate, text) = plt.subplots(1, 2, figsize=(11, 4))
    rounds = [r for r in result["history_turns_per_s_by_round"] if r]
    tenths = range(1, len(result["history_turns_per_s"]) + 1)
    if rounds and all(len(r) == len(tenths) for r in rounds):
        low = [min(col) for col in zip(*rounds, strict=True)]
        high = [max(col) for col in zip(*rounds, strict=True)]
        rate.fill_between(tenths, low, high, alpha=0.2, label="in history, range of the runs")
    _curves(
        rate,
        tenths,
        [
            (result["history_turns_per_s"], "o-", "in history (median)"),
            (result["history_fresh_turns_per_s"], "s--", "each tenth alone"),
            (result["history_turns_per_s_without_topic_nodes"], "^:", "in history, no topic nodes"),
        ],
        "turns/s",
        f"history_flatness {_or_dash(result['history_flatness'])}",
    )
    _curves(
        text,
        tenths,
        [
            (result["history_embedded_chars_by_tenth"], "o-", "in history"),
            (result["history_fresh_embedded_chars_by_tenth"], "s--", "each tenth alone"),
            (
                result["history_embedded_chars_without_topic_nodes"],
                "^:",
                "in history, no topic nodes",
            ),
        ],
        "characters handed to the model",
        f"history_text_growth {_or_dash(result['history_text_growth'])}",
    )
    fig.suptitle(f"Ingest over one owner's history: {Path(result['data']).name}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _curves(
    ax: Any, tenths: range, series: list[tuple[list[float], str, str]], ylabel: str, title: str
) -> None:
    """One panel: each series (values, matplotlib format, label) that has a value per tenth."""
    for values, fmt, label in series:
        if len(values) == len(tenths):
            ax.plot(tenths, values, fmt, label=label)
    ax.set_xlabel("tenth of the owner's history")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    ax.legend(loc="best", fontsize=8)


def _fmt(s: dict[str, float]) -> str:
    return f"{s['median']} (min {s['min']}, max {s['max']})"


def _or_dash(value: Any) -> Any:
    return "-" if value is None else value


def _fmt_or(s: dict[str, float] | None) -> str:
    return "-" if s is None else _fmt(s)


def _flatness(rounds: Sequence[Sequence[float]]) -> list[float]:
    """Each round's last tenth over its first (the rounds whose first tenth extracted spans)."""
    return [r[-1] / r[0] for r in rounds if r and r[0] > 0]


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def _per_tenth(rounds: Sequence[Sequence[float]]) -> list[float]:
    """Each tenth's median over the rounds (rounds that measured every tenth)."""
    longest = max(map(len, rounds), default=0)
    full = [r for r in rounds if r and len(r) == longest]
    return [statistics.median(col) for col in zip(*full, strict=True)] if full else []


if __name__ == "__main__":
    main()
