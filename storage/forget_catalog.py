"""Forgetting an owner in the catalog: its rows in every table, and the bytes they leave behind.

What belongs to an owner is found from the catalog's own schema, not from a list: every base
table with an ``owner_id`` column (``tables.OWNER_COLUMN``) loses the owner's rows, so a table added
later with that column is erased without a change here. Two tables have no owner column and are
matched through it: ``dead_letters`` (a payload naming the owner or one of its conversations) and
the ``llm_calls`` rows written before calls carried their owner (by the span, segment or task skill
they were made for).

A deleted row is not gone from the bytes: a DuckDB file keeps it in its blocks until the file is
written anew (:func:`rewrite_file`), and DuckLake keeps it in the Parquet files of older snapshots
and in the current files behind a deletion file (:func:`purge_lake`).
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from skillstream.storage.catalog import LAKE, Catalog
from skillstream.storage.filters import ident, literal
from skillstream.tables import OWNER_COLUMN

_REWRITE = ".rewrite-"
"""Infix of the temporary name a catalog file is rewritten under."""


@dataclass
class OwnerTraces:
    """What the catalog knows of one owner, read before anything is erased (the other stores
    are found through it)."""

    message_ids: set[str] = field(default_factory=set)
    conversation_ids: set[str] = field(default_factory=set)
    work_ids: set[str] = field(default_factory=set)
    """Spans, task-skill segments and task skills: what an ``llm_calls`` row names."""
    request_hashes: set[str] = field(default_factory=set)
    """LLM requests made for the owner only (the answer cache's keys)."""
    dead_letters: set[str] = field(default_factory=set)


def owner_tables(cat: Catalog) -> list[str]:
    """The catalog's base tables with an ``owner_id`` column, read from the catalog itself."""
    rows = cat.con.execute(
        "SELECT c.table_name FROM information_schema.columns AS c "
        "JOIN information_schema.tables AS t ON t.table_catalog = c.table_catalog "
        "AND t.table_schema = c.table_schema AND t.table_name = c.table_name "
        "WHERE c.column_name = ? AND c.table_schema = 'main' "
        "AND c.table_catalog = current_database() AND t.table_type = 'BASE TABLE' "
        "ORDER BY c.table_name",
        [OWNER_COLUMN],
    ).fetchall()
    return [r[0] for r in rows]


def _columns_of(cat: Catalog, table: str) -> list[str]:
    return _column(
        cat,
        "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
        "AND table_schema = 'main' AND table_catalog = current_database()",
        [table],
    )


def _column(cat: Catalog, sql: str, params: list[Any]) -> list[Any]:
    return [r[0] for r in cat.con.execute(sql, params).fetchall() if r[0] is not None]


def read_traces(cat: Catalog, owner: str) -> OwnerTraces:
    """Everything the other stores are searched with, for ``owner``, read generically from every
    owner table: message ids (columns ``message_id``, ``message_ids``, ``source_message_ids``,
    and the JSON ``messages`` of failed spans), conversation ids (``conversation_id``), and what
    ``llm_calls`` rows name (``span_id``, ``segment_id``, ``skill_id``, a task skill's ``id``)."""
    t = OwnerTraces()
    for table in owner_tables(cat):
        columns = set(_columns_of(cat, table))
        for col in _ID_COLUMNS & columns:
            values = _column(
                cat, f"SELECT DISTINCT {ident(col)} FROM {ident(table)} WHERE owner_id = ?", [owner]
            )
            if col == "conversation_id":
                t.conversation_ids.update(values)
            elif col == "message_id":
                t.message_ids.update(values)
            elif col in ("message_ids", "source_message_ids"):
                t.message_ids.update(m for ids in values for m in ids or [])
            elif col == "messages":
                t.message_ids.update(m for text in values for m in _message_ids(text))
            elif table in _WORK_TABLES or col != "id":
                t.work_ids.update(values)
    t.conversation_ids.discard("")
    if cat.has("dead_letters"):
        for dl_id, payload in cat.con.execute("SELECT id, payload FROM dead_letters").fetchall():
            if _names_owner(payload, owner, t.conversation_ids):
                t.dead_letters.add(dl_id)
                t.message_ids.update(_message_ids(f"[{payload}]"))
    if cat.has("llm_calls"):
        mine = _llm_calls(cat, owner, t)
        t.request_hashes = set(
            _column(
                cat,
                "SELECT DISTINCT request_hash FROM llm_calls WHERE call_id IN "
                "(SELECT unnest(?::VARCHAR[])) AND request_hash NOT IN (SELECT request_hash "
                "FROM llm_calls WHERE call_id NOT IN (SELECT unnest(?::VARCHAR[])))",
                [mine, mine],
            )
        )
    return t


_ID_COLUMNS = {
    "conversation_id",
    "message_id",
    "message_ids",
    "source_message_ids",
    "messages",
    "span_id",
    "segment_id",
    "skill_id",
    "id",
}
"""The columns of an owner table that :func:`read_traces` reads."""

_WORK_TABLES = {"task_skills"}
"""Tables whose ``id`` is what an ``llm_calls`` row names (a task skill's distillation)."""


def _llm_calls(cat: Catalog, owner: str, t: OwnerTraces) -> list[str]:
    """Ids of the owner's ``llm_calls`` rows: by owner, or (rows without one) by what they were
    made for."""
    return _column(
        cat,
        "SELECT call_id FROM llm_calls WHERE owner_id = ? "
        "OR (owner_id IS NULL AND span_id IN (SELECT unnest(?::VARCHAR[])))",
        [owner, sorted(t.work_ids)],
    )


def _message_ids(text: str | None) -> list[str]:
    """The ``message_id`` values of a JSON list of messages (none when it does not parse)."""
    try:
        items = json.loads(text or "[]")
    except ValueError:
        return []
    items = items if isinstance(items, list) else [items]
    return [str(m["message_id"]) for m in items if isinstance(m, dict) and m.get("message_id")]


def _names_owner(payload: str | None, owner: str, conversations: set[str]) -> bool:
    """Whether a dead letter's payload holds the owner id, or one of its conversation ids, as a
    JSON string (a payload is the record as JSON, cut to a length, so it is searched as text)."""
    if not payload:
        return False
    return any(json.dumps(x, ensure_ascii=False) in payload for x in (owner, *conversations))


def count_rows(cat: Catalog, owner: str, traces: OwnerTraces) -> dict[str, int]:
    """The rows :func:`erase_rows` would delete, per table (tables with none left out)."""
    out: dict[str, int] = {}
    for table in owner_tables(cat):
        if table == "llm_calls":
            continue
        n = cat.con.execute(
            f"SELECT count(*) FROM {ident(table)} WHERE {ident(OWNER_COLUMN)} = ?", [owner]
        ).fetchone()
        if n and n[0]:
            out[table] = int(n[0])
    if cat.has("llm_calls"):
        calls = len(_llm_calls(cat, owner, traces))
        if calls:
            out["llm_calls"] = calls
    if traces.dead_letters:
        out["dead_letters"] = len(traces.dead_letters)
    return out


def erase_rows(cat: Catalog, owner: str, traces: OwnerTraces) -> dict[str, int]:
    """Delete the owner's rows from every table, in one transaction; the rows deleted per table."""
    counted = count_rows(cat, owner, traces)

    def work(c: Catalog) -> None:
        c.sign("forget an owner")
        if c.has("llm_calls"):
            calls = _llm_calls(c, owner, traces)
            c.con.execute(
                "DELETE FROM llm_calls WHERE call_id IN (SELECT unnest(?::VARCHAR[]))", [calls]
            )
        for table in owner_tables(c):
            if table != "llm_calls":
                c.con.execute(
                    f"DELETE FROM {ident(table)} WHERE {ident(OWNER_COLUMN)} = ?", [owner]
                )
        if traces.dead_letters:
            c.con.execute(
                "DELETE FROM dead_letters WHERE id IN (SELECT unnest(?::VARCHAR[]))",
                [sorted(traces.dead_letters)],
            )

    if counted:
        cat.run_transaction(work)
    return counted


# ---------------------------------------------------------------------- the bytes left behind
def rewrite_file(path: str | os.PathLike[str]) -> int:
    """Write a DuckDB catalog file anew, so deleted rows leave its blocks; returns the bytes
    saved. The copy is built under a temporary name and renamed over the file only when complete
    (a kill leaves the old file, whole). Nobody may hold the file open (the run lock is held)."""
    file = Path(path)
    for stale in file.parent.glob(f"{file.name}{_REWRITE}*"):
        with contextlib.suppress(OSError):
            stale.unlink()
    before = file.stat().st_size
    tmp = file.with_name(f"{file.name}{_REWRITE}{os.getpid()}-{uuid.uuid4().hex[:8]}")
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH {literal(str(file))} AS old")
        con.execute("CHECKPOINT old")  # a write-ahead log left beside the file goes in first
        con.execute("DETACH old")
        con.execute(f"ATTACH {literal(str(file))} AS old (READ_ONLY)")
        con.execute(f"ATTACH {literal(str(tmp))} AS fresh")
        con.execute("COPY FROM DATABASE old TO fresh")
        con.execute("CHECKPOINT fresh")
        con.execute("DETACH fresh")
        con.execute("DETACH old")
    except BaseException:
        con.close()
        for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
            with contextlib.suppress(OSError):
                leftover.unlink()
        raise
    con.close()
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, file)
    with contextlib.suppress(OSError):
        file.with_name(file.name + ".wal").unlink()
    return before - file.stat().st_size


