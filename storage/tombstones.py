"""What an owner's state holds that LanceDB does not: expired memories, open contradictions and
the members of its topic nodes.

When a memory expires, the store sink deletes its LanceDB row (the vector and full-text indexes
forget it) and keeps its minimal ``memory_meta`` row and its events (``storage.writer``). An
owner's state is read from LanceDB, so whoever builds one (the flow's hydration, ``skillstream
maintain``) adds these rows back from the catalog: the lifecycle still knows each expired id
(an expired topic node or summary is not written again under the same id, and a contradiction
with an expired side can be settled), and a run resumed from the store sees what an uninterrupted
run has in its state. The same readers add the owner's unresolved contradictions (and which of them
were escalated already) from the ``contradictions`` table, so escalation after a resume or in a
later run happens as in a state that never left memory (:class:`OpenContradictions`), and each
topic node's members at its last version, from ``memory_relations`` (:class:`TopicMembers`): the
reorganizer writes a node's new version as the members that joined and left since.

Example:
    >>> stones = Tombstones.read(catalog)  # doctest: +SKIP
    >>> stones.owner("u1")  # doctest: +SKIP
    [Memory(id='mem_…', status='expired', text='', ...)]
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from skillstream.lifecycle.contradictions import TABLE as CONTRADICTIONS
from skillstream.lifecycle.contradictions import UNRESOLVED
from skillstream.lifecycle.reorganizer import MEMBER_OF
from skillstream.lifecycle.states import UNINDEXED_SQL
from skillstream.memories import OwnerMemories
from skillstream.model import Memory
from skillstream.storage import filters
from skillstream.storage.lance import memory_from_row
from skillstream.vocab import LifecycleEvent

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
    def read(
        cls,
        catalog: Any,
        owner_id: str | None = None,
        *,
        owner_ids: Sequence[str] | None = None,
    ) -> Tombstones:
        """The expired memories in ``catalog`` (of one owner, some, or all), without task-skill
        items.

        Args:
            catalog: An open ``Catalog`` (read-only is enough), or ``None`` for a new home.
            owner_id: Only this owner's rows.
            owner_ids: Only these owners' rows.
        """
        if catalog is None or not catalog.has(TABLE):
            return cls()
        where = filters.where_all(
            UNINDEXED_SQL,
            filters.not_skill_item(),
            filters.eq("owner_id", owner_id) if owner_id is not None else None,
            filters.is_in("owner_id", list(owner_ids)) if owner_ids is not None else None,
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


class OpenContradictions:
    """The unresolved contradictions of a home's owners, and which were escalated already (read
    once from the catalog), for the states read back from the store: escalation then goes on as
    in a state that never left memory."""

    def __init__(
        self,
        open_: dict[str, dict[str, tuple[str, str, datetime]]] | None = None,
        escalated: dict[str, set[str]] | None = None,
    ) -> None:
        self.open = open_ or {}
        self.escalated = escalated or {}

    @classmethod
    def read(
        cls,
        catalog: Any,
        owner_id: str | None = None,
        *,
        owner_ids: Sequence[str] | None = None,
    ) -> OpenContradictions:
        """Read them from ``catalog`` (of one owner, some, or all); ``None`` reads as none."""
        if catalog is None or not catalog.has(CONTRADICTIONS):
            return cls()
        mine = owners_where(owner_id, owner_ids)
        rows = catalog.sql(
            f"SELECT owner_id, contradiction_id, memory_a, memory_b, detected_at "
            f"FROM {CONTRADICTIONS} WHERE resolution = ? AND detected_at IS NOT NULL AND {mine}",
            [UNRESOLVED],
        ).to_pylist()
        found: dict[str, dict[str, tuple[str, str, datetime]]] = {}
        for r in rows:
            found.setdefault(r["owner_id"], {})[r["contradiction_id"]] = (
                r["memory_a"],
                r["memory_b"],
                r["detected_at"].astimezone(UTC),
            )
        done: dict[str, set[str]] = {}
        if found and catalog.has("memory_events"):
            events = catalog.sql(
                f"SELECT DISTINCT owner_id, reason FROM memory_events WHERE event = ? AND {mine}",
                [LifecycleEvent.ESCALATED.value],
            ).to_pylist()
            for e in events:
                for cid in found.get(e["owner_id"], {}):
                    if cid in (e["reason"] or ""):
                        done.setdefault(e["owner_id"], set()).add(cid)
        return cls(found, done)

    def fill(self, state: OwnerMemories) -> OwnerMemories:
        """Add the owner's open and escalated contradictions to ``state``; returns it."""
        state.open_contradictions.update(self.open.get(state.owner_id, {}))
        state.escalated.update(self.escalated.get(state.owner_id, set()))
        return state


