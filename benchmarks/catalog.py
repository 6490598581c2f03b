"""Store-sink throughput: memory rows committed per second, one writer against two, in one run.

    python benchmarks/catalog.py --json benchmarks/results/catalog.json

What one store partition does for every batch (``storage.writer.write_results``: LanceDB upsert,
then one catalog transaction ending with the span ledger) is run by separate writer processes on
span results made up front (memories with real-width random vectors, lifecycle events, LLM calls),
each writer with its own owners, as owner-sharded partitions have:

* ``file``: one process, the DuckDB file (the default; it takes one writer only);
* ``shared_1``: one process, the shared catalog (DuckLake on PostgreSQL, data files in a folder);
* ``shared_2``: two processes at once on the shared catalog, each half of the owners.

Every case writes the same results into a fresh home, LanceDB in a local folder. Rows per second =
memory rows committed / wall time from the moment every writer is ready (stores open, results
built) to the last commit. ``speedup`` = shared_2 / shared_1. Without ``--catalog`` a PostgreSQL
server is started from the machine's binaries in a temporary folder (``tests/servers/postgres.py``).
Results go to ``--json`` and a markdown table next to it (same name, ``.md``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import shutil
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DIM = 384


def make_results(owners: list[str], spans: int, per_span: int) -> list[Any]:
    """Span results for ``owners``: ``spans`` each, ``per_span`` new memories a span (the store
    tests' results, with real-width random vectors)."""
    import numpy as np

    from tests.storage.conftest import make_memory, make_result

    rng = np.random.default_rng(7)
    out = []
    for owner in owners:
        for n in range(spans):
            mems = [
                make_memory(
                    per_span * n + k,
                    owner,
                    text=f"{owner} said fact {k} in span {n}",
                    vector=rng.random(DIM, dtype=np.float32).tolist(),
                )
                for k in range(per_span)
            ]
            out.append(make_result(n, owner, memories=mems))
    return out


def writer(keys: dict, owners: list[str], args: dict, ready: Any, go: Any, done: Any) -> None:
    """One writer process: open the stores, build its results, wait for the start, write."""
    from skillstream.settings import Settings
    from skillstream.storage.home import open_stores
    from skillstream.storage.writer import write_results

    settings = Settings.from_keys(**keys)
    results = make_results(owners, args["spans"], args["per_span"])
    batch = args["batch"]
    with open_stores(settings, DIM) as stores:
        ready.put(os.getpid())
        go.wait()
        rows = 0
        for i in range(0, len(results), batch):
            rows += write_results(stores, results[i : i + batch]).memories
        done.put((rows, time.perf_counter()))


def run_case(keys: dict, writers: int, owners: list[str], args: dict) -> dict:
    ctx = mp.get_context("spawn")
    ready, done, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    shares = [owners[i::writers] for i in range(writers)]
    procs = [
        ctx.Process(target=writer, args=(keys, share, args, ready, go, done)) for share in shares
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=600)
    t0 = time.perf_counter()
    go.set()
    finished = [done.get(timeout=3600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        if p.exitcode != 0:
            raise SystemExit(f"a writer failed (exit {p.exitcode})")
    seconds = max(t for _, t in finished) - t0
    rows = sum(r for r, _ in finished)
    return {
        "writers": writers,
        "rows": rows,
        "seconds": round(seconds, 2),
        "rows_per_s": rows / seconds,
    }


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--owners", type=int, default=8)
    p.add_argument("--spans", type=int, default=30, help="Spans per owner.")
    p.add_argument("--per-span", type=int, default=4, help="New memories per span.")
    p.add_argument("--batch", type=int, default=4, help="Span results per write (one commit).")
    p.add_argument("--catalog", default="", help="A ducklake:postgres://... catalog to use.")
    p.add_argument(
        "--catalog-threads",
        type=int,
        default=None,
        help="DuckDB threads of each writer's shared-catalog connection (default: the setting's).",
    )
    p.add_argument("--json", dest="out", default="benchmarks/results/catalog.json")
    args = p.parse_args(argv)
    load_before = [round(x, 2) for x in os.getloadavg()]
    from skillstream.settings import Settings

    owners = [f"owner{i}" for i in range(args.owners)]
    sizes = {"spans": args.spans, "per_span": args.per_span, "batch": args.batch}
    root = Path(tempfile.mkdtemp(prefix="ss-bench-catalog-"))

    def lake(server: Any) -> str:
        if args.catalog:
            return args.catalog
        return server.create_database(f"bench_{uuid.uuid4().hex[:10]}")

    try:
        with _server(args.catalog) as server:
            cases = {"file": run_case({"home": str(root / "file")}, 1, owners, sizes)}
            for name, writers in (("shared_1", 1), ("shared_2", 2)):
                home = root / name
                keys = {
                    "home": str(home),
                    "catalog": lake(server),
                    "catalog_data": str(home / "data"),
                }
                if args.catalog_threads is not None:
                    keys["catalog_threads"] = args.catalog_threads
                cases[name] = run_case(keys, writers, owners, sizes)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load_average": load_before,
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "sizes": {"owners": args.owners, **sizes, "dim": DIM},
        "catalog_threads": Settings.from_keys(
            **({} if args.catalog_threads is None else {"catalog_threads": args.catalog_threads})
        ).storage.catalog_threads,
        "cases": cases,
        "speedup": round(cases["shared_2"]["rows_per_s"] / cases["shared_1"]["rows_per_s"], 2),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    write_markdown(out.with_suffix(".md"), result)
    print(json.dumps(result, indent=2))
    return result


class _server:
    """The PostgreSQL server of the run: none when ``--catalog`` names one."""

    def __init__(self, given: str) -> None:
        self.given = given
        self._cm: Any = None

    def __enter__(self) -> Any:
        if self.given:
            return None
        from tests.servers.postgres import postgres_server

        self._cm = postgres_server()
        return self._cm.__enter__()

    def __exit__(self, *exc: object) -> None:
        if self._cm is not None:
            self._cm.__exit__(*exc)


def write_markdown(path: Path, r: dict) -> None:
    c = r["cases"]
    lines = [
        "# Store-sink throughput: one writer against two (`benchmarks/catalog.py`)",
        "",
        f"{r['when']}, {r['machine']}, load average {r['load_average']} before the run "
        f"({r.get('load_average_after')} after it: its own threads count); "
        f"{r['sizes']['owners']} owners x {r['sizes']['spans']} spans x "
        f"{r['sizes']['per_span']} memories, {r['sizes']['batch']} spans a commit, "
        f"catalog_threads {r.get('catalog_threads')}.",
        "",
        "| catalog | writer processes | memory rows | seconds | rows/s |",
        "|---|---|---|---|---|",
    ]
    names = {
        "file": "DuckDB file",
        "shared_1": "DuckLake (PostgreSQL)",
        "shared_2": "DuckLake (PostgreSQL)",
    }
    for key in ("file", "shared_1", "shared_2"):
        x = c[key]
        lines.append(
            f"| {names[key]} | {x['writers']} | {x['rows']} | {x['seconds']} "
            f"| {x['rows_per_s']:.0f} |"
        )
    lines += ["", f"Two writers against one on the shared catalog: **{r['speedup']}x**.", ""]
    path.write_text("\n".join(lines))


if __name__ == "__main__":
    main()
