"""The reconcile's checksum: a consistent home is recognised without a row-by-row comparison, and
a LanceDB table that differs only in one row's version (same ids, same count) is still caught."""

from __future__ import annotations

from skillstream.storage.catalog import Catalog
from skillstream.storage.lance import MemoryIndex
from skillstream.storage.reconcile import reconcile_memories

from .conftest import make_memory

WIDTH = 8


def embed(texts: list[str]) -> list[list[float]]:
    return [[1.0] + [0.0] * (WIDTH - 1) for _ in texts]


def test_only_a_version_differs_and_reconcile_rolls_it_back(tmp_path):
    items = [make_memory(i, owner=f"u{i % 3}", vector=embed(["x"])[0]) for i in range(40)]
    index = MemoryIndex(str(tmp_path / "db"), WIDTH)
    index.upsert(items)
    cat = Catalog(str(tmp_path / "catalog.duckdb"))
    try:
        rows = []
        for m in items:
            row = m.row()
            row.pop("vector", None)
            rows.append(row)
        cat.insert_ignore("memory_meta", rows)
        assert reconcile_memories(cat, index, embed).changed == 0  # consistent: nothing to do

        ahead = items[7].copy()
        ahead.version += 1
        ahead.text = "a change the catalog never committed"
        index.upsert([ahead])
        assert index.count() == len(items)  # same ids and count: only the version differs

        done = reconcile_memories(cat, index, embed)
        assert (done.deleted, done.rolled_back, done.restored) == (0, 1, 0)
        back = index.table.scan(f"id = '{ahead.id}'").to_pylist()
        assert [(r["version"], r["text"]) for r in back] == [(items[7].version, items[7].text)]
        assert reconcile_memories(cat, index, embed).changed == 0
    finally:
        cat.close()
