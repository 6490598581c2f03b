"""Every table of a home, declared in one place: the DuckDB catalog's and LanceDB's.

:data:`CATALOG` lists the catalog tables (name, Arrow schema with its primary key and a one-line
description, and the row class written to it, if any). ``storage.catalog`` creates exactly these
tables and generates their DDL from the schemas; nothing adds a table by being imported. LanceDB
tables are created from :func:`memories_lance` and :func:`task_skills_lance`.

Where a record type exists, the columns come from it (LanceDB's ``LanceModel`` idea): the typed rows
of ``skillstream.model`` (contradictions, session summaries, failed spans, queries) and the
task-skill record (``distill.record``), so a column is added in exactly one place. Timestamps are
microseconds in UTC. ``vector`` columns are fixed-size lists whose width comes from the embedding
model.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from skillstream.columns import STR_LIST, TS, arrow_fields
from skillstream.distill.record import TaskSkillVersionRow, task_skill_fields
from skillstream.model import (
    CatalogRow,
    ContradictionRow,
    FailedSpanRow,
    MemoryRelationRow,
    QueryRow,
    SessionSummaryRow,
)


def _schema(fields: list[pa.Field], key: str | None, doc: str) -> pa.Schema:
    meta = {b"doc": doc.encode()}
    if key:
        meta[b"primary_key"] = key.encode()
    return pa.schema(fields, metadata=meta)


MESSAGES = _schema(
    [
        pa.field("message_id", pa.string(), nullable=False),
        pa.field("conversation_id", pa.string(), nullable=False),
        pa.field("owner_id", pa.string(), nullable=False),
        pa.field("agent_id", pa.string()),
        pa.field("session_id", pa.string(), nullable=False),
        pa.field("role", pa.string(), nullable=False),
        pa.field("speaker", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("ts", TS, nullable=False),
        pa.field("metadata", pa.string()),
        pa.field("source", pa.string()),
        pa.field("position", pa.int64()),
    ],
    "message_id",
    "One chat message in the canonical format, after validation.",
)

SPANS = _schema(
    [
        pa.field("span_id", pa.string(), nullable=False),
        pa.field("owner_id", pa.string(), nullable=False),
        pa.field("conversation_id", pa.string(), nullable=False),
        pa.field("session_id", pa.string()),
        pa.field("seq", pa.int64()),
        pa.field("start_ts", TS),
        pa.field("end_ts", TS),
        pa.field("message_ids", STR_LIST),
        pa.field("n_tokens", pa.int32()),
        pa.field("lang", pa.string()),
        pa.field("status", pa.string()),
        pa.field("extractor", pa.string()),
        pa.field("memory_skills", STR_LIST),
        pa.field("controller", pa.string()),
        pa.field("n_ops", pa.int32()),
        pa.field("memory_ids", STR_LIST),
        pa.field("error", pa.string()),
        pa.field("attempts", pa.int32()),
        pa.field("processed_at", TS),
        pa.field("message_digests", STR_LIST),
    ],
    "span_id",
    "The span ledger: one row per processed span; its presence is the span's commit marker.",
)

# Columns of a memory. LanceDB keeps them with the vector; the DuckDB catalog keeps them without it.
MEMORY_FIELDS = [
    pa.field("id", pa.string(), nullable=False),
    pa.field("owner_id", pa.string(), nullable=False),
    pa.field("agent_id", pa.string()),
    pa.field("conversation_id", pa.string()),
    pa.field("scope", pa.string(), nullable=False),
    pa.field("memory_type", pa.string(), nullable=False),
    pa.field("kind", pa.string(), nullable=False),
    pa.field("key", pa.string()),
    pa.field("subject", pa.string()),
    pa.field("text", pa.string(), nullable=False),
    pa.field("tags", STR_LIST),
    pa.field("confidence", pa.float64()),
    pa.field("status", pa.string(), nullable=False),
    pa.field("event_ts", TS),
    pa.field("valid_from", TS),
    pa.field("valid_to", TS),
    pa.field("created_at", TS),
    pa.field("updated_at", TS),
    pa.field("last_accessed_at", TS),
    pa.field("last_reinforced_at", TS),
    pa.field("reinforcement", pa.int32()),
    pa.field("expires_at", TS),
    pa.field("merged_into", pa.string()),
    pa.field("source_message_ids", STR_LIST),
    pa.field("span_id", pa.string()),
    pa.field("lang", pa.string()),
    pa.field("version", pa.int32()),
    # lifecycle: the creating session (session scope, summaries) and decay bookkeeping
    pa.field("session_id", pa.string()),
    pa.field("decay_steps", pa.int32()),
]

LANCE_MEMORY_COLUMNS = [f.name for f in MEMORY_FIELDS]
"""LanceDB keeps every memory column plus the vector, so search hits and the flow's hydration of an
owner's state need no second store; DuckDB's ``memory_meta`` is the SQL-side copy."""


def vector_field(dim: int) -> pa.Field:
    """The embedding column for a model of width ``dim``."""
    return pa.field("vector", pa.list_(pa.float32(), dim))


def memories_lance(dim: int) -> pa.Schema:
    """Schema of the LanceDB ``memories`` table."""
    by_name = {f.name: f for f in MEMORY_FIELDS}
    return _schema(
        [by_name[c] for c in LANCE_MEMORY_COLUMNS] + [vector_field(dim)],
        "id",
        "Memories as search sees them: text, vector and the filter columns.",
    )


MEMORY_META = _schema(
    MEMORY_FIELDS, "id", "Full metadata of every memory (the vector lives in LanceDB)."
)

MEMORY_EVENTS = _schema(
    [
        pa.field("event_id", pa.string(), nullable=False),
        pa.field("memory_id", pa.string(), nullable=False),
        pa.field("owner_id", pa.string(), nullable=False),
        pa.field("event", pa.string(), nullable=False),
        pa.field("reason", pa.string()),
        pa.field("old_value", pa.string()),
        pa.field("new_value", pa.string()),
        pa.field("old_status", pa.string()),
        pa.field("new_status", pa.string()),
        pa.field("span_id", pa.string()),
        pa.field("actor", pa.string()),
        pa.field("event_ts", TS),
        pa.field("recorded_at", TS),
        pa.field("version", pa.int32()),
    ],
    "event_id",
    "Append-only lifecycle log: one row per change of a memory.",
)

DEAD_LETTERS = _schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("position", pa.string(), nullable=False),
        pa.field("stage", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("payload", pa.string()),
        pa.field("recorded_at", TS),
    ],
    "id",
    "Records that could not be processed, with where they came from and why.",
)

LLM_CALLS = _schema(
    [
        pa.field("call_id", pa.string(), nullable=False),
        pa.field("request_hash", pa.string(), nullable=False),
        pa.field("purpose", pa.string(), nullable=False),
        pa.field("backend", pa.string(), nullable=False),
        pa.field("model", pa.string()),
        pa.field("span_id", pa.string()),
        pa.field("prompt_tokens", pa.int64()),
        pa.field("completion_tokens", pa.int64()),
        pa.field("latency_ms", pa.float64()),
        pa.field("status", pa.string(), nullable=False),
        pa.field("cached", pa.bool_()),
        pa.field("attempts", pa.int32()),
        pa.field("error", pa.string()),
        pa.field("created_at", TS),
        pa.field("owner_id", pa.string()),
    ],
    "call_id",
    "Every LLM request: purpose, tokens, latency, outcome, and the owner it was made for.",
)

OPEN_MESSAGES = _schema(
    [
        pa.field("open_id", pa.string(), nullable=False),
        pa.field("stage", pa.string(), nullable=False),
        pa.field("owner_id", pa.string(), nullable=False),
        pa.field("conversation_id", pa.string(), nullable=False),
        pa.field("message_id", pa.string(), nullable=False),
        pa.field("position", pa.int32()),
        pa.field("seq", pa.int64()),
        pa.field("last_seen", TS),
        pa.field("message", pa.string(), nullable=False),
        pa.field("held_at", TS),
    ],
    "open_id",
    "Messages of open spans and task segments held between runs (Home.add, a stopped live run).",
)

# ---------------------------------------------------------------- memory skills
MEMORY_SKILLS = _schema(
    [
        pa.field("version_id", pa.string(), nullable=False),
        pa.field("name", pa.string(), nullable=False),
        pa.field("version", pa.int32(), nullable=False),
        pa.field("description", pa.string(), nullable=False),
        pa.field("purpose", pa.string()),
        pa.field("when_to_use", pa.string()),
        pa.field("how_to_apply", pa.string()),
        pa.field("constraints", pa.string()),
        pa.field("action", pa.string(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("source", pa.string()),
        pa.field("content_hash", pa.string()),
        pa.field("created_at", TS),
        pa.field("usage_count", pa.int64()),
        pa.field("reward_mean", pa.float64()),
        pa.field("recent_rewards", pa.list_(pa.float64())),
        pa.field("offline", pa.string()),
    ],
    "version_id",
    "The memory skill bank: one row per version of a memory skill (``name@version``); the highest "
    "version of a name is its current state, and status 'retired' takes it out of selection.",
)

FAILED_SPANS = _schema(
    arrow_fields(FailedSpanRow),
    "span_id",
    "Spans whose extraction failed, with their (already redacted) messages as JSON, so "
    "``skillstream retry-failed`` can process them later; status 'pending' or 'resolved'.",
)

CONTRADICTIONS = _schema(
    arrow_fields(ContradictionRow),
    "contradiction_id",
    "Conflicting memories of one owner: memory_a (existing) vs memory_b (new), how it was settled "
    "(keep-a, keep-b, discard-both, unresolved) and by which rule (newer, confidence, lifecycle).",
)

SESSION_SUMMARIES = _schema(
    arrow_fields(SessionSummaryRow),
    "summary_id",
    "One summary per session (narrative, key facts, topics, emotional context, token count); "
    "summary_id is the id of the summary memory.",
)

MEMORY_RELATIONS = _schema(
    arrow_fields(MemoryRelationRow),
    "relation_id",
    "Links between memories: member_of (a memory joins or leaves an abstract topic node of the "
    "reorganizer at a node version: change) and consolidated_into (a merged memory and the new "
    "version that replaced it).",
)

QUERIES = _schema(
    arrow_fields(QueryRow),
    "query_id",
    "Every recorded memory search: who asked, what (redacted), how (keyword, semantic, hybrid), "
    "which memories came back in rank order, and the event time it ran at.",
)

# ---------------------------------------------------------------- task skills
TASK_SKILL_FIELDS = task_skill_fields()
"""Columns of a task skill, from the record (``scripts``, ``references``, ``planned_*`` and
``stats`` are JSON)."""

TASK_SKILLS = _schema(
    TASK_SKILL_FIELDS, "id", "Current version of every task skill (the vector lives in LanceDB)."
)
TASK_SKILL_VERSIONS = _schema(
    arrow_fields(TaskSkillVersionRow),
    "version_id",
    "Every version of every task skill: what changed it, its package, the full record as JSON.",
)


def task_skills_lance(dim: int) -> pa.Schema:
    """Schema of the LanceDB ``task_skills`` table for vectors of width ``dim``."""
    return _schema(
        TASK_SKILL_FIELDS + [vector_field(dim)], "id", "Task skills as search sees them."
    )


# ---------------------------------------------------------------- erasure
# These tables have no ``owner_id`` column on purpose: forgetting an owner deletes every row of
# every table that has one, and what these keep must outlive the owner (``storage/erasure.py``).
RUN_LEASES = _schema(
    [
        pa.field("lease_id", pa.string(), nullable=False),
        pa.field("host", pa.string()),
        pa.field("pid", pa.int64()),
        pa.field("started_at", TS),
        pa.field("heartbeat_at", TS),
    ],
    "lease_id",
    "Runs writing a shared catalog now: each renews its row while it runs (forget waits for none).",
)

ERASURES = _schema(
    [
        pa.field("erasure_id", pa.string(), nullable=False),
        pa.field("owner_hash", pa.string(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("started_at", TS),
        pa.field("finished_at", TS),
        pa.field("messages", pa.int64()),
        pa.field("counts", pa.string()),
    ],
    "erasure_id",
    "The audit of forgotten owners: one row per erasure, the owner as a salted hash only, its "
    "status (started, done), when, and how much each store lost (JSON counts).",
)

ERASED_MESSAGES = _schema(
    [
        pa.field("message_hash", pa.string(), nullable=False),
        pa.field("erasure_id", pa.string(), nullable=False),
        pa.field("erased_at", TS),
    ],
    "message_hash",
    "Tombstones of forgotten messages: a salted hash of owner and message id, so a replay of the "
    "same source does not bring them back; never the ids or the text.",
)

ERASURE_SALT = _schema(
    [
        pa.field("name", pa.string(), nullable=False),
        pa.field("salt", pa.string(), nullable=False),
        pa.field("created_at", TS),
    ],
    "name",
    "The home's random salt of the erasure hashes (one row), made by the first erasure.",
)


# ---------------------------------------------------------------- the catalog
@dataclass(frozen=True)
class Table:
    """A catalog table.

    Attributes:
        name: Table name.
        schema: Its columns, with the primary key and a description in the metadata.
        row: The typed row class written to it, when rows travel as one.
    """

    name: str
    schema: pa.Schema
    row: type[CatalogRow] | None = None

    @property
    def key(self) -> str | None:
        return primary_key(self.schema)


CATALOG: tuple[Table, ...] = (
    Table("memory_meta", MEMORY_META),
    Table("memory_events", MEMORY_EVENTS),
    Table("spans", SPANS),
    Table("open_messages", OPEN_MESSAGES),
    Table("dead_letters", DEAD_LETTERS),
    Table("llm_calls", LLM_CALLS),
    Table("memory_skills", MEMORY_SKILLS),
    Table("failed_spans", FAILED_SPANS, FailedSpanRow),
    Table("contradictions", CONTRADICTIONS, ContradictionRow),
    Table("queries", QUERIES, QueryRow),
    Table("session_summaries", SESSION_SUMMARIES, SessionSummaryRow),
    Table("memory_relations", MEMORY_RELATIONS, MemoryRelationRow),
    Table("task_skills", TASK_SKILLS),
    Table("task_skill_versions", TASK_SKILL_VERSIONS, TaskSkillVersionRow),
    Table("run_leases", RUN_LEASES),
    Table("erasures", ERASURES),
    Table("erased_messages", ERASED_MESSAGES),
    Table("erasure_salt", ERASURE_SALT),
)
"""Every DuckDB table of the catalog, in creation order."""

CATALOG_TABLES: dict[str, pa.Schema] = {t.name: t.schema for t in CATALOG}
"""Catalog table schemas by name."""

ROW_TABLES: dict[type[CatalogRow], str] = {t.row: t.name for t in CATALOG if t.row is not None}
"""The table each typed row class is written to."""


def table_of(row: CatalogRow) -> str:
    """The catalog table a typed row belongs to."""
    return ROW_TABLES[type(row)]


def primary_key(schema: pa.Schema) -> str | None:
    """The primary-key column named in a schema's metadata."""
    meta = schema.metadata or {}
    key = meta.get(b"primary_key")
    return key.decode() if key else None


def empty_table(schema: pa.Schema) -> pa.Table:
    return schema.empty_table()


OWNER_COLUMN = "owner_id"
"""The column that ties a row to an owner, in the catalog and in LanceDB."""


def owner_tables() -> list[str]:
    """The catalog tables whose rows belong to an owner (they have an ``owner_id`` column):
    forgetting an owner deletes its rows from each, so a new table with that column is erased
    without further code."""
    return [t.name for t in CATALOG if OWNER_COLUMN in t.schema.names]
