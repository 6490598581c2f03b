"""Topic nodes in search: the members of each node, and a ranked list with nodes expanded.

The reorganizer (``skillstream.lifecycle.reorganizer``) links every topic node to its members in
``memory_relations`` (relation ``member_of``, written as the members that joined and left at each
node version; read with ``storage.tombstones.node_members``). A search that
expands nodes replaces each node hit, in place, by its members that the reader may see and that
are searchable, most central first (by cosine to the centre of those members' vectors, as the
reorganizer ranks a cluster's members); a member already in the list keeps its first place.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from skillstream.lifecycle.clusters import unit
from skillstream.settings import StorageSettings
from skillstream.vocab import MemoryKind


class NodeMembers:
    """The current members of every topic node of a home, read once from its catalog.

    Args:
        catalog: An open catalog, or ``None`` to open the home's catalog read-only when needed.
        storage: The home's storage settings (used when ``catalog`` is ``None``).
    """

    def __init__(self, catalog: Any, storage: StorageSettings | None) -> None:
        self.catalog = catalog
        self.storage = storage
        self._members: dict[str, list[str]] | None = None
        self._lock = threading.Lock()

    def members(self, node_id: str) -> list[str]:
        with self._lock:
            if self._members is None:
                self._members = self._load()
        return self._members.get(node_id, [])

    def _load(self) -> dict[str, list[str]]:
        from skillstream.storage.catalog import catalog_exists, open_catalog
        from skillstream.storage.tombstones import members_by_node

        if self.catalog is not None:
            return members_by_node(self.catalog)
        if self.storage is None or not catalog_exists(self.storage):
            return {}
        cat = open_catalog(self.storage, read_only=True)
        try:
            return members_by_node(cat)
        finally:
            cat.close()


def expand(
    hits: Sequence[dict[str, Any]],
    members: Callable[[str], list[str]],
    fetch: Callable[[list[str]], list[dict[str, Any]]],
    k: int,
) -> list[dict[str, Any]]:
    """``hits`` with every topic node replaced by its members (see the module docstring).

    Args:
        hits: Ranked hits.
        members: Node id -> member ids, most central first.
        fetch: Member ids -> the rows of those the reader may see and search (any order).
        k: Length of the result.

    Returns:
        At most ``k`` hits; a member carries its node's ``score``, ``relevance`` and ``recency``
        and ``node_id``.
    """
    wanted = [i for h in hits if h.get("kind") == MemoryKind.TOPIC for i in members(h["id"])]
    rows = {r["id"]: r for r in fetch(list(dict.fromkeys(wanted)))} if wanted else {}
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for h in hits:
        if h.get("kind") != MemoryKind.TOPIC:
            group = [h]
        else:
            group = []
            for r in central_first([rows[i] for i in members(h["id"]) if i in rows]):
                m = dict(r)
                m.pop("vector", None)
                for name in ("score", "relevance", "recency"):
                    m[name] = h.get(name)
                m["node_id"] = h["id"]
                group.append(m)
        for g in group:
            if g["id"] not in seen:
                seen.add(g["id"])
                out.append(g)
    return out[:k]


def central_first(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A node's member rows by cosine to the centre of their vectors (the normalised sum), the
    most central first, ties by id (``reorganizer.build_node``'s order); as given when a row has
    no vector."""
    vectors = [r.get("vector") for r in rows]
    if len(rows) < 2 or any(v is None for v in vectors):
        return list(rows)
    mat = np.asarray(vectors, dtype=np.float32)
    sims = mat @ unit(mat.sum(axis=0))
    order = sorted(range(len(rows)), key=lambda i: (-round(float(sims[i]), 6), rows[i]["id"]))
    return [rows[i] for i in order]
