"""What the server reads from a home's catalog, always for an :class:`~.auth.Access`.

Each function takes an open catalog and returns plain rows. Every query is bound to the owners the
access may see, so a limited token's request cannot read another owner's rows whatever it names.
Identifiers are fixed here; values are always bound parameters.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from skillstream.server.auth import Access

MEMORY_COLUMNS = (
    "id, owner_id, agent_id, conversation_id, session_id, scope, memory_type, kind, key, "
    "subject, text, tags, confidence, status, event_ts, valid_from, valid_to, created_at, "
    "updated_at, last_accessed_at, reinforcement, expires_at, merged_into, span_id, lang, version"
)
"""The columns of a memory the server shows (not its vector)."""

FILTERS = ("kind", "memory_type", "status", "scope")
"""Columns a memory list filters on by equality."""

PAGE = 200
"""Most rows of one list."""


def _owner_clause(access: Access, column: str = "owner_id") -> tuple[str, list[Any]]:
    if access.owners is None:
        return "TRUE", []
    if not access.owners:
        return "FALSE", []
    marks = ", ".join("?" for _ in access.owners)
    return f"{column} IN ({marks})", sorted(access.owners)


def rows(catalog: Any, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = catalog.sql(sql, params or []).to_pylist()
    return result


def owners(catalog: Any, access: Access) -> list[dict[str, Any]]:
    """Owners with memories: their counts by status and the latest event time."""
    where, params = _owner_clause(access)
    return rows(
        catalog,
        "SELECT owner_id, count(*) AS memories, "
        "count(*) FILTER (WHERE status IN ('generated', 'activated')) AS live, "
        "count(*) FILTER (WHERE status = 'archived') AS archived, "
        "count(*) FILTER (WHERE status = 'expired') AS expired, max(event_ts) AS latest "
        f"FROM memory_meta WHERE {where} GROUP BY owner_id ORDER BY owner_id",
        params,
    )


def memories(
    catalog: Any,
    access: Access,
    owner: str,
    *,
    filters: dict[str, str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = PAGE,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """An owner's memories, newest event first, filtered by equality on ``FILTERS`` and by
    event time. Topic nodes are memories too (``kind = 'topic'``)."""
    access.require(owner)
    clauses = ["owner_id = ?"]
    params: list[Any] = [owner]
    for name, value in (filters or {}).items():
        if name not in FILTERS:
            raise ValueError(f"cannot filter on {name!r}")
        if value:
            clauses.append(f"{name} = ?")
            params.append(value)
    if since is not None:
        clauses.append("event_ts >= ?")
        params.append(since)
    if until is not None:
        clauses.append("event_ts < ?")
        params.append(until)
    params += [max(1, min(limit, PAGE)), max(0, offset)]
    return rows(
        catalog,
        f"SELECT {MEMORY_COLUMNS} FROM memory_meta WHERE {' AND '.join(clauses)} "
        "ORDER BY event_ts DESC NULLS LAST, id LIMIT ? OFFSET ?",
        params,
    )


def memory(catalog: Any, access: Access, memory_id: str) -> dict[str, Any] | None:
    """One memory, or ``None`` when there is none this access may see."""
    where, params = _owner_clause(access)
    found = rows(
        catalog,
        f"SELECT {MEMORY_COLUMNS} FROM memory_meta WHERE id = ? AND {where}",
        [memory_id, *params],
    )
    return found[0] if found else None


def history(catalog: Any, access: Access, memory_id: str) -> list[dict[str, Any]] | None:
    """A memory's lifecycle events, oldest first; ``None`` when the memory is not visible."""
    if memory(catalog, access, memory_id) is None:
        return None
    from skillstream.services.home_lifecycle import history as events

    return events(catalog, memory_id)


def contradictions(
    catalog: Any, access: Access, owner: str | None = None, *, every: bool = False
) -> list[dict[str, Any]]:
    """Contradictions of the visible owners (open ones unless ``every``), oldest first."""
    if owner is not None:
        access.require(owner)
    if not catalog.has("contradictions"):
        return []
    from skillstream.services.home_lifecycle import list_contradictions

    found = list_contradictions(catalog, now=None, older_than=None, owner=owner, all_=every)
    return [c for c in found if access.allows(c["owner_id"])]


