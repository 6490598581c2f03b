"""Distillation of task skills, per owner, without Bytewax: a block goes in, task-skill results out.

For every :class:`~skillstream.distill.record.ConversationBlock` (the messages of a conversation
between two closes), :meth:`TaskSkillDistiller.distill_block`:

1. **chunks** it into task segments (the distiller's ``chunk``: embedding shifts offline, one LLM
   call with an LLM);
2. **gates** each segment: fewer than ``min_steps`` procedural sentences means no reusable
   procedure, and nothing is distilled (no LLM call either);
3. **recalls** the owner's related task skills (hybrid search over name, description, triggers);
4. **extracts** a draft (the distiller's ``propose``) that either creates a task skill or updates
   one of the *recalled* ones; a draft naming any other skill becomes a new skill;
5. in **full mode**, generates scripts, the tool list and reference documents (the distiller's
   ``details``; the LLM distiller makes the three calls concurrently);
6. applies the sensitive-data rules, embeds the skill, **publishes** its package (a new path per
   version) and returns a :class:`~skillstream.distill.record.TaskSkillResult` for the store sink;
7. **consolidates**: when the changed skill duplicates another active skill of the owner (see
   :mod:`skillstream.distill.consolidate`), the two are merged into a new version of one of them
   (published again) and the other is archived; both versions are results too (``merged``).
   Young skills that are due are **folded** the same way into the established skill they resemble.

State per owner (:class:`OwnerTaskSkills`) holds the owner's task skills and the segments already
distilled. A state created in this run is hydrated from the store, and segments whose ids are
already recorded on a stored skill are skipped: running the same input twice changes nothing.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np

from skillstream.distill.consolidate import SEEN, duplicate_of, fold_targets, merge, survivor_first
from skillstream.distill.draft import Draft, apply_draft
from skillstream.distill.grounding import GROUNDING, concrete_tokens, invented, skill_text
from skillstream.distill.heuristics import procedural_steps
from skillstream.distill.package import redact_skill
from skillstream.distill.recall import RecallHit, recall
from skillstream.distill.record import ConversationBlock, TaskSegment, TaskSkill, TaskSkillResult
from skillstream.distill.trust import LIVE, TrustRules, born, count_outcome, outcome_of, promote
from skillstream.embed import Embed
from skillstream.errors import TerminalError
from skillstream.model import LLMCall
from skillstream.vocab import TaskSkillStatus

log = logging.getLogger(__name__)

Hydrate = Callable[[str], list[TaskSkill]]


class Distiller(Protocol):
    """What the orchestrator needs from a distiller (``heuristics.HeuristicDistiller``,
    ``llm.LLMDistiller``)."""

    name: str

    def chunk(self, block: ConversationBlock) -> tuple[list[TaskSegment], list[LLMCall]]: ...

    def propose(
        self, segment: TaskSegment, recall: Callable[[str], list[RecallHit]]
    ) -> tuple[Draft | None, list[LLMCall]]: ...

    def details(self, skill: TaskSkill) -> tuple[TaskSkill, list[LLMCall]]: ...


class PackagePublisher(Protocol):
    """Publishes a task skill's package (``services.publishing.Publisher`` is one)."""

    def publish(self, skill: TaskSkill) -> str:
        """Write the package and return its URL."""
        ...


class CachedEmbed:
    """An embedding function with a bounded memo, so a text is embedded once.

    ``prime`` embeds many texts in large batches ahead of time (what a batch job does before a
    sequential pass that would otherwise embed them one by one).
    """

    def __init__(self, embed: Embed, size: int = 20_000) -> None:
        self.embed = embed
        self.size = size
        self._memo: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing:
            self.prime(missing)
        with self._lock:
            rows = []
            for t in texts:
                v = self._memo.get(t)
                if v is None:  # evicted meanwhile: embed it alone
                    v = np.asarray(self.embed([t])[0], dtype=np.float32)
                rows.append(v)
        return np.stack(rows) if rows else np.zeros((0, 0), dtype=np.float32)

    def prime(self, texts: Sequence[str], batch: int = 256) -> None:
        todo = list(dict.fromkeys(t for t in texts if t not in self._memo))
        for i in range(0, len(todo), batch):
            chunk = todo[i : i + batch]
            vecs = np.asarray(self.embed(chunk), dtype=np.float32)
            with self._lock:
                for t, v in zip(chunk, vecs):
                    self._memo[t] = v
                while len(self._memo) > self.size:
                    self._memo.popitem(last=False)


