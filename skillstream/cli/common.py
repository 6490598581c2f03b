"""Helpers shared by the CLI modules: settings from the context, output formats."""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import click
import pyarrow as pa

from skillstream.settings import Settings

FORMATS = ["auto", "jsonl", "parquet", "csv", "locomo", "star"]
"""Input formats of chat-log files (``auto`` picks by extension and content)."""

format_option = click.option(
    "--format", "fmt", type=click.Choice(FORMATS), default="auto", show_default=True
)
"""The ``--format`` option of the commands that read chat-log files."""

map_option = click.option(
    "--map",
    "mapping",
    multiple=True,
    metavar="FIELD=COLUMN",
    help="Map a canonical field to an input column.",
)
"""The ``--map`` option of the commands that read chat-log files."""


def settings_from(ctx: click.Context, **explicit: Any) -> Settings:
    return Settings.load(home=ctx.obj["home"], **explicit)


def existing_home(settings: Settings) -> Settings:
    """``settings``, once it is sure that their home holds a catalog (something has run there).

    Commands that read a home call it first, so that a mistyped ``--home`` is reported and
    nothing is created there.

    Raises:
        InputError: the home has no catalog; the message names the home and what to do.
    """
    from pathlib import Path

    from skillstream.errors import InputError

    if not Path(settings.storage.catalog).exists():
        raise InputError(
            f"no skillstream home at {settings.storage.home} (no catalog at "
            f"{settings.storage.catalog}); nothing was created. Check --home, or run "
            f"'skillstream --home {settings.storage.home} run' first"
        )
    return settings


def _jsonable(v: Any) -> Any:
    if isinstance(
        v, pa.MonthDayNano
    ):  # DuckDB INTERVAL: an ISO 8601 duration (months are not seconds)
        months, days, nanos = v
        return f"P{months}M{days}DT{nanos / 1e9:g}S"
    if isinstance(v, (datetime, date)):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if hasattr(v, "tolist"):
        return v.tolist()
    if isinstance(v, Decimal):  # DuckDB DECIMAL (numeric literals, sums of decimals)
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, timedelta):  # INTERVAL
        return v.total_seconds()
    if isinstance(v, (UUID, time)):
        return str(v)
    return v


def dumps(obj: Any) -> str:
    return json.dumps(obj, default=_jsonable, ensure_ascii=False, indent=2)


def emit_table(table: pa.Table, fmt: str) -> None:
    """Print an Arrow table as text, JSON (list of objects) or CSV."""
    rows = table.to_pylist()
    if fmt == "json":
        click.echo(dumps([{k: _jsonable(v) for k, v in r.items()} for r in rows]))
    elif fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(table.column_names)
        for r in rows:
            w.writerow([_jsonable(r[c]) for c in table.column_names])
        sys.stdout.write(buf.getvalue())
    else:
        click.echo(format_text(table.column_names, rows))


def format_text(columns: list[str], rows: Iterable[dict[str, Any]], width: int = 60) -> str:
    def cell(v: Any) -> str:
        s = "" if v is None else str(_jsonable(v))
        s = s.replace("\n", " ")
        return s if len(s) <= width else s[: width - 1] + "…"

    rows = list(rows)
    cells = [[cell(r[c]) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    line = lambda vals: " | ".join(v.ljust(w) for v, w in zip(vals, widths))  # noqa: E731
    out = [line(columns), "-+-".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)
