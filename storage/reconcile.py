"""Bring LanceDB back to what the catalog committed, before a run resumes.

The store sink (:mod:`skillstream.storage.writer`) writes a batch to LanceDB first and commits it to
the catalog second, ending with the span ledger. A crash between the two leaves LanceDB *ahead*:
rows written for spans (or task segments) the ledger does not have. Those run again when the flow
resumes; an owner whose state is read from LanceDB would then meet its own earlier output as
existing memories and reinforce it (same ids, higher versions) instead of writing the same rows.

Two LanceDB tables have a committed copy in the catalog under the same name, without the vector:
``memories`` (``memory_meta`` in the catalog) and ``task_skills``. For each,
:func:`reconcile_table` makes LanceDB agree with the catalog:

* a row whose id the catalog never committed is deleted;
* a row whose version differs from the committed one is replaced by the committed row (its
  columns from the catalog, its vector the embedding of the committed text);
* a committed row missing from LanceDB (a crash inside an earlier reconcile) is written back.

Committed rows that LanceDB must not hold count as not committed: an expired memory (its minimal
row in ``memory_meta``) is deleted from LanceDB if a replay wrote it back, and never restored.

A home that is already consistent (the usual case) is recognised by a checksum of the
``(id, version)`` pairs on both sides (count and sum of 64-bit hashes, read streaming), so a run's
start does not join two tables of millions of rows; only a mismatch compares them row by row.

Every command that writes both stores outside a run (``maintain``, settling a contradiction,
``import memories``, the task-skill commands) reconciles first, with :func:`reconcile_stores` on the
stores it has open or :func:`reconcile_home`: a command killed between its two writes leaves
LanceDB ahead just as a run does, and the next command must not read that as committed.

Run :func:`reconcile_home` once per home before the flow starts, in the process that owns the store
sink; it opens the catalog once, read-only, and never writes it. With a shared catalog every store
partition writes its own owners, so each partition reconciles only those (``owners``) before it
writes: rows of other owners may be in flight in other processes and are left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from skillstream.embed import Embed
from skillstream.lifecycle.states import UNINDEXED_SQL
from skillstream.settings import Settings
from skillstream.storage import filters
from skillstream.storage.catalog import Catalog, catalog_exists, open_catalog
from skillstream.storage.home import Stores, open_index
from skillstream.storage.lance import LanceTable, MemoryIndex, memory_from_row

log = logging.getLogger(__name__)

Restore = Callable[[list[dict[str, Any]]], None]
"""Writes committed catalog rows (no vectors) back to the LanceDB table, embedding them."""

Owners = Callable[[str], bool]
"""Which owners a reconcile may touch (``owner_id`` -> keep); ``None`` means every owner."""

_DIFF = """
SELECT coalesce(l.id, c.id) AS id, coalesce(l.owner_id, c.owner_id) AS owner_id,
       l.version AS lance_version, c.version AS committed_version
