"""A home of many memories: search and hydration latency, ingest into it, disk and memory.

    python benchmarks/scale.py --memories 100000 --owners 1000 --json OUT.json

1. **The store.** ``--memories`` N memories of ``--owners`` M owners (owner ``i % M``), built once
   into ``--cache`` (default ``~/.cache/skillstream/scale``) and reused by later runs with the same
   N, M, seed and build tag (a hash of the LanceDB and ledger schemas, the index thresholds and
   the sentence vectors); indexes a newer policy adds are created on the cached home
   (``index_upgrade_s``). The build writes Arrow batches of 50,000 rows straight to LanceDB and
   the catalog (``memory_meta``, and a span ledger of one ``done`` span per five memories of an
   owner, so a run's start reads a ledger of the store's size), not through the flow. Texts
   recombine real sentences: the turns of ``--data`` (LoCoMo by default) are split into sentences,
   and each memory is one sentence or two joined. Vectors: every distinct
   sentence is embedded once with the configured model; a two-sentence memory gets the normalised
   sum of its sentences' vectors (close to what the model gives the joined text, without embedding
   N texts). Event times spread over two years; about 5% of the memories are not ``activated``.
   Then ``optimize`` compacts the table and creates the indexes its size calls for
   (``index_build_s``: scalar indexes, full-text index, and the ANN index from 100,000 rows).
   An interrupted build resumes from the last chunk it wrote.
2. **Queries**, each over one random owner, after the LanceDB files have been read once
   (``warm_read_s``, ``warm_read_mb``: the queries meet the store in the page cache, as a store in
   use is; this machine's kernel reclaims idle file pages, so without it the figures depend on
   what ran in the minutes before) and a warm-up of 20 queries: owner-filtered hybrid search (text
   and vector, RRF-fused) ``search_*_ms``; owner-filtered vector search ``vector_*_ms``; owner
   hydration (all of an owner's memories with vectors, what a span of a returning owner loads)
   ``hydrate_*_ms``. Query vectors are the sentences' cached vectors, so the figures are the
   store's; embedding one query with the model is reported apart (``embed_query_p50_ms``).
3. **Ingest.** The memory flow (rules backend) runs over ``--ingest`` (default: the first two
   conversations of ``--data``) in a child process, into an empty home and into a copy of the big
   one, interleaved ``--rounds`` times; ``ingest_ratio_vs_empty`` is the median turns/s into the big
   home over the median into the empty one, and ``peak_rss_mb`` the flow process's peak RSS
   writing into the big home (``peak_rss_mb_empty``: into the empty one).

Results go to ``--json`` and a markdown table beside it; the cache is never written into the
current folder unless pointed there.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent
DEV_FILE = Path("shared") / "data" / "locomo" / "locomo-dev.json"
DEFAULT_DATA = next(
    (d / DEV_FILE for d in ROOT.parents if (d / DEV_FILE).exists()), ROOT.parent / DEV_FILE
)
DEFAULT_CACHE = Path.home() / ".cache" / "skillstream" / "scale"
CHUNK = 50_000
SPAN_MEMORIES = 5
BUILD_VERSION = 3
KINDS = ("fact", "preference", "event", "plan", "opinion", "person")
T_START = datetime(2023, 1, 1, tzinfo=UTC)


# ---------------------------------------------------------------------- sentence pool
def sentences(path: Path) -> list[str]:
    """Distinct sentences of 4 to 40 words from the turns of a LoCoMo file."""
    from skillstream.connectors.locomo import iter_locomo

    seen: dict[str, None] = {}
    for _, record in iter_locomo(path):
        if not isinstance(record, dict):  # a turn the reader refused
            continue
        for s in re.split(r"(?<=[.!?])\s+", str(record.get("content") or "")):
            s = s.strip()
            if 4 <= len(s.split()) <= 40:
                seen.setdefault(s, None)
    return list(seen)


def sentence_pool(data: Path, cache: Path) -> tuple[list[str], np.ndarray]:
    """The sentences and their unit vectors, embedded once and cached."""
    from skillstream.embed import get_embedder, identity
    from skillstream.settings import Settings

    settings = Settings.from_keys().embedding
    texts = sentences(data)
    tag = hashlib.sha256(("\n".join(texts) + identity(settings)).encode()).hexdigest()[:12]
    path = cache / f"pool-{tag}.npz"
    if path.exists():
        return texts, np.load(path)["vectors"]
    print(f"embedding {len(texts)} sentences once (cached in {path})", file=sys.stderr)
    vectors = get_embedder(settings).encode(texts)
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(path, vectors=vectors)
    return texts, vectors


# ---------------------------------------------------------------------- building the home
def memory_chunk(
    start: int, stop: int, owners: int, texts: list[str], vectors: np.ndarray, seed: int
):
    """Memories ``start..stop`` as an Arrow table of the LanceDB schema."""
    import pyarrow as pa

    from skillstream import tables
    from skillstream.vocab import MemoryStatus

    rng = np.random.default_rng([seed, start])
    n = stop - start
    a = rng.integers(0, len(texts), n)
    b = np.where(rng.random(n) < 0.5, rng.integers(0, len(texts), n), -1)
    vec = vectors[a] + np.where((b >= 0)[:, None], vectors[np.maximum(b, 0)], 0.0)
    vec = (vec / np.linalg.norm(vec, axis=1, keepdims=True)).astype(np.float32)
    text = [texts[i] if j < 0 else f"{texts[i]} {texts[j]}" for i, j in zip(a, b, strict=True)]
    ts = [T_START + timedelta(seconds=int(s)) for s in rng.integers(0, 2 * 365 * 86400, n)]
    status = np.where(
        rng.random(n) < 0.95, MemoryStatus.ACTIVATED.value, MemoryStatus.ARCHIVED.value
    )
    ids = range(start, stop)
    schema = tables.memories_lance(vectors.shape[1])
    columns: dict[str, Any] = {
        "id": [f"mem-{i:09d}" for i in ids],
        "owner_id": [f"owner-{i % owners:06d}" for i in ids],
        "scope": ["private"] * n,
        "memory_type": ["LongTermMemory"] * n,
        "kind": [KINDS[i % len(KINDS)] for i in ids],
        "text": text,
        "tags": [[] for _ in ids],
        "confidence": rng.uniform(0.3, 1.0, n),
        "status": status.tolist(),
        "event_ts": ts,
        "created_at": ts,
        "updated_at": ts,
        "reinforcement": [0] * n,
        "source_message_ids": [[f"msg-{i:09d}"] for i in ids],
        "version": [1] * n,
        "decay_steps": [0] * n,
        "lang": ["en"] * n,
        "session_id": [f"session-{i % (owners * 4):07d}" for i in ids],
        "span_id": [span_id(i, owners) for i in ids],
    }
    arrays = []
    for field in schema:
        if field.name == "vector":
            arrays.append(
                pa.FixedSizeListArray.from_arrays(pa.array(vec.reshape(-1)), vec.shape[1])
            )
        elif field.name in columns:
            arrays.append(pa.array(columns[field.name], type=field.type))
        else:
            arrays.append(pa.nulls(n, type=field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def schema_tag(vectors: np.ndarray) -> str:
    """A short hash of what a built home depends on besides N, M and seed: the LanceDB schema,
    the index policy and the sentence pool (a change to any of them builds a new home)."""
    from skillstream import tables
    from skillstream.storage.lance import MEMORY_INDEXES, IndexPolicy

    policy = IndexPolicy(scalar=MEMORY_INDEXES)
    parts = [
        str(BUILD_VERSION),
        str(tables.memories_lance(vectors.shape[1])),
        str(tables.SPANS),
        repr((policy.scalar_rows, policy.vector_rows, policy.vector_type)),
        hashlib.sha256(vectors.tobytes()).hexdigest(),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:10]


def span_id(i: int, owners: int) -> str:
    """The span memory ``i`` came from: an owner's memories, ``SPAN_MEMORIES`` to a span."""
    return f"span-{i % owners:06d}-{i // owners // SPAN_MEMORIES:07d}"


