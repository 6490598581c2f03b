"""Trust in a task skill: its state, its reliability and every change of state with its reason.

A distilled skill has to earn its place. It is born a ``candidate`` (kept, recalled by distillation,
not served to agents, no package published) and becomes ``active`` once ``min_support`` task
segments support it: each segment is one occurrence of the task (a conversation, or a later
session of one, in which the user did it again), so two segments are two independent times the
procedure was followed. Each skill carries a **reliability**: the posterior mean of
a Beta(1, 1) prior updated by its outcomes (a success or a failure from feedback or a message's
``outcome`` metadata; a view counts as ``view_weight`` of a success, an agent chose to read it).
An active skill whose reliability falls below ``retire_below`` after at least ``min_outcomes``
outcomes is ``retired``. Usage age (time since it was last used, or since it changed when it was
never used) makes an active skill ``stale`` after ``stale_days`` and ``archived`` after
``archive_days``. A person can ``pin`` a skill: pinned skills are active and no rule moves them.

Nothing is deleted: every change is a :class:`StateChange` (from, to, reason, time) that the
caller writes as a new version of the skill (``task_skill_versions``, its ``reason`` column).
The functions here take a skill and a time and return the next version; they do no I/O.

The state and counters live in ``status`` and ``stats["trust"]``, so stored homes need no new
column on the skill tables: a skill stored before trust existed reads as active with no outcomes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from skillstream.distill.record import TaskSkill
from skillstream.vocab import TaskSkillStatus

TRUST = "trust"
"""``stats`` key of a skill's trust counters (``successes``, ``failures``, ``pinned``)."""

LIVE = (TaskSkillStatus.CANDIDATE, TaskSkillStatus.ACTIVE, TaskSkillStatus.STALE)
"""States a segment may still update: distillation and consolidation recall these."""
SERVED = (TaskSkillStatus.ACTIVE,)
"""States an agent sees unless it asks for more."""
SHOWN = (*LIVE, TaskSkillStatus.RETIRED, TaskSkillStatus.ARCHIVED)
"""Every state a person may ask to see (all but ``deleted``)."""


@dataclass(frozen=True)
class TrustRules:
    """The trust settings of a home (``DistillationSettings``, via ``factory.trust_rules``), as
    plain numbers. The defaults here put no skill on probation (``min_support`` 1: a component
    built without settings serves what it distils); the settings' default is 2."""

    min_support: int = 1
    retire_below: float = 0.4
    min_outcomes: int = 3
    view_weight: float = 0.1
    stale_days: float = 90.0
    archive_days: float = 365.0


@dataclass(frozen=True)
class StateChange:
    """One change of a task skill's state (or of its pin): what it was, what it is, and why."""

    skill_id: str
    name: str
    old: str
    new: str
    reason: str
    at: datetime


def counters(skill: TaskSkill) -> dict[str, Any]:
    """The skill's trust counters (a copy; zeros for a skill that has none)."""
    got = skill.stats.get(TRUST) or {}
    return {
        "successes": float(got.get("successes", 0)),
        "failures": float(got.get("failures", 0)),
        "pinned": bool(got.get("pinned", False)),
    }


def reliability(skill: TaskSkill, rules: TrustRules) -> float:
    """Posterior mean success rate: ``(s + w * views + 1) / (s + w * views + f + 2)``."""
    c = counters(skill)
    good = c["successes"] + rules.view_weight * skill.times_used
    return (good + 1.0) / (good + c["failures"] + 2.0)


def support(skill: TaskSkill) -> int:
    """Independent evidence: the distinct task segments the skill was distilled from."""
    return len(set(skill.source_segment_ids))


def is_pinned(skill: TaskSkill) -> bool:
    return counters(skill)["pinned"]


def born(skill: TaskSkill, rules: TrustRules) -> str:
    """The state of a new distilled skill: ``candidate`` until enough support, else ``active``."""
    return (
        TaskSkillStatus.ACTIVE if support(skill) >= rules.min_support else TaskSkillStatus.CANDIDATE
    )


def _next(skill: TaskSkill, status: str, now: datetime) -> TaskSkill:
    out = skill.copy()
    out.status = status
    out.version += 1
    out.updated_at = now
    return out


def _with_counters(skill: TaskSkill, **changes: Any) -> None:
    c = counters(skill)
    c.update(changes)
    skill.stats = {**skill.stats, TRUST: c}


