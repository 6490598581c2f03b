"""``skillstream sql``: SQL over a home, sandboxed, in bounded steps, in five output formats.

Formats: ``table`` (aligned text, the default), ``json`` (a list of objects), ``csv`` (a header
row, then the rows), ``parquet`` and ``arrow`` (the Arrow IPC file format, what
``pyarrow.ipc.open_file`` and ``polars.read_ipc`` read). Text goes to standard output, binary
formats too unless ``--out`` names a file (a local path or an fsspec URI such as ``s3://...``).
Rows are written as they arrive (except ``table``, which needs every row for the column widths),
and the command stops after ``--max-rows`` rows or ``--max-bytes`` bytes of results, with a note
on standard error. ``--out`` writes into a folder that exists; it creates none. In ``csv``, a text
cell that a spreadsheet would run as a formula (it starts with ``=``, ``+``, ``-``, ``@``, a tab or
a carriage return) is written with a leading ``'``, as OWASP advises for CSV injection.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable
from contextlib import contextmanager
from typing import IO, Any

import click
import pyarrow as pa

from skillstream.cli.common import _jsonable, format_text, settings_from

SQL_FORMATS = ("table", "json", "csv", "parquet", "arrow")
DEFAULT_MAX_ROWS = 10_000
DEFAULT_MAX_BYTES = 256 * 1024 * 1024


@click.command()
@click.argument("query")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(SQL_FORMATS),
    default=None,
    help="Output format (default: table).",
)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--csv", "as_csv", is_flag=True, help="Same as --format csv.")
@click.option(
    "--out",
    default=None,
    metavar="PATH",
    help="Write the result to this file or fsspec URI instead of standard output.",
)
@click.option(
    "--max-rows",
    type=click.IntRange(min=0),
    default=DEFAULT_MAX_ROWS,
    show_default=True,
    help="Stop after this many rows (0: no limit).",
)
@click.option(
    "--max-bytes",
    type=click.IntRange(min=0),
    default=DEFAULT_MAX_BYTES,
    show_default=True,
    help="Stop once the rows read hold this many bytes (0: no limit).",
)
@click.option(
    "--allow-external-access",
    is_flag=True,
    help="Let the SQL read and write files outside the home, attach other databases and change "
    "DuckDB settings (off by default).",
)
@click.pass_context
def sql(ctx, query, fmt, as_json, as_csv, out, max_rows, max_bytes, allow_external_access):
    """Run SQL (DuckDB) over the catalog and the memory tables (view ``memories``).

    Only statements that read the home run (SELECT, FROM, WITH, VALUES, DESCRIBE, SHOW,
    SUMMARIZE), and they cannot name a file, unless --allow-external-access is given; results
    stream, and stop after --max-rows rows or --max-bytes bytes.
    """
    from skillstream.cli.query import open_catalog
    from skillstream.errors import InputError
    from skillstream.storage.sandbox import check_allowed, check_sql, lock_down, run_query

    chosen = {f for f, on in (("json", as_json), ("csv", as_csv)) if on} | ({fmt} if fmt else set())
    if len(chosen) > 1:
        raise InputError(f"choose one output format, got {', '.join(sorted(chosen))}")
    fmt = chosen.pop() if chosen else "table"
    check_sql(query)
    if out is not None:
        _check_out(out)
    cat = open_catalog(settings_from(ctx)).for_user_sql()
    try:
        lock_down(cat.con, allow_external=allow_external_access, data_paths=cat.data_paths())
        if not allow_external_access:
            check_allowed(cat.con, query)
        result = run_query(cat.con, query, max_rows=max_rows or None, max_bytes=max_bytes or None)
        if result is None:
            return
        with _output(out, binary=fmt in ("parquet", "arrow")) as fh:
            WRITERS[fmt](fh, result.schema, result)
        if result.truncated:
            click.echo(
                f"note: stopped after {result.rows} rows; pass --max-rows N or --max-bytes N "
                "for more (0: no limit)",
                err=True,
            )
        if out:
            click.echo(f"wrote {result.rows} rows to {out}", err=True)
    finally:
        cat.close()


def _check_out(out: str) -> None:
    """Refuse an output path whose folder does not exist (the command creates no folder)."""
    from skillstream.errors import InputError
    from skillstream.settings import is_remote, local_path

    if is_remote(out):
        return
    folder = local_path(out).parent
    if not folder.is_dir():
        raise InputError(
            f"--out {out!r}: the folder {str(folder)!r} does not exist; create it first"
        )


@contextmanager
def _output(out: str | None, *, binary: bool):
    if out is None:
        if binary:
            yield sys.stdout.buffer
            sys.stdout.buffer.flush()
        else:
            yield sys.stdout
        return
    import fsspec

    if binary:
        with fsspec.open(out, "wb") as fh:
            yield fh
    else:
        with fsspec.open(out, "w", encoding="utf-8", newline="") as fh:
            yield fh


def _write_table(fh: IO[str], schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> None:
    rows = [r for b in batches for r in b.to_pylist()]
    fh.write(format_text(schema.names, rows) + "\n")


def _write_json(fh: IO[str], schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> None:
    first = True
    fh.write("[")
    for batch in batches:
        for row in batch.to_pylist():
            text = json.dumps(
                {k: _jsonable(v) for k, v in row.items()},
                default=_jsonable,
                ensure_ascii=False,
                indent=2,
            )
            fh.write(("\n" if first else ",\n") + "\n".join("  " + ln for ln in text.split("\n")))
            first = False
    fh.write("]\n" if first else "\n]\n")


def _write_csv(fh: IO[str], schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> None:
    w = csv.writer(fh, lineterminator="\n")
    w.writerow(schema.names)
    for batch in batches:
        for row in batch.to_pylist():
            w.writerow([_csv_cell(_jsonable(row[c])) for c in schema.names])


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value: Any) -> Any:
    """A text cell a spreadsheet would run as a formula gets a leading ``'``; others are kept."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def _write_parquet(fh: IO[bytes], schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> None:
    import pyarrow.parquet as pq

    with pq.ParquetWriter(fh, schema) as w:
        for batch in batches:
            w.write_batch(batch)


def _write_arrow(fh: IO[bytes], schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> None:
    with pa.ipc.new_file(fh, schema) as w:
        for batch in batches:
            w.write_batch(batch)


WRITERS: dict[str, Any] = {
    "table": _write_table,
    "json": _write_json,
    "csv": _write_csv,
    "parquet": _write_parquet,
    "arrow": _write_arrow,
}
"""Output format -> ``writer(file, schema, batches)``."""
