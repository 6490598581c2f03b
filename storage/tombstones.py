"""Expired memories: gone from LanceDB, kept as minimal rows in the catalog.

When a memory expires, the store sink deletes its LanceDB row (the vector and full-text indexes
forget it) and keeps its minimal ``memory_meta`` row and its events (``storage.writer``). An
owner's state is read from LanceDB, so whoever builds one (the flow's hydration, ``skillstream
maintain``) adds these rows back from the catalog: the lifecycle still knows each expired id
(an expired topic node or summary is not written again under the same id, and a contradiction
with an expired side can be settled), and a run resumed from the store sees what an uninterrupted
run has in its state.

Example:
    >>> stones = Tombstones.read(catalog)  # doctest: +SKIP
    >>> stones.owner("u1")  # doctest: +SKIP
    [Memory(id='mem_…', status='expired', text='', ...)]
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from skillstream.lifecycle.states import UNINDEXED_SQL
from skillstream.model import Memory
from skillstream.storage import filters
from skillstream.storage.lance import memory_from_row

TABLE = "memory_meta"


class Tombstones:
    """The minimal rows of a home's expired memories, grouped by owner (read once)."""

    def __init__(self, rows: pa.Table | None = None) -> None:
        self._rows = rows
        self._slices: dict[str, tuple[int, int]] = {}
        if rows is not None and rows.num_rows:
            owners = rows.column("owner_id").to_pylist()
            start = 0
            for i in range(1, len(owners) + 1):
                if i == len(owners) or owners[i] != owners[start]:
                    self._slices[owners[start]] = (start, i - start)
                    start = i

    @classmethod
    def read(cls, catalog: Any, owner_id: str | None = None) -> Tombstones:
        """The expired memories in ``catalog`` (of one owner, or all), without task-skill items.

        Args:
            catalog: An open ``Catalog`` (read-only is enough), or ``None`` for a new home.
            owner_id: Only this owner's rows.
        """
        if catalog is None or not catalog.has(TABLE):
            return cls()
        where = filters.where_all(
            UNINDEXED_SQL,
            filters.not_skill_item(),
            filters.eq("owner_id", owner_id) if owner_id is not None else None,
        )
        rows = catalog.sql(f"SELECT * FROM {TABLE} WHERE {where} ORDER BY owner_id, id")
        return cls(rows)

    def __len__(self) -> int:
        return self._rows.num_rows if self._rows is not None else 0

    def owners(self) -> list[str]:
        """Owners with at least one expired memory."""
        return sorted(self._slices)

    def owner(self, owner_id: str) -> list[Memory]:
        """One owner's expired memories (no vector), by id."""
        where = self._slices.get(owner_id)
        if where is None or self._rows is None:
            return []
        return [memory_from_row(r) for r in self._rows.slice(*where).to_pylist()]


def owner_memories(index: Any, catalog: Any, owner_id: str) -> list[Memory]:
    """One owner's memories as its state holds them: the LanceDB rows (``MemoryIndex``) and the
    minimal rows of its expired memories from ``catalog``."""
    return [*index.owner_memories(owner_id), *Tombstones.read(catalog, owner_id).owner(owner_id)]
