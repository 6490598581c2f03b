"""Helpers shared by the CLI modules: settings from the context, JSON and text output."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import click
import pyarrow as pa

from skillstream.settings import Settings

FORMATS = ["auto", "jsonl", "parquet", "csv", "locomo", "star", "chatgpt", "claude", "json"]
"""Input formats of chat-log files (``auto`` picks by extension; ``json`` by content: a LoCoMo
file, a ChatGPT or a Claude ``conversations.json`` export)."""

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
    from skillstream.storage.home import require_home

    home = settings.storage.home
    return require_home(settings, f"Check --home, or run 'skillstream --home {home} run' first")


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