@dataclass
class OwnerTaskSkills:
    """Distillation state of one owner: task skills by id and the segments already distilled."""

    owner_id: str
    skills: dict[str, TaskSkill] = field(default_factory=dict)
    segments: set[str] = field(default_factory=set)
    run_id: str = ""

    def copy(self) -> OwnerTaskSkills:
        return OwnerTaskSkills(
            self.owner_id,
            {k: v.copy() for k, v in self.skills.items()},
            set(self.segments),
            self.run_id,
        )

    def names(self) -> set[str]:
        return {s.name for s in self.skills.values()}

    def put(self, skill: TaskSkill) -> None:
        self.skills[skill.id] = skill
        self.segments.update(skill.source_segment_ids)


class TaskSkillDistiller:
    """Turns conversation blocks into task-skill results for one owner at a time.

    Args:
        distiller: The rules or LLM distiller.
        embed: Texts to unit vectors (wrapped in a :class:`CachedEmbed`).
        publisher: Publishes a task skill's package and returns its URL; ``None`` publishes
            nothing (the URL stays empty).
        hydrate: Reads an owner's stored task skills when its state is first created.
        full: Full mode (scripts, tools, references).
        min_steps: The gate: procedural sentences a segment needs (0 turns the gate off).
        recall_k: Related task skills recalled per segment.
        consolidate_threshold: Fit at which two task skills of an owner are merged (above 1:
            never).
        clock: Current time (tests pass a fixed one).
        run_id: Identifies states created by this distiller (restored states carry another).
        trust: Probation and reliability rules (``distill.trust``).
    """

    def __init__(
        self,
        distiller: Distiller,
        embed: Embed,
        *,
        publisher: PackagePublisher | None = None,
        hydrate: Hydrate | None = None,
        full: bool = False,
        min_steps: int = 2,
        recall_k: int = 5,
        consolidate_threshold: float = 0.55,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        run_id: str = "",
        trust: TrustRules | None = None,
    ) -> None:
        self.trust = trust or TrustRules()
        self.distiller = distiller
        self.embed = embed if isinstance(embed, CachedEmbed) else CachedEmbed(embed)
        self.publisher = publisher
        self.hydrate = hydrate
        self.full = full
        self.min_steps = min_steps
        self.recall_k = recall_k
        self.consolidate_threshold = consolidate_threshold
        self.clock = clock
        self.run_id = run_id

    # ------------------------------------------------------------------ state
    def new_state(self, owner_id: str) -> OwnerTaskSkills:
        """A fresh state, hydrated with the owner's stored task skills when a reader is set."""
        state = OwnerTaskSkills(owner_id, run_id=self.run_id)
        if self.hydrate is not None:
            for skill in self.hydrate(owner_id):
                state.put(skill)
        return state

    # ------------------------------------------------------------------ work
    def distill_block(
        self, state: OwnerTaskSkills, block: ConversationBlock
    ) -> list[TaskSkillResult]:
        """Distil one block into results (one per task segment that was not skipped)."""
        try:
            segments, calls = self.distiller.chunk(block)
        except TerminalError as e:
            calls = list(getattr(e, "calls", []))
            return [
                TaskSkillResult(
                    block.owner_id,
                    "failed",
                    conversation_id=block.conversation_id,
                    llm_calls=calls,
                    error=str(e),
                )
            ]
        results: list[TaskSkillResult] = []
        for seg in segments:
            result = self.distill_segment(state, seg)
            results.append(result)
            if result.changed and result.skill is not None:
                results.extend(self.consolidate(state, result.skill))
                results.extend(self.fold(state))
        if calls:
            if results:
                results[0].llm_calls = calls + results[0].llm_calls
            else:
                results.append(
                    TaskSkillResult(
                        block.owner_id,
                        "gated",
                        conversation_id=block.conversation_id,
                        llm_calls=calls,
                    )
                )
        return results

    def distill_segment(self, state: OwnerTaskSkills, segment: TaskSegment) -> TaskSkillResult:
        """Distil one task segment against the owner's task skills (mutates ``state``)."""
        base: dict[str, Any] = dict(
            owner_id=segment.owner_id,
            segment_id=segment.segment_id,
            conversation_id=segment.conversation_id,
        )
        if segment.segment_id in state.segments or segment.unowned_id in state.segments:
            return TaskSkillResult(action="skipped", **base)
        if self.min_steps and procedural_steps(segment) < self.min_steps:
            return TaskSkillResult(action="gated", **base)
        recalled: dict[str, RecallHit] = {}

        def recall_for(query: str, request: str = "") -> list[RecallHit]:
            vecs = self.embed([query, request] if request else [query])
            hits = recall(
                query,
                vecs[0],
                list(state.skills.values()),
                k=self.recall_k,
                statuses=LIVE,
                request=vecs[1] if request else None,
            )
            recalled.update((h.skill.id, h) for h in hits)
            return hits

        calls: list[LLMCall] = []
        try:
            draft, calls = self.distiller.propose(segment, recall_for)
        except TerminalError as e:
            return TaskSkillResult(
                action="failed", llm_calls=list(getattr(e, "calls", [])), error=str(e), **base
            )
        if draft is None:
            return TaskSkillResult(action="gated", llm_calls=calls, **base)
        if draft.update_of and draft.update_of not in recalled:
            log.info(
                "draft for %s names %s, which was not recalled: distilled as a new task skill",
                segment.segment_id,
                draft.update_of,
            )
            draft.update_of = None
        existing = state.skills.get(draft.update_of) if draft.update_of else None
        skill = apply_draft(
            draft,
            existing,
            owner_id=state.owner_id,
            taken_names=state.names(),
            now=self.clock(),
            segment_id=segment.segment_id,
            conversation_id=segment.conversation_id,
            distiller=self.distiller.name,
        )
        if self.full:
            try:
                skill, more = self.distiller.details(skill)
                calls = calls + more
            except TerminalError as e:  # the skill stands without its details
                calls = calls + list(getattr(e, "calls", []))
                log.warning("full-mode details for task skill %s failed: %s", skill.name, e)
        made_up = self.unsourced(skill, existing, segment)
        if made_up and existing is not None:  # an update may not bring in made-up tokens
            log.info(
                "update of task skill %s from %s refused: %s not in its sources",
                existing.name,
                segment.segment_id,
                ", ".join(made_up),
            )
            return TaskSkillResult(
                action="ungrounded",
                llm_calls=calls,
                reason=f"update of {existing.name} refused, not in its sources: "
                + ", ".join(made_up),
                invented=made_up,
                **base,
            )
        skill.stats[SEEN] = len(state.segments) + 1
        reasons = self.judge(skill, existing, segment)
        skill = self.finish(skill)
        state.put(skill)
        action = "updated" if existing is not None else "created"
        return TaskSkillResult(
            action=action,
            skill=skill,
            llm_calls=calls,
            reason="; ".join(reasons) or None,
            invented=made_up,
            **base,
        )

    def unsourced(
        self, skill: TaskSkill, existing: TaskSkill | None, segment: TaskSegment
    ) -> list[str]:
        """The concrete tokens of a just-distilled version that neither the segment nor the
        skill's earlier version (itself checked) contains; recorded in ``stats["grounding"]``,
        which keeps a new skill a candidate (see ``distill.grounding``)."""
        sources = [m.text for m in segment.messages]
        earlier: list[str] = []
        if existing is not None:
            sources.append(skill_text(existing))
            earlier = list((existing.stats.get(GROUNDING) or {}).get("invented", []))
        made_up = invented(skill, sources)
        now = " ".join(sources[: len(segment.messages)]).lower()
        still = [t for t in earlier if t.lower() not in now and t in concrete_tokens(skill)]
        made_up = list(dict.fromkeys([*made_up, *still]))
        skill.stats = {k: v for k, v in skill.stats.items() if k != GROUNDING}
        if made_up:
            skill.stats[GROUNDING] = {"invented": made_up}
        return made_up

    def judge(
        self, skill: TaskSkill, existing: TaskSkill | None, segment: TaskSegment | None = None
    ) -> list[str]:
        """Set the state of a just-distilled version (probation, promotion, outcomes carried by
        the segment's messages), in place; returns the reasons of its changes of state."""
        reasons: list[str] = []
        old = existing.status if existing is not None else None
        held = (skill.stats.get(GROUNDING) or {}).get("invented")
        if existing is None:
            skill.status = TaskSkillStatus.CANDIDATE if held else born(skill, self.trust)
            reasons.append(f"new: {skill.status}")
            if held:
                reasons.append("not in its sources: " + ", ".join(held))
        elif held:
            pass  # a candidate whose draft named made-up tokens stays one
        else:
            step = promote(skill, self.trust)
            if step is not None:
                skill.status = step[0]
                reasons.append(f"{old} -> {step[0]}: {step[1]}")
        for m in segment.messages if segment is not None else ():
            success = outcome_of(m.metadata)
            if success is None:
                continue
            change = count_outcome(
                skill, success, self.trust, self.clock(), f"message {m.message_id}"
            )
            if change is not None:
                reasons.append(f"{change.old} -> {change.new}: {change.reason}")
        return reasons

    def consolidate(self, state: OwnerTaskSkills, skill: TaskSkill) -> list[TaskSkillResult]:
        """Merge ``skill`` with the owner's task skills it duplicates (mutates ``state``).

        Returns:
            Two ``merged`` results per merge: the survivor's new (published) version and the
            absorbed skill's archived one.
        """
        out: list[TaskSkillResult] = []
        current = skill
        for _ in range(len(state.skills)):
            dup = duplicate_of(
                current,
                list(state.skills.values()),
                threshold=self.consolidate_threshold,
                k=self.recall_k,
            )
            if dup is None:
                break
            kept, gone = self._merge(state, *survivor_first(current, dup))
            log.info("task skill %s merged into %s", gone.name, kept.name)
            out += [
                TaskSkillResult(state.owner_id, "merged", skill=kept),
                TaskSkillResult(state.owner_id, "merged", skill=gone),
            ]
            current = kept
        return out

    def fold(self, state: OwnerTaskSkills) -> list[TaskSkillResult]:
        """Fold the owner's young task skills that are due into their nearest established ones (see
        ``consolidate.fold_targets``; mutates ``state``).

        Returns:
            Two ``merged`` results per fold, as :meth:`consolidate`.
        """
        out: list[TaskSkillResult] = []
        for young, target in fold_targets(list(state.skills.values()), len(state.segments)):
            kept, gone = self._merge(state, state.skills[target.id], young)
            log.info("young task skill %s folded into %s", gone.name, kept.name)
            out += [
                TaskSkillResult(state.owner_id, "merged", skill=kept),
                TaskSkillResult(state.owner_id, "merged", skill=gone),
            ]
        return out

    def _merge(
        self, state: OwnerTaskSkills, survivor: TaskSkill, absorbed: TaskSkill
    ) -> tuple[TaskSkill, TaskSkill]:
        """Merge two skills, publish the survivor's new version and record both in ``state``."""
        kept, gone = merge(survivor, absorbed, now=self.clock())
        self.judge(kept, survivor)
        kept = self.finish(kept)
        state.put(kept)
        state.put(gone)
        return kept, gone

    def finish(self, skill: TaskSkill) -> TaskSkill:
        """Redact, embed and publish a task-skill version (also used by the API); a candidate is
        not published (its package comes with the version that makes it active)."""
        skill = redact_skill(skill)
        skill.vector = [float(x) for x in self.embed([skill.search_text()])[0]]
        if self.publisher is not None and skill.status != TaskSkillStatus.CANDIDATE:
            skill.package_url = self.publisher.publish(skill)
        return skill