def ledger_chunk(start: int, stop: int, owners: int):
    """The span ledger rows (status ``done``) of memories ``start..stop`` (each span once, at
    its first memory), so a run's start reads a ledger the size of the store's."""
    import pyarrow as pa

    from skillstream import tables

    firsts = [i for i in range(start, stop) if (i // owners) % SPAN_MEMORIES == 0]
    n = len(firsts)
    columns: dict[str, Any] = {
        "span_id": [span_id(i, owners) for i in firsts],
        "owner_id": [f"owner-{i % owners:06d}" for i in firsts],
        "conversation_id": [f"conv-{i % owners:06d}" for i in firsts],
        "session_id": [f"session-{i % (owners * 4):07d}" for i in firsts],
        "seq": [i // owners // SPAN_MEMORIES for i in firsts],
        "status": ["done"] * n,
        "extractor": ["rules"] * n,
        "n_ops": [SPAN_MEMORIES] * n,
        "attempts": [1] * n,
        "processed_at": [T_START] * n,
    }
    schema = tables.SPANS
    arrays = [
        pa.array(columns[f.name], type=f.type) if f.name in columns else pa.nulls(n, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def upgrade(home: Path, marker: Path, dim: int) -> None:
    """Give a cached home the indexes the current policy adds (the time is recorded)."""
    from skillstream.settings import Settings
    from skillstream.storage.home import open_index

    t0 = time.perf_counter()
    made = open_index(Settings.from_keys(home=str(home)), dim).table.ensure_indexes()
    if made:
        built = json.loads(marker.read_text())
        built["indexed"] = built.get("indexed", []) + made
        built["index_upgrade_s"] = round(time.perf_counter() - t0, 1)
        marker.write_text(json.dumps(built))


def build_home(args: argparse.Namespace, texts: list[str], vectors: np.ndarray) -> Path:
    """The cached home of ``args.memories`` memories (built when missing)."""
    from skillstream.settings import Settings
    from skillstream.storage.catalog import Catalog
    from skillstream.storage.home import open_index

    home = (
        Path(args.cache) / f"home-{args.memories}-{args.owners}-{args.seed}-{schema_tag(vectors)}"
    )
    marker = home / "built.json"
    if marker.exists():
        upgrade(home, marker, vectors.shape[1])
        return home
    settings = Settings.from_keys(home=str(home))
    index = open_index(settings, vectors.shape[1])
    # A build that was interrupted goes on from its last whole chunk (each chunk is one LanceDB
    # commit; the catalog's inserts of a chunk written again are ignored).
    done = index.count()
    if done % CHUNK and done != args.memories:
        shutil.rmtree(home)
        index = open_index(settings, vectors.shape[1])
        done = 0
    elif done:
        print(f"resuming the build of {home} at {done} memories", file=sys.stderr)
    catalog = Catalog(settings.storage.catalog)
    t0 = time.perf_counter()
    try:
        for start in range(done, args.memories, CHUNK):
            stop = min(start + CHUNK, args.memories)
            chunk = memory_chunk(start, stop, args.owners, texts, vectors, args.seed)
            index.table.table.add(chunk)
            with catalog.transaction():
                catalog.insert_ignore("memory_meta", chunk.drop_columns(["vector"]))
                catalog.insert_ignore("spans", ledger_chunk(start, stop, args.owners))
            print(f"built {stop}/{args.memories}", file=sys.stderr)
        write_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        indexed = index.optimize()
        index_s = time.perf_counter() - t0
    finally:
        catalog.close()
    marker.write_text(
        json.dumps(
            {"write_s": round(write_s, 1), "index_build_s": round(index_s, 1), "indexed": indexed}
        )
    )
    return home


def drop_old_versions(home: Path, dim: int) -> None:
    """Delete the files of the table's earlier versions (the chunks before compaction), so
    ``disk_mb`` is the size of the store, not of its history (LanceDB's ``optimize`` does the same
    for versions older than a week)."""
    from skillstream.settings import Settings
    from skillstream.storage.home import open_index

    table = open_index(Settings.from_keys(home=str(home)), dim, create=False).table.table
    with warnings.catch_warnings():  # LanceDB warns about concurrent readers: there are none
        warnings.simplefilter("ignore", UserWarning)
        table.optimize(cleanup_older_than=timedelta(0), delete_unverified=True)


# ---------------------------------------------------------------------- measuring
def percentiles(ms: list[float]) -> dict[str, float]:
    q = [float(np.percentile(ms, p)) for p in (50, 95, 99)]
    return {"p50": round(q[0], 2), "p95": round(q[1], 2), "p99": round(q[2], 2)}


def timed(calls: list[Callable[[], Any]], warmup: int = 20) -> list[float]:
    for call in calls[:warmup]:
        call()
    out = []
    for call in calls:
        t0 = time.perf_counter()
        call()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def read_through(folder: Path) -> tuple[float, float]:
    """Read every file under ``folder`` once, so the queries meet the store in the page cache
    (as a store in use is), not wherever the last minutes of other work left it; returns the
    seconds and megabytes read."""
    t0 = time.perf_counter()
    size = 0
    for f in sorted(folder.rglob("*")):
        if f.is_file():
            with f.open("rb") as handle:
                while chunk := handle.read(1 << 24):
                    size += len(chunk)
    return round(time.perf_counter() - t0, 1), round(size / 2**20, 1)


def measure_queries(
    home: Path, args: argparse.Namespace, texts: list[str], vectors: np.ndarray
) -> dict[str, Any]:
    from skillstream.embed import get_embedder
    from skillstream.settings import Settings
    from skillstream.storage.home import open_index

    settings = Settings.from_keys(home=str(home))
    index = open_index(settings, vectors.shape[1], create=False)
    rng = np.random.default_rng(args.seed + 1)
    owners = [f"owner-{i:06d}" for i in rng.integers(0, args.owners, args.queries)]
    picks = rng.integers(0, len(texts), args.queries)

    def hybrid(o: str, i: int) -> Callable[[], Any]:
        return lambda: index.search(texts[i], vectors[i], owner=o, k=10)

    def vector(o: str, i: int) -> Callable[[], Any]:
        return lambda: index.search(vector=vectors[i], owner=o, k=10)

    def hydrate(o: str) -> Callable[[], Any]:
        return lambda: index.owner_memories(o)

    warm_s, warm_mb = read_through(Path(settings.storage.lancedb))
    search = timed([hybrid(o, i) for o, i in zip(owners, picks, strict=True)])
    vec = timed([vector(o, i) for o, i in zip(owners, picks, strict=True)])
    hyd = timed([hydrate(o) for o in owners[: max(20, args.queries // 3)]], warmup=5)
    embedder = get_embedder(settings.embedding)

    def embed(i: int) -> Callable[[], Any]:
        return lambda: embedder.encode([texts[i]])

    emb = timed([embed(i) for i in picks[:100]], warmup=5)
    return {
        "search_ms": percentiles(search),
        "vector_ms": percentiles(vec),
        "hydrate_ms": percentiles(hyd),
        "embed_query_p50_ms": round(statistics.median(emb), 2),
        "indexes": index.table.indexed_columns(),
        "warm_read_s": warm_s,
        "warm_read_mb": warm_mb,
    }


def ingest_once(home: Path, data: str) -> dict[str, float]:
    """Run the memory flow over ``data`` into ``home`` in a child process."""
    cmd = [sys.executable, __file__, "--ingest-child", str(home), data]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def ingest_child(home: str, data: str) -> None:
    """The child's side: load the model, time the flow, print turns/s and peak RSS as JSON."""
    import resource

    import skillstream.storage.sinks  # noqa: F401  (imported before timing, like the model)
    from skillstream.embed import get_embedder
    from skillstream.flows.runner import Runner
    from skillstream.settings import Settings

    settings = Settings.from_keys(home=home)
    get_embedder(settings.embedding).encode(["warm up"])
    runner = Runner(settings)
    t0 = time.perf_counter()
    runner.execute(runner.dataflow(runner.source(data)))
    seconds = time.perf_counter() - t0
    turns = runner.counters.snapshot().get("messages", 0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {"turns": turns, "seconds": seconds, "turns_per_s": turns / seconds, "rss_mb": rss}
        )
    )


def ingest_data(args: argparse.Namespace, folder: Path) -> str:
    if args.ingest:
        return str(args.ingest)
    from skillstream.connectors.locomo import load_locomo

    path = folder / "ingest.json"
    path.write_text(json.dumps(load_locomo(args.data)[:2]))
    return str(path)


def measure_ingest(home: Path, args: argparse.Namespace) -> dict[str, Any]:
    empty, big = [], []
    with tempfile.TemporaryDirectory(prefix="ss-scale-") as tmp:
        data = ingest_data(args, Path(tmp))
        for r in range(args.rounds):
            target = Path(tmp) / f"empty-{r}"
            empty.append(ingest_once(target, data))
            shutil.rmtree(target)
            target = Path(tmp) / f"big-{r}"
            shutil.copytree(home, target)
            big.append(ingest_once(target, data))
            shutil.rmtree(target)
    e = statistics.median(x["turns_per_s"] for x in empty)
    b = statistics.median(x["turns_per_s"] for x in big)
    return {
        "ingest_turns": big[0]["turns"],
        "ingest_turns_per_s_empty": [round(x["turns_per_s"], 1) for x in empty],
        "ingest_turns_per_s_big": [round(x["turns_per_s"], 1) for x in big],
        "ingest_ratio_vs_empty": round(b / e, 3),
        "peak_rss_mb": round(max(x["rss_mb"] for x in big), 1),
        "peak_rss_mb_empty": round(max(x["rss_mb"] for x in empty), 1),
    }


def disk_mb(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20, 1)


# ---------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--memories", type=int, default=100_000)
    p.add_argument("--owners", type=int, default=1_000)
    p.add_argument("--json", dest="out", help="results file (and .md beside it); required")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo file: the sentences")
    p.add_argument("--ingest", type=Path, help="chat log for the ingest comparison")
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where built homes are kept")
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--skip-ingest", action="store_true")
    p.add_argument(
        "--build-only", action="store_true", help="build the cached home and stop (no --json)"
    )
    p.add_argument("--ingest-child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.ingest_child:
        ingest_child(*args.ingest_child)
        return {}
    if not args.out and not args.build_only:
        p.error("--json OUT is required")

    texts, vectors = sentence_pool(args.data, args.cache)
    home = build_home(args, texts, vectors)
    drop_old_versions(home, vectors.shape[1])
    if args.build_only:
        print(home)
        return json.loads((home / "built.json").read_text())
    built = json.loads((home / "built.json").read_text())
    queries = measure_queries(home, args, texts, vectors)
    ingest = {} if args.skip_ingest else measure_ingest(home, args)
    result: dict[str, Any] = {
        "memories": args.memories,
        "owners": args.owners,
        "sentences": len(texts),
        "search_p50_ms": queries["search_ms"]["p50"],
        "search_p95_ms": queries["search_ms"]["p95"],
        "search_p99_ms": queries["search_ms"]["p99"],
        "vector_p50_ms": queries["vector_ms"]["p50"],
        "vector_p95_ms": queries["vector_ms"]["p95"],
        "vector_p99_ms": queries["vector_ms"]["p99"],
        "hydrate_p50_ms": queries["hydrate_ms"]["p50"],
        "hydrate_p95_ms": queries["hydrate_ms"]["p95"],
        "embed_query_p50_ms": queries["embed_query_p50_ms"],
        "warm_read_s": queries["warm_read_s"],
        "warm_read_mb": queries["warm_read_mb"],
        **ingest,
        "disk_mb": disk_mb(home),
        "index_build_s": built["index_build_s"],
        "build_write_s": built["write_s"],
        "index_upgrade_s": built.get("index_upgrade_s", 0.0),
        "indexes": queries["indexes"],
        "queries": args.queries,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "machine": f"{platform.machine()} {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    rows = [(k, v) for k, v in result.items() if not isinstance(v, (dict, list))]
    out.with_suffix(".md").write_text(
        f"# A home of {args.memories} memories, {args.owners} owners\n\n"
        "| measure | value |\n|---|---|\n" + "".join(f"| {k} | {v} |\n" for k, v in rows)
    )
    json.dump(result, sys.stdout, indent=2)
    print()
    return result


if __name__ == "__main__":
    main()
