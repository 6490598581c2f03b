"""Writing task-skill results: the part of ``writer.write_results`` that knows task skills.

``write_results`` hands the :class:`~skillstream.distill.record.TaskSkillResult` items of a batch
here twice: first :func:`write_lance` upserts the new task-skill versions into LanceDB
``task_skills`` (before the catalog transaction, like memories), then :func:`catalog_rows` gives
the ``task_skills`` and ``task_skill_versions`` rows that go into the same DuckDB transaction as the
rest of the batch. Their LLM calls are written with everyone else's. Each stored task skill is also
a ``SkillMemory`` item of the memories table (:func:`memory_items`, with one lifecycle event per
version, :func:`memory_events`), written with the batch's memories, so memory search finds it.

Replays are harmless: a task-skill version has a deterministic id (skill id and version), LanceDB
and the catalog upsert by key, and a stored row is never replaced by a lower version.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from skillstream.distill.memory_item import skill_event, skill_memory
from skillstream.distill.record import TaskSkill, TaskSkillResult
from skillstream.model import Memory, MemoryEvent
from skillstream.storage.task_skills import (
    TABLE,
    VERSIONS,
    TaskSkillIndex,
    catalog_row,
    version_row,
)


def is_result(item: Any) -> bool:
    """Whether an item is a task-skill result."""
    return isinstance(item, TaskSkillResult)


def latest(results: Iterable[TaskSkillResult]) -> list[TaskSkill]:
    """One task skill per id: the highest version among the changed results."""
    best: dict[str, TaskSkill] = {}
    for r in results:
        if r.changed and r.skill is not None:
            cur = best.get(r.skill.id)
            if cur is None or r.skill.version >= cur.version:
                best[r.skill.id] = r.skill
    return list(best.values())


def write_lance(stores: Any, results: list[TaskSkillResult]) -> list[TaskSkill]:
    """Upsert the latest version of every changed task skill into LanceDB; returns them as stored
    (usage counters carried forward)."""
    skills = latest(results)
    if not skills:
        return []
    dim = len(skills[0].vector or []) or stores.index.dim
    index = TaskSkillIndex(stores.index.db, dim)
    index.upsert(skills)
    stored = {s.id: s for s in index.by_ids([s.id for s in skills])}
    return [stored.get(s.id, s) for s in skills]


def catalog_rows(results: list[TaskSkillResult], stored: list[TaskSkill]) -> dict[str, list[Any]]:
    """Rows for the catalog tables ``task_skills`` (current) and ``task_skill_versions``."""
    versions = [
        version_row(
            r.skill,
            r.action,
            segment_id=r.segment_id,
            conversation_id=r.conversation_id,
            reason=r.reason,
        )
        for r in results
        if r.changed and r.skill is not None
    ]
    out: dict[str, list[Any]] = {}
    if stored:
        out[TABLE] = [catalog_row(s) for s in stored]
    if versions:
        out[VERSIONS] = versions
    return out


def memory_items(stored: list[TaskSkill]) -> list[Memory]:
    """The ``SkillMemory`` items of the stored task skills (for the memories table)."""
    return [skill_memory(s) for s in stored if s.vector]


def memory_events(results: list[TaskSkillResult]) -> list[MemoryEvent]:
    """One lifecycle event of the memory item per changed task-skill version."""
    return [
        skill_event(r.skill, r.action)
        for r in results
        if r.changed and r.skill is not None and r.skill.vector
    ]
