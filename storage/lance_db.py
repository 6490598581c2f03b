"""A LanceDB database that reads and writes rows through ``lance``, and imports ``lancedb`` only
to create a table or an index, or to compact.

Importing ``lancedb`` takes over a second (most of it the generated client of its namespace
service, which a local or object-store home never uses), more than everything else a ``search``
or a run with nothing new needs. Everything a table's rows need (its schema, its indexes,
counting, the ``lance`` dataset that search and SQL read, upserts, updates and deletes) goes
through ``lance`` itself, which LanceDB writes through too, with the same merge-insert, update
and delete of one dataset version (an upsert into a table whose key has its index goes through
LanceDB: see :class:`Merge`); the ``lancedb`` connection and table are opened the first
time anything else is asked of a table.

Both sides see the latest committed version: datasets are opened afresh for every call, and the
connection is opened with ``read_consistency_interval=0``. ``memory://`` databases live in one
LanceDB connection's memory, so they go through ``lancedb`` for everything.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from typing import Any

import lance

INDEX_TYPES = {
    "Inverted": "FTS",
    "IVF_FLAT": "IvfFlat",
    "IVF_PQ": "IvfPq",
    "IVF_HNSW_SQ": "IvfHnswSq",
    "IVF_HNSW_PQ": "IvfHnswPq",
    "IVF_HNSW_FLAT": "IvfHnswFlat",
}
"""``lance`` index type -> the name LanceDB's ``list_indices`` gives it (others are the same)."""


SMALL_FRAGMENT_ROWS = 100_000
"""A fragment with fewer rows than this is small (LanceDB's ``stats`` counts them so)."""


@dataclass(frozen=True)
class IndexStats:
    """Rows an index covers and rows written since it was last folded in."""

    num_indexed_rows: int
    num_unindexed_rows: int


@dataclass(frozen=True)
class IndexInfo:
    """One index of a table, as LanceDB's ``list_indices`` describes it."""

    name: str
    index_type: str
    columns: list[str]


class Database:
    """A LanceDB database at ``uri`` (see the module's description).

    Args:
        uri: Local folder or object-store URI of the database.
        connect_options: Options of the ``lancedb`` connection (object-store options and
            LanceDB's own, such as the storage version of new tables).
        dataset_options: Object-store options of the ``lance`` datasets (``None``: local).
    """

    def __init__(
        self, uri: str, connect_options: dict | None, dataset_options: dict | None
    ) -> None:
        self.uri = uri
        self.connect_options = connect_options
        self.dataset_options = dataset_options
        self.direct = not uri.startswith("memory://")
        self._connecting = threading.Lock()

    @cached_property
    def lancedb(self) -> Any:
        """The ``lancedb`` connection (imported and opened now if it was not yet)."""
        with self._connecting:
            import lancedb

            return lancedb.connect(
                self.uri,
                storage_options=self.connect_options,
                read_consistency_interval=timedelta(0),
            )

    def path(self, name: str) -> str:
        """The URI of table ``name``'s dataset (as LanceDB places it)."""
        if "://" in self.uri and not self.uri.startswith("file://"):
            return f"{self.uri.rstrip('/')}/{name}.lance"
        from pathlib import Path

        return str(Path(self.uri.removeprefix("file://"), f"{name}.lance"))

    def open_table(self, name: str) -> Any:
        """Table ``name``; ``ValueError`` when it does not exist (as LanceDB raises)."""
        if not self.direct:
            return self.lancedb.open_table(name)
        table = Table(self, name)
        table.to_lance()  # raises ValueError ("... was not found") for a missing table
        return table

    def create_table(self, name: str, schema: Any) -> Any:
        created = self.lancedb.create_table(name, schema=schema)
        return Table(self, name, created) if self.direct else created

    def table_names(self) -> list[str]:
        return list(self.lancedb.table_names())


class Table:
    """One table: reads through ``lance``, everything else through the ``lancedb`` table."""

    def __init__(self, db: Database, name: str, table: Any = None) -> None:
        self._db = db
        self.name = name
        self._table = table

    def to_lance(self, **kwargs: Any) -> Any:
        """The table's ``lance`` dataset at its latest version (``kwargs`` go to
        ``lance.dataset``, a ``session`` for instance)."""
        return lance.dataset(
            self._db.path(self.name), storage_options=self._db.dataset_options, **kwargs
        )

    @property
    def schema(self) -> Any:
        return self.to_lance().schema

    def count_rows(self, where: str | None = None) -> int:
        return int(self.to_lance().count_rows(filter=where))

    def list_indices(self) -> list[IndexInfo]:
        return [
            IndexInfo(ix["name"], INDEX_TYPES.get(ix["type"], ix["type"]), list(ix["fields"]))
            for ix in self.to_lance().list_indices()
        ]

    def stats(self) -> dict[str, Any]:
        """Rows and fragments, as the keys of LanceDB's ``Table.stats`` (those read here)."""
        ds = self.to_lance()
        sizes = [f.metadata.physical_rows for f in ds.get_fragments()]
        return {
            "num_rows": ds.count_rows(),
            "fragment_stats": {
                "num_fragments": len(sizes),
                "num_small_fragments": sum(1 for n in sizes if n < SMALL_FRAGMENT_ROWS),
            },
        }

    def index_stats(self, name: str) -> IndexStats:
        got = self.to_lance().stats.index_stats(name)
        return IndexStats(int(got["num_indexed_rows"]), int(got["num_unindexed_rows"]))

    def update(self, where: str | None = None, values_sql: dict[str, str] | None = None) -> None:
        """LanceDB's ``Table.update`` with SQL values, through ``lance``."""
        self.to_lance().update(values_sql or {}, where=where)

    def delete(self, where: str) -> None:
        """LanceDB's ``Table.delete``, through ``lance``."""
        self.to_lance().delete(where)

    def merge_insert(self, on: str) -> Merge:
        """LanceDB's merge-insert builder (the calls ``LanceTable.upsert`` makes of it)."""
        return Merge(self, on)

    def _lancedb_table(self) -> Any:
        if self._table is None:
            self._table = self._db.lancedb.open_table(self.name)
        return self._table

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self._lancedb_table(), attr)


class Merge:
    """A merge-insert on a key that updates every matched row (where ``where`` holds) and inserts
    the rest, as LanceDB's builder does. It runs through ``lance``, except on a table whose key
    has its index: pylance 14 refuses a conditional merge-insert that finds its rows through that
    index ("primary key ... must not be nullable"), so such a table is written through LanceDB.
    """

    def __init__(self, table: Table, on: str) -> None:
        self.table = table
        self.on = on
        self.where: str | None = None

    def when_matched_update_all(self, where: str | None = None) -> Merge:
        self.where = where
        return self

    def when_not_matched_insert_all(self) -> Merge:
        return self

    def execute(self, data: Any) -> Any:
        ds = self.table.to_lance()
        if any(ix["fields"][:1] == [self.on] for ix in ds.list_indices()):
            return (
                self.table._lancedb_table()
                .merge_insert(self.on)
                .when_matched_update_all(where=self.where)
                .when_not_matched_insert_all()
                .execute(data)
            )
        # the stored fields as they are (a declared key is not nullable), as LanceDB casts a
        # batch to its table's schema
        import pyarrow as pa

        stored = pa.schema([ds.schema.field(n) for n in data.column_names])
        return (
            ds.merge_insert(self.on)
            .when_matched_update_all(condition=self.where)
            .when_not_matched_insert_all()
            .execute(data.cast(stored))
        )
