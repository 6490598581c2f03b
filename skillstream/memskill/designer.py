"""The designer: mines the cases that went wrong and rewrites or adds memory skills (MemSkill 3.4).

* ``HardCaseBuffer``: queries whose recall fell below ``threshold``, keyed by their text, with a
  fail count and the step last seen; cases older than ``window`` steps are dropped and at most
  ``cap`` are kept (the least difficult go first). Difficulty ``(1 - score) * log1p(fails)``.
* ``representatives``: k-means (seeded, numpy) on the cases' query vectors, then the most difficult
  ``per_cluster`` of every cluster, at most ``limit`` in all.
* ``Designer.round``: an *analysis* call (failure patterns and what the memory lacked) and an *edit*
  call that proposes at most ``max_changes`` changes: ``add`` a new skill (INSERT or UPDATE action
  only) or ``refine`` an existing one. Every change is validated (name format, known skill for a
  refinement, allowed action, lengths); invalid ones are dropped, an unusable answer changes
  nothing. Accepted changes give new ``MemorySkill`` versions (refinements bump the version).
* ``evolve``: training and evolution alternate. Each cycle trains, validates, keeps a snapshot of
  bank and controller when the validation reward is the best so far, rolls back to the best snapshot
  when it dropped, stops after ``patience`` cycles without improvement, and otherwise asks the
  designer for changes; new skills get an exploration bias (an extra logit, decaying linearly to 0
  over ``bias_updates`` PPO updates). After every cycle ``on_cycle`` receives the loop's state
  (JSON-ready), with which ``evolve(resume=...)`` continues an interrupted run after that cycle.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from skillstream.extract import MemorySkill
from skillstream.llm import LLMFailure
from skillstream.llm.base import ChatBackend, ChatRequest
from skillstream.memskill.rewards import Query
from skillstream.memskill.versions import skill_from_row, skill_row
from skillstream.vocab import Op

NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
NEW_ACTIONS = (Op.INSERT, Op.UPDATE)
MAX_DESCRIPTION = 1024
MAX_INSTRUCTION = 4000


# ------------------------------------------------------------------------------ hard cases
@dataclass
class HardCase:
    """A query the memories answered badly."""

    query: Query
    score: float
    fails: int
    last_step: int

    @property
    def difficulty(self) -> float:
        return (1.0 - self.score) * math.log1p(self.fails)


@dataclass
class HardCaseBuffer:
    """Bounded, windowed buffer of hard cases (see the module docstring)."""

    threshold: float = 0.5
    window: int = 50
    cap: int = 200
    cases: dict[str, HardCase] = field(default_factory=dict)

    def add(self, query: Query, score: float, step: int) -> None:
        """Record a query's score at ``step``; only a score below ``threshold`` is a failure."""
        if score >= self.threshold:
            return
        case = self.cases.get(query.text)
        if case is None:
            self.cases[query.text] = HardCase(query, score, 1, step)
        else:
            case.score, case.fails, case.last_step = score, case.fails + 1, step
        self.cases = {k: c for k, c in self.cases.items() if step - c.last_step <= self.window}
        if len(self.cases) > self.cap:
            keep = sorted(self.cases.values(), key=lambda c: -c.difficulty)[: self.cap]
            self.cases = {c.query.text: c for c in keep}


def kmeans(vectors: np.ndarray, k: int, seed: int = 0, iters: int = 25) -> np.ndarray:
    """Cluster labels of ``vectors`` (n, d) into at most ``k`` clusters (seeded k-means)."""
    n = len(vectors)
    k = max(1, min(k, n))
    rng = np.random.default_rng(seed)
    centres = vectors[rng.choice(n, size=k, replace=False)].astype(np.float64)
    labels: np.ndarray = np.zeros(n, dtype=np.int64)
    for _ in range(iters):
        dist = ((vectors[:, None, :] - centres[None, :, :]) ** 2).sum(-1)
        new = dist.argmin(1)
        if np.array_equal(new, labels) and _ > 0:
            break
        labels = new
        for j in range(k):
            if (labels == j).any():
                centres[j] = vectors[labels == j].mean(0)
    return labels


def representatives(
    buffer: HardCaseBuffer, clusters: int = 5, per_cluster: int = 3, limit: int = 15, seed: int = 0
) -> list[list[HardCase]]:
    """The most difficult cases of every cluster (clusters in order of their worst case)."""
    cases = list(buffer.cases.values())
    if not cases:
        return []
    labels = kmeans(np.stack([c.query.vector for c in cases]), clusters, seed)
    groups: dict[int, list[HardCase]] = {}
    for c, lab in zip(cases, labels):
        groups.setdefault(int(lab), []).append(c)
    ordered = [sorted(g, key=lambda c: -c.difficulty)[:per_cluster] for g in groups.values()]
    ordered.sort(key=lambda g: -g[0].difficulty)
    out, n = [], 0
    for g in ordered:
        g = g[: max(0, limit - n)]
        if g:
            out.append(g)
            n += len(g)
    return out


