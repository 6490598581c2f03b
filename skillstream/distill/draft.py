"""A distiller's proposal for one task segment, and how a proposal becomes a task-skill version.

Both distillers (``rules`` and the LLM one) return a :class:`Draft`: the fields of a task-skill
record plus ``update_of``, the id of a *recalled* task skill it updates (or ``None`` for a new one).
:func:`apply_draft` turns it into the next version:

* a new task skill gets a name unique for its owner (``-2``, ``-3``... when taken);
* an LLM draft for an update is the complete new text of the skill (``merge == "replace"``): its
  fields replace the old ones, the name stays;
* a rules draft for an update is evidence (``merge == "evidence"``): steps and terms are counted
  across every segment merged so far, and the procedure keeps the steps seen most often, in their
  usual order; lessons, preferences, tools and checks are unions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from skillstream.distill.record import (
    DESCRIPTION_MAX,
    FILE_SECTIONS,
    LIST_SECTIONS,
    TEXT_SECTIONS,
    SkillContent,
    TaskSkill,
    check_name,
    skill_id,
    slugify,
)
from skillstream.distill.steps import terms

MAX_STEPS = 12
MAX_ITEMS = 12
MAX_TRIGGERS = 10
MAX_STAT_STEPS = 60
MAX_STAT_TERMS = 200
STEP_MATCH = 0.5
"""Term overlap (Jaccard) at which two steps count as the same step."""
_FROM_STATS = ("procedure", "triggers")
"""List sections a rules merge recomputes from the evidence; the others are unions."""


@dataclass(kw_only=True)
class Draft(SkillContent):
    """What a distiller proposes for one segment (see the module docstring).

    The name and sections are the record's own (:class:`SkillContent`); ``id`` and ``owner_id``
    stay empty. ``request`` is what the user asked for in the segment (``segment.request_text``),
    the second signal recall and the update decision match on.
    """

    update_of: str | None = None
    request: str = ""
    merge: str = "evidence"
    stats: dict[str, Any] = field(default_factory=dict)
    lang: str = "en"

    def search_text(self) -> str:
        parts = [self.title, self.description, ", ".join(self.triggers)]
        return "\n".join(p for p in parts if p)


def unique_name(wanted: str, owner_id: str, taken: set[str]) -> str:
    """``wanted`` (made valid) or ``wanted-2``, ``wanted-3``... whichever the owner has not used."""
    base = slugify(wanted)
    check_name(base)
    if base not in taken:
        return base
    n = 2
    while True:
        suffix = f"-{n}"
        cand = base[: 64 - len(suffix)].rstrip("-") + suffix
        if cand not in taken:
            return cand
        n += 1


def apply_draft(
    draft: Draft,
    existing: TaskSkill | None,
    *,
    owner_id: str,
    taken_names: set[str],
    now: datetime,
    segment_id: str | None,
    conversation_id: str | None,
    distiller: str,
) -> TaskSkill:
    """The next version of ``existing`` (or a new task skill) after ``draft``."""
    if existing is None:
        name = unique_name(draft.name or draft.title or "task", owner_id, taken_names)
        skill = TaskSkill(
            id=skill_id(owner_id, name),
            owner_id=owner_id,
            name=name,
            version=0,
            created_at=now,
            distiller=distiller,
            lang=draft.lang,
        )
        _replace(skill, draft)
        skill.stats = fold_stats({}, draft.stats)
    else:
        skill = existing.copy()
        if draft.merge == "replace":
            _replace(skill, draft)
            skill.stats = fold_stats(skill.stats, draft.stats)
        else:
            _merge_evidence(skill, draft)
    skill.version += 1
    skill.updated_at = now
    skill.distiller = distiller
    if segment_id and segment_id not in skill.source_segment_ids:
        skill.source_segment_ids.append(segment_id)
    if conversation_id and conversation_id not in skill.source_conversation_ids:
        skill.source_conversation_ids.append(conversation_id)
    skill.description = clip_description(skill.description or skill.title)
    return skill


def clip_description(text: str) -> str:
    """A description that fits the Agent Skills rules: one paragraph, no angle brackets."""
    text = re.sub(r"\s+", " ", text.replace("<", "(").replace(">", ")")).strip()
    if len(text) > DESCRIPTION_MAX:
        text = text[: DESCRIPTION_MAX - 1].rstrip() + "…"
    return text


def _replace(skill: TaskSkill, draft: Draft) -> None:
    for name in TEXT_SECTIONS:
        value = getattr(draft, name)
        if value:
            setattr(skill, name, value)
    for name in LIST_SECTIONS:
        setattr(skill, name, _dedupe(getattr(draft, name)))
    for name in FILE_SECTIONS:
        value = getattr(draft, name)
        if value or name.startswith("planned"):
            setattr(skill, name, dict(value))
    skill.lang = draft.lang or skill.lang


def _merge_evidence(skill: TaskSkill, draft: Draft) -> None:
    skill.stats = fold_stats(skill.stats, draft.stats)
    merge_sections(skill, draft)
    if draft.description and not skill.description:
        skill.description = draft.description
    skill.description = describe(skill.title, skill.procedure, skill.triggers, skill.lang)


def merge_sections(skill: TaskSkill, other: SkillContent) -> None:
    """Fold ``other``'s sections into ``skill`` (whose ``stats`` already hold both evidences):
    procedure and triggers from the evidence, the other lists as unions, files kept unless
    missing."""
    stats = skill.stats
    n = max(1, int(stats.get("n", 1)))
    steps = stats.get("steps", [])
    keep = [s for s in steps if s[1] >= max(1, round(0.2 * n))] or steps
    keep = sorted(keep, key=lambda s: (-s[1], s[2] / max(1, s[1])))[:MAX_STEPS]
    skill.procedure = [s[0] for s in sorted(keep, key=lambda s: s[2] / max(1, s[1]))]
    top = sorted(stats.get("terms", {}).items(), key=lambda kv: (-kv[1], kv[0]))
    skill.triggers = [t for t, _ in top[:MAX_TRIGGERS]]
    for name in LIST_SECTIONS:
        if name in _FROM_STATS:
            continue
        merged = _dedupe(getattr(skill, name) + getattr(other, name))
        setattr(skill, name, merged[:MAX_ITEMS])
    for name in FILE_SECTIONS:
        files: dict[str, str] = dict(getattr(skill, name))
        for key, value in getattr(other, name).items():
            files.setdefault(key, value)
        setattr(skill, name, files)


def describe(title: str, procedure: list[str], triggers: list[str], lang: str) -> str:
    """The offline distiller's description: what the skill does (first steps) and when to use it.

    It does not mention how many conversations it came from: the description is embedded for
    search, and a text that changes with every merge would have to be embedded again each time.
    """
    topics = ", ".join(triggers[:6])
    steps = "; ".join(_gist(s) for s in procedure[:5])
    if lang == "zh":
        text = f"{title}。" + (f"步骤：{steps}。" if steps else "")
        if topics:
            text += f"当请求涉及 {topics} 时使用。"
        return clip_description(text)
    text = f"{title}." + (f" Steps: {steps}." if steps else "")
    if topics:
        text += f" Use it when a request is about {topics}."
    return clip_description(text)


def _gist(step: str, limit: int = 80) -> str:
    step = step.rstrip(" .?!。？！")
    if len(step) <= limit:
        return step
    cut = step[: limit - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(" ,;:") + "…"


PROTOTYPES = ("centroid", "requests")
"""Vector sums a rules skill keeps: of its drafts' search texts and of the users' requests."""


def centroid(stats: dict[str, Any], key: str = "centroid") -> list[float] | None:
    """The unit mean of the vectors summed under ``key`` (``centroid``: the drafts merged into a
    skill; ``requests``: their users' requests); ``None`` before any."""
    total = stats.get(key)
    if not total:
        return None
    norm = sum(x * x for x in total) ** 0.5
    return [x / norm for x in total] if norm else None


def fold_stats(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Add a draft's evidence to a skill's: steps (support, summed position), term counts, and
    the sums of the draft and request vectors (whose directions are the skill's prototypes).

    A draft's step counts for the known step it matches best (``STEP_MATCH``), one to one: two
    steps of one procedure are two steps ("the colour of the first cable", "of the second
    cable"), however alike they read, so a known step that an earlier step of the same draft took
    is not matched again.
    """
    out: dict[str, Any] = {
        # what the evidence does not hold (trust counters, merge links) stays as it was
        **{k: v for k, v in old.items() if k not in ("n", "steps", "terms", *PROTOTYPES)},
        "n": int(old.get("n", 0)) + int(new.get("n", 0)),
        "steps": [list(s) for s in old.get("steps", [])],
        "terms": dict(old.get("terms", {})),
    }
    taken: set[int] = set()  # known steps a step of this draft already counted for
    for text, support, pos in new.get("steps", []):
        toks = set(terms(text))
        best, best_j = -1, 0.0
        for i, s in enumerate(out["steps"]):
            if i in taken:
                continue
            other = set(terms(s[0]))
            j = len(toks & other) / len(toks | other) if toks | other else float(text == s[0])
            if j > best_j:
                best, best_j = i, j
        if best >= 0 and best_j >= STEP_MATCH:
            out["steps"][best][1] += support
            out["steps"][best][2] += pos
        else:
            best = len(out["steps"])
            out["steps"].append([text, support, pos])
        taken.add(best)
    for term, count in new.get("terms", {}).items():
        out["terms"][term] = out["terms"].get(term, 0) + count
    for key in PROTOTYPES:
        old_c, new_c = old.get(key), new.get(key)
        if old_c and new_c and len(old_c) == len(new_c):
            out[key] = [round(a + b, 5) for a, b in zip(old_c, new_c)]
        elif old_c or new_c:
            out[key] = [round(x, 5) for x in (old_c or new_c or [])]
    out["steps"] = sorted(out["steps"], key=lambda s: -s[1])[:MAX_STAT_STEPS]
    top = sorted(out["terms"].items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_STAT_TERMS]
    out["terms"] = dict(top)
    return out


def _dedupe(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        item = str(item).strip()
        key = re.sub(r"\W+", " ", item.lower()).strip()
        if item and key not in seen:
            seen.add(key)
            out.append(item)
    return out
