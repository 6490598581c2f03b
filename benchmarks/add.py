"""``Home.add`` of one message: into an empty home and into a home of many memories.

    python benchmarks/add.py --memories 50000 --owners 1000 --json benchmarks/results/add.json

An application that adds each exchange as it happens pays ``add``'s cost per message, so that cost
must follow the message, not the home. Each add closes its span (``flush=True``), so what is timed
is the message's memories stored. The big home is ``scale.py``'s (built once into ``--cache``
and copied here, so the cached one is never written). Each round adds one new message, in one
process with the embedding model loaded and one untimed add into each home first (a home's first
add creates its tables), ``--rounds`` rounds, interleaved:

* **a new owner** (``add_ratio_big_vs_empty``): the message's owner has no memory in either home,
  so the two adds do the same work and differ only by what the home holds: the median seconds
  into the big home over the median into the empty one (1.0: the home's size costs nothing);
* **a known owner** (``add_ratio_known_owner``): the owner is one the big home already holds
  (``owner-000007``, about memories/owners memories), so the add into the big home also loads
  that owner's memories and runs its first maintenance tick over them: the cost of the owner's own
  history, which an add must pay, beside the home's size.

Results go to ``--json`` and a Markdown table beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
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
from llm_stub import write_results  # noqa: E402

KNOWN = "owner-000007"


def message(i: int, owner: str) -> dict[str, Any]:
    """The ``i``-th message added: a new conversation of ``owner``, a statement worth keeping."""
    return {
        "conversation_id": f"bench-add-{owner}-{i}",
        "message_id": f"bench-add-{owner}-{i}-0",
        "user_id": owner,
        "role": "user",
        "name": "Sam",
        "content": f"I started a pottery class on Thursdays, lesson {i} was about glazing.",
        "timestamp": f"2025-03-{1 + i % 28:02d}T10:00:00Z",
    }


def timed_add(home: Path, i: int, owner: str) -> float:
    import skillstream

    h = skillstream.open(home)
    t0 = time.perf_counter()
    added = h.add([message(i, owner)], flush=True)
    seconds = time.perf_counter() - t0
    if added.messages != 1 or added.dead_letters:
        raise RuntimeError(f"add into {home} took {added}")
    return seconds


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--memories", type=int, default=50_000)
    p.add_argument("--owners", type=int, default=1_000)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--json", dest="out", required=True, help="results file (and .md beside it)")
    p.add_argument("--data", type=Path, default=scale.DEFAULT_DATA)
    p.add_argument("--cache", type=Path, default=scale.DEFAULT_CACHE)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args(argv)

    from skillstream.embed import get_embedder
    from skillstream.settings import Settings

    texts, vectors = scale.sentence_pool(args.data, args.cache)
    cached = scale.build_home(args, texts, vectors)
    get_embedder(Settings.from_keys().embedding).encode(["warm up"])
    work = Path(tempfile.mkdtemp(prefix="ss-bench-add-"))
    times: dict[str, list[float]] = {k: [] for k in ("empty", "big", "empty_known", "big_known")}
    try:
        big, empty = work / "big", work / "empty"
        shutil.copytree(cached, big)
        timed_add(work / "warm-up", 0, "warm-up")  # the first add pays imports and the trace
        for home in (empty, big):  # a home's first add creates its tables: not what is timed
            timed_add(home, 0, "first")
        for i in range(args.rounds):
            new = f"new-owner-{i}"  # an owner neither home holds, new in every round
            times["empty"].append(timed_add(empty, i, new))
            times["big"].append(timed_add(big, i, new))
            times["empty_known"].append(timed_add(empty, i, KNOWN))
            times["big_known"].append(timed_add(big, i, KNOWN))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    result: dict[str, Any] = {
        "memories": args.memories,
        "owners": args.owners,
        "rounds": args.rounds,
        "add_empty_s": round(med["empty"], 4),
        "add_big_s": round(med["big"], 4),
        "add_ratio_big_vs_empty": round(med["big"] / med["empty"], 3),
        "add_known_owner_empty_s": round(med["empty_known"], 4),
        "add_known_owner_big_s": round(med["big_known"], 4),
        "add_ratio_known_owner": round(med["big_known"] / med["empty_known"], 3),
        **{f"all_{k}_s": [round(x, 4) for x in v] for k, v in times.items()},
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "machine": f"{platform.machine()} {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    rows = [(k, v) for k, v in result.items() if not isinstance(v, (dict, list))]
    write_results(
        args.out,
        result,
        [
            f"# add() of one message: an empty home and a home of {args.memories} memories",
            "",
            "| measure | value |",
            "|---|---|",
            *(f"| {k} | {v} |" for k, v in rows),
        ],
    )
    json.dump(result, sys.stdout, indent=2)
    print()
    return result


if __name__ == "__main__":
    main()
