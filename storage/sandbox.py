"""SQL typed by a user: a connection that cannot reach past the home, and results in bounded steps.

``skillstream sql`` runs whatever it is given on the catalog's read-only connection. Before the
user's text runs, :func:`lock_down` turns the connection into a sandbox:

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
the configuration unlocked, for a user who wants to read or write other files on purpose.

:func:`run_query` returns a :class:`BoundedResult`: record batches pulled from DuckDB one at a time,
stopping after ``max_rows`` rows, so ``select * from range(100000000)`` costs one batch of memory,
not the whole result.
"""

from __future__ import annotations

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


def check_sql(query: str) -> str:
    """The query, or an :class:`InputError` when it holds no statement (only blanks or comments)."""
    if not _COMMENTS.sub("", query).strip().strip(";").strip():
        raise InputError("the SQL text is empty; give a statement, e.g. 'select * from memories'")
    return query


class BoundedResult:
    """A query result read in record batches, stopping after ``max_rows`` rows.

    Iterate it once. After the iteration, :attr:`truncated` says whether rows were left unread
    and :attr:`rows` how many were given.

    Args:
        reader: A ``pyarrow.RecordBatchReader`` over the result.
        max_rows: The most rows to give; ``None`` for all.
    """

    def __init__(self, reader: pa.RecordBatchReader, max_rows: int | None) -> None:
        self.schema: pa.Schema = reader.schema
        self.max_rows = max_rows
        self.rows = 0
        self.truncated = False
        self._reader = reader

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        limit = self.max_rows
        try:
            for batch in self._reader:
                if limit is not None and self.rows + batch.num_rows > limit:
                    keep = limit - self.rows
                    if keep:
                        self.rows += keep
                        yield batch.slice(0, keep)
                    self.truncated = True
                    return
                self.rows += batch.num_rows
                yield batch
        except _USER_ERRORS as e:  # errors raised while the result is computed
            raise user_error(e) from e
        finally:
            self._reader.close()

    def to_table(self) -> pa.Table:
        """Every row the limit lets through, as one table."""
        return pa.Table.from_batches(list(self), schema=self.schema)


def run_query(
    con: Any, query: str, *, max_rows: int | None, batch_rows: int = BATCH_ROWS
) -> BoundedResult | None:
    """Run user SQL and return its result in bounded steps.

    Args:
        con: A connection (normally after :func:`lock_down`).
        query: One or more statements; the last one's result is returned.
        max_rows: The most rows to read; ``None`` for no limit.
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
    return BoundedResult(reader, max_rows)


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
