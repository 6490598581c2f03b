"""Search latency through ``skillstream serve`` against a ``skillstream search`` process per
question, on a home built from LoCoMo dev.

    python benchmarks/serve.py --data ../shared/data/locomo/locomo-dev.json \
        --home /tmp/locomo-home --json benchmarks/results/serve.json

The home is built first when it holds nothing (``skillstream run --format locomo``; each
conversation is one owner). Then ``serve`` starts on a loopback port and answers
``--questions`` LoCoMo questions (the first of each conversation in turn, each asked for its own
conversation's owner) through ``GET /v1/search`` on one kept-alive HTTP connection: the
figure is the wall time of each request, as the client sees it, from which p50, p90 and p99.
Against it, ``--cold`` of the same questions are asked as a new ``skillstream search`` process
each (the CLI's cold start, the way an agent without the server asks), from the process's start
to its exit. Both record their searches, as the CLI does by default. The machine's load average
at the start is written down: run it with nothing else running.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent


def skillstream(*args: str) -> list[str]:
    exe = Path(sys.executable).parent / "skillstream"
    return [str(exe), *args] if exe.exists() else [sys.executable, "-m", "skillstream.cli", *args]


def questions(data: Path, n: int) -> list[tuple[str, str]]:
    """``(owner, question)`` pairs: the conversations' questions taken in turn."""
    samples = json.loads(data.read_text())
    queues = [[(s["sample_id"], q["question"]) for q in s["qa"]] for s in samples]
    out: list[tuple[str, str]] = []
    while len(out) < n and any(queues):
        for queue in queues:
            if queue and len(out) < n:
                out.append(queue.pop(0))
    return out


def build(home: Path, data: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(
        skillstream("--home", str(home), "run", "--source", str(data), "--format", "locomo"),
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    i = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[i]


def served(home: Path, asked: list[tuple[str, str]], k: int, env: dict[str, str]) -> dict:
    port = free_port()
    started = time.perf_counter()
    proc = subprocess.Popen(
        skillstream("--home", str(home), "serve", "--addr", f"127.0.0.1:{port}"),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                conn.request("GET", "/healthz")
                health = conn.getresponse()
                health.read()
                if health.status == 200:
                    break
            except OSError:
                time.sleep(0.1)
            if proc.poll() is not None:
                raise SystemExit(f"serve exited with {proc.returncode}")
        ready = time.perf_counter() - started
        seconds = []
        hits = 0
        for owner, q in asked:
            t = time.perf_counter()
            conn.request("GET", f"/v1/search?q={quote(q)}&owner={quote(owner)}&k={k}")
            response = conn.getresponse()
            body = json.loads(response.read())
            seconds.append(time.perf_counter() - t)
            if response.status != 200:
                raise SystemExit(f"search failed: {response.status} {body}")
            hits += len(body["hits"])
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return {
        "requests": len(seconds),
        "hits_per_request": round(hits / len(seconds), 2),
        "ready_seconds": round(ready, 3),
        "p50_ms": round(1000 * percentile(seconds, 50), 1),
        "p90_ms": round(1000 * percentile(seconds, 90), 1),
        "p99_ms": round(1000 * percentile(seconds, 99), 1),
        "mean_ms": round(1000 * statistics.fmean(seconds), 1),
        "max_ms": round(1000 * max(seconds), 1),
    }


def cold(home: Path, asked: list[tuple[str, str]], k: int, env: dict[str, str]) -> dict:
    seconds = []
    for owner, q in asked:
        t = time.perf_counter()
        subprocess.run(
            skillstream("--home", str(home), "search", q, "--owner", owner, "--k", str(k)),
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        seconds.append(time.perf_counter() - t)
    return {
        "processes": len(seconds),
        "p50_ms": round(1000 * percentile(seconds, 50), 1),
        "p99_ms": round(1000 * percentile(seconds, 99), 1),
        "mean_ms": round(1000 * statistics.fmean(seconds), 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="LoCoMo JSON (dev).")
    ap.add_argument("--home", type=Path, required=True, help="The home (built when empty).")
    ap.add_argument("--questions", type=int, default=300)
    ap.add_argument("--cold", type=int, default=20, help="Questions asked as CLI processes.")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--json", type=Path, required=True, help="Where the figures go.")
    args = ap.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLSTREAM_")}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    load = os.getloadavg()[0]
    built = None
    if not (args.home / "catalog.duckdb").exists():
        built = round(build(args.home, args.data, env), 1)
    asked = questions(args.data, args.questions)
    # warm the embedding cache the way a home's first command does, then measure
    subprocess.run(
        skillstream("--home", str(args.home), "search", "warm up", "--k", "1"),
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    server = served(args.home, asked, args.k, env)
    cli = cold(args.home, asked[: args.cold], args.k, env)
    out: dict[str, Any] = {
        "data": str(args.data.name),
        "k": args.k,
        "serve": server,
        "cli_cold": cli,
        "cli_over_serve_p50": round(cli["p50_ms"] / server["p50_ms"], 1),
        "build_seconds": built,
        "load_average_at_start": round(load, 2),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
