"""The DuckDB catalog: metadata, the lifecycle log, the span ledger, and SQL over both stores.

Tables are exactly those declared in ``skillstream.tables.CATALOG`` (DDL is generated, never
written by hand); opening a catalog for writing creates the missing ones. A column added to a
schema is added to an existing file with ``ALTER TABLE``. A new file is built under a temporary name
with every table and linked into place only when complete, so a process killed while it creates the
catalog leaves no catalog or a whole one; a file without tables (left by an older version) reads as
an empty ledger and gets its tables from the next writer.

Data goes in as Arrow tables registered on the connection, never as SQL text; statements quote every
identifier. Writes are idempotent: :meth:`Catalog.upsert` replaces rows by primary key and
:meth:`Catalog.insert_ignore` keeps the first copy of a key (append-only logs).

Two backends, one contract (deterministic ids, upserts, the ledger row last in one transaction):

* **a DuckDB file** (the default). One process may hold a read-write connection to a file, and
  while it does no other process can open the file at all, not even read-only; several read-only
  processes may share a file when no writer holds it. So a running flow owns its catalog; query it
  through that process, after it stops, or from a copy of the file. :class:`CatalogLockedError`
  says so.
* **DuckLake** (``ducklake:postgres://USER@HOST:PORT/DB``): an in-memory DuckDB connection
  attaches a DuckLake catalog whose metadata lives in PostgreSQL and whose data files (Parquet) live
  in a folder or on S3 (``data``). Any number of processes on any hosts read and write it at once.
  DuckLake has no primary keys, so upserts are ``MERGE`` statements on the declared key, and a
  transaction that meets a concurrent commit (DuckLake's conflict check) is run again
  (:meth:`Catalog.run_transaction`); writes are idempotent, so a rerun is safe. Extensions load
  from their wheels, never from the internet.

Views are TEMP views made on every connection from a small registry (:func:`register_view`), so
modules can add their own. :meth:`Catalog.attach_lance` registers LanceDB tables
(``lance_<name>``, pinned to the version current at the call) and the ``memories`` view that joins
``memory_meta`` with the LanceDB vectors.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from skillstream import tables as declared
from skillstream.errors import ConfigError, InputError, TransientError
from skillstream.settings import StorageSettings, lake_parts
from skillstream.storage.filters import ident, literal
from skillstream.storage.options import fsspec_options, protocol_of
from skillstream.storage.rows import Rows, dedupe, to_table

log = logging.getLogger(__name__)

RETRY_WAIT_MS = 5
"""DuckLake's first wait before it runs a conflicting commit again (its default is 100 ms)."""


class CatalogLockedError(TransientError):
    """The catalog file is held by another process's read-write connection."""


class LakeMissingError(InputError):
    """The PostgreSQL database holds no DuckLake catalog yet (nothing was written)."""


# ---------------------------------------------------------------------- Arrow -> DuckDB DDL
_SCALARS = {
    pa.string(): "VARCHAR",
    pa.large_string(): "VARCHAR",
    pa.bool_(): "BOOLEAN",
    pa.int8(): "TINYINT",
    pa.int16(): "SMALLINT",
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.uint8(): "UTINYINT",
    pa.uint16(): "USMALLINT",
    pa.uint32(): "UINTEGER",
    pa.uint64(): "UBIGINT",
    pa.float32(): "FLOAT",
    pa.float64(): "DOUBLE",
    pa.binary(): "BLOB",
    pa.large_binary(): "BLOB",
    pa.date32(): "DATE",
}


def duckdb_type(t: pa.DataType) -> str:
    """The DuckDB column type for an Arrow type.

    Raises:
        ValueError: for Arrow types the catalog does not map.
    """
    if t in _SCALARS:
        return _SCALARS[t]
    if pa.types.is_timestamp(t):
        return "TIMESTAMPTZ" if t.tz else "TIMESTAMP"
    if pa.types.is_fixed_size_list(t):
        return f"{duckdb_type(t.value_type)}[{t.list_size}]"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"{duckdb_type(t.value_type)}[]"
    raise ValueError(f"no DuckDB type for Arrow type {t}")


def lake_type(t: pa.DataType) -> str:
    """The DuckLake column type: DuckDB's, with fixed-size arrays as lists (DuckLake has none)."""
    if pa.types.is_fixed_size_list(t):
        return f"{lake_type(t.value_type)}[]"
    return duckdb_type(t)


