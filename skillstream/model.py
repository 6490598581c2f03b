"""Plain data records that flow between the stages.

They are frozen or treated as values: a stage returns new records instead of mutating what it got,
which keeps Bytewax snapshots honest and the core logic testable without any I/O.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Self

import pyarrow as pa

from skillstream.columns import STR_LIST, TS, column
from skillstream.vocab import MemoryKind, MemoryStatus, MemoryType, Op

ROLES = ("user", "assistant", "system", "tool")


@dataclass(frozen=True)
class Message:
    """One validated chat message in the canonical format."""

    message_id: str
    conversation_id: str
    owner_id: str
    session_id: str
    role: str
    speaker: str
    text: str
    ts: datetime
    agent_id: str | None = None
    metadata: str | None = None
    """JSON text of the record's ``metadata`` object (image captions live here too)."""
    source: str | None = None
    position: int | None = None


@dataclass(frozen=True)
class DeadLetter:
    """A record that could not be processed: where it came from, why, and a truncated payload."""

    id: str
    source: str
    position: str
    stage: str
    reason: str
    payload: str | None
    recorded_at: datetime


@dataclass(frozen=True)
class Span:
    """Consecutive messages of one conversation, cut by a token budget, a session or an idle gap."""

    span_id: str
    owner_id: str
    conversation_id: str
    session_id: str
    seq: int
    messages: tuple[Message, ...]
    n_tokens: int
    lang: str
    trimmed: bool = False
    """Cut without messages that were already inside a done span (``SpanBuilder.trim``)."""

    @property
    def start_ts(self) -> datetime:
        return self.messages[0].ts

    @property
    def end_ts(self) -> datetime:
        return self.messages[-1].ts

    @property
    def message_ids(self) -> list[str]:
        return [m.message_id for m in self.messages]


@dataclass(frozen=True)
class MemoryOp:
    """One operation proposed by an extractor for a span.

    ``target_id`` names the existing memory an UPDATE or DELETE applies to. ``source_message_ids``
    are the messages the statement came from (a subset of the span's messages).
    """

    op: Op
    text: str = ""
    kind: str = MemoryKind.FACT
    key: str | None = None
    subject: str | None = None
    tags: tuple[str, ...] = ()
    event_ts: datetime | None = None
    target_id: str | None = None
    source_message_ids: tuple[str, ...] = ()
    confidence: float | None = None
    reason: str = ""
    memory_skill: str | None = None
    scope: str | None = None
    """Scope asked for by the executor (``private``, ``fleet``, ``session``); default: policy's."""
    memory_type: str | None = None
    """Memory type asked for by the executor (``LongTermMemory``, ...); default: by kind."""


@dataclass
class Memory:
    """A memory item, as held in the extraction state and written to the stores."""

    id: str
    owner_id: str
    text: str
    kind: str
    scope: str = "private"
    memory_type: str = MemoryType.LONG_TERM
    agent_id: str | None = None
    conversation_id: str | None = None
    key: str | None = None
    subject: str | None = None
    tags: list[str] = field(default_factory=list)
    confidence: float = 0.7
    status: str = MemoryStatus.GENERATED
    event_ts: datetime | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    last_accessed_at: datetime | None = None
    last_reinforced_at: datetime | None = None
    reinforcement: int = 0
    expires_at: datetime | None = None
    merged_into: str | None = None
    source_message_ids: list[str] = field(default_factory=list)
    span_id: str | None = None
    lang: str = "en"
    version: int = 1
    session_id: str | None = None
    """The session whose span created the memory (session scope and session summaries use it)."""
    decay_steps: int = 0
    """Confidence decay steps applied since the memory was last created, reinforced or accessed."""
    vector: list[float] | None = None

    def row(self) -> dict[str, Any]:
        """A dict with one entry per column of ``tables.MEMORY_FIELDS`` plus ``vector``."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def copy(self) -> Memory:
        new = dataclasses.replace(self)
        new.tags = list(self.tags)
        new.source_message_ids = list(self.source_message_ids)
        return new


@dataclass(frozen=True)
class MemoryEvent:
    """One lifecycle change of a memory (a row of ``memory_events``)."""

    event_id: str
    memory_id: str
    owner_id: str
    event: str
    reason: str
    old_value: str | None
    new_value: str | None
    old_status: str | None
    new_status: str | None
    span_id: str | None
    actor: str
    event_ts: datetime | None
    recorded_at: datetime
    version: int | None = None
    """The memory's version after the change (``refused`` events repeat the unchanged version)."""


