"""Bring LanceDB back to what the catalog committed, before a run resumes.

The store sink (:mod:`skillstream.storage.sinks`) writes a batch to LanceDB first and commits it to
the catalog second, ending with the span ledger. A crash between the two leaves LanceDB *ahead*:
memories inserted or changed by spans the ledger does not have. Those spans run again when the flow
resumes; an owner whose state is hydrated from LanceDB would then meet the span's own earlier output
as existing memories and reinforce it (same ids, higher versions) instead of writing the same rows.

:func:`reconcile_memories` makes the LanceDB ``memories`` table agree with ``memory_meta``:

* a row whose id the catalog never committed is deleted;
* a row whose version is ahead of the committed one is replaced by the committed row (its columns
  from ``memory_meta``, its vector the embedding of the committed text);
* a committed memory missing from LanceDB (a crash inside an earlier reconcile) is written back.

Run it once per home before the flow starts, in the process that owns the store sink; it reads
the catalog read-only and never writes it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from skillstream.model import Memory
from skillstream.storage import filters
from skillstream.storage.catalog import Catalog
from skillstream.storage.lance import MemoryIndex

log = logging.getLogger(__name__)

Embed = Callable[[Sequence[str]], np.ndarray]

_DIFF = """
SELECT coalesce(l.id, m.id) AS id, l.version AS lance_version, m.version AS committed_version
FROM (SELECT id, version FROM lance_memories) AS l
FULL OUTER JOIN (SELECT id, version FROM memory_meta) AS m ON l.id = m.id
WHERE m.id IS NULL OR l.id IS NULL OR l.version <> m.version
"""


@dataclass
class Reconciled:
    """What :func:`reconcile_memories` changed in LanceDB."""

    deleted: int = 0
    rolled_back: int = 0
    restored: int = 0

    @property
    def changed(self) -> int:
        return self.deleted + self.rolled_back + self.restored


def reconcile_memories(catalog_path: str, index: MemoryIndex, embed: Embed) -> Reconciled:
    """Make the LanceDB memories agree with the catalog's committed ``memory_meta``.

    Args:
        catalog_path: The DuckDB catalog file (a missing file means nothing was committed).
        index: The LanceDB memories table to repair.
        embed: Text embedder for the vectors of rolled-back and restored rows.

    Returns:
        Counts of deleted, rolled-back and restored rows (all zero for a consistent home).
    """
    done = Reconciled()
    dataset = index.to_lance()
    if dataset is None:
        return done
    diff, committed = _compare(catalog_path, dataset)
    if not diff:
        return done
    stale = [d["id"] for d in diff if d["committed_version"] is None]
    rewrite = [d for d in diff if d["committed_version"] is not None]
    done.deleted = len(stale)
    done.rolled_back = sum(1 for d in rewrite if d["lance_version"] is not None)
    done.restored = len(rewrite) - done.rolled_back
    ids = stale + [d["id"] for d in rewrite if d["lance_version"] is not None]
    for chunk in _chunks(ids, 1000):
        index.table.delete(filters.is_in("id", chunk))
    memories = [_memory(row) for row in committed]
    if memories:
        vectors = embed([m.text for m in memories])
        for m, v in zip(memories, vectors):
            m.vector = np.asarray(v, dtype=np.float32)
        index.upsert(memories)
    log.warning(
        "LanceDB memories were ahead of the catalog (a run stopped between the two writes): "
        "%d uncommitted rows deleted, %d rolled back to their committed version, %d restored",
        done.deleted, done.rolled_back, done.restored,
    )
    return done


def _compare(catalog_path: str, dataset: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rows whose LanceDB and committed versions differ, and the committed rows among them."""
    if Path(catalog_path).exists():
        with Catalog(catalog_path, read_only=True) as cat:
            if cat.has("memory_meta"):
                cat.con.register("lance_memories", dataset)
                diff = cat.sql(_DIFF).to_pylist()
                return diff, _committed_rows(cat, [d["id"] for d in diff if d["committed_version"] is not None])
    # Nothing committed yet: every LanceDB row is ahead of the catalog.
    ids = dataset.to_table(columns=["id"])["id"].to_pylist()
    return [{"id": i, "lance_version": None, "committed_version": None} for i in ids], []


def _memory(row: dict[str, Any]) -> Memory:
    for name in ("tags", "source_message_ids"):
        if row.get(name) is None:
            row[name] = []
    return Memory(**row)


def _committed_rows(cat: Catalog, ids: list[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for chunk in _chunks(ids, 1000):
        rows += cat.sql("SELECT * FROM memory_meta WHERE id IN (SELECT unnest(?))", [chunk]).to_pylist()
    return rows


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i:i + size] for i in range(0, len(items), size)]