def table_ddl(name: str, schema: pa.Schema, *, keys: bool = True) -> str:
    """``CREATE TABLE IF NOT EXISTS`` for a schema, with its primary key unless ``keys`` is off
    (DuckLake: no constraints but ``NOT NULL``; its upserts match on the key instead)."""
    typed = duckdb_type if keys else lake_type
    cols = [f"{ident(f.name)} {typed(f.type)}{'' if f.nullable else ' NOT NULL'}" for f in schema]
    key = declared.primary_key(schema)
    if key and keys:
        cols.append(f"PRIMARY KEY ({ident(key)})")
    return f"CREATE TABLE IF NOT EXISTS {ident(name)} (\n  " + ",\n  ".join(cols) + "\n)"


# ---------------------------------------------------------------------- views
@dataclass(frozen=True)
class View:
    """A TEMP view made on each catalog connection once every relation in ``needs`` exists."""

    name: str
    sql: str
    needs: tuple[str, ...] = ()


VIEWS: dict[str, View] = {}
"""Registered views, created in registration order."""


def register_view(name: str, sql: str, needs: Sequence[str] = ()) -> None:
    """Add (or replace) a view in the registry.

    Args:
        name: View name.
        sql: The ``SELECT`` statement.
        needs: Tables or attached LanceDB relations (``lance_<table>``) the view reads; while one
            is missing the view is left out instead of failing.
    """
    VIEWS[name] = View(name, sql, tuple(needs))


register_view(
    "memories",
    "SELECT m.*, l.vector FROM memory_meta AS m LEFT JOIN lance_memories AS l ON l.id = m.id",
    needs=("memory_meta", "lance_memories"),
)
register_view(
    "active_memories",
    "SELECT * FROM memory_meta WHERE status IN ('generated', 'activated')",
    needs=("memory_meta",),
)
register_view(
    "llm_usage",
    """SELECT purpose, backend, model,
              count(*) AS calls,
              count(*) FILTER (WHERE cached) AS cached_calls,
              count(*) FILTER (WHERE error IS NOT NULL) AS failed_calls,
              sum(prompt_tokens) AS prompt_tokens,
              sum(completion_tokens) AS completion_tokens,
              avg(latency_ms) AS avg_latency_ms
       FROM llm_calls GROUP BY ALL""",
    needs=("llm_calls",),
)


# ---------------------------------------------------------------------- extensions
def extension_path(name: str) -> Path | None:
    """Path of a DuckDB extension shipped in the ``duckdb-extension-<name>`` wheel, if installed."""
    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations))) / "extensions"
    exact = root / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if exact.exists():
        return exact
    found = sorted(root.glob(f"*/{name}.duckdb_extension"))
    return found[-1] if found else None


# ---------------------------------------------------------------------- the catalog
LAKE = "lake"
"""The name a DuckLake catalog is attached under (and made the default database)."""
META = ident("__ducklake_metadata_" + LAKE)
"""The schema of the DuckLake catalog's own metadata tables."""

_CREATING = ".creating-"
"""Infix of the temporary name a catalog file is built under (``catalog.duckdb.creating-PID-X``)."""


def is_conflict(error: BaseException) -> bool:
    """Whether a DuckDB error is a concurrent commit that a rerun of the transaction resolves."""
    if isinstance(error, duckdb.TransactionException):
        return True
    text = str(error).lower()
    return "conflict" in text or "could not serialize" in text