@dataclass(frozen=True)
class LLMCall:
    """Accounting for one LLM request (a row of ``llm_calls``)."""

    call_id: str
    request_hash: str
    purpose: str
    backend: str
    model: str | None
    span_id: str | None
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    status: str
    cached: bool
    attempts: int
    error: str | None
    created_at: datetime


# ---------------------------------------------------------------- rows of the catalog's own tables
# Each class is the declaration of its table's columns (``skillstream.tables`` derives the Arrow
# schema from it); the store sink writes each class to its table.


class CatalogRow:
    """Base of the typed rows of the catalog's own tables."""

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Self:
        """The row from a catalog row (``SELECT *``); other columns are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in row.items() if k in names})


@dataclass(frozen=True, kw_only=True)
class ContradictionRow(CatalogRow):
    """A row of ``contradictions``: memory_a (existing) vs memory_b (new) and how it was settled."""

    contradiction_id: str = column(pa.string(), nullable=False)
    owner_id: str = column(pa.string(), nullable=False)
    memory_a: str = column(pa.string(), nullable=False)
    memory_b: str = column(pa.string(), nullable=False)
    key: str | None = column(pa.string(), default=None)
    description: str | None = column(pa.string(), default=None)
    detected_at: datetime | None = column(TS, default=None)
    detected_by: str | None = column(pa.string(), default=None)
    span_id: str | None = column(pa.string(), default=None)
    resolution: str = column(pa.string(), nullable=False)
    rule: str | None = column(pa.string(), default=None)
    winner_id: str | None = column(pa.string(), default=None)
    resolved_at: datetime | None = column(TS, default=None)
    recorded_at: datetime | None = column(TS, default=None)


@dataclass(frozen=True, kw_only=True)
class SessionSummaryRow(CatalogRow):
    """A row of ``session_summaries``; ``summary_id`` is the id of the summary memory."""

    summary_id: str = column(pa.string(), nullable=False)
    owner_id: str = column(pa.string(), nullable=False)
    conversation_id: str | None = column(pa.string(), default=None)
    session_id: str = column(pa.string(), nullable=False)
    narrative: str | None = column(pa.string(), default=None)
    key_facts: list[str] = column(STR_LIST, default_factory=list)
    topics: list[str] = column(STR_LIST, default_factory=list)
    n_memories: int | None = column(pa.int32(), default=None)
    token_count: int | None = column(pa.int32(), default=None)
    start_ts: datetime | None = column(TS, default=None)
    end_ts: datetime | None = column(TS, default=None)
    version: int | None = column(pa.int32(), default=None)
    recorded_at: datetime | None = column(TS, default=None)
    emotional_context: str | None = column(pa.string(), default=None)
    """The tones the session's memories speak in (``lifecycle.tone``); ``None``: none found."""


@dataclass(frozen=True, kw_only=True)
class MemoryRelationRow(CatalogRow):
    """A row of ``memory_relations``: ``source_id`` relates to ``target_id`` as ``relation``.

    ``member_of``: a memory (source) belongs to an abstract topic node (target) of the
    reorganizer; ``consolidated_into``: a merged memory (source) lives on in a new consolidated
    version (target). ``version`` is the target's version when the row was written.

    A node's ``member_of`` rows are written as changes: at each node version, a ``join`` row for
    each member that came in and a ``leave`` row for each that went (``change``). A row without
    ``change`` is a whole listing: the node's members at that version are exactly its rows of that
    version (homes written before memberships were written as changes, and a version written
    from a state that did not know the node's last members). The current members are the whole
    listing of the latest such version, then every change after it (``storage.tombstones``).
    """

    relation_id: str = column(pa.string(), nullable=False)
    owner_id: str = column(pa.string(), nullable=False)
    source_id: str = column(pa.string(), nullable=False)
    target_id: str = column(pa.string(), nullable=False)
    relation: str = column(pa.string(), nullable=False)
    rank: int | None = column(pa.int32(), default=None)
    """Order of the member in its node (most central first)."""
    weight: float | None = column(pa.float64(), default=None)
    """Cosine similarity of the member to its node's centre (``member_of``)."""
    version: int | None = column(pa.int32(), default=None)
    event_ts: datetime | None = column(TS, default=None)
    recorded_at: datetime | None = column(TS, default=None)
    change: str | None = column(pa.string(), default=None)
    """``member_of``: ``join`` or ``leave`` at ``version``; ``None``: a whole listing."""