RELATIONS = "memory_relations"


def owners_where(owner_id: str | None, owner_ids: Sequence[str] | None) -> str:
    """A filter on ``owner_id``: one owner, some, or all (``true``)."""
    return (
        filters.where_all(
            filters.eq("owner_id", owner_id) if owner_id is not None else None,
            filters.is_in("owner_id", list(owner_ids)) if owner_ids is not None else None,
        )
        or "true"
    )


MEMBERS_SQL = """
WITH m AS (
    SELECT owner_id, target_id, source_id, version, weight, {change} AS change
    FROM memory_relations WHERE relation = ? AND {where}
),
listed AS (
    SELECT target_id, max(version) AS version FROM m WHERE change IS NULL GROUP BY target_id
),
latest AS (
    SELECT m.*, row_number() OVER (
        PARTITION BY m.target_id, m.source_id ORDER BY m.version DESC
    ) AS nth
    FROM m LEFT JOIN listed l ON l.target_id = m.target_id
    WHERE l.version IS NULL OR m.version > l.version
       OR (m.version = l.version AND m.change IS NULL)
)
SELECT owner_id, target_id, source_id FROM latest
WHERE nth = 1 AND coalesce(change, 'join') = 'join'
ORDER BY owner_id, target_id, weight DESC NULLS LAST, source_id
"""
"""Every topic node's current members, most central first: the rows of the node's latest whole
listing (``member_of`` rows without ``change``), then each member's latest change after it, kept
when it is a ``join`` (``model.MemoryRelationRow``). ``{change}`` is ``NULL`` in a catalog written
before the column existed, where every version is a whole listing."""


def node_members(
    catalog: Any, owner_id: str | None = None, *, owner_ids: Sequence[str] | None = None
) -> dict[str, dict[str, tuple[str, ...]]]:
    """Owner -> topic node -> its members (most central first), from ``catalog`` (of one owner,
    some, or all); ``None``, or a catalog without relations, reads as none."""
    if catalog is None or not catalog.has(RELATIONS):
        return {}
    mine = owners_where(owner_id, owner_ids)
    change = "change" if "change" in catalog.columns(RELATIONS) else "NULL"
    rows = catalog.sql(MEMBERS_SQL.format(change=change, where=mine), [MEMBER_OF])
    found: dict[str, dict[str, list[str]]] = {}
    for owner, node, member in zip(
        rows.column("owner_id").to_pylist(),
        rows.column("target_id").to_pylist(),
        rows.column("source_id").to_pylist(),
        strict=True,
    ):
        found.setdefault(owner, {}).setdefault(node, []).append(member)
    return {o: {n: tuple(ms) for n, ms in nodes.items()} for o, nodes in found.items()}


def members_by_node(catalog: Any) -> dict[str, list[str]]:
    """Topic node -> its members (most central first), every owner's (:func:`node_members`)."""
    found = node_members(catalog).values()
    return {node: list(ms) for nodes in found for node, ms in nodes.items()}


class TopicMembers:
    """The members of a home's topic nodes at their last versions, per owner (read once from the
    catalog with :func:`node_members`), for the states read back from the store: the reorganizer
    then writes each node's next version as what changed, as in a state that never left memory."""

    def __init__(self, members: dict[str, dict[str, tuple[str, ...]]] | None = None) -> None:
        self.members = members or {}

    def fill(self, state: OwnerMemories) -> OwnerMemories:
        """Add the owner's topic nodes' members to ``state``; returns it."""
        state.topic_members.update(self.members.get(state.owner_id, {}))
        return state


def owner_state(index: Any, catalog: Any, owner_id: str) -> OwnerMemories:
    """One owner's state read back from the store: its memories (:func:`owner_memories`), its
    open contradictions and its topic nodes' members."""
    state = OwnerMemories(owner_id)
    for m in owner_memories(index, catalog, owner_id):
        state.put(m)
    OpenContradictions.read(catalog, owner_id).fill(state)
    return TopicMembers(node_members(catalog, owner_id)).fill(state)
