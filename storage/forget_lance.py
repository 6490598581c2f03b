"""Forgetting an owner in LanceDB: its rows, and every file that still holds them.

LanceDB deletes a row by writing a deletion file beside the data file that holds it; the row stays
in that file, in every older version of the table, and in the indexes (the full-text index keeps
its words, a scalar index the owner id, a vector index its vector). So for every table of the
database with an ``owner_id`` column (found from the tables' schemas: ``memories``, where the
task skills' ``SkillMemory`` items are too, and ``task_skills``):

1. the owner's rows are deleted;
2. the data files are compacted with deletions materialised (every file with a deleted row is
   written anew without it);
3. every index is built again from the remaining rows (same column, same kind; an index of a
   kind not known here is dropped, and the next ``optimize`` makes it again);
4. every older version is removed, with the files only it used.

Steps 2 to 4 run on every owner table at each erasure, whether or not step 1 found rows, so a
second run after a kill finishes what the first began. Other owners' rows keep their content;
their files are rewritten and the table's history (time travel) starts anew.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import lancedb

from skillstream.storage.filters import eq
from skillstream.storage.lance import retry_conflicts, vector_index
from skillstream.tables import OWNER_COLUMN

log = logging.getLogger(__name__)

_SCALAR = {
    "BTree": lancedb.index.BTree,
    "Bitmap": lancedb.index.Bitmap,
    "LabelList": lancedb.index.LabelList,
}
_VECTOR = {"IvfPq": "ivf_pq", "IvfFlat": "ivf_flat", "IvfHnswSq": "ivf_hnsw_sq"}


def owner_tables(db: Any) -> list[str]:
    """The database's tables with an ``owner_id`` column."""
    names = []
    for name in sorted(db.table_names()):
        if OWNER_COLUMN in db.open_table(name).schema.names:
            names.append(name)
    return names


def count_rows(db: Any, owner: str) -> dict[str, int]:
    """The owner's rows per table (tables with none left out)."""
    out = {}
    for name in owner_tables(db):
        n = db.open_table(name).count_rows(eq(OWNER_COLUMN, owner))
        if n:
            out[name] = int(n)
    return out


def erase(db: Any, owner: str, *, unverified: bool) -> dict[str, int]:
    """Delete the owner's rows and every file that held them (see the module docstring).

    Args:
        db: The LanceDB connection.
        owner: The owner id.
        unverified: Also delete files no version names that are younger than LanceDB's
            safety margin (7 days): files of a write that never committed, which may hold the
            owner's rows. Only safe while no other process writes (the run lock is held).

    Returns:
        Rows deleted per table, and ``lance_versions_removed``.
    """
    out: dict[str, int] = {}
    removed = 0
    for name in owner_tables(db):
        tbl = db.open_table(name)
        where = eq(OWNER_COLUMN, owner)
        n = int(tbl.count_rows(where))
        if n:
            retry_conflicts(lambda t=tbl, w=where: t.delete(w), name)
            out[name] = n
        removed += _rewrite(tbl, name, unverified=unverified)
    out["lance_versions_removed"] = removed
    return out


def _rewrite(tbl: Any, name: str, *, unverified: bool) -> int:
    """Steps 2 to 4 for one table; the number of versions removed."""
    ds = tbl.to_lance()
    ds.optimize.compact_files(materialize_deletions=True, materialize_deletions_threshold=0.0)
    tbl.checkout_latest()
    dim = None
    vector = tbl.schema.field("vector") if "vector" in tbl.schema.names else None
    if vector is not None:
        dim = vector.type.list_size
    for ix in tbl.list_indices():
        column, kind = ix.columns[0], str(ix.index_type)
        config: Any
        if kind == "FTS":
            config = lancedb.index.FTS()
        elif kind in _SCALAR:
            config = _SCALAR[kind]()
        elif kind in _VECTOR and dim is not None:
            config = vector_index(_VECTOR[kind], dim)
        else:
            # an index this code cannot build again would keep the deleted rows' entries: it
            # goes, and the table's next optimize makes the indexes its policy asks for
            log.warning(
                "%s: index %s of kind %s dropped (built again by optimize)", name, ix.name, kind
            )
            tbl.drop_index(ix.name)
            continue
        tbl.create_index(column, config=config, replace=True)
    ds = tbl.to_lance()
    stats = ds.cleanup_old_versions(older_than=timedelta(0), delete_unverified=unverified)
    return int(getattr(stats, "old_versions", 0))
