"""The offline ``rules`` task-skill distiller: no LLM, no network, deterministic.

* **Chunking**: topic segmentation by embedding shifts (``segment.segment_block``).
* **Procedure**: the assistant's ordered steps and imperatives, in order ("First, run pytest" ->
  "Run pytest"), plus its requests for information in task dialogues ("Could I get your name?").
* **Experience**: a user's report of a failure paired with the assistant's next instruction
  ("If it failed at the push step with an authentication error: log in to the registry first").
* **Preferences**: the user's own standing preferences ("I always want the health check to run"),
  never the assistant's suggestions.
* **Triggers**: the segment's salient terms (user turns weigh double).
* **Tools and verification**: well-known tools and commands named in the steps; steps that check.
* **Update or new**: the recalled task skill the draft fits best is updated when the fit reaches
  ``merge_threshold``; else a new task skill is created. The fit blends the draft's affinity to
  the skill (its description to the mean of the drafts merged into the skill, and the user's
  request to the mean of their requests) with the share of the draft's steps the skill already
  knows (see :func:`similarity`).

It is honestly weaker than an LLM: it copies the conversation's wording instead of generalising it,
and a task named by the user in an unusual way may not find its existing skill.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from skillstream.distill import steps as st
from skillstream.distill.draft import STEP_MATCH, Draft, describe
from skillstream.distill.recall import RecallHit, affinity
from skillstream.distill.record import ConversationBlock, TaskSegment, TaskSkill
from skillstream.distill.segment import request_text, segment_block
from skillstream.embed import Embed
from skillstream.model import LLMCall

Recall = Callable[..., list[RecallHit]]
"""``recall(query, request="")``: the owner's related task skills for a query and a request."""

_SKIP_LEAD = re.compile(
    r"^(?:hi|hello|hey|so|ok(?:ay)?|well|um|please)?[,!.\s]*"
    r"(?:(?:can|could|would|will) you (?:please )?"
    r"(?:help me (?:to )?|walk me through |show me how to |"
    r"tell me how to |explain how to |remind me how to )?|"
    r"(?:please )?(?:help me (?:to )?|walk me through |show me how to |tell me how to )|"
    r"how (?:do|can|should) (?:i|we) |i(?:'d| would) like (?:you )?to |"
    r"i (?:need|want|have) (?:you )?to |"
    r"we (?:need|want|have) to |i'?m (?:trying|looking|planning|hoping) to |let'?s |"
    r"i need |i want |"
    r"i wanna |i would like |i'd like )?",
    re.IGNORECASE,
)
_GERUND = re.compile(r"^([a-z]+?)(?:ing)$")


class HeuristicDistiller:
    """Task chunking and task-skill extraction with text rules and embeddings.

    Args:
        embed: Texts to unit vectors (the flow's embedder).
        merge_threshold: Cosine similarity at which a draft updates a recalled task skill.
        shift_threshold: See ``segment.segment_block``.
    """

    name = "rules"

    def __init__(
        self, embed: Embed, *, merge_threshold: float = 0.55, shift_threshold: float = 0.2
    ) -> None:
        self.embed = embed
        self.merge_threshold = merge_threshold
        self.shift_threshold = shift_threshold

    # ------------------------------------------------------------------ the distiller interface
    def chunk(self, block: ConversationBlock) -> tuple[list[TaskSegment], list[LLMCall]]:
        """Task segments of a block (no LLM calls)."""
        return segment_block(block, self.embed, shift_threshold=self.shift_threshold), []

    def propose(self, segment: TaskSegment, recall: Recall) -> tuple[Draft | None, list[LLMCall]]:
        """A draft for the segment; ``update_of`` names the recalled skill it merges into."""
        draft = draft_of(segment)
        if draft is None:
            return None, []
        query = draft.search_text()
        draft.request = request_text(segment.messages)
        hits = recall(query, draft.request)
        texts = [query, draft.request] if draft.request else [query]
        vecs = np.asarray(self.embed(texts), dtype=np.float32)
        vec, req = vecs[0], (vecs[1] if draft.request else None)
        draft.stats["centroid"] = [round(float(x), 5) for x in vec]
        if req is not None:
            draft.stats["requests"] = [round(float(x), 5) for x in req]
        if hits:
            scored = [(similarity(vec, draft, h.skill, req), h.skill.id) for h in hits]
            best_score, best_id = max(scored)
            if best_score >= self.merge_threshold:
                draft.update_of = best_id
        return draft, []

    def details(self, skill: TaskSkill) -> tuple[TaskSkill, list[LLMCall]]:
        """Full mode without an LLM: a shell script of the commands in the steps, and a reference
        note with the lessons and checks."""
        out = skill.copy()
        commands: list[str] = []
        for step in skill.procedure:
            commands.extend(c for c in st.commands_in(step) if c not in commands)
        if commands:
            body = "\n".join(commands)
            out.scripts = {**out.scripts, "run.sh": _script(skill.title, body)}
        if skill.experience or skill.verification:
            lines = [f"# {skill.title}: notes", ""]
            if skill.experience:
                lines += ["## Pitfalls", ""] + [f"- {e}" for e in skill.experience] + [""]
            if skill.verification:
                lines += ["## Checks", ""] + [f"- {v}" for v in skill.verification] + [""]
            out.references = {**out.references, "notes.md": "\n".join(lines)}
        out.planned_scripts = {k: v for k, v in out.planned_scripts.items() if k not in out.scripts}
        out.planned_references = {
            k: v for k, v in out.planned_references.items() if k not in out.references
        }
        return out, []