# ------------------------------------------------------------------------------ LLM rounds
ANALYSIS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "patterns": {"type": "array", "items": {"type": "string"}},
        "missing": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["patterns"],
}
# Loose on purpose: one invalid change is dropped by ``Designer.validate``, not the whole answer.
EDIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "changes": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "change": {"type": "string"},
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "instruction": {"type": "string"},
                    "action": {"type": "string"},
                },
                "required": ["change", "name", "description", "instruction"],
            },
        }
    },
    "required": ["changes"],
}


@dataclass(frozen=True)
class Change:
    """One accepted designer change: the new skill version and whether it is a new skill."""

    skill: MemorySkill
    new: bool


def _skills_text(skills: Sequence[MemorySkill]) -> str:
    return "\n".join(f"- {s.name} ({s.action}): {s.description}" for s in skills)


def _cases_text(groups: Sequence[Sequence[HardCase]]) -> str:
    lines = []
    for i, g in enumerate(groups):
        lines.append(f"Group {i + 1}:")
        for c in g:
            lines.append(f'- "{c.query.text}" (recall {c.score:.2f}, failed {c.fails} times)')
    return "\n".join(lines)


def _analysis_check(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict) or not isinstance(data.get("patterns"), list):
        raise ValueError("expected an object with a 'patterns' list")
    return data


def _edit_check(data: Any) -> list[Any]:
    if not isinstance(data, dict) or not isinstance(data.get("changes"), list):
        raise ValueError("expected an object with a 'changes' list")
    return list(data["changes"])


class Designer:
    """Two LLM calls per round: analysis, then edits (see the module docstring)."""

    def __init__(self, backend: ChatBackend, max_changes: int = 3) -> None:
        self.backend = backend
        self.max_changes = max_changes
        self.rejected: list[tuple[str, str]] = []

    def analysis_request(
        self, groups: Sequence[Sequence[HardCase]], skills: Sequence[MemorySkill]
    ) -> ChatRequest:
        user = (
            "A memory system writes memories from conversations with the skills below, and these "
            "questions were answered badly from the memories it wrote. Find the failure "
            "patterns: was the information never stored, stored without the detail asked for "
            "(dates, names, places), or stored in a form hard to find?\n\n"
            f"# Memory skills\n{_skills_text(skills)}\n\n# Questions answered badly\n"
            f"{_cases_text(groups)}\n\n"
            'Answer with JSON: {"patterns": ["..."], "missing": ["what the memory lacked"]}'
        )
        return ChatRequest(
            purpose="design",
            messages=(
                ("system", "You improve how a memory system extracts memories."),
                ("user", user),
            ),
            schema=ANALYSIS_SCHEMA,
            temperature=0.0,
            max_tokens=600,
        )

    def edit_request(self, analysis: dict[str, Any], skills: Sequence[MemorySkill]) -> ChatRequest:
        user = (
            f"# Memory skills\n{_skills_text(skills)}\n\n# Failure analysis\n"
            f"Patterns: {'; '.join(map(str, analysis.get('patterns', [])))}\n"
            f"Missing: {'; '.join(map(str, analysis.get('missing', []) or []))}\n\n"
            f"Propose at most {self.max_changes} changes. Each either refines an existing skill "
            "(same name, better description and instruction) or adds a new one (a new lowercase "
            "hyphenated name, action INSERT or UPDATE). The instruction has the sections "
            "Purpose, When to use, How to apply, Constraints.\n"
            'Answer with JSON: {"changes": [{"change": "add" or "refine", "name": "...", '
            '"description": "...", "instruction": "...", "action": "INSERT"}]}'
        )
        return ChatRequest(
            purpose="design",
            messages=(
                ("system", "You improve how a memory system extracts memories."),
                ("user", user),
            ),
            schema=EDIT_SCHEMA,
            temperature=0.0,
            max_tokens=1200,
        )

    def validate(self, items: Sequence[Any], skills: Sequence[MemorySkill]) -> list[Change]:
        """Accepted changes (at most ``max_changes``); the rest go to ``rejected``."""
        by_name = {s.name: s for s in skills}
        out: list[Change] = []
        self.rejected = []
        for item in items:
            why = self._why_invalid(item, by_name, {c.skill.name for c in out})
            if why:
                self.rejected.append((str(item)[:200], why))
                continue
            name = item["name"].strip()
            desc = " ".join(item["description"].split())
            instr = item["instruction"].strip()
            if item["change"] == "refine":
                old = by_name[name]
                skill = replace(old, description=desc, instruction=instr, version=old.version + 1)
                out.append(Change(skill, new=False))
            else:
                action = str(item.get("action") or Op.INSERT).upper()
                out.append(Change(MemorySkill(name, desc, instr, Op(action)), new=True))
            if len(out) >= self.max_changes:
                break
        return out

    @staticmethod
    def _why_invalid(item: Any, by_name: dict[str, MemorySkill], taken: set[str]) -> str | None:
        if not isinstance(item, dict):
            return "a change must be an object"
        change, name = item.get("change"), item.get("name")
        desc, instr = item.get("description"), item.get("instruction")
        if change not in ("add", "refine"):
            return f"unknown change {change!r}"
        if not isinstance(name, str) or not NAME.match(name.strip()) or len(name) > 64:
            return f"invalid skill name {name!r}"
        if name in taken:
            return f"{name} is changed twice"
        if not isinstance(desc, str) or not desc.strip() or len(desc) > MAX_DESCRIPTION:
            return "the description must be 1-1024 characters"
        if "<" in desc or ">" in desc:
            return "the description may not hold angle brackets"
        if not isinstance(instr, str) or not instr.strip() or len(instr) > MAX_INSTRUCTION:
            return "the instruction must be 1-4000 characters"
        if change == "refine" and name not in by_name:
            return f"cannot refine unknown skill {name}"
        if change == "add":
            if name in by_name:
                return f"{name} exists already; refine it instead"
            if str(item.get("action") or Op.INSERT).upper() not in NEW_ACTIONS:
                return "a new skill may only INSERT or UPDATE"
        return None

    def round(
        self, groups: Sequence[Sequence[HardCase]], skills: Sequence[MemorySkill]
    ) -> list[Change]:
        """Analysis and edit calls for the representative cases; accepted changes."""
        self.rejected = []
        if not groups:
            return []
        try:
            analysis = self.backend.chat(
                self.analysis_request(groups, skills), _analysis_check
            ).data
            items = self.backend.chat(self.edit_request(analysis, skills), _edit_check).data
        except LLMFailure as e:  # no usable answer within the retries: the bank stays as it is
            self.rejected = [("(answer)", str(e)[:300])]
            return []
        return self.validate(items, skills)


