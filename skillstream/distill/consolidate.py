"""Consolidation of task skills: two task skills of one owner that do the same task become one.

Distillation decides per segment whether its draft updates a recalled task skill. When that
decision misses (the user named the task in an unusual way, the skill was young and said little),
a second task skill of the same task is born. Consolidation is the lifecycle step that catches it:
whenever a task skill changes, the owner's other active task skills are recalled with the changed
skill's own search text, and a recalled skill is a duplicate when (see :func:`duplicate_of`) the
two are asked alike (``SAME_REQUESTS``), share their steps both ways (``SHARED_STEPS``), one of
them is still young (``YOUNG``) and their :func:`fit` reaches the threshold a draft needs to update
a skill. No rule knows what the tasks are about: only how alike two skills' requests and steps are
and how much evidence each has.

:func:`merge` keeps both histories:

* the **survivor** (the skill with more source segments; the older on a tie) gets a new version
  whose evidence, sections and sources are the union of both, and whose ``stats["merged_from"]``
  lists the skills it absorbed; the caller re-publishes its package;
* the **absorbed** skill gets a new version with status ``archived`` and
  ``stats["merged_into"]`` naming the survivor: hidden from lists and recall, its earlier versions
  and packages untouched.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np

from skillstream.distill.draft import (
    MAX_ITEMS,
    MAX_STEPS,
    MAX_TRIGGERS,
    PROTOTYPES,
    clip_description,
    describe,
    fold_stats,
    merge_sections,
)
from skillstream.distill.heuristics import STEP_WEIGHT, step_overlap
from skillstream.distill.recall import prototype, recall
from skillstream.distill.record import FILE_SECTIONS, LIST_SECTIONS, TaskSkill
from skillstream.vocab import TaskSkillStatus

SHARED_STEPS = 0.4
"""Share of each skill's steps the other must know for two skills to be duplicates: two tasks that
are asked alike ("book a table" / "book a room") still ask for different things."""
YOUNG = 3
"""Source segments the smaller of two skills may have for them to be duplicates. A duplicate is a
segment that recall missed, found out while it is young; two skills that each went on to win many
segments' update decisions on their own were kept apart by that evidence, segment after segment."""
SAME_REQUESTS = 0.7
"""Cosine two skills' prototypes must reach for them to be duplicates: a centroid is the mean of
many drafts, so two of one task sit much closer than a draft does to its own skill."""
MERGED_FROM = "merged_from"
MERGED_INTO = "merged_into"


def fit(a: TaskSkill, b: TaskSkill) -> float:
    """How alike two task skills are: the draft-to-skill fit, symmetric.

    ``(1 - STEP_WEIGHT) * cosine of the prototypes + STEP_WEIGHT * step overlap``, where the step
    overlap is the smaller of the two directions (the share of ``a``'s steps ``b`` knows and the
    share of ``b``'s steps ``a`` knows), so a short skill whose few steps every task shares does not
    fit a long one by default.
    """
    return (1 - STEP_WEIGHT) * cosine(a, b) + STEP_WEIGHT * shared_steps(a, b)


def cosine(a: TaskSkill, b: TaskSkill) -> float:
    """Cosine of the two skills' prototypes: of their drafts' centroids, averaged with that of
    their requests' centroids when both have one (0 when neither can be taken)."""
    cos = []
    for key in PROTOTYPES:
        va, vb = prototype(a, key), prototype(b, key)
        if va is not None and vb is not None and va.shape == vb.shape:
            cos.append(float(np.dot(va, vb)))
    return sum(cos) / len(cos) if cos else 0.0


def shared_steps(a: TaskSkill, b: TaskSkill) -> float:
    """The smaller of the share of ``a``'s steps that ``b`` knows and the converse."""
    return min(step_overlap(a.procedure, b), step_overlap(b.procedure, a))