STEP_WEIGHT = 0.3
"""Share of the step overlap in the similarity of a draft to a task skill (the rest is cosine)."""


def similarity(
    vec: np.ndarray, draft: Draft, skill: TaskSkill, request: np.ndarray | None = None
) -> float:
    """How well a draft fits a task skill, in [0, 1]-ish.

    ``(1 - STEP_WEIGHT) * cosine + STEP_WEIGHT * step overlap``, where the cosine is the draft's
    ``recall.affinity`` to the skill (its text to the centroid of the drafts merged into the skill,
    averaged with its user's request to the centroid of their requests: steadier prototypes than
    any one text; the skill's own vector when it has no centroid), and the step overlap is the
    share of the draft's steps that match a step the skill has seen (term overlap of at least one
    half). Two kinds of task that sound alike ("plan a party" / "RSVP to a party") ask different
    things; the requests and the steps show it.
    """
    cos = affinity(vec, request, skill) or 0.0
    return (1 - STEP_WEIGHT) * cos + STEP_WEIGHT * step_overlap(draft.procedure, skill)


def step_overlap(steps: list[str], skill: TaskSkill) -> float:
    """Share of ``steps`` that match one of the skill's known steps (or its procedure)."""
    if not steps:
        return 0.0
    known = [frozenset(st.terms(s[0])) for s in skill.stats.get("steps", [])]
    known = known or [frozenset(st.terms(s)) for s in skill.procedure]
    hit = 0
    for step in steps:
        a = frozenset(st.terms(step))
        if a and any(b and len(a & b) / len(a | b) >= STEP_MATCH for b in known):
            hit += 1
    return hit / len(steps)


def _script(title: str, body: str) -> str:
    return (
        f"#!/usr/bin/env sh\n# {title}\n"
        "# Commands collected from the procedure; review before running.\n"
        f"set -e\n{body}\n"
    )


def procedural_steps(segment: TaskSegment) -> int:
    """How many step sentences a segment states (what the gate counts)."""
    return st.count_steps(segment.messages)