def promote(skill: TaskSkill, rules: TrustRules) -> tuple[str, str] | None:
    """``(state, reason)`` a just-distilled version should take instead of its own, if any: a
    candidate with enough support becomes active (the caller keeps the version number)."""
    if skill.status == TaskSkillStatus.CANDIDATE and support(skill) >= rules.min_support:
        return TaskSkillStatus.ACTIVE, f"supported by {support(skill)} segments"
    if skill.status == TaskSkillStatus.STALE:
        return TaskSkillStatus.ACTIVE, "distilled again from a new segment"
    return None


def count_outcome(
    skill: TaskSkill, success: bool, rules: TrustRules, now: datetime, note: str = ""
) -> StateChange | None:
    """Count one outcome on ``skill`` (in place, same version); retire it when its reliability
    falls below the threshold, and return that change of state."""
    c = counters(skill)
    key = "successes" if success else "failures"
    _with_counters(skill, **{key: c[key] + 1})
    word = "success" if success else "failure"
    reason = f"{word}: {note}" if note else word
    rel = reliability(skill, rules)
    c = counters(skill)
    if (
        success
        or c["pinned"]
        or skill.status not in LIVE
        or c["successes"] + c["failures"] < rules.min_outcomes
        or rel >= rules.retire_below
    ):
        return None
    old = skill.status
    skill.status = TaskSkillStatus.RETIRED
    why = f"reliability {rel:.2f} below {rules.retire_below:g} after {reason}"
    return StateChange(skill.id, skill.name, old, skill.status, why, now)


def record_outcome(
    skill: TaskSkill, success: bool, rules: TrustRules, now: datetime, note: str = ""
) -> tuple[TaskSkill, StateChange | None]:
    """The next version after one outcome, and the change of state it caused (retirement)."""
    out = _next(skill, skill.status, now)
    return out, count_outcome(out, success, rules, now, note)


def outcome_of(metadata: str | None) -> bool | None:
    """A message's ``outcome`` metadata as success (True) or failure (False); None when absent.

    Accepted: ``"success"``/``"succeeded"``/``"ok"``/``true`` and ``"failure"``/``"failed"``/
    ``"fail"``/``false``, in a JSON object's ``outcome`` key.
    """
    if not metadata:
        return None
    try:
        got = json.loads(metadata)
    except ValueError:
        return None
    value = got.get("outcome") if isinstance(got, dict) else None
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = value.strip().lower()
        if word in ("success", "succeeded", "ok"):
            return True
        if word in ("failure", "failed", "fail"):
            return False
    return None


def pin(skill: TaskSkill, pinned: bool, now: datetime) -> tuple[TaskSkill, StateChange]:
    """The next version pinned (active, no rule moves it) or unpinned (its state kept)."""
    status = TaskSkillStatus.ACTIVE if pinned else skill.status
    out = _next(skill, status, now)
    _with_counters(out, pinned=pinned)
    reason = "pinned by a person" if pinned else "unpinned by a person"
    return out, StateChange(skill.id, skill.name, skill.status, out.status, reason, now)


def last_use(skill: TaskSkill) -> datetime | None:
    """When the skill was last used, or last changed by distillation when it never was."""
    return skill.last_used_at or skill.created_at or skill.updated_at


def age_change(
    skill: TaskSkill, rules: TrustRules, now: datetime
) -> tuple[TaskSkill, StateChange] | None:
    """The next version when usage age moves the skill (active -> stale -> archived), else None."""
    if is_pinned(skill) or skill.status not in (TaskSkillStatus.ACTIVE, TaskSkillStatus.STALE):
        return None
    since = last_use(skill)
    if since is None:
        return None
    if since.tzinfo is None and now.tzinfo is not None:
        since = since.replace(tzinfo=now.tzinfo)
    age = now - since
    if age >= timedelta(days=rules.archive_days):
        new = TaskSkillStatus.ARCHIVED
        limit = rules.archive_days
    elif age >= timedelta(days=rules.stale_days) and skill.status == TaskSkillStatus.ACTIVE:
        new = TaskSkillStatus.STALE
        limit = rules.stale_days
    else:
        return None
    reason = f"unused for {age.days} days (limit {limit:g})"
    return _next(skill, new, now), StateChange(skill.id, skill.name, skill.status, new, reason, now)


def serve_order(skills: list[TaskSkill], rules: TrustRules) -> list[TaskSkill]:
    """Skills in serving order: served states first, then by reliability, then by name."""
    order: dict[str, None] = dict.fromkeys((*SERVED, *LIVE, TaskSkillStatus.RETIRED))
    rank: dict[str, int] = {str(s): i for i, s in enumerate(order)}
    return sorted(
        skills, key=lambda s: (rank.get(str(s.status), len(rank)), -reliability(s, rules), s.name)
    )
