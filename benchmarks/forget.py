"""``forget`` of one owner in a big home: time, and disk before and after.

    python benchmarks/forget.py --memories 100000 --owners 10 --json benchmarks/results/forget.json

The home is ``scale.py``'s (``--memories`` memories of ``--owners`` owners, owner ``i % M``, with
``memory_meta``, a span ledger and the indexes its size calls for), built once into ``--cache`` and
copied here, so the cached one is never changed. Before the forget the copy's older LanceDB
versions are dropped (as LanceDB's own upkeep does after a week), so the disk figures compare the
store, not its history. ``forget_owner`` then erases ``owner-000003`` (memories/owners memories):
rows, a LanceDB compaction with new indexes and no older versions, the catalog file written anew.
Reported: the seconds of the forget, the home's size on disk before and after, and the counts.

Results go to ``--json`` and a Markdown table beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale  # noqa: E402

OWNER = "owner-000003"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--memories", type=int, default=100_000)
    p.add_argument("--owners", type=int, default=10)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--data", default=str(scale.DEFAULT_DATA))
    p.add_argument("--cache", default=str(scale.DEFAULT_CACHE))
    p.add_argument("--json", dest="out", default=None)
    args = p.parse_args(argv)

    from skillstream.services.forget import forget_owner
    from skillstream.settings import Settings

    texts, vectors = scale.sentence_pool(Path(args.data), Path(args.cache))
    cached = scale.build_home(args, texts, vectors)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(shutil.copytree(cached, Path(tmp) / "home"))
        scale.drop_old_versions(home, vectors.shape[1])
        before = scale.disk_mb(home)
        settings = Settings.from_keys(home=str(home))
        t0 = time.perf_counter()
        report = forget_owner(settings, OWNER)
        seconds = time.perf_counter() - t0
        after = scale.disk_mb(home)
    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "memories": args.memories,
        "owners": args.owners,
        "owner_memories": report.counts["lancedb"].get("memories", 0),
        "forget_s": round(seconds, 2),
        "disk_mb_before": round(before, 1),
        "disk_mb_after": round(after, 1),
        "counts": report.counts,
    }
    if args.out:
        out = Path(args.out)
        out.write_text(json.dumps(result, indent=2) + "\n")
        out.with_suffix(".md").write_text(markdown(result))
    print(json.dumps(result, indent=2))
    return result


def markdown(r: dict[str, Any]) -> str:
    return (
        f"# forget of one owner ({r['when']}, {r['machine']})\n\n"
        "Written by `python benchmarks/forget.py "
        f"--memories {r['memories']} --owners {r['owners']} "
        "--json benchmarks/results/forget.json`.\n\n"
        "| memories in the home | of the owner | forget (s) "
        "| disk before (MB) | disk after (MB) |\n"
        "|---|---|---|---|---|\n"
        f"| {r['memories']:,} | {r['owner_memories']:,} | {r['forget_s']} | "
        f"{r['disk_mb_before']} | {r['disk_mb_after']} |\n"
    )


if __name__ == "__main__":
    main()
