"""A home's content as a few short hashes: two homes with equal hashes hold the same memories.

    python benchmarks/fingerprint.py HOME [--json FILE]

Each line hashes one table's rows, sorted, over every column but the wall-clock ones
(``processed_at``, ``recorded_at``): the memories (``memory_meta``), their events, relations, the
span ledger, contradictions, session summaries and task skills from the catalog, and the memory
vectors (id, version and the vector's float32 bytes) from LanceDB. A refactoring that must not
change what the flow stores is checked by running the same input into two homes, before and
after, and comparing these lines.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

TABLES = (
    "memory_meta",
    "memory_events",
    "memory_relations",
    "spans",
    "contradictions",
    "session_summaries",
    "task_skills",
)
WALL_CLOCK = {"processed_at", "recorded_at"}


def _digest(rows: list[tuple]) -> str:
    h = hashlib.sha256()
    for row in sorted(rows, key=repr):
        h.update(repr(row).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()[:16]


def fingerprint(home: str) -> dict[str, dict[str, object]]:
    """``{table: {"rows": n, "hash": h}}`` for the catalog tables and the memory vectors."""
    import duckdb
    import lancedb

    out: dict[str, dict[str, object]] = {}
    con = duckdb.connect(str(Path(home) / "catalog.duckdb"), read_only=True)
    try:
        for table in TABLES:
            cols = [
                r[0]
                for r in con.execute(
                    "select column_name from information_schema.columns where table_name = ? "
                    "order by ordinal_position",
                    [table],
                ).fetchall()
                if r[0] not in WALL_CLOCK
            ]
            if not cols:
                continue
            quoted = ", ".join(f'"{c}"::VARCHAR' for c in cols)  # no timezone objects
            rows = con.execute(f'select {quoted} from "{table}"').fetchall()
            out[table] = {"rows": len(rows), "hash": _digest(rows)}
    finally:
        con.close()
    db = lancedb.connect(str(Path(home) / "lancedb"))
    memories: Any = None
    try:
        memories = db.open_table("memories")
    except (FileNotFoundError, ValueError):
        pass
    if memories is not None:
        data = memories.to_arrow().select(["id", "version", "vector"])
        vectors = np.asarray(data["vector"].to_pylist(), dtype=np.float32)
        rows = [
            (i, v, vec.tobytes().hex())
            for i, v, vec in zip(data["id"].to_pylist(), data["version"].to_pylist(), vectors)
        ]
        out["vectors"] = {"rows": len(rows), "hash": _digest(rows)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("home")
    ap.add_argument("--json", help="also write the hashes to this file")
    args = ap.parse_args(argv)
    prints = fingerprint(args.home)
    for table, v in prints.items():
        print(f"{table:18} {v['rows']:>8} rows  {v['hash']}")
    if args.json:
        Path(args.json).write_text(json.dumps(prints, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