FROM (SELECT id, owner_id, version FROM lance_rows) AS l
FULL OUTER JOIN (SELECT id, owner_id, version FROM {committed} WHERE {where}) AS c ON l.id = c.id
WHERE c.id IS NULL OR l.id IS NULL OR l.version <> c.version
"""


_SUMMARY = """
SELECT count(*) AS n, coalesce(sum(hash(id, version::BIGINT)::HUGEINT), 0) AS h FROM {rows}
WHERE {where}
"""
"""A checksum of a table's (id, version) pairs: equal for two tables holding the same pairs, and
computed streaming, so a consistent home is confirmed without joining the two tables."""


@dataclass
class Reconciled:
    """What a reconcile changed in one LanceDB table."""

    deleted: int = 0
    rolled_back: int = 0
    restored: int = 0

    @property
    def changed(self) -> int:
        return self.deleted + self.rolled_back + self.restored


def reconcile_table(
    cat: Catalog | None,
    table: LanceTable,
    committed: str,
    restore: Restore,
    owners: Owners | None = None,
    where: str = "true",
    scope: str = "true",
) -> Reconciled:
    """Make one LanceDB table agree with its committed copy in the catalog.

    Args:
        cat: The catalog, open (read-only is enough); ``None`` when it does not exist yet, which
            means nothing was committed.
        table: The LanceDB table (key ``id``, version column ``version``).
        committed: The catalog table holding the committed rows (a trusted constant).
        restore: Writes committed rows back to ``table``.
        owners: Only rows of these owners are compared and changed (default: all).
        where: The committed rows LanceDB holds (a trusted SQL condition); the others are
            treated as never committed.
        scope: The rows compared at all, on both sides (a trusted SQL condition on
            ``owner_id``; pushed down to LanceDB).

    Returns:
        Counts of deleted, rolled-back and restored rows (all zero for a consistent home).
    """
    done = Reconciled()
    dataset = table.to_lance()
    if dataset is None:
        return done
    diff, rows = _compare(cat, dataset, committed, where, scope)
    if owners is not None:
        diff = [d for d in diff if owners(d["owner_id"])]
        rows = [r for r in rows if owners(r["owner_id"])]
    if not diff:
        return done
    stale = [d["id"] for d in diff if d["committed_version"] is None]
    replaced = [
        d["id"]
        for d in diff
        if d["committed_version"] is not None and d["lance_version"] is not None
    ]
    done.deleted, done.rolled_back = len(stale), len(replaced)
    done.restored = len(diff) - done.deleted - done.rolled_back
    for chunk in _chunks(stale + replaced, 1000):
        table.delete(filters.is_in("id", chunk))
    if rows:
        restore(rows)
    log.warning(
        "LanceDB %s was ahead of the catalog (a run "
        "stopped between the two writes): %d uncommitted "
        "rows deleted, %d rolled back to their committed version, %d restored",
        table.name,
        done.deleted,
        done.rolled_back,
        done.restored,
    )
    return done


def reconcile_memories(
    cat: Catalog | None,
    index: MemoryIndex,
    embed: Embed,
    owners: Owners | None = None,
    scope: str = "true",
) -> Reconciled:
    """:func:`reconcile_table` for the memories (committed copy: ``memory_meta``)."""

    def restore(rows: list[dict[str, Any]]) -> None:
        memories = [memory_from_row(r) for r in rows]
        for m, v in zip(memories, embed([m.text for m in memories])):
            m.vector = np.asarray(v, dtype=np.float32)
        index.upsert(memories)

    return reconcile_table(
        cat, index.table, "memory_meta", restore, owners, f"NOT ({UNINDEXED_SQL})", scope
    )


def reconcile_task_skills(
    cat: Catalog | None,
    db: Any,
    embed: Embed,
    owners: Owners | None = None,
    scope: str = "true",
) -> Reconciled:
    """:func:`reconcile_table` for task skills (committed copy: the catalog's ``task_skills``)."""
    from skillstream.distill.record import TaskSkill
    from skillstream.storage.task_skills import TABLE, TaskSkillIndex

    index = TaskSkillIndex(db, None, create=False)
    if not index.table.exists:
        return Reconciled()

    def restore(rows: list[dict[str, Any]]) -> None:
        skills = [TaskSkill.from_row(r) for r in rows]
        for s, v in zip(skills, embed([s.search_text() for s in skills])):
            s.vector = [float(x) for x in v]
        index.upsert(skills)

    return reconcile_table(cat, index.table, TABLE, restore, owners, scope=scope)


def reconcile_home(
    settings: Settings,
    dim: int,
    embed: Embed,
    owners: Owners | None = None,
    only: Sequence[str] | None = None,
) -> dict[str, Reconciled]:
    """Reconcile every LanceDB table of a home that has a committed copy in the catalog.

    Args:
        settings: The home.
        dim: Embedding width of the memories table.
        embed: Embeds restored rows.
        owners: Only these owners' rows (a store partition of a shared catalog); default all.
        only: Only the rows of these owner ids, read with a filter on both sides (a run of a
            few owners' messages costs what their rows cost, not the home's).
    """
    index = open_index(settings, dim, create=False)
    cat = (
        open_catalog(settings.storage, read_only=True) if catalog_exists(settings.storage) else None
    )
    scope = filters.is_in("owner_id", list(only)) if only is not None else "true"
    try:
        return {
            "memories": reconcile_memories(cat, index, embed, owners, scope),
            "task_skills": reconcile_task_skills(cat, index.db, embed, owners, scope),
        }
    finally:
        if cat is not None:
            cat.close()


def reconcile_stores(stores: Stores, embed: Embed) -> dict[str, Reconciled]:
    """:func:`reconcile_home` on stores a command holds open for writing (every owner)."""
    return {
        "memories": reconcile_memories(stores.catalog, stores.index, embed),
        "task_skills": reconcile_task_skills(stores.catalog, stores.index.db, embed),
    }


Rows = list[dict[str, Any]]


def _compare(
    cat: Catalog | None, dataset: Any, committed: str, where: str, scope: str = "true"
) -> tuple[Rows, Rows]:
    """Ids whose LanceDB and committed versions differ, and the committed rows among them."""
    if scope != "true":  # a few owners: read their rows from LanceDB with the filter pushed down
        dataset = dataset.to_table(columns=["id", "owner_id", "version"], filter=scope)
        where = f"({where}) AND ({scope})"
    if cat is not None and cat.has(committed):
        cat.con.register("lance_rows", dataset)
        try:
            ahead = cat.sql(_SUMMARY.format(rows="lance_rows", where="true")).to_pylist()
            if ahead == cat.sql(_SUMMARY.format(rows=committed, where=where)).to_pylist():
                return [], []  # the usual case: nothing to compare row by row
            diff = cat.sql(_DIFF.format(committed=committed, where=where)).to_pylist()
        finally:
            cat.con.unregister("lance_rows")
        fix = [d["id"] for d in diff if d["committed_version"] is not None]
        return diff, _committed_rows(cat, committed, fix)
    # Nothing committed yet: every LanceDB row is ahead of the catalog.
    rows = dataset if scope != "true" else dataset.to_table(columns=["id", "owner_id"])
    found = rows.select(["id", "owner_id"]).to_pylist()
    return [
        {"id": r["id"], "owner_id": r["owner_id"], "lance_version": None, "committed_version": None}
        for r in found
    ], []


def _committed_rows(cat: Catalog, committed: str, ids: list[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for chunk in _chunks(ids, 1000):
        rows += cat.sql(
            f"SELECT * FROM {committed} WHERE id IN (SELECT unnest(?))", [chunk]
        ).to_pylist()
    return rows


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