def apply_changes(skills: Sequence[MemorySkill], changes: Sequence[Change]) -> list[MemorySkill]:
    """The bank after ``changes``: refinements replace their skill, new skills are appended."""
    out = list(skills)
    for ch in changes:
        if ch.new:
            out.append(ch.skill)
        else:
            out = [ch.skill if s.name == ch.skill.name else s for s in out]
    return out


# ------------------------------------------------------------------------------ the loop
@dataclass
class Snapshot:
    """Bank and controller weights at the end of a cycle."""

    cycle: int
    reward: float
    skills: list[MemorySkill]
    weights: dict[str, Any]


@dataclass
class EvolveReport:
    cycles: list[dict[str, Any]] = field(default_factory=list)
    best: Snapshot | None = None


def _case_row(c: HardCase) -> dict[str, Any]:
    q = c.query
    return {
        "text": q.text,
        "evidence": list(q.evidence),
        "vector": [float(x) for x in np.asarray(q.vector, dtype=np.float32)],
        "pool": None if q.pool is None else sorted(q.pool),
        "score": c.score,
        "fails": c.fails,
        "last_step": c.last_step,
    }


def _case_from_row(row: dict[str, Any]) -> HardCase:
    pool = row.get("pool")
    query = Query(
        str(row["text"]),
        tuple(row["evidence"]),
        np.asarray(row["vector"], dtype=np.float32),
        None if pool is None else frozenset(pool),
    )
    return HardCase(query, float(row["score"]), int(row["fails"]), int(row["last_step"]))


class SkillDesigner(Protocol):
    """What ``evolve`` needs of a designer: ``Designer`` (an LLM) or ``OfflineDesigner``."""

    rejected: list[tuple[str, str]]

    def round(
        self, groups: Sequence[Sequence[HardCase]], skills: Sequence[MemorySkill]
    ) -> list[Change]: ...