def duplicate_of(
    skill: TaskSkill,
    skills: Sequence[TaskSkill],
    *,
    threshold: float,
    k: int = 5,
) -> TaskSkill | None:
    """The active task skill among ``skills`` that ``skill`` duplicates, or ``None``.

    The candidates are what recall returns for the skill's own search text and vector (the
    search a later segment of this task would make), whose prototypes reach ``SAME_REQUESTS``
    and that share at least ``SHARED_STEPS`` of their steps both ways; the best-fitting one counts
    when its fit reaches ``threshold``.
    """
    others = [s for s in skills if s.id != skill.id and s.owner_id == skill.owner_id]
    if not others or skill.status != TaskSkillStatus.ACTIVE:
        return None
    vec = np.asarray(skill.vector, dtype=np.float32) if skill.vector else None
    hits = recall(skill.search_text(), vec, others, k=k)
    best: tuple[float, str, TaskSkill] | None = None
    for h in hits:
        if min(len(skill.source_segment_ids), len(h.skill.source_segment_ids)) > YOUNG:
            continue
        if shared_steps(skill, h.skill) < SHARED_STEPS or cosine(skill, h.skill) < SAME_REQUESTS:
            continue
        f = fit(skill, h.skill)
        if best is None or (f, h.skill.id) > best[:2]:
            best = (f, h.skill.id, h.skill)
    if best is None or best[0] < threshold:
        return None
    return best[2]


def survivor_first(a: TaskSkill, b: TaskSkill) -> tuple[TaskSkill, TaskSkill]:
    """``(survivor, absorbed)``: more source segments wins, then the older, then the name."""

    def key(s: TaskSkill) -> tuple[int, str, str]:
        created = s.created_at.isoformat() if s.created_at else ""
        return (-len(s.source_segment_ids), created, s.name)

    return (a, b) if key(a) <= key(b) else (b, a)


def merge(
    survivor: TaskSkill, absorbed: TaskSkill, *, now: datetime
) -> tuple[TaskSkill, TaskSkill]:
    """The next versions of both skills after ``absorbed`` is merged into ``survivor``.

    Returns:
        ``(survivor's new version, absorbed's new version)``; the first still needs redaction,
        embedding and publishing (``TaskSkillDistiller.finish``), the second is archived as is.
    """
    kept = survivor.copy()
    if survivor.stats.get("steps") and absorbed.stats.get("steps"):
        kept.stats = fold_stats(survivor.stats, absorbed.stats)
        merge_sections(kept, absorbed)
        kept.description = describe(kept.title, kept.procedure, kept.triggers, kept.lang)
    else:  # a skill written as a whole (LLM, saved, imported): keep its text, add what is new
        kept.procedure = _union(survivor.procedure, absorbed.procedure)[:MAX_STEPS]
        kept.triggers = _union(survivor.triggers, absorbed.triggers)[:MAX_TRIGGERS]
        for name in LIST_SECTIONS:
            if name not in ("procedure", "triggers"):
                items = _union(getattr(kept, name), getattr(absorbed, name))
                setattr(kept, name, items[:MAX_ITEMS])
        for name in FILE_SECTIONS:
            setattr(kept, name, {**getattr(absorbed, name), **getattr(kept, name)})
        kept.stats = dict(kept.stats)
    kept.stats[MERGED_FROM] = sorted(
        set(survivor.stats.get(MERGED_FROM, []))
        | {absorbed.id}
        | set(absorbed.stats.get(MERGED_FROM, []))
    )
    kept.source_segment_ids = _union(survivor.source_segment_ids, absorbed.source_segment_ids)
    kept.source_conversation_ids = _union(
        survivor.source_conversation_ids, absorbed.source_conversation_ids
    )
    kept.times_used = survivor.times_used + absorbed.times_used
    if absorbed.last_used_at and (
        kept.last_used_at is None or kept.last_used_at < absorbed.last_used_at
    ):
        kept.last_used_at = absorbed.last_used_at
    kept.description = clip_description(kept.description or kept.title)
    kept.status = TaskSkillStatus.ACTIVE
    kept.version += 1
    kept.updated_at = now

    gone = absorbed.copy()
    gone.stats = dict(gone.stats)
    gone.stats[MERGED_INTO] = survivor.id
    gone.status = TaskSkillStatus.ARCHIVED
    gone.version += 1
    gone.updated_at = now
    return kept, gone


def _union(a: list[str], b: list[str]) -> list[str]:
    """``a`` then the items of ``b`` it lacks, in order."""
    return list(dict.fromkeys([*a, *b]))