def purge_lake(cat: Catalog) -> dict[str, int]:
    """On DuckLake, drop every byte of deleted rows: rows kept inline in PostgreSQL go to
    Parquet, data files with deletions are rewritten without them, every snapshot but the
    latest is expired, and the files no snapshot needs any more are deleted at once.

    Returns:
        ``snapshots_expired`` and ``files_deleted``.
    """
    meta = f"{ident('__ducklake_metadata_' + LAKE)}"

    def count(sql: str) -> int:
        row = cat.con.execute(sql).fetchone()
        return int(row[0]) if row else 0

    snapshots = count(f"SELECT count(*) FROM {meta}.ducklake_snapshot")
    cat.flush()
    cat.run_transaction(
        lambda c: c.con.execute(
            "CALL ducklake_rewrite_data_files(?, delete_threshold => 0.0)", [LAKE]
        )
    )
    cat.run_transaction(
        lambda c: c.con.execute("CALL ducklake_expire_snapshots(?, older_than => now())", [LAKE])
    )
    deleted = cat.con.execute(
        "SELECT count(*) FROM ducklake_cleanup_old_files(?, cleanup_all => true)", [LAKE]
    ).fetchone()
    orphans = cat.con.execute(
        "SELECT count(*) FROM ducklake_delete_orphaned_files(?, cleanup_all => true)", [LAKE]
    ).fetchone()
    return {
        "snapshots_expired": max(
            0, snapshots - count(f"SELECT count(*) FROM {meta}.ducklake_snapshot")
        ),
        "files_deleted": int(deleted[0] if deleted else 0) + int(orphans[0] if orphans else 0),
    }