@dataclass(frozen=True, kw_only=True)
class FailedSpanRow(CatalogRow):
    """A row of ``failed_spans``: a span whose extraction failed, with its messages as JSON."""

    span_id: str = column(pa.string(), nullable=False)
    owner_id: str = column(pa.string(), nullable=False)
    conversation_id: str = column(pa.string(), nullable=False)
    session_id: str | None = column(pa.string(), default=None)
    seq: int | None = column(pa.int64(), default=None)
    lang: str | None = column(pa.string(), default=None)
    n_tokens: int | None = column(pa.int32(), default=None)
    messages: str = column(pa.string(), nullable=False)
    extractor: str | None = column(pa.string(), default=None)
    error: str | None = column(pa.string(), default=None)
    attempts: int | None = column(pa.int32(), default=None)
    retries: int | None = column(pa.int32(), default=None)
    status: str = column(pa.string(), nullable=False)
    failed_at: datetime | None = column(TS, default=None)
    resolved_at: datetime | None = column(TS, default=None)


@dataclass(frozen=True, kw_only=True)
class QueryRow(CatalogRow):
    """A row of ``queries``: one recorded memory search."""

    query_id: str = column(pa.string(), nullable=False)
    owner_id: str | None = column(pa.string(), default=None)
    agent_id: str | None = column(pa.string(), default=None)
    session_id: str | None = column(pa.string(), default=None)
    query: str = column(pa.string(), nullable=False)
    strategy: str = column(pa.string(), nullable=False)
    k: int | None = column(pa.int32(), default=None)
    result_ids: list[str] = column(STR_LIST, default_factory=list)
    n_results: int | None = column(pa.int32(), default=None)
    executed_at: datetime | None = column(TS, default=None)
    recorded_at: datetime | None = column(TS, default=None)


@dataclass
class TableRows:
    """Rows a span or a maintenance pass adds to the catalog's own tables, one typed list each."""

    contradictions: list[ContradictionRow] = field(default_factory=list)
    session_summaries: list[SessionSummaryRow] = field(default_factory=list)
    failed_spans: list[FailedSpanRow] = field(default_factory=list)
    memory_relations: list[MemoryRelationRow] = field(default_factory=list)

    def all(self) -> list[ContradictionRow | SessionSummaryRow | FailedSpanRow | MemoryRelationRow]:
        """Every row, table by table."""
        return [
            *self.contradictions,
            *self.session_summaries,
            *self.failed_spans,
            *self.memory_relations,
        ]

    def __bool__(self) -> bool:
        return bool(
            self.contradictions
            or self.session_summaries
            or self.failed_spans
            or self.memory_relations
        )


@dataclass
class SpanResult:
    """What processing one span produced; the unit the store sink writes atomically.

    ``memories`` are the final states of every memory the span touched; ``events`` the lifecycle
    log rows; ``status`` is ``done``, ``failed`` or ``skipped`` (already in the ledger).
    """

    span: Span
    status: str
    extractor: str
    memories: list[Memory] = field(default_factory=list)
    events: list[MemoryEvent] = field(default_factory=list)
    llm_calls: list[LLMCall] = field(default_factory=list)
    memory_skills: list[str] = field(default_factory=list)
    controller: str | None = None
    """Which controller chose the memory skills (``cosine``, ``torch:<checkpoint hash>``);
    ``None`` when every skill was used."""
    n_ops: int = 0
    error: str | None = None
    attempts: int = 1
    processed_at: datetime | None = None
    rows: TableRows = field(default_factory=TableRows)
    """Rows for the catalog's other tables (contradictions, a failed span's messages...)."""


@dataclass
class MaintenanceResult:
    """What one maintenance pass changed for one owner (no span: nothing goes to the ledger).

    Written by the store sink like a ``SpanResult`` (memories, lifecycle events, ``rows``).
    ``status`` is always ``maintenance``; ``at`` is the event time the pass ran at.
    """

    owner_id: str
    at: datetime
    memories: list[Memory] = field(default_factory=list)
    events: list[MemoryEvent] = field(default_factory=list)
    rows: TableRows = field(default_factory=TableRows)
    status: str = "maintenance"
    actor: str = "maintenance"
