"""The fixed words skillstream stores: kinds, types, statuses, operations and event names.

Each set is a ``StrEnum`` declared here and nowhere else. A member *is* its value string (it
compares, hashes, formats and JSON-encodes as the value), so tables, Arrow columns, JSON, Kafka
events and ids hold the same words they always did; rows read back as plain strings compare equal
to the members. Two things do not take a member as a plain string: ``repr`` (write ``str(m)`` in
messages that show a list of values) and ``yaml.safe_dump`` (pass ``str(m)``).

Two status words: a memory is ``activated``, a task skill or a memory skill ``active``. They stay
different on purpose. A memory's status is one state of a lifecycle (``activated``, ``archived``,
``merged``, ``expired``, ``deleted``, ``frozen``) whose events speak the same language (an archived
memory is ``reactivated``); a skill's status is only whether it is published. Both words are stored
in existing homes (``memory_meta``, the LanceDB table, ``task_skills``, ``memory_skills``, SKILL.md
front matter) and read by Kafka consumers, so unifying them would change stored values.
"""

from __future__ import annotations

from enum import StrEnum


class MemoryKind(StrEnum):
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


KINDS: tuple[MemoryKind, ...] = (
    MemoryKind.FACT,
    MemoryKind.EVENT,
    MemoryKind.PREFERENCE,
    MemoryKind.PLAN,
    MemoryKind.OPINION,
)
"""The kinds an extractor may write (the LLM schema offers these)."""


class MemoryType(StrEnum):
    """Where a memory lives and counts against capacity (the ``memory_type`` column)."""

    WORKING = "WorkingMemory"
    LONG_TERM = "LongTermMemory"
    USER = "UserMemory"
    SKILL = "SkillMemory"


class MemoryStatus(StrEnum):
    """The lifecycle state of a memory (the ``status`` column); see ``lifecycle.states``."""

    ACTIVATED = "activated"
    ARCHIVED = "archived"
    MERGED = "merged"
    EXPIRED = "expired"
    DELETED = "deleted"
    FROZEN = "frozen"


class LifecycleEvent(StrEnum):
    """What happened to a memory (the ``event`` column of ``memory_events``)."""

    CREATED = "created"
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


class Op(StrEnum):
    """The four primitive memory operations (also the action a memory skill may produce)."""

    INSERT = "INSERT"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    NOOP = "NOOP"


class TaskSkillStatus(StrEnum):
    """Whether a task skill is published (the ``status`` column of ``task_skills``)."""

    ACTIVE = "active"
    ARCHIVED = "archived"
    DELETED = "deleted"
    """The soft delete: the record and every package stay, search and lists skip it."""


class MemorySkillStatus(StrEnum):
    """Whether a memory skill version can be selected (the ``status`` of ``memory_skills``)."""

    ACTIVE = "active"
    RETIRED = "retired"
