"""A topic node's members read back from ``memory_relations`` on a real DuckDB catalog: rows
written as joins and leaves, whole listings (homes written before changes), a catalog from before
the ``change`` column, and an owner's state read back with them."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from skillstream.ids import prefixed_id
from skillstream.lifecycle.reorganizer import JOIN, LEAVE, MEMBER_OF
from skillstream.model import MemoryRelationRow
from skillstream.storage.catalog import Catalog
from skillstream.storage.tombstones import node_members, owner_state

from .conftest import DIM, make_memory

AT = datetime(2024, 5, 1, tzinfo=UTC)


def row(owner, node, member, version, change, weight=None):
    return dataclasses.asdict(
        MemoryRelationRow(
            relation_id=prefixed_id("rel", member, node, MEMBER_OF, version),
            owner_id=owner,
            source_id=member,
            target_id=node,
            relation=MEMBER_OF,
            rank=None if change == LEAVE else 0,
            weight=weight,
            version=version,
            event_ts=AT,
            recorded_at=AT,
            change=change,
        )
    )


def listing(owner, node, members, version):
    """A whole listing: the node's members at ``version``, most central first."""
    return [row(owner, node, m, version, None, 1.0 - i / 10) for i, m in enumerate(members)]


def test_joins_and_leaves_give_the_current_members_most_central_first(tmp_path):
    with Catalog(str(tmp_path / "catalog.duckdb")) as cat:
        cat.upsert(
            "memory_relations",
            [
                row("o1", "n1", "a", 1, JOIN, 0.9),
                row("o1", "n1", "b", 1, JOIN, 0.8),
                row("o1", "n1", "c", 1, JOIN, 0.7),
                row("o1", "n1", "b", 2, LEAVE),
                row("o1", "n1", "d", 2, JOIN, 0.95),
                row("o1", "n1", "c", 3, LEAVE),
                row("o1", "n1", "b", 3, JOIN, 0.85),  # came back
                row("o2", "n2", "x", 1, JOIN, 0.5),
                # another relation is not a membership
                {**row("o1", "n1", "z", 1, None, 0.99), "relation": "consolidated_into"},
            ],
        )
        assert node_members(cat) == {"o1": {"n1": ("d", "a", "b")}, "o2": {"n2": ("x",)}}
        assert node_members(cat, "o2") == {"o2": {"n2": ("x",)}}
        assert node_members(cat, owner_ids=["o1"]) == {"o1": {"n1": ("d", "a", "b")}}


def test_a_whole_listing_replaces_what_came_before_it(tmp_path):
    """Homes written before memberships were changes list every member at every version; a state
    that did not know a node's members lists them whole too."""
    with Catalog(str(tmp_path / "catalog.duckdb")) as cat:
        cat.upsert(
            "memory_relations",
            [
                *listing("o1", "n1", ["a", "b", "c"], 1),
                *listing("o1", "n1", ["c", "a", "d"], 2),  # b left, d came in
                row("o1", "n1", "e", 3, JOIN, 0.1),
                row("o1", "n1", "a", 3, LEAVE),
            ],
        )
        assert node_members(cat) == {"o1": {"n1": ("c", "d", "e")}}
        cat.upsert("memory_relations", listing("o1", "n1", ["b"], 4))
        assert node_members(cat) == {"o1": {"n1": ("b",)}}


def test_a_catalog_from_before_the_change_column_reads_as_whole_listings(tmp_path):
    path = str(tmp_path / "catalog.duckdb")
    with Catalog(path) as cat:
        cat.upsert(
            "memory_relations",
            [*listing("o1", "n1", ["a", "b"], 1), *listing("o1", "n1", ["b", "c"], 2)],
        )
        cat.con.execute("ALTER TABLE memory_relations DROP COLUMN change")
    old = Catalog(path, read_only=True)
    try:
        assert "change" not in old.columns("memory_relations")
        assert node_members(old) == {"o1": {"n1": ("b", "c")}}
    finally:
        old.close()
    with Catalog(path) as cat:  # a writer adds the column; the old rows stay whole listings
        assert "change" in cat.columns("memory_relations")
        cat.upsert("memory_relations", [row("o1", "n1", "b", 3, LEAVE)])
        assert node_members(cat) == {"o1": {"n1": ("c",)}}


def test_an_owner_read_back_from_the_store_knows_its_nodes_members(tmp_path):
    from skillstream.storage.lance import MemoryIndex

    index = MemoryIndex(str(tmp_path / "lancedb"), dim=DIM)
    m1, m2 = make_memory(1, owner="o1"), make_memory(2, owner="o1")
    index.upsert([m1, m2])
    with Catalog(str(tmp_path / "catalog.duckdb")) as cat:
        cat.upsert(
            "memory_relations",
            [row("o1", "n1", m1.id, 1, JOIN, 0.9), row("o1", "n1", m2.id, 1, JOIN, 0.8)],
        )
        state = owner_state(index, cat, "o1")
    assert sorted(state.items) == [m1.id, m2.id]
    assert state.topic_members == {"n1": (m1.id, m2.id)}
    assert owner_state(index, None, "o2").topic_members == {}
