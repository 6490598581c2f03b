"""A task skill as a memory item, so memory search finds it beside facts and events.

Each stored version of a task skill gives one ``SkillMemory`` memory (kind ``task_skill``) of the
same owner, under an id derived from the task skill's id: ``title: description`` as its text (what
a reader needs to decide whether to load the skill), the task skill's vector (the same embedding
model over its name, description and triggers), ``task-skill`` and the name as tags,
``task_skill:<name>`` as its key, and no event time (a procedure happened at no one time; its
creation and update times are the task skill's). Its status follows the task skill's (only an
active task skill is a live memory: candidates, stale, retired and archived ones are archived
items, found when a search asks for archived memories too; deleted ones drop out), its confidence
follows the task skill's reliability (:func:`confidence`; memory search ranks by confidence), its
version is the task skill's, and each version records one lifecycle event.

These items are written by the store's writer, never extracted: the extraction state never reads
them (``storage.lance.MemoryIndex.owner_memories`` leaves them out), so they change no extracted
memory, and an evaluation that counts extracted memories filters them by ``memory_type``.
"""

from __future__ import annotations

from datetime import UTC, datetime

from skillstream.distill.record import TaskSkill
from skillstream.distill.trust import TrustRules, reliability
from skillstream.ids import prefixed_id
from skillstream.model import Memory, MemoryEvent
from skillstream.vocab import (
    LifecycleEvent,
    MemoryKind,
    MemoryStatus,
    MemoryType,
    TaskSkillStatus,
)

TAG = "task-skill"
"""The tag every task-skill memory item carries."""

_STATUS = {
    TaskSkillStatus.CANDIDATE: MemoryStatus.ARCHIVED,
    TaskSkillStatus.ACTIVE: MemoryStatus.ACTIVATED,
    TaskSkillStatus.STALE: MemoryStatus.ARCHIVED,
    TaskSkillStatus.RETIRED: MemoryStatus.ARCHIVED,
    TaskSkillStatus.ARCHIVED: MemoryStatus.ARCHIVED,
    TaskSkillStatus.DELETED: MemoryStatus.DELETED,
}


def memory_id(skill_id: str) -> str:
    """The memory id of a task skill's item (stable across its versions)."""
    return prefixed_id("skm", skill_id)


def skill_memory(skill: TaskSkill) -> Memory:
    """The ``SkillMemory`` item of one task-skill version."""
    title = skill.title or skill.name.replace("-", " ")
    text = f"{title}: {skill.description}".strip().rstrip(":") if skill.description else title
    return Memory(
        id=memory_id(skill.id),
        owner_id=skill.owner_id,
        text=text,
        kind=MemoryKind.TASK_SKILL,
        memory_type=MemoryType.SKILL,
        key=f"task_skill:{skill.name}",
        subject=skill.name,
        tags=[TAG, skill.name],
        confidence=confidence(skill),
        status=_STATUS.get(TaskSkillStatus(skill.status), MemoryStatus.ACTIVATED),
        event_ts=None,
        valid_from=skill.created_at,
        created_at=skill.created_at,
        updated_at=skill.updated_at,
        last_accessed_at=skill.last_used_at,
        reinforcement=skill.times_used,
        source_message_ids=[],
        lang=skill.lang,
        version=skill.version,
        vector=list(skill.vector) if skill.vector else None,
    )


def confidence(skill: TaskSkill) -> float:
    """The item's confidence: 1 while the skill's reliability is at least the prior's (0.5, no
    outcomes yet, or more successes than failures), and in proportion below it, so memory search
    ranks a skill that keeps failing lower and leaves every other skill where it was."""
    return round(min(1.0, 2.0 * reliability(skill, TrustRules())), 4)


def skill_event(skill: TaskSkill, change: str, recorded_at: datetime | None = None) -> MemoryEvent:
    """The lifecycle event of a task-skill version's item (``created``, ``updated`` or
    ``deleted``), with the task skill's change as the reason."""
    item = skill_memory(skill)
    if skill.status == TaskSkillStatus.DELETED:
        event = LifecycleEvent.DELETED
    elif skill.version <= 1:
        event = LifecycleEvent.CREATED
    else:
        event = LifecycleEvent.UPDATED
    return MemoryEvent(
        event_id=prefixed_id("evt", item.id, skill.version, event),
        memory_id=item.id,
        owner_id=skill.owner_id,
        event=event,
        reason=f"task skill {change}",
        old_value=None,
        new_value=item.text,
        old_status=None,
        new_status=item.status,
        span_id=None,
        actor=f"task-skill:{skill.distiller}",
        event_ts=skill.updated_at,
        recorded_at=recorded_at or datetime.now(UTC),
        version=skill.version,
    )
