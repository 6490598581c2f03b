"""The fixed words skillstream stores: kinds, types, statuses, operations and event names.

Each set is a ``StrEnum`` declared here and nowhere else. A member *is* its value string (it
compares, hashes, formats, JSON-encodes and, here, ``repr``s as the value), so tables, Arrow
columns, JSON, Kafka events, ids and messages hold the same words they always did; rows read back
as plain strings compare equal to the members. ``yaml.safe_dump`` does not take a member: pass
``str(member)``.

Two status words: a used memory is ``activated``, a task skill or a memory skill ``active``. They
stay different on purpose. A memory's status is one state of a lifecycle (``generated``,
``activated``, ``archived``, ``merged``, ``expired``, ``deleted``, ``frozen``) whose events speak
the same language (an archived memory is ``reactivated``); a skill's status is only whether it is
published. Both words are stored in existing homes (``memory_meta``, the LanceDB table,
``task_skills``, ``memory_skills``, SKILL.md front matter) and read by Kafka consumers, so unifying
them would change stored values.
"""

from __future__ import annotations

from enum import StrEnum


class Word(StrEnum):
    """A stored word: a ``StrEnum`` whose ``repr`` is its value's (``'activated'``), so messages
    that quote a value read the same whether they got a member or a string from a row."""

    def __repr__(self) -> str:
        return repr(self.value)


class MemoryKind(Word):
    """What a memory says (the ``kind`` column)."""

    FACT = "fact"
    EVENT = "event"
    PREFERENCE = "preference"
    PLAN = "plan"
    OPINION = "opinion"
    SUMMARY = "summary"
    """A session summary (written by the lifecycle, never extracted)."""
    LESSON = "lesson"
    """A lesson learned from a task outcome."""
    SKILL = "skill"
    TASK_SKILL = "task_skill"
    TOPIC = "topic"
    """An abstract node of the reorganizer: a cluster of long-term memories said in one sentence."""
    REASONING = "reasoning"
    """A conclusion drawn from other statements (why something is so)."""
    PROCEDURE = "procedure"
    """How something is done: steps, a routine, a method."""


KINDS: tuple[MemoryKind, ...] = (
    MemoryKind.FACT,
    MemoryKind.EVENT,
    MemoryKind.PREFERENCE,
    MemoryKind.PLAN,
    MemoryKind.OPINION,
    MemoryKind.REASONING,
    MemoryKind.PROCEDURE,
)
"""The kinds an extractor may write (the LLM schema offers these)."""


class MemoryType(Word):
    """Where a memory lives and counts against capacity (the ``memory_type`` column)."""

    WORKING = "WorkingMemory"
    LONG_TERM = "LongTermMemory"
    USER = "UserMemory"
    SKILL = "SkillMemory"


EXTRACTED_TYPES: tuple[MemoryType, ...] = (
    MemoryType.WORKING,
    MemoryType.LONG_TERM,
    MemoryType.USER,
)
"""The types an extractor may choose for a memory (``SkillMemory`` belongs to task skills)."""


class MemoryStatus(Word):
    """The lifecycle state of a memory (the ``status`` column); see ``lifecycle.states``."""

    GENERATED = "generated"
    """New, not used yet (no search hit, no extraction retrieved it)."""
    ACTIVATED = "activated"
    ARCHIVED = "archived"
    MERGED = "merged"
    EXPIRED = "expired"
    DELETED = "deleted"
    FROZEN = "frozen"


class LifecycleEvent(Word):
    """What happened to a memory (the ``event`` column of ``memory_events``)."""

    CREATED = "created"
    ACTIVATED = "activated"
    """First use of a generated memory (a search hit, or retrieved for an extraction)."""
    CONSOLIDATED = "consolidated"
    """A new version written from memories merged into it."""
    UPDATED = "updated"
    REINFORCED = "reinforced"
    MERGED = "merged"
    ARCHIVED = "archived"
    INVALIDATED = "invalidated"
    REACTIVATED = "reactivated"
    DECAYED = "decayed"
    EXPIRED = "expired"
    DELETED = "deleted"
    FROZEN = "frozen"
    UNFROZEN = "unfrozen"
    REFUSED = "refused"
    ESCALATED = "escalated"
    """An unresolved contradiction grew older than the escalation time: it needs a human."""


class Op(Word):
    """The four primitive memory operations (also the action a memory skill may produce)."""

    INSERT = "INSERT"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    NOOP = "NOOP"


class TaskSkillStatus(Word):
    """A task skill's state (the ``status`` column of ``task_skills``; see ``distill.trust``)."""

    CANDIDATE = "candidate"
    """Distilled, on probation: recalled by distillation, not served until enough support."""
    ACTIVE = "active"
    """Published and served."""
    RETIRED = "retired"
    """Its outcomes brought its reliability below the threshold: not served by default."""
    STALE = "stale"
    """Unused for a while: not served by default; a new segment or a pin makes it active."""
    ARCHIVED = "archived"
    """Unused for long, or merged into another skill: kept with its history, never served."""
    DELETED = "deleted"
    """The soft delete: the record and every package stay, search and lists skip it."""


class MemorySkillStatus(Word):
    """Whether a memory skill version can be selected (the ``status`` of ``memory_skills``)."""

    ACTIVE = "active"
    RETIRED = "retired"
