"""Declaring stored columns on dataclasses, so a record and its table are one declaration.

A dataclass field made with :func:`column` carries its Arrow type; :func:`arrow_fields` derives
the table's columns from the class, in field order (the way LanceDB's ``LanceModel`` derives a
schema from a model). Timestamps are microseconds in UTC.

Example:
    >>> @dataclass(frozen=True)
    ... class Row:
    ...     id: str = column(pa.string(), nullable=False)
    >>> [f.name for f in arrow_fields(Row)]
    ['id']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

TS = pa.timestamp("us", tz="UTC")
STR_LIST = pa.list_(pa.string())

_KEY = "skillstream"


@dataclass(frozen=True)
class Column:
    """A stored column.

    Attributes:
        type: Arrow type, or ``None`` for a field the tables do not hold as such (a vector, whose
            width comes from the embedding model).
        nullable: Whether the column may be null.
        json: Stored as JSON text (dicts).
        info: What else a module declares about the field (a task-skill section, say).
    """

    type: pa.DataType | None
    nullable: bool = True
    json: bool = False
    info: Any = None


def column(
    type_: pa.DataType | None,
    *,
    nullable: bool = True,
    json: bool = False,
    info: Any = None,
    default: Any = dataclasses.MISSING,
    default_factory: Any = dataclasses.MISSING,
) -> Any:
    """A dataclass field that is a stored column (arguments as in :class:`Column`)."""
    meta = {_KEY: Column(type_, nullable=nullable, json=json, info=info)}
    return dataclasses.field(default=default, default_factory=default_factory, metadata=meta)


def columns(cls: type) -> list[tuple[str, Column]]:
    """The declared columns of a dataclass, in field order, with their names."""
    out = []
    for f in dataclasses.fields(cls):
        col = f.metadata.get(_KEY)
        if col is not None:
            out.append((f.name, col))
    return out


def arrow_fields(cls: type, extra: Iterable[pa.Field] = ()) -> list[pa.Field]:
    """Arrow fields of every typed column of a dataclass, in field order, then ``extra``."""
    out = [
        pa.field(name, col.type, nullable=col.nullable)
        for name, col in columns(cls)
        if col.type is not None
    ]
    return out + list(extra)
