"""Turning records into Arrow tables that match a schema, and collapsing duplicate keys.

Both stores take batches as Arrow tables shaped exactly like the table's schema (from
``skillstream.tables``): the LanceDB upsert and the DuckDB upsert share these helpers so a record
is converted the same way for either store.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeAlias

import pyarrow as pa

from skillstream.errors import InputError

Rows: TypeAlias = Sequence[Mapping[str, Any]] | pa.Table

_FIELDS: dict[type, tuple[str, ...]] = {}
"""The field names of the dataclasses written so far (those without a ``row()``)."""


def as_dict(record: Any) -> dict[str, Any]:
    """A column dict for a record: a mapping, a dataclass, or an object with ``row()``."""
    names = _FIELDS.get(type(record))
    if names is not None:
        return {n: getattr(record, n) for n in names}
    if isinstance(record, Mapping):
        return dict(record)
    row = getattr(record, "row", None)
    if callable(row):
        return dict(row())
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        names = _FIELDS[type(record)] = tuple(f.name for f in dataclasses.fields(record))
        return {n: getattr(record, n) for n in names}
    raise InputError(
        f"cannot write a {type(record).__name__} as a table row: expected a dict, a dataclass "
        "or an object with a row() method"
    )


def to_table(rows: Rows | Iterable[Any], schema: pa.Schema, *, table: str = "") -> pa.Table:
    """Conform ``rows`` to ``schema``: columns in schema order, extra columns dropped.

    Missing nullable columns become nulls; values are cast to the schema's types.

    Args:
        rows: An Arrow table, or records accepted by :func:`as_dict`.
        schema: The target schema.
        table: Table name, used in error messages.

    Returns:
        A table with exactly ``schema``'s fields.

    Raises:
        InputError: when a value cannot be converted or a required column holds nulls.
    """
    where = f" for table {table!r}" if table else ""
    try:
        if isinstance(rows, pa.Table):
            columns = []
            for f in schema:
                if f.name in rows.column_names:
                    columns.append(rows.column(f.name).cast(f.type))
                else:
                    columns.append(pa.nulls(rows.num_rows, f.type))
            out = pa.Table.from_arrays(columns, schema=schema)
        else:
            out = pa.Table.from_pylist([as_dict(r) for r in rows], schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
        raise InputError(f"rows do not match the schema{where}: {e}") from e
    for f in schema:
        if not f.nullable and out.column(f.name).null_count:
            raise InputError(
                f"column {f.name!r}{where} is required but {out.column(f.name).null_count} "
                "row(s) have no value"
            )
    return out


def latest_indices(keys: Sequence[Any], versions: Sequence[Any] | None = None) -> list[int]:
    """Positions of the rows that survive de-duplication by key, in first-seen key order.

    For each key the row with the highest version wins (``None`` counts as lowest); among equal
    versions, or without versions, the last row wins.
    """
    best: dict[Any, int] = {}
    for i, key in enumerate(keys):
        j = best.get(key)
        if j is None:
            best[key] = i
            continue
        if versions is None:
            best[key] = i
            continue
        new, old = versions[i], versions[j]
        if old is None or (new is not None and new >= old):
            best[key] = i
    return list(best.values())


def dedupe(table: pa.Table, key: str, version: str | None = None) -> pa.Table:
    """Drop rows whose ``key`` repeats, keeping what :func:`latest_indices` keeps."""
    if table.num_rows < 2:
        return table
    keys = table.column(key).to_pylist()
    if len(set(keys)) == len(keys):
        return table
    versions = table.column(version).to_pylist() if version else None
    return table.take(latest_indices(keys, versions))
