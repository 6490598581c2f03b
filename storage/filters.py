"""Safe SQL text for filters and identifiers.

LanceDB filters (DataFusion SQL) and DuckDB statements are strings, so every value that reaches them
goes through :func:`literal` and every name through :func:`ident`. Values that can be bound as
parameters (DuckDB) are bound instead; these helpers are for the places where a string is the only
interface (LanceDB ``where`` clauses, DDL).

Example:
    >>> where_all(eq("owner_id", "o'brien"), is_in("status", ["activated"]))
    "(owner_id = 'o''brien') AND (status IN ('activated'))"
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from skillstream.vocab import MemoryType

if TYPE_CHECKING:
    from skillstream.lifecycle.policy import Policy, Reader

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def ident(name: str) -> str:
    """Quote an identifier for DuckDB: wrap in double quotes, double any inside."""
    if not name or "\x00" in name:
        raise ValueError(f"not a valid identifier: {name!r}")
    return '"' + name.replace('"', '""') + '"'


def lance_column(name: str) -> str:
    """A column reference for a LanceDB filter: plain names as is, others in backticks."""
    if _PLAIN.match(name):
        return name
    if "`" in name or "\x00" in name:
        raise ValueError(f"column name cannot be used in a LanceDB filter: {name!r}")
    return f"`{name}`"


def literal(value: Any) -> str:
    """Render a Python value as an SQL literal that both DuckDB and DataFusion read the same way.

    Strings are wrapped in single quotes with inner single quotes doubled (backslashes are not
    escapes in either dialect). Datetimes become UTC ``TIMESTAMP`` literals.

    Raises:
        ValueError: for NUL characters, non-finite floats, or types without a literal form.
    """
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"non-finite float has no SQL literal: {value!r}")
        return repr(value)
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError("strings with NUL characters cannot be used in a filter")
        return "'" + value.replace("'", "''") + "'"
    raise ValueError(f"no SQL literal for a value of type {type(value).__name__}")


def eq(column: str, value: Any) -> str:
    """``column = value`` (``column IS NULL`` for ``None``) for a LanceDB filter."""
    col = lance_column(column)
    if value is None:
        return f"{col} IS NULL"
    return f"{col} = {literal(value)}"


def is_in(column: str, values: Iterable[Any]) -> str:
    """``column IN (...)``; an empty list gives a clause that matches nothing."""
    items = list(values)
    if not items:
        return "FALSE"
    return f"{lance_column(column)} IN ({', '.join(literal(v) for v in items)})"


def not_skill_item() -> str:
    """Rows that are not a task skill's ``SkillMemory`` item (see ``distill.memory_item``)."""
    return f"memory_type IS NULL OR memory_type <> {literal(MemoryType.SKILL.value)}"


def where_all(*clauses: str | None) -> str | None:
    """Join the non-empty clauses with ``AND`` (each in parentheses when there are several)."""
    parts = [c for c in clauses if c]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return " AND ".join(f"({p})" for p in parts)


def read_filter(reader: Reader, policy: Policy) -> str | None:
    """The LanceDB filter that keeps what ``lifecycle.policy.can_read`` allows (``None``: no
    restriction)."""
    if reader.is_operator:
        return None
    parts = []
    if "fleet" in policy.readable:
        parts.append(eq("scope", "fleet"))
    if reader.owner_id is not None:
        owner = eq("owner_id", reader.owner_id)
        if "private" in policy.readable:
            parts.append(f"{eq('scope', 'private')} AND {owner}")
        if "session" in policy.readable and reader.session_id is not None:
            parts.append(
                f"{eq('scope', 'session')} AND {owner} AND {eq('session_id', reader.session_id)}"
            )
    if not parts:
        return "FALSE"
    return " OR ".join(f"({p})" for p in parts)