def over_time(catalog: Any, access: Access, column: str, owner: str | None = None) -> list[Any]:
    """Memories per month of event time and per value of ``column`` (status or memory_type)."""
    if column not in ("status", "memory_type"):
        raise ValueError(f"cannot chart {column!r}")
    where, params = _owner_clause(access)
    if owner is not None:
        access.require(owner)
        where += " AND owner_id = ?"
        params.append(owner)
    return rows(
        catalog,
        f"SELECT strftime(date_trunc('month', event_ts), '%Y-%m') AS period, "
        f"coalesce({column}, '?') AS series, count(*) AS n FROM memory_meta "
        f"WHERE event_ts IS NOT NULL AND kind <> 'topic' AND {where} GROUP BY ALL ORDER BY 1, 2",
        params,
    )


def llm_per_day(catalog: Any, access: Access) -> list[dict[str, Any]]:
    """LLM calls and tokens per day and model (calls answered from the cache cost nothing)."""
    if not catalog.has("llm_calls"):
        return []
    where, params = _owner_clause(access)
    return rows(
        catalog,
        "SELECT strftime(created_at, '%Y-%m-%d') AS day, coalesce(model, backend) AS model, "
        "count(*) AS calls, sum(prompt_tokens) FILTER (WHERE NOT cached) AS prompt_tokens, "
        "sum(completion_tokens) FILTER (WHERE NOT cached) AS completion_tokens "
        f"FROM llm_calls WHERE {where} GROUP BY ALL ORDER BY 1, 2",
        params,
    )


def cost(catalog: Any, access: Access, prices: Any) -> dict[str, Any]:
    """What the LLM cost, per purpose, in all and per 1,000 turns (as ``stats --cost``), of the
    visible owners."""
    from skillstream.services.cost import read_cost

    owners = None if access.owners is None else sorted(access.owners)
    return read_cost(catalog, prices, owners)


def skill_versions(catalog: Any, access: Access, owner: str, name: str) -> list[dict[str, Any]]:
    """A task skill's versions, newest first."""
    access.require(owner)
    if not catalog.has("task_skill_versions"):
        return []
    return rows(
        catalog,
        "SELECT version, change, status, reason, package_url, conversation_id, created_at "
        "FROM task_skill_versions WHERE owner_id = ? AND name = ? ORDER BY version DESC",
        [owner, name],
    )


def memory_skill_bank(catalog: Any) -> list[dict[str, Any]]:
    """Every version of every memory skill of the bank, by name then newest first."""
    if not catalog.has("memory_skills"):
        return []
    return rows(
        catalog,
        "SELECT name, version, status, action, source, description, purpose, usage_count, "
        "reward_mean, created_at FROM memory_skills ORDER BY name, version DESC",
    )


def stats(catalog: Any, access: Access) -> dict[str, Any]:
    """Counts of memories by status, kind and type; spans by status; open spans; dead letters
    (dead letters and spans of other owners are not counted for a limited token)."""
    where, params = _owner_clause(access)
    out: dict[str, Any] = {}
    for column in ("status", "kind", "memory_type"):
        out[f"memories_by_{column}"] = {
            r["v"]: r["n"]
            for r in rows(
                catalog,
                f"SELECT coalesce({column}, '?') AS v, count(*) AS n FROM memory_meta "
                f"WHERE {where} GROUP BY 1 ORDER BY 1",
                params,
            )
        }
    out["memories"] = sum(out["memories_by_status"].values())
    out["owners"] = rows(
        catalog, f"SELECT count(DISTINCT owner_id) AS n FROM memory_meta WHERE {where}", params
    )[0]["n"]
    out["spans_by_status"] = {
        r["v"]: r["n"]
        for r in rows(
            catalog,
            f"SELECT status AS v, count(*) AS n FROM spans WHERE {where} GROUP BY 1 ORDER BY 1",
            params,
        )
    }
    if catalog.has("open_messages"):
        out["open_spans"] = rows(
            catalog,
            "SELECT count(DISTINCT (owner_id, conversation_id)) AS n FROM open_messages "
            f"WHERE stage = 'spans' AND {where}",
            params,
        )[0]["n"]
    if not access.limited:
        out["dead_letters"] = rows(catalog, "SELECT count(*) AS n FROM dead_letters")[0]["n"]
    return out