def evolve(
    trainer: Any,
    designer: SkillDesigner,
    train: Callable[[Any], list[tuple[Query, float]]],
    validate: Callable[[Any], float],
    *,
    cycles: int = 5,
    patience: int = 2,
    bias: float = 2.0,
    bias_updates: int = 10,
    buffer: HardCaseBuffer | None = None,
    seed: int = 0,
    resume: tuple[dict[str, Any], dict[str, Any] | None] | None = None,
    on_cycle: Callable[[dict[str, Any], EvolveReport], None] | None = None,
) -> EvolveReport:
    """Alternate training and evolution (see the module docstring).

    Args:
        trainer: A ``train.Trainer`` (its ``skills``, ``net``, ``set_skills``, ``updates``).
        designer: Proposes the changes (with an LLM, or offline by example).
        train: Runs one training phase of ``trainer``; returns the (query, recall) pairs its
            rollouts scored, for the hard-case buffer.
        validate: The validation reward of ``trainer``'s current bank and controller.
        cycles: At most this many cycles.
        patience: Stop after this many cycles without a better validation reward.
        bias: Initial extra logit of a new skill.
        bias_updates: PPO updates over which the bias decays to 0.
        resume: The loop state an ``on_cycle`` call received and the best snapshot's weights:
            continue after that cycle (the trainer must already hold its state of that moment).
        on_cycle: Called after every completed cycle with the loop state (JSON-ready) and the
            report so far, to snapshot the cycle and make the run resumable.
    """
    buffer = buffer or HardCaseBuffer()
    report = EvolveReport()
    stale = 0
    new_names: list[str] = []
    since = trainer.updates
    first = 0
    if resume is not None:
        state, weights = resume
        first = int(state["next"])
        stale = int(state["stale"])
        new_names = [str(n) for n in state["new_names"]]
        since = int(state["since"])
        report.cycles = [dict(r) for r in state["cycles"]]
        buffer.cases = {c["text"]: _case_from_row(c) for c in state["buffer"]}
        trainer.set_skills([skill_from_row(r) for r in state["skills"]])
        best = state.get("best")
        if best is not None and weights is not None:
            report.best = Snapshot(
                int(best["cycle"]),
                float(best["reward"]),
                [skill_from_row(r) for r in best["skills"]],
                weights,
            )
        if state.get("stopped"):
            return report

    def done(cycle: int, stopped: bool = False) -> None:
        if on_cycle is None:
            return
        best = report.best
        on_cycle(
            {
                "next": cycle + 1,
                "stale": stale,
                "new_names": list(new_names),
                "since": since,
                "cycles": report.cycles,
                "buffer": [_case_row(c) for c in buffer.cases.values()],
                "skills": [skill_row(s) for s in trainer.skills],
                "best": None
                if best is None
                else {
                    "cycle": best.cycle,
                    "reward": best.reward,
                    "skills": [skill_row(s) for s in best.skills],
                },
                "stopped": stopped,
            },
            report,
        )

    for cycle in range(first, cycles):
        if new_names:
            left = max(0.0, 1.0 - (trainer.updates - since) / max(bias_updates, 1))
            trainer.set_skills(trainer.skills, {n: bias * left for n in new_names})
        for q, score in train(trainer):
            buffer.add(q, score, trainer.updates)
        reward = float(validate(trainer))
        row: dict[str, Any] = {"cycle": cycle, "reward": reward, "skills": len(trainer.skills)}
        if report.best is None or reward > report.best.reward:
            report.best = Snapshot(
                cycle, reward, list(trainer.skills), copy.deepcopy(trainer.net.state_dict())
            )
            stale = 0
            row["snapshot"] = True
        else:
            stale += 1
            trainer.net.load_state_dict(report.best.weights)
            trainer.set_skills(report.best.skills)
            new_names = []
            row["rolled_back_to"] = report.best.cycle
        if stale >= patience:
            row["stopped"] = True
            report.cycles.append(row)
            done(cycle, stopped=True)
            break
        per, limit = getattr(designer, "per_cluster", 3), getattr(designer, "limit", 15)
        groups = representatives(buffer, per_cluster=per, limit=limit, seed=seed + cycle)
        changes = designer.round(groups, trainer.skills)
        row["changes"] = [(("add" if c.new else "refine"), c.skill.name) for c in changes]
        row["rejected"] = list(designer.rejected)
        row["hard_cases"] = len(buffer.cases)
        notes = getattr(designer, "notes", None)
        if notes is not None:  # what the offline designer saw and wrote from it
            row["proposals"] = list(notes)
        if changes:
            new_names = [c.skill.name for c in changes if c.new]
            since = trainer.updates
            trainer.set_skills(apply_changes(trainer.skills, changes), {n: bias for n in new_names})
        report.cycles.append(row)
        done(cycle)
    return report