def draft_of(segment: TaskSegment) -> Draft | None:
    """The rules draft of a segment, or ``None`` when it states no step at all."""
    procedure: list[str] = []
    experience: list[str] = []
    preferences: list[str] = []
    verification: list[str] = []
    tools: list[str] = []
    failure: str | None = None
    for m in segment.messages:
        parts = st.sentences(m.text)
        if m.role == "user":
            for s in parts:
                pref = st.preference_of(s)
                if pref:
                    preferences.append(pref)
                elif st.is_failure(s) and not st.is_question(s):
                    failure = st.lead_stripped(s).rstrip(".!")
                if st.is_ordered(s):
                    step = st.step_of(s, "user")
                    if step:
                        procedure.append(step)
            continue
        if m.role != "assistant":
            continue
        for s in parts:
            step = st.step_of(s, "assistant")
            if not step:
                continue
            if failure:
                if segment.lang == "zh":
                    experience.append(f"如果{failure.rstrip('。！')}：{step}")
                else:
                    experience.append(f"If {_lower_first(failure)}: {_lower_first(step)}")
                failure = None
                continue
            procedure.append(step)
            check = _check_of(step)
            if check:
                verification.append(check)
        for tool in st.tools_in(m.text):
            if tool not in tools:
                tools.append(tool)
    procedure = _dedupe(procedure)
    if not procedure and not experience:
        return None
    weighted = [(m.text, 2.0 if m.role == "user" else 1.0) for m in segment.messages]
    names = st.names_given((m.role, m.text) for m in segment.messages)
    top = st.salient_terms(weighted, k=10, exclude=names)
    triggers = [t for t, _ in top]
    title = title_of(segment, triggers)
    n = len(procedure)
    stats = {
        "n": 1,
        "steps": [[s, 1, i / max(1, n - 1) if n > 1 else 0.0] for i, s in enumerate(procedure)],
        "terms": {t: round(w, 3) for t, w in top},
    }
    planned = {}
    if any(st.commands_in(s) for s in procedure):
        planned["run.sh"] = "Run the commands of the procedure in order."
    return Draft(
        title=title,
        name=title,
        description=describe(title, procedure, triggers, segment.lang),
        triggers=triggers[:8],
        procedure=procedure,
        experience=_dedupe(experience),
        preferences=_dedupe(preferences),
        tools=tools,
        verification=_dedupe(verification),
        planned_scripts=planned,
        stats=stats,
        lang=segment.lang,
    )


def title_of(segment: TaskSegment, triggers: list[str]) -> str:
    """A broad task name: the verb and object of the user's first request ("I want to plan a
    party" -> "Plan party"), else the segment's top terms."""
    if segment.lang != "zh":
        asked = 0
        for m in segment.messages:
            if m.role != "user":
                continue
            asked += 1
            if asked > 3:
                break
            for s in st.sentences(m.text):
                title = _verb_object(s)
                if title:
                    return title
    if segment.lang == "zh" and triggers:
        return "".join(triggers[:2]) + "流程"
    return " ".join(t.capitalize() for t in triggers[:3]) or "Task"


_TITLE_VERBS = st.IMPERATIVE_VERBS | frozenset("attend access unlock play know fix".split())


def _verb_object(sentence: str) -> str | None:
    if not _REQUEST_CUE.search(sentence):
        return None
    rest = _SKIP_LEAD.sub("", sentence.strip(), count=1)
    words = re.findall(r"[A-Za-z][A-Za-z'-]*", rest)
    for i, word in enumerate(words[:4]):
        verb = word.lower()
        g = _GERUND.match(verb)
        if g and g.group(1) in _TITLE_VERBS:
            verb = g.group(1)
        elif g and g.group(1) + "e" in _TITLE_VERBS:
            verb = g.group(1) + "e"
        if verb not in _TITLE_VERBS:
            continue
        phrase: list[str] = []
        for w in words[i + 1 : i + 8]:
            if w.lower() in _PREPOSITIONS and st.terms(" ".join(phrase)):
                break
            phrase.append(w)
        objects = [t for t in st.terms(" ".join(phrase)) if t != verb][:2]
        if objects:
            return " ".join([verb.capitalize()] + objects)
    return None


_PREPOSITIONS = frozenset(
    "in on at to from for with about of by into near around before after".split()
)
_REQUEST_CUE = re.compile(
    r"\b(?:can|could|would|will) you\b|\bhelp me\b|\bhow (?:do|can|should) (?:i|we)\b|"
    r"\bi(?:'d| would) like\b|\bi (?:need|want|have|wanna)\b|\bwe (?:need|want|have)\b|"
    r"\blet'?s\b|\bi'?m (?:trying|looking|planning|hoping)\b|\bwalk me through\b|\bshow me\b|"
    r"^(?:please )?[a-z]+ (?:me|a|an|the|my)\b",
    re.IGNORECASE,
)


_CHECK = re.compile(r"\b(check|verify|confirm|make sure|ensure)\b(.*)$", re.IGNORECASE)


def _check_of(step: str) -> str | None:
    m = _CHECK.search(step)
    if not m or len(m.group(2).split()) < 3:
        return None
    return (m.group(1).capitalize() + m.group(2)).rstrip(" .") + "."


def _lower_first(s: str) -> str:
    return s[:1].lower() + s[1:] if s and not s[:2].isupper() else s


def _dedupe(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = re.sub(r"\W+", " ", item.lower()).strip()
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out
