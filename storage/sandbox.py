"""SQL typed by a user: a connection that cannot reach past the home, and results in bounded steps.

``skillstream sql`` runs what it is given on the catalog's read-only connection, after two gates.

:func:`check_allowed` lets through only statements that read the home, by a list of what is
allowed (never by a list of what is refused): each statement must be a ``SELECT`` (which covers
``FROM``, ``WITH``, ``VALUES``, ``DESCRIBE``, ``SHOW`` and ``SUMMARIZE``), every table it names
must be a plain identifier (a table, a view or a ``WITH`` name; a quoted ``'file.csv'`` is a file),
and every table function it calls must be one of ``ALLOWED_TABLE_FUNCTIONS``, none of which takes a
path. The statement's parse tree (``json_serialize_sql``) is what is checked, not its text. So no
statement can name a file at all: DuckDB always lets a connection write its own database file,
write-ahead log and temporary folder (``COPY ... TO '<home>/catalog.duckdb'`` would overwrite the
catalog), and a transaction statement (``BEGIN``, ``COMMIT``) has no business in a read.

Then :func:`lock_down` turns the connection into a sandbox, a second wall behind the first:

- ``enable_external_access = false``: no file or URL outside the opened catalog can be read or
  written (``read_csv('/etc/passwd')``, ``COPY ... TO``, ``ATTACH`` of another database, ``INSTALL``
  and ``LOAD`` all fail with a permission error); a DuckLake catalog's data path
  (``Catalog.data_paths``) is the one folder left readable, since its tables are files there;
- ``python_enable_replacements = false``: a table name never resolves to a Python variable of the
  running process;
- ``autoinstall_known_extensions = false``: nothing is downloaded;
- ``enable_progress_bar = false``: a long query prints nothing into the result;
- ``lock_configuration = true``: none of the above can be switched back by a ``SET``.

The LanceDB tables and the ``memories`` view keep working: they are registered on the connection
(``Catalog.attach_lance``) and the FTS extension is loaded before the lock, and a registered
dataset is read by Python, not through DuckDB's file system.

``allow_external=True`` (the command's ``--allow-external-access``) leaves external access on and
the configuration unlocked and skips :func:`check_allowed`, for a user who wants to read or
write other files on purpose.

:func:`run_query` returns a :class:`BoundedResult`: record batches pulled from DuckDB one at a time,
stopping after ``max_rows`` rows, so ``select * from range(100000000)`` costs one batch of memory,
not the whole result.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

import duckdb
import pyarrow as pa

from skillstream.errors import InputError

BATCH_ROWS = 10_000
"""Rows pulled from DuckDB per step."""

_COMMENTS = re.compile(r"--[^\n]*|/\*.*?\*/", re.DOTALL)

_USER_ERRORS: tuple[type[Exception], ...] = (
    duckdb.ParserException,
    duckdb.BinderException,
    duckdb.CatalogException,
    duckdb.PermissionException,
    duckdb.InvalidInputException,
    duckdb.ConversionException,
    duckdb.OutOfRangeException,
    duckdb.NotImplementedException,
    duckdb.TypeMismatchException,
    duckdb.ConstraintException,
    duckdb.DependencyException,
    duckdb.OutOfMemoryException,
    duckdb.TransactionException,
)
"""DuckDB errors that say something about the SQL text (or what it asks for), not about us."""


def lock_down(con: Any, *, allow_external: bool = False, data_paths: Sequence[str] = ()) -> None:
    """Make a connection safe for user SQL (see the module docstring).

    Call it after every extension is loaded and every view and dataset is registered: once
    locked, the connection cannot load anything more.

    Args:
        con: A DuckDB connection.
        allow_external: Keep external access on and the configuration unlocked.
        data_paths: Folders (or URI prefixes) the catalog's own tables are read from, which stay
            readable (``Catalog.data_paths``).
    """
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET enable_progress_bar = false")  # it would print into the result
    con.execute("SET python_enable_replacements = false")
    if allow_external:
        return
    if data_paths:
        con.execute("SET allowed_directories = ?", [list(data_paths)])
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


ALLOWED_TABLE_FUNCTIONS = frozenset(
    {
        "range",
        "generate_series",
        "unnest",
        "json_each",
        "json_tree",
        "duckdb_columns",
        "duckdb_constraints",
        "duckdb_databases",
        "duckdb_functions",
        "duckdb_indexes",
        "duckdb_keywords",
        "duckdb_schemas",
        "duckdb_tables",
        "duckdb_types",
        "duckdb_views",
        "pragma_table_info",
        "pragma_show",
    }
)
"""The table functions user SQL may call: sequences, unnesting and the catalog's own description.
None reads or writes a file."""

_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
ALLOWED_STATEMENTS = "SELECT (and FROM, WITH, VALUES, DESCRIBE, SHOW, SUMMARIZE)"


def check_allowed(con: Any, query: str) -> None:
    """Refuse SQL that does anything but read the home's tables and views.

    Args:
        con: The DuckDB connection the SQL will run on (it parses the SQL).
        query: One or more statements.

    Raises:
        InputError: A statement is not a ``SELECT``, names a file, or calls a table function
            outside ``ALLOWED_TABLE_FUNCTIONS``; the message names what was found.
    """
    try:
        statements = con.extract_statements(query)
    except _USER_ERRORS as e:
        raise user_error(e) from e
    for st in statements:
        kind = str(st.type).rsplit(".", 1)[-1]
        if kind != "SELECT":
            raise _refused(f"a {kind} statement")
        tree = json.loads(con.execute("SELECT json_serialize_sql(?)", [st.query]).fetchone()[0])
        if tree.get("error"):
            raise _refused(f"a statement that cannot be checked ({tree.get('error_message')})")
        _check_tree(tree)


def _check_tree(node: Any) -> None:
    if isinstance(node, list):
        for item in node:
            _check_tree(item)
        return
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if kind == "BASE_TABLE":
        name = str(node.get("table_name", ""))
        if not _PLAIN_NAME.fullmatch(name):
            raise _refused(f"the table name {name!r}, which would be read as a file")
    elif kind == "TABLE_FUNCTION":
        function = node.get("function") or {}
        name = str(function.get("function_name", ""))
        if name.lower() not in ALLOWED_TABLE_FUNCTIONS or function.get("schema"):
            raise _refused(f"the table function {name}()")
    for value in node.values():
        _check_tree(value)


def _refused(what: str) -> InputError:
    return InputError(
        f"'skillstream sql' only reads the home: it runs {ALLOWED_STATEMENTS} over the home's "
        f"tables and views, and got {what}. Table functions allowed: "
        f"{', '.join(sorted(ALLOWED_TABLE_FUNCTIONS))}. Pass --allow-external-access to run "
        "anything DuckDB runs"
    )


def check_sql(query: str) -> str:
    """The query, or an :class:`InputError` when it holds no statement (only blanks or comments)."""
    if not _COMMENTS.sub("", query).strip().strip(";").strip():
        raise InputError("the SQL text is empty; give a statement, e.g. 'select * from memories'")
    return query


class BoundedResult:
    """A query result read in record batches, stopping after ``max_rows`` rows or ``max_bytes``.

    Iterate it once. After the iteration, :attr:`truncated` says whether rows were left unread
    and :attr:`rows` how many were given. The byte bound is checked on each batch as it arrives
    (Arrow's buffer sizes): the batch that passes it is cut to the rows that fit, at least one.

    Args:
        reader: A ``pyarrow.RecordBatchReader`` over the result.
        max_rows: The most rows to give; ``None`` for all.
        max_bytes: The most bytes of rows to give; ``None`` for no limit.
    """

    def __init__(
        self, reader: pa.RecordBatchReader, max_rows: int | None, max_bytes: int | None = None
    ) -> None:
        self.schema: pa.Schema = reader.schema
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.rows = 0
        self.bytes = 0
        self.truncated = False
        self._reader = reader

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        limit = self.max_rows
        try:
            for batch in self._reader:
                keep = batch.num_rows
                if limit is not None and self.rows + keep > limit:
                    keep = limit - self.rows
                    self.truncated = True
                if self.max_bytes is not None and keep:
                    keep = self._rows_within_bytes(batch, keep)
                if keep:
                    self.rows += keep
                    yield batch if keep == batch.num_rows else batch.slice(0, keep)
                if self.truncated:
                    return
        except _USER_ERRORS as e:  # errors raised while the result is computed
            raise user_error(e) from e
        finally:
            self._reader.close()

    def _rows_within_bytes(self, batch: pa.RecordBatch, keep: int) -> int:
        assert self.max_bytes is not None
        size = batch.slice(0, keep).nbytes
        if self.bytes + size <= self.max_bytes:
            self.bytes += size
            return keep
        self.truncated = True
        lo = 0  # the most rows that fit, found by halving (at least one row overall)
        hi = keep
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.bytes + batch.slice(0, mid).nbytes <= self.max_bytes:
                lo = mid
            else:
                hi = mid - 1
        if lo == 0 and self.rows == 0:
            lo = 1
        self.bytes += batch.slice(0, lo).nbytes if lo else 0
        return lo

    def to_table(self) -> pa.Table:
        """Every row the limit lets through, as one table."""
        return pa.Table.from_batches(list(self), schema=self.schema)


def run_query(
    con: Any,
    query: str,
    *,
    max_rows: int | None,
    max_bytes: int | None = None,
    batch_rows: int = BATCH_ROWS,
) -> BoundedResult | None:
    """Run user SQL and return its result in bounded steps.

    Args:
        con: A connection (normally after :func:`lock_down`).
        query: One or more statements; the last one's result is returned.
        max_rows: The most rows to read; ``None`` for no limit.
        max_bytes: The most bytes of rows to read; ``None`` for no limit.
        batch_rows: Rows per record batch.

    Returns:
        The result, or ``None`` when the last statement returns no rows (``SET``, ``CREATE``).

    Raises:
        InputError: The SQL is empty, does not parse, names something that does not exist,
            or asks for something the sandbox forbids.
    """
    if max_rows is not None and max_rows < 0:
        raise InputError(f"the row limit must be 0 or more, got {max_rows}")
    check_sql(query)
    try:
        cur = con.execute(query)
        if cur.description is None:
            return None
        reader = (
            cur.to_arrow_reader(batch_rows)
            if hasattr(cur, "to_arrow_reader")
            else cur.fetch_record_batch(batch_rows)
        )
    except _USER_ERRORS as e:
        raise user_error(e) from e
    return BoundedResult(reader, max_rows, max_bytes)


def user_error(e: Exception) -> InputError:
    """An :class:`InputError` for a DuckDB error caused by the SQL text."""
    text = str(e).strip()
    if isinstance(e, duckdb.PermissionException) or "configuration has been locked" in text:
        return InputError(
            f"{text}. 'skillstream sql' cannot read or write files outside the home, attach other "
            "databases or change settings; pass --allow-external-access to allow it"
        )
    if isinstance(e, duckdb.OutOfMemoryException):
        return InputError(f"{text}. Narrow the query or lower --max-rows")
    return InputError(f"SQL error: {text}")
