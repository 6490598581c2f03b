"""Start-up of the commands people run most, on the bundled sample's home.

    python benchmarks/startup.py --rounds 5 --json benchmarks/results/startup.json

Each command is a new process, timed from its start to its exit (wall seconds): ``search``,
``stats``, ``sql``, a ``run`` with nothing new, and the MCP server's first ``memory_search``
(``skillstream mcp`` over stdio, timed from the server's start to the first answer). Each is timed

* **cached**: the embedding cache holds the traced model (``skillstream/traced.py``), as it does
  after a home's first command;
* **uncached**: ``embed_cache = off``, so the process imports sentence-transformers and traces the
  model, as every process did before the cache;

on an idle machine and with every other core kept busy by a spinning process (``--busy``). The
rounds interleave the variants; the figure is the median of ``--rounds``. The machine's load
average at the start is recorded: run it with nothing else running.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

COMMANDS: dict[str, list[str]] = {
    "search": ["search", "where is Maya travelling", "--k", "3"],
    "stats": ["stats"],
    "sql": ["sql", "select count(*) from memories"],
    "run_nothing_new": ["run"],
}


def cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from skillstream.cli import main; main()", *args]


def env_for(cache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLSTREAM_")}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", SKILLSTREAM_EMBED_CACHE=cache)
    return env


def timed(args: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(args, env=env, check=True, capture_output=True)
    return time.perf_counter() - t


def mcp_first_search(home: Path, env: dict[str, str]) -> float:
    """Seconds from starting ``skillstream mcp`` to the answer of its first ``memory_search``."""
    import anyio
    from mcp import Client, StdioServerParameters

    server = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from skillstream.cli import main; main()", "--home", str(home)]
        + ["mcp", "--owner", "maya"],
        env=env,
    )

    async def session() -> float:
        t = time.perf_counter()
        async with Client(server) as client:
            result = await client.call_tool("memory_search", {"query": "Lisbon", "k": 3})
            took = time.perf_counter() - t
            assert not result.is_error, result.content
            return took

    return anyio.run(session)


def spin() -> None:  # pragma: no cover - a busy core
    while True:
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", type=Path, required=True, help="where the results go")
    args = ap.parse_args(argv)

    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="skillstream-startup-") as tmp:
        root = Path(tmp)
        home, cache = root / "home", str(root / "embed-cache")
        variants = {"cached": env_for(cache), "uncached": env_for("off")}
        subprocess.run(cli("--home", str(home), "run"), env=variants["cached"], check=True)
        subprocess.run(  # the cache is written by the first command that loads the model
            cli("--home", str(home), *COMMANDS["search"]), env=variants["cached"], check=True
        )
        times: dict[str, dict[str, list[float]]] = {}
        for busy in (False, True):
            spinners = []
            if busy:
                spinners = [
                    multiprocessing.Process(target=spin, daemon=True)
                    for _ in range(max(1, (os.cpu_count() or 2) - 1))
                ]
                for p in spinners:
                    p.start()
            try:
                for _ in range(args.rounds):
                    for variant, env in variants.items():
                        key = f"{variant}{'_busy' if busy else ''}"
                        got = times.setdefault(key, {})
                        for name, cmd in COMMANDS.items():
                            got.setdefault(name, []).append(
                                timed(cli("--home", str(home), *cmd), env)
                            )
                        got.setdefault("mcp_first_search", []).append(mcp_first_search(home, env))
            finally:
                for p in spinners:
                    p.terminate()
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_average_at_start": round(load, 2),
        "rounds": args.rounds,
        "median_s": {
            key: {name: round(statistics.median(v), 2) for name, v in got.items()}
            for key, got in times.items()
        },
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result["median_s"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
