"""A home's content as a few short hashes: two homes with equal hashes hold the same memories.

    python benchmarks/fingerprint.py HOME [--json FILE]

Each line hashes one table's rows, sorted, over every column but the wall-clock ones
(``processed_at``, ``recorded_at``): the memories (``memory_meta``), their events, relations, the
span ledger, contradictions, session summaries and task skills from the catalog, and the memory
vectors (id, version and the vector's float32 bytes) from LanceDB. A refactoring that must not
change what the flow stores is checked by running the same input into two homes, before and
after, and comparing these lines.

The ``*_without_nodes`` lines hash the same rows with the reorganizer's topic nodes left out
(memories of kind ``topic``, their events and vectors, and the ``member_of`` relations): a change
to topic nodes alone must leave them equal. ``topic_nodes`` counts the nodes, their versions and
their ``member_of`` rows.
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
NOT_NODES = {
    "memory_meta": "kind <> 'topic'",
    "memory_events": "memory_id not in (select id from memory_meta where kind = 'topic')",
    "memory_relations": "relation <> 'member_of'",
}
"""Each table's rows that are not the reorganizer's topic nodes."""


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
            apart = NOT_NODES.get(table)
            if apart:
                rows = con.execute(f'select {quoted} from "{table}" where {apart}').fetchall()
                out[f"{table}_without_nodes"] = {"rows": len(rows), "hash": _digest(rows)}
        nodes = con.execute(
            "select count(*), coalesce(sum(version), 0) from memory_meta where kind = 'topic'"
        ).fetchone()
        links = con.execute(
            "select count(*) from memory_relations where relation = 'member_of'"
        ).fetchone()
        assert nodes is not None and links is not None
        out["topic_nodes"] = {
            "rows": int(nodes[0]),
            "versions": int(nodes[1]),
            "member_of": int(links[0]),
        }
    finally:
        con.close()
    db = lancedb.connect(str(Path(home) / "lancedb"))
    memories: Any = None
    try:
        memories = db.open_table("memories")
    except (FileNotFoundError, ValueError):
        pass
    if memories is not None:
        data = memories.to_arrow().select(["id", "version", "vector", "kind"])
        vectors = np.asarray(data["vector"].to_pylist(), dtype=np.float32)
        rows = [
            (i, v, vec.tobytes().hex())
            for i, v, vec in zip(data["id"].to_pylist(), data["version"].to_pylist(), vectors)
        ]
        out["vectors"] = {"rows": len(rows), "hash": _digest(rows)}
        kinds = data["kind"].to_pylist()
        rows = [r for r, kind in zip(rows, kinds) if kind != "topic"]
        out["vectors_without_nodes"] = {"rows": len(rows), "hash": _digest(rows)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("home")
    ap.add_argument("--json", help="also write the hashes to this file")
    args = ap.parse_args(argv)
    prints = fingerprint(args.home)
    for table, v in prints.items():
        if "hash" in v:
            print(f"{table:28} {v['rows']:>8} rows  {v['hash']}")
        else:
            print(f"{table:28} " + ", ".join(f"{k} {n}" for k, n in v.items()))
    if args.json:
        Path(args.json).write_text(json.dumps(prints, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