def writer_name() -> str:
    """This process as a catalog writer: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Catalog:
    """A catalog: a DuckDB file, or a DuckLake catalog on PostgreSQL.

    Args:
        path: The database file (local; parent folders are created), ``":memory:"``, or
            ``ducklake:postgres://USER@HOST:PORT/DB``.
        read_only: Open without write access (no tables are created).
        data: DuckLake only: where its data files go (a folder or an ``s3://`` URI).
        storage_options: DuckLake only: credentials and endpoint for ``s3://`` data (the
            LanceDB-style keys of ``settings.storage_options``).
        threads: DuckLake only, when writing: DuckDB threads of the connection (0: DuckDB's
            default, one per core).

    Raises:
        CatalogLockedError: when another process holds the file for writing.
        InputError: for a read-only open of a catalog that does not exist.
    """

    def __init__(
        self,
        path: str,
        read_only: bool = False,
        *,
        data: str | None = None,
        storage_options: dict | None = None,
        threads: int = 0,
    ) -> None:
        self.path = str(path)
        self.read_only = read_only
        self.lake = lake_parts(self.path)
        self._lance: tuple[str, dict | None, tuple[str, ...]] | None = None
        self._lance_db: Any = None
        self._in_tx = False
        self._ensured: dict[str, pa.Schema] = {}
        if self.lake is not None:
            self.con = self._attach_lake(data, storage_options)
            if threads and not read_only:
                self.con.execute(f"SET threads = {int(threads)}")
        else:
            self.con = self._open_file()
        self.con.execute("SET TimeZone = 'UTC'")
        if not read_only:
            self.ensure_tables()
        self.create_views()

    @property
    def shared(self) -> bool:
        """Whether this catalog takes concurrent writers (DuckLake)."""
        return self.lake is not None

    def data_paths(self) -> list[str]:
        """Where the catalog's own data files lie beyond the database it opened: a DuckLake
        catalog's data path (as the catalog stored it); nothing for a DuckDB file."""
        if not self.shared:
            return []
        row = self.con.execute(
            f"SELECT value FROM {META}.ducklake_metadata WHERE key = 'data_path'"
        ).fetchone()
        path = str(row[0] or "") if row else ""
        return [path.rstrip("/") + "/"] if path else []

    def _open_file(self) -> duckdb.DuckDBPyConnection:
        file = Path(self.path)
        if self.path != ":memory:":
            if self.read_only and not file.exists():
                raise InputError(f"catalog file {self.path!r} does not exist; run the flow first")
            if not self.read_only:
                file.parent.mkdir(parents=True, exist_ok=True)
                _remove_dead_creators(file)
                if not file.exists():
                    _create_file(file)
        try:
            return duckdb.connect(self.path, read_only=self.read_only)
        except duckdb.IOException as e:
            if "lock" in str(e).lower():
                raise CatalogLockedError(
                    f"catalog {self.path!r} is open for writing in another process, and DuckDB "
                    "lets no other process open the file while it is (not even read-only). "
                    "Query it after that process stops, through that process, or from a copy "
                    f"of the file. DuckDB said: {e}"
                ) from e
            raise

    def _attach_lake(self, data: str | None, options: dict | None) -> duckdb.DuckDBPyConnection:
        assert self.lake is not None
        con = duckdb.connect(":memory:")
        self.con = con
        needed = ["postgres_scanner", "ducklake"]
        data = data or ""
        remote = protocol_of(data) in ("s3", "s3a")
        if remote:
            needed.append("httpfs")
        for name in needed:
            if not self.load_extension(name):
                raise ConfigError(
                    f"the DuckLake catalog needs the DuckDB extension {name!r}; install the wheel "
                    f"duckdb-extension-{name.replace('_', '-')}=={duckdb.__version__}"
                )
        if remote:
            _s3_secret(con, data, options)
        part = self.lake
        conninfo = (
            f"dbname={part['dbname']} host={part['host']} port={part['port']} user={part['user']}"
        )
        opts = []
        if data and not self.read_only:  # readers use the data path stored in the catalog
            local = protocol_of(data) == ""
            if local and not self.read_only:
                Path(data).mkdir(parents=True, exist_ok=True)
            opts.append(f"DATA_PATH {literal(data.rstrip('/') + '/')}")
        if self.read_only:
            opts.append("READ_ONLY")
        attach = f"ATTACH {literal('ducklake:postgres:' + conninfo)} AS {LAKE}"
        if opts:
            attach += f" ({', '.join(opts)})"
        shown = f"{part['user']}@{part['host']}:{part['port']}/{part['dbname']}"
        for attempt in range(8):
            try:
                con.execute(attach)
                break
            except duckdb.Error as e:
                racing = is_conflict(e) or "already exists" in str(e) or "duplicate key" in str(e)
                if racing and attempt < 7:  # two processes creating the metadata at once
                    _backoff(attempt)
                    continue
                with contextlib.suppress(duckdb.Error):
                    con.close()
                if self.read_only and "does not exist" in str(e) and "DuckLake" in str(e):
                    raise LakeMissingError(
                        f"no DuckLake catalog in {shown} yet; run the flow first"
                    ) from e
                raise TransientError(f"cannot attach the DuckLake catalog {shown}: {e}") from e
        con.execute(f"USE {LAKE}")
        # DuckLake runs a commit that lost the race for the next snapshot again by itself, first
        # after 100 ms: longer than a whole commit of a store batch. A short first wait (growing
        # 1.5x a try, as before) lets racing writers go on at once.
        con.execute(f"SET ducklake_retry_wait_ms = {RETRY_WAIT_MS}")
        return con

    @classmethod
    def open_read_only(cls, path: str) -> Catalog:
        """Open a catalog for queries only (see the module docstring on locking)."""
        return cls(path, read_only=True)

    def for_user_sql(self) -> Catalog:
        """Ready the connection for SQL a user typed (``skillstream sql``, ``Home.sql``): DuckDB's
        full-text functions are loaded. skillstream's own statements need none of them, and
        loading them took a quarter of a catalog open."""
        self.load_extension("fts")
        return self

    def load_extension(self, name: str) -> bool:
        """``LOAD`` an extension from its wheel (never ``INSTALL``); ``False`` if unavailable."""
        path = extension_path(name)
        if path is None:
            return False
        try:
            self.con.execute(f"LOAD '{str(path).replace(chr(39), chr(39) * 2)}'")
        except duckdb.Error as e:
            log.debug("could not load DuckDB extension %s from %s: %s", name, path, e)
            return False
        return True

    # ------------------------------------------------------------------ tables
    def _relations(self) -> set[str]:
        rows = self.con.execute("SELECT table_name FROM information_schema.tables").fetchall()
        return {r[0] for r in rows}

    def has(self, name: str) -> bool:
        """Whether a table or view of that name exists."""
        return name in self._relations()

    def columns(self, table: str) -> list[str]:
        """The columns of a table of the catalog, in order (none for a table it lacks)."""
        rows = self.con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
            "AND table_schema = 'main' AND table_catalog = current_database() "
            "ORDER BY ordinal_position",
            [table],
        ).fetchall()
        return [r[0] for r in rows]

    def _all_columns(self) -> dict[str, list[str]]:
        """The columns of every table of the catalog, in order: one query, where a query per
        table made most of the time of opening a catalog for writing."""
        rows = self.con.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'main' AND table_catalog = current_database() "
            "ORDER BY table_name, ordinal_position"
        ).fetchall()
        found: dict[str, list[str]] = {}
        for table, column in rows:
            found.setdefault(table, []).append(column)
        return found

    def ensure_table(self, name: str, have: list[str] | None = None) -> None:
        """Create a declared table if missing, or add columns its schema gained since.

        Args:
            name: A table of ``tables.CATALOG_TABLES``.
            have: Its columns as just read (:meth:`_all_columns`); read here when not given,
                and again after a conflict with another writer.
        """
        schema = self._schema(name)
        if self.read_only or self._ensured.get(name) is schema:
            return
        typed = lake_type if self.shared else duckdb_type
        for attempt in range(8):
            try:
                if have is None or attempt:
                    have = self.columns(name)
                if not have:
                    self.con.execute(table_ddl(name, schema, keys=not self.shared))
                for f in schema:
                    if have and f.name not in have:
                        self.con.execute(
                            f"ALTER TABLE {ident(name)} ADD COLUMN {ident(f.name)} {typed(f.type)}"
                        )
                break
            except duckdb.Error as e:
                # Another process created or changed the table at the same moment (DuckLake).
                if self._in_tx or not self.shared or not is_conflict(e) or attempt == 7:
                    raise
                _backoff(attempt)
        self._ensured[name] = schema

    def ensure_tables(self) -> None:
        """Create every table declared in ``tables.CATALOG`` (on DuckLake, in one transaction,
        run again if another process created them at the same moment)."""
        if not self.shared:
            have = self._all_columns()
            for name in list(declared.CATALOG_TABLES):
                self.ensure_table(name, have.get(name, []))
            return

        def create(cat: Catalog) -> None:
            have = cat._all_columns()
            for name in list(declared.CATALOG_TABLES):
                cat.ensure_table(name, have.get(name, []))

        self.run_transaction(create)

    @staticmethod
    def _schema(name: str) -> pa.Schema:
        try:
            return declared.CATALOG_TABLES[name]
        except KeyError:
            raise InputError(
                f"{name!r} is not a catalog table; known: {sorted(declared.CATALOG_TABLES)} "
                "(declared in skillstream.tables)"
            ) from None

    # ------------------------------------------------------------------ writing
    @contextlib.contextmanager
    def transaction(self) -> Iterator[Catalog]:
        """Run the block in one transaction (joins an open one); roll back on error."""
        if self._in_tx:
            yield self
            return
        self.con.execute("BEGIN TRANSACTION")
        self._in_tx = True
        try:
            yield self
        except BaseException:
            self._in_tx = False
            self._ensured.clear()  # DDL inside the block is rolled back too
            self.con.execute("ROLLBACK")
            raise
        self._in_tx = False
        self.con.execute("COMMIT")

    def run_transaction(self, work: Callable[[Catalog], Any], *, attempts: int = 8) -> Any:
        """Run ``work(self)`` in one transaction; on a DuckLake catalog, run it again (with a
        short random back-off) when its commit meets a concurrent writer's.

        ``work`` must be idempotent (every write here is an upsert or insert-if-new), since a
        rerun repeats it from the start.
        """
        for attempt in range(attempts if self.shared else 1):
            try:
                with self.transaction():
                    return work(self)
            except duckdb.Error as e:
                if not self.shared or not is_conflict(e) or attempt == attempts - 1:
                    raise
                log.info("catalog commit met a concurrent writer; running it again: %s", e)
                _backoff(attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def sign(self, message: str) -> None:
        """On DuckLake, label the open transaction's snapshot with this process (``host:pid``,
        the ``author`` of ``ducklake_snapshots``) and a message; a DuckDB file has no snapshots."""
        if self.shared and self._in_tx:
            self.con.execute(
                "CALL ducklake_set_commit_message(?, ?, ?)", [LAKE, writer_name(), message]
            )

    def upsert(self, table: str, rows: Rows, *, version: str | None = None) -> int:
        """Insert rows, replacing existing rows with the same primary key (last wins in a batch).

        Args:
            table: A table of ``tables.CATALOG``.
            rows: Dicts, dataclasses, records with ``row()``, or an Arrow table; extra fields
                are ignored.
            version: A version column: in a batch the highest version of a key wins, and a
                stored row is only replaced by one of an equal or higher version.

        Returns:
            Rows offered after de-duplication.
        """
        return self._write(table, rows, replace=True, version=version)

    def insert_ignore(self, table: str, rows: Rows) -> int:
        """Insert rows whose primary key is new; existing keys are left as they are."""
        return self._write(table, rows, replace=False)

    def _write(self, table: str, rows: Rows, *, replace: bool, version: str | None = None) -> int:
        schema = self._schema(table)
        key = declared.primary_key(schema)
        if not key:
            raise InputError(f"catalog table {table!r} has no primary key; upserts need one")
        data = to_table(rows, schema, table=table)
        if data.num_rows == 0:
            return 0
        data = dedupe(data, key, version)
        self.ensure_table(table)
        if self.shared:
            self._merge(table, schema, key, data, replace=replace, version=version)
            return data.num_rows
        cols = ", ".join(ident(c) for c in schema.names)
        others = [c for c in schema.names if c != key]
        if replace and others:
            action = "DO UPDATE SET " + ", ".join(
                f"{ident(c)} = excluded.{ident(c)}" for c in others
            )
            if version:
                v, t = ident(version), ident(table)
                action += f" WHERE {t}.{v} IS NULL OR excluded.{v} >= {t}.{v}"
        else:
            action = "DO NOTHING"
        source = f"__skillstream_rows_{uuid.uuid4().hex}"
        self.con.register(source, data)
        try:
            self.con.execute(
                f"INSERT INTO {ident(table)} ({cols}) SELECT {cols} FROM {ident(source)} "
                f"ON CONFLICT ({ident(key)}) {action}"
            )
        finally:
            self.con.unregister(source)
        return data.num_rows

    def _merge(
        self,
        table: str,
        schema: pa.Schema,
        key: str,
        data: pa.Table,
        *,
        replace: bool,
        version: str | None,
    ) -> None:
        """The DuckLake upsert: ``MERGE`` on the declared key (DuckLake has no primary keys)."""
        t, k = ident(table), ident(key)
        cols = ", ".join(ident(c) for c in schema.names)
        values = ", ".join(f"s.{ident(c)}" for c in schema.names)
        others = [c for c in schema.names if c != key]
        clauses = []
        if replace and others:
            cond = ""
            if version:
                v = ident(version)
                cond = f" AND ({t}.{v} IS NULL OR s.{v} >= {t}.{v})"
            sets = ", ".join(f"{ident(c)} = s.{ident(c)}" for c in others)
            clauses.append(f"WHEN MATCHED{cond} THEN UPDATE SET {sets}")
        clauses.append(f"WHEN NOT MATCHED THEN INSERT ({cols}) VALUES ({values})")
        source = f"__skillstream_rows_{uuid.uuid4().hex}"
        self.con.register(source, data)
        try:
            self.con.execute(
                f"MERGE INTO {t} USING (SELECT * FROM temp.main.{ident(source)}) AS s "
                f"ON {t}.{k} = s.{k} " + " ".join(clauses)
            )
        finally:
            self.con.unregister(source)

    # ------------------------------------------------------------------ reading
    def sql(self, query: str, params: Sequence[Any] | dict[str, Any] | None = None) -> pa.Table:
        """Run a query with bound parameters and return the result as Arrow."""
        cur = self.con.execute(query, params) if params is not None else self.con.execute(query)
        if cur is None or cur.description is None:  # no statement (only blanks or comments)
            return pa.table({})
        return cur.to_arrow_table()

    def count(self, table: str) -> int:
        """Rows in a table or view."""
        row = self.con.execute(f"SELECT count(*) FROM {ident(table)}").fetchone()
        return int(row[0]) if row else 0

    def processed_span_ids(self, owners: Sequence[str] | None = None) -> set[str]:
        """Ids of spans whose ledger row says ``done`` (they are not extracted again), of every
        owner or of ``owners`` only."""
        if not self.has("spans"):  # a file whose tables were never created: nothing is done
            return set()
        if owners is None:
            rows = self.con.execute("SELECT span_id FROM spans WHERE status = 'done'").fetchall()
        else:
            rows = self.con.execute(
                "SELECT span_id FROM spans WHERE status = 'done' "
                "AND owner_id IN (SELECT unnest(?::VARCHAR[]))",
                [list(owners)],
            ).fetchall()
        return {r[0] for r in rows}

    def done_messages(
        self, owners: Sequence[str] | None = None
    ) -> list[tuple[str, str, str, str | None]]:
        """``(owner_id, conversation_id, message_id, digest)`` of every message inside a done
        span, of every owner or of ``owners`` only; ``digest`` is ``None`` for spans written
        before the ledger kept digests."""
        if not self.has("spans"):
            return []
        digests = (
            "message_digests" if "message_digests" in self.columns("spans") else "NULL::VARCHAR[]"
        )
        query = (
            f"SELECT owner_id, conversation_id, unnest(message_ids), unnest({digests}) "
            "FROM spans WHERE status = 'done'"
        )
        if owners is None:
            rows = self.con.execute(query).fetchall()
        else:
            rows = self.con.execute(
                query + " AND owner_id IN (SELECT unnest(?::VARCHAR[]))", [list(owners)]
            ).fetchall()
        return [(o, c, m, d) for o, c, m, d in rows if m is not None]

    def open_messages(self, owners: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Held messages of open spans and task segments (``skillstream.held``), in the order
        they were held (times as seconds since the epoch)."""
        if not self.has("open_messages"):
            return []
        cols = (
            "stage, owner_id, conversation_id, message_id, position, seq, "
            "epoch(last_seen) AS last_seen, "
            "message, epoch(held_at) AS held_at"
        )
        query = f"SELECT {cols} FROM open_messages"
        params: list[Any] = []
        if owners is not None:
            query += " WHERE owner_id IN (SELECT unnest(?::VARCHAR[]))"
            params.append(list(owners))
        cur = self.con.execute(query + " ORDER BY held_at, position", params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    # ------------------------------------------------------------------ LanceDB and views
    def attach_lance(
        self,
        uri: str,
        storage_options: dict | None = None,
        tables: Sequence[str] = ("memories",),
        *,
        db: Any = None,
    ) -> list[str]:
        """Expose LanceDB tables to SQL as ``lance_<table>`` and (re)create the views.

        Each table is registered as its ``lance`` dataset, pinned to the version current now:
        call again (or :meth:`refresh_lance`) to see later writes. Tables that do not exist yet
        are skipped, and so are views that need them.

        Args:
            uri: LanceDB URI.
            storage_options: Options for that URI.
            tables: LanceDB table names.
            db: An open LanceDB connection to reuse (else one is opened).

        Returns:
            The tables attached.
        """
        from skillstream.storage.lance import connect

        db = db if db is not None else connect(uri, storage_options)
        self._lance = (uri, storage_options, tuple(tables))
        self._lance_db = db
        attached = []
        for name in tables:
            alias = f"lance_{name}"
            try:
                dataset = db.open_table(name).to_lance()
            except ValueError:
                with contextlib.suppress(Exception):
                    self.con.unregister(alias)
                continue
            self.con.register(alias, dataset)
            attached.append(name)
        self.create_views()
        return attached

    def publish_memories_view(self, lancedb_uri: str) -> bool:
        """On DuckLake, store the ``memories`` view in the catalog itself, reading the LanceDB
        table through DuckDB's ``lance`` extension, so any DuckDB client that loads that
        extension and attaches the catalog can query ``memories`` (not only this program).

        Returns ``False`` (and changes nothing) on a DuckDB file, a read-only catalog, without
        the ``lance`` extension's wheel, or when that extension cannot open the LanceDB table
        (it does not read LanceDB's S3 options).
        """
        if not self.shared or self.read_only or not self.load_extension("lance"):
            return False
        location = lancedb_uri.rstrip("/") + "/memories.lance"
        sql = (
            f"CREATE OR REPLACE VIEW {LAKE}.main.memories AS SELECT m.*, l.vector "
            f"FROM {LAKE}.main.memory_meta AS m LEFT JOIN {literal(location)} AS l ON l.id = m.id"
        )
        try:
            self.run_transaction(lambda cat: cat.con.execute(sql))
        except duckdb.Error as e:
            # DuckDB checks the view's LanceDB table as it stores it; the lance extension cannot
            # always reach it (S3 credentials are LanceDB's own). The run goes on without it.
            log.warning("memories view not stored in the catalog (LanceDB at %s): %s", location, e)
            return False
        return True

    def refresh_lance(self) -> list[str]:
        """Re-pin the attached LanceDB tables to their latest versions."""
        if self._lance is None:
            return []
        uri, options, tables = self._lance
        return self.attach_lance(uri, options, tables, db=self._lance_db)

    def register_view(self, name: str, sql: str, needs: Sequence[str] = ()) -> bool:
        """Register a view (see :func:`register_view`) and create it on this connection now."""
        register_view(name, sql, needs)
        return self._create_view(VIEWS[name], self._relations())

    def create_views(self) -> list[str]:
        """(Re)create every registered view whose inputs exist; returns the views made."""
        made = []
        relations = self._relations()  # read once: a view made here is added as it is made
        for view in list(VIEWS.values()):
            if self._create_view(view, relations):
                made.append(view.name)
                relations.add(view.name)
        return made

    def _create_view(self, view: View, relations: set[str]) -> bool:
        missing = [n for n in view.needs if n not in relations]
        if missing:
            with contextlib.suppress(duckdb.Error):
                self.con.execute(f"DROP VIEW IF EXISTS temp.{ident(view.name)}")
            log.debug("view %s left out: %s missing", view.name, missing)
            return False
        self.con.execute(f"CREATE OR REPLACE TEMP VIEW {ident(view.name)} AS {view.sql}")
        return True

    # ------------------------------------------------------------------ lifecycle
    def flush(self) -> None:
        """On DuckLake, write rows kept inline in PostgreSQL (small commits) to Parquet data
        files; a DuckDB file has nothing to flush. Run again when it meets another writer."""
        if not self.shared or self.read_only:
            return
        self.run_transaction(
            lambda cat: cat.con.execute("CALL ducklake_flush_inlined_data(?)", [LAKE])
        )

    def compact(self) -> dict[str, int]:
        """On DuckLake, the upkeep many small commits need: rows kept inline in PostgreSQL are
        written to Parquet, the small data files of each table are merged into larger ones, and
        files replaced more than a day ago are deleted (a reader still scanning one is not cut
        short). A DuckDB file has nothing to compact.

        Returns:
            ``data_files_before`` and ``data_files_after``: live Parquet data files.
        """
        if not self.shared or self.read_only:
            return {}
        before = self._data_files()
        self.flush()
        self.run_transaction(
            lambda cat: cat.con.execute("CALL ducklake_merge_adjacent_files(?)", [LAKE])
        )
        self.run_transaction(
            lambda cat: cat.con.execute(
                "CALL ducklake_cleanup_old_files(?, older_than => now() - INTERVAL '1 day')",
                [LAKE],
            )
        )
        return {"data_files_before": before, "data_files_after": self._data_files()}

    def _data_files(self) -> int:
        row = self.con.execute(
            f"SELECT count(*) FROM {META}.ducklake_data_file WHERE end_snapshot IS NULL"
        ).fetchone()
        return int(row[0]) if row else 0

    def close(self, *, checkpoint: bool = True) -> None:
        """Close the connection.

        Args:
            checkpoint: Write the WAL into the file now (DuckDB's default). ``False`` leaves a
                DuckDB file's committed writes in its write-ahead log, where they are as durable;
                the file takes them at a later checkpoint (when the log passes DuckDB's
                ``checkpoint_threshold``, or at the close of a writer that checkpoints). A
                checkpoint rewrites the last row group of every table it touches, so its cost
                grows with the catalog; a write of a few rows should not pay it.
        """
        with contextlib.suppress(duckdb.Error):
            if not checkpoint and not self.read_only:
                self.con.execute("PRAGMA disable_checkpoint_on_shutdown")
            self.con.close()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------- opening by settings
def open_catalog(storage: StorageSettings, read_only: bool = False) -> Catalog:
    """Open the catalog the storage settings name (a DuckDB file or DuckLake)."""
    return Catalog(
        storage.catalog,
        read_only=read_only,
        data=storage.catalog_data_uri,
        storage_options=dict(storage.storage_options) if storage.storage_options else None,
        threads=storage.catalog_threads,
    )


def catalog_exists(storage: StorageSettings) -> bool:
    """Whether the catalog has been created (a DuckLake catalog is asked, a file looked for)."""
    if lake_parts(storage.catalog) is None:
        return Path(storage.catalog).exists()
    try:
        open_catalog(storage, read_only=True).close()
    except LakeMissingError:
        return False
    return True


def _create_file(file: Path) -> None:
    """Create a catalog file with every declared table, atomically.

    The file is built under a temporary name and hard-linked to its real name only when complete,
    so a process killed at any moment leaves either no catalog or a whole one. A link never
    replaces an existing file: when two processes create the catalog at once, the first wins and
    the other's copy is dropped.
    """
    tmp = file.with_name(f"{file.name}{_CREATING}{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        con = duckdb.connect(str(tmp))
        try:
            con.execute("BEGIN TRANSACTION")
            for name, schema in declared.CATALOG_TABLES.items():
                con.execute(table_ddl(name, schema))
            con.execute("COMMIT")
            con.execute("CHECKPOINT")
        finally:
            con.close()
        with contextlib.suppress(FileExistsError):
            os.link(tmp, file)
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
            with contextlib.suppress(OSError):
                leftover.unlink()


def _remove_dead_creators(file: Path) -> None:
    """Remove the temporary files of creators that were killed mid-creation (process gone)."""
    for stale in file.parent.glob(f"{file.name}{_CREATING}*"):
        pid = stale.name.split(_CREATING, 1)[1].split("-", 1)[0]
        if pid.isdigit() and not _pid_alive(int(pid)):
            with contextlib.suppress(OSError):
                stale.unlink()


def _s3_secret(con: duckdb.DuckDBPyConnection, uri: str, options: dict | None) -> None:
    """A temporary DuckDB S3 secret (never stored) from the LanceDB-style storage options."""
    kw = fsspec_options(uri, options)
    parts = ["TYPE s3"]
    if kw.get("key"):
        parts.append(f"KEY_ID {literal(kw['key'])}")
    if kw.get("secret"):
        parts.append(f"SECRET {literal(kw['secret'])}")
    if kw.get("token"):
        parts.append(f"SESSION_TOKEN {literal(kw['token'])}")
    region = (kw.get("client_kwargs") or {}).get("region_name")
    if region:
        parts.append(f"REGION {literal(region)}")
    endpoint = str(kw.get("endpoint_url") or "")
    if endpoint:
        scheme, _, host = endpoint.partition("://")
        parts.append(f"ENDPOINT {literal(host.rstrip('/') if host else scheme)}")
        parts.append("URL_STYLE 'path'")
        parts.append(f"USE_SSL {'false' if scheme == 'http' else 'true'}")
    con.execute(f"CREATE OR REPLACE TEMPORARY SECRET skillstream_catalog_data ({', '.join(parts)})")


def _backoff(attempt: int) -> None:
    time.sleep(min(2.0, 0.02 * 2**attempt) * (0.5 + random.random()))
