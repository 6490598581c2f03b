"""End-to-end ingest throughput against embedding-only throughput, in the same run.

    python benchmarks/ingest.py --data ../shared/data/locomo/locomo-dev.json \
        --json benchmarks/results/ingest.json

1. Reads every message of ``--data`` once (the same reader the flow uses) and embeds the turn texts
   alone with the same model and batch size: ``embed_only_turns_per_s``.
2. Runs the whole memory flow (Bytewax, rules backend, LanceDB + DuckDB sinks) into a fresh
   temporary home: ``turns_per_s``.
3. ``ratio`` = turns_per_s / embed_only_turns_per_s (1.0 means the flow costs no more than embedding
   the turns), ``peak_rss_mb`` the process's peak resident memory.

The model is loaded, and the store libraries imported, before either timing starts. Results go to
``--json`` and a markdown table next to it (same name, ``.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def read_messages(path: str, fmt: str):
    from skillstream.connectors.files import FileSource, read_all

    return [m for m in read_all(FileSource(path, format=fmt)) if hasattr(m, "text")]


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data", default=str(Path(__file__).resolve().parent.parent / "data" / "sample")
    )
    p.add_argument("--format", default="auto")
    p.add_argument("--json", dest="out", default="benchmarks/results/ingest.json")
    p.add_argument("--workers", type=int, default=1)
    args = p.parse_args(argv)

    from bytewax.testing import cluster_main

    import skillstream.storage.sinks  # noqa: F401  (store libraries imported, like the model loaded, before timing)
    from skillstream.connectors.files import FileSource
    from skillstream.embed import get_embedder
    from skillstream.flows import progress
    from skillstream.flows.memory import build_flow
    from skillstream.settings import Settings

    settings_probe = Settings.load(home=tempfile.mkdtemp(prefix="ss-bench-probe-"))
    embedder = get_embedder(settings_probe.embedding)
    embedder.encode(["warm up"])

    messages = read_messages(args.data, args.format)
    texts = [m.text for m in messages]
    t0 = time.perf_counter()
    embedder.encode(texts)
    embed_s = time.perf_counter() - t0

    with tempfile.TemporaryDirectory(prefix="ss-bench-") as home:
        settings = Settings.load(home=home)
        progress.reset()
        t0 = time.perf_counter()
        parts = build_flow(
            settings, FileSource(args.data, format=args.format), workers=args.workers
        )
        cluster_main(parts.flow, [], 0, worker_count_per_proc=args.workers)
        flow_s = time.perf_counter() - t0
        counts = progress.snapshot()
        from skillstream.storage.lance import MemoryIndex

        n_memories = MemoryIndex(
            settings.storage.lancedb, parts.dim, settings.storage.storage_options
        ).count()

    n = len(texts)
    result = {
        "data": str(args.data),
        "turns": n,
        "memories": n_memories,
        "spans": counts.get("spans_done", 0),
        "workers": args.workers,
        "turns_per_s": round(n / flow_s, 1),
        "embed_only_turns_per_s": round(n / embed_s, 1),
        "ratio": round(embed_s / flow_s, 3),
        "flow_seconds": round(flow_s, 2),
        "embed_seconds": round(embed_s, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "machine": f"{platform.machine()} {os.cpu_count()} "
        f"cores, Python {platform.python_version()}",
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    md = out.with_suffix(".md")
    md.write_text(
        "# Ingest throughput\n\n"
        f"Data: `{result['data']}` ({n} turns, {result['spans']} spans, {n_memories} memories), "
        f"{result['workers']} worker(s), {result['machine']}, {result['measured_at']}.\n\n"
        "| measure | value |\n|---|---|\n"
        f"| end-to-end turns/s (rules backend, LanceDB + DuckDB) | {result['turns_per_s']} |\n"
        f"| embedding-only turns/s (same texts, same "
        f"model) | {result['embed_only_turns_per_s']} |\n"
        f"| ratio | {result['ratio']} |\n"
        f"| peak RSS (MB) | {result['peak_rss_mb']} |\n"
    )
    json.dump(result, sys.stdout, indent=2)
    print()
    return result


if __name__ == "__main__":
    main()
