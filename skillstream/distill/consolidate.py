"""Consolidation of task skills: two task skills of one owner that do the same task become one.

Distillation decides per segment whether its draft updates a recalled task skill. When that
decision misses (the user named the task in an unusual way, the conversation took an odd turn, the
skill was young and said little), a second task skill of the same task is born. Consolidation is
the lifecycle step that catches it, in two ways:

* **duplicates** (:func:`duplicate_of`): whenever a task skill changes, the owner's other active
  task skills are recalled with the changed skill's own search text, and a recalled skill is a
  duplicate when the two are asked alike (``SAME_REQUESTS``), share their steps both ways
  (``SHARED_STEPS``) and their :func:`fit` reaches the threshold a draft needs to update a skill;
* **folds** (:func:`fold_targets`): a *young* skill (at most ``YOUNG`` source segments) is folded
  into the nearest *established* one when their prototypes are very close (``FOLD_NEAR``), or
  when it has gone ``STALE`` (the owner distilled that many segments and none of them went to it)
  and the nearest established skill is reasonably close (``FOLD_MIN``). A task that recurs keeps
  winning segments and grows out of being young; a one-off reading of a known task does not.

No rule knows what the tasks are about: only how alike two skills' requests and steps are and how
much evidence each has gathered over the owner's stream.

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
from skillstream.distill.recall import mean_cosine, prototype, recall
from skillstream.distill.record import FILE_SECTIONS, LIST_SECTIONS, TaskSkill
from skillstream.distill.trust import LIVE, TRUST, counters
from skillstream.vocab import TaskSkillStatus

SHARED_STEPS = 0.4
"""Share of each skill's steps the other must know for two skills to be duplicates: two tasks that
are asked alike ("book a table" / "book a room") still ask for different things."""
YOUNG = 3
"""Source segments a task skill may have and still be young (a candidate for a fold)."""
SAME_REQUESTS = 0.7
"""Cosine two skills' prototypes must reach for them to be duplicates: a centroid is the mean of
many drafts, so two of one task sit much closer than a draft does to its own skill."""
STALE = 300
"""Segments an owner distils after a young task skill last changed for the skill to count as
stale: a task that recurs wins some of them, so a young skill that wins none was a one-off reading
of a task the owner already has a skill for."""
FOLD_MIN = 0.45
"""Cosine a stale young skill's prototypes must reach to the established skill it folds into. By
then its task has not come back in ``STALE`` segments, so the only question left is whether its one
segment reads like a variant of a skill the owner has or like nothing the owner has: skills of
different tasks sit at a median cosine of 0.37 from each other in the task-skill evaluation
(``docs/task-skills.md``), so a one-off below 0.45 stays a skill of its own."""
FOLD_NEAR = 0.75
"""Cosine at which a young skill folds into an established one at once, stale or not: its users
asked for what the established skill does, in the same words, and only its steps read otherwise."""
SEEN = "seen"
"""``stats`` key: the owner's clock (segments distilled into its task skills) when a skill last
took in a segment."""
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
    cos = mean_cosine(
        [prototype(a, key) for key in PROTOTYPES], [prototype(b, key) for key in PROTOTYPES]
    )
    return 0.0 if cos is None else cos


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
    if not others or skill.status not in LIVE:
        return None
    vec = np.asarray(skill.vector, dtype=np.float32) if skill.vector else None
    hits = recall(skill.search_text(), vec, others, k=k, statuses=LIVE)
    best: tuple[float, str, TaskSkill] | None = None
    for h in hits:
        if shared_steps(skill, h.skill) < SHARED_STEPS or cosine(skill, h.skill) < SAME_REQUESTS:
            continue
        f = fit(skill, h.skill)
        if best is None or (f, h.skill.id) > best[:2]:
            best = (f, h.skill.id, h.skill)
    if best is None or best[0] < threshold:
        return None
    return best[2]


def support(skill: TaskSkill) -> int:
    """A task skill's evidence: the task segments distilled into it."""
    return len(skill.source_segment_ids)


def fold_targets(skills: Sequence[TaskSkill], clock: int) -> list[tuple[TaskSkill, TaskSkill]]:
    """``(young, established)`` pairs: each young skill that folds and the skill it folds into.

    A skill is young while it has at most ``YOUNG`` source segments, established above that, and
    stale when the owner has distilled ``STALE`` segments since it last took one in
    (``stats["seen"]`` against ``clock``, the number of segments in the owner's task skills). A
    young skill folds into the established skill whose prototypes are nearest when their mean
    cosine reaches ``FOLD_NEAR``, or ``FOLD_MIN`` once it is stale. Steps are not compared: a
    one-off segment's steps are what made it miss its task's skill in the first place.
    """
    active = [s for s in skills if s.status in LIVE]
    # a young skill is looked at when it has just changed or is stale (one that did not fold
    # when it changed only moves nearer when the established skills move, and they move slowly)
    young_ones = [
        s
        for s in active
        if support(s) <= YOUNG
        and (int(s.stats.get(SEEN, 0)) >= clock or clock - int(s.stats.get(SEEN, 0)) >= STALE)
    ]
    established = [s for s in active if support(s) > YOUNG]
    if not young_ones or not established:
        return []
    protos = {s.id: [prototype(s, key) for key in PROTOTYPES] for s in established}
    out = []
    for young in sorted(young_ones, key=lambda s: s.id):
        stale = clock - int(young.stats.get(SEEN, 0)) >= STALE
        mine = [prototype(young, key) for key in PROTOTYPES]
        best: tuple[float, str, TaskSkill] | None = None
        for other in established:
            cos = mean_cosine(mine, protos[other.id])
            if cos is not None and (best is None or (cos, other.id) > best[:2]):
                best = (cos, other.id, other)
        if best is not None and best[0] >= (FOLD_MIN if stale else FOLD_NEAR):
            out.append((young, best[2]))
    return out


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
    kept.stats[SEEN] = max(int(survivor.stats.get(SEEN, 0)), int(absorbed.stats.get(SEEN, 0)))
    mine, theirs = counters(survivor), counters(absorbed)
    kept.stats[TRUST] = {
        "successes": mine["successes"] + theirs["successes"],
        "failures": mine["failures"] + theirs["failures"],
        "pinned": mine["pinned"] or theirs["pinned"],
    }
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
    kept.status = survivor.status if survivor.status in LIVE else TaskSkillStatus.ACTIVE
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
