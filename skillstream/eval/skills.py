"""Task-skill evaluation on STAR dialogues (``skillstream eval skills PATH``).

Single-task dialogues only. For each task, its dialogues (in file order) are split: the first 70%
are distilled, in dialogue-id order, into the task skills of one owner; for each of the rest, the
top task skill is recalled. Reported:

* ``skills``: task skills distilled (active at the end);
* ``tasks``: distinct tasks among the dialogues;
* ``purity``: the share of a task skill's source dialogues that belong to its majority task,
  averaged over task skills weighted by their number of source dialogues;
* ``recall@1``: the share of held-out dialogues whose top recalled task skill's majority task is
  the dialogue's own task (no hit counts as a miss);
* ``no_skill_dialogues``: held-out dialogues whose task is the majority task of no served skill
  (none of its training dialogues stated a procedure, or it is still on probation), which
  ``recall@1`` counts as misses whatever recall does; ``recall@1_with_skill`` the share over the
  others;
* ``llm_calls``: LLM requests made while distilling (0 with the ``rules`` backend);
* ``candidates``: task skills still on probation at the end (not served, not counted in
  ``skills``);
* ``step_recall``: whether the skill would have helped: for each held-out dialogue that states
  steps, the share of its assistant's steps (in order) that the recalled skill's procedure covers
  (``distill.coverage.step_recall``), averaged; ``baseline_step_recall`` the same with the steps
  of the single most similar distilled dialogue (cosine of the same query) in place of a skill,
  and ``no_skill_step_recall`` with no procedure at all (0 by construction: the floor);
* ``grounded_share``: share of served skills whose commands, paths, URLs, file names and tool
  names all appear in their source dialogues (``distill.grounding``), ``concrete_tokens`` how many
  such tokens the served skills name; ``invented_tokens`` the tokens the grounding check found in
  drafts before it held them back.

The recall query for a held-out dialogue is what the distiller itself would search with: the
offline draft's name, description and triggers (no LLM call), or the user's turns when the
dialogue states no step, together with the user's request (``segment.request_text``). Recall is
the distiller's own hybrid search (vector, BM25 and prototypes, RRF-fused).
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from skillstream.connectors.star import load_star_dialogues
from skillstream.distill.coverage import step_recall
from skillstream.distill.distiller import CachedEmbed, OwnerTaskSkills, TaskSkillDistiller
from skillstream.distill.factory import make_distiller, trust_rules
from skillstream.distill.grounding import concrete_tokens, invented
from skillstream.distill.heuristics import draft_of
from skillstream.distill.recall import recall
from skillstream.distill.record import ConversationBlock, TaskSkillResult
from skillstream.distill.segment import request_text, segment_block
from skillstream.errors import InputError
from skillstream.model import Message
from skillstream.settings import Settings
from skillstream.vocab import TaskSkillStatus

log = logging.getLogger(__name__)

OWNER = "star"


@dataclass(frozen=True)
class Split:
    """Dialogues to distil from and dialogues to recall for, with every dialogue's task."""

    train: list[dict[str, Any]]
    test: list[dict[str, Any]]
    task_of: dict[str, str]


def split_dialogues(
    dialogues: list[dict[str, Any]],
    train_share: float = 0.7,
    per_task: int | None = None,
    share: float | None = None,
) -> Split:
    """Single-task dialogues, per task the first ``train_share`` (rounded) for distillation.

    Args:
        dialogues: As returned by ``connectors.star.load_star_dialogues``.
        train_share: Share of each task's dialogues that is distilled.
        per_task: Keep only the first ``per_task`` dialogues of each task (quick runs).
        share: Keep only the first ``share`` of each task's dialogues (rounded, at least 2): a
            shorter stream with the same mix of tasks.
    """
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for d in dialogues:
        if len(d["tasks"]) == 1 and any(t.get("text") for t in d["turns"]):
            by_task[d["tasks"][0]].append(d)
    train, test = [], []
    for task in sorted(by_task):
        items = by_task[task][:per_task] if per_task else by_task[task]
        if share is not None:
            items = items[: max(2, int(round(len(items) * share)))]
        cut = int(round(len(items) * train_share))
        train.extend(items[:cut])
        test.extend(items[cut:])
    train.sort(key=lambda d: _order(d["dialogue_id"]))
    test.sort(key=lambda d: _order(d["dialogue_id"]))
    task_of = {d["id"]: d["tasks"][0] for d in train + test}
    return Split(train, test, task_of)


def _order(dialogue_id: Any) -> tuple[int, str]:
    try:
        return int(dialogue_id), ""
    except (TypeError, ValueError):
        return 1 << 62, str(dialogue_id)


def block_of(dialogue: dict[str, Any], owner_id: str = OWNER) -> ConversationBlock:
    """A STAR dialogue as one conversation block of ``owner_id``."""
    cid = dialogue["id"]
    msgs = [
        Message(f"{cid}:{n}", cid, owner_id, cid, t["role"], t["agent"], t["text"], t["ts"])
        for n, t in enumerate(dialogue["turns"], 1)
        if t.get("text")
    ]
    return ConversationBlock.of(msgs)


def evaluate_star(
    path: str | Path,
    settings: Settings,
    *,
    embed: Callable | None = None,
    backend: Any = None,
    train_share: float = 0.7,
    per_task: int | None = None,
    share: float | None = None,
    write: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Run the evaluation (see the module docstring).

    Args:
        path: A STAR ``.jsonl`` or ``.jsonl.gz`` file.
        settings: Distillation settings (``llm``, ``distill_*``); with ``write`` also the home
            where the task skills and their packages are stored.
        embed: Texts to unit vectors (default: the settings' embedder).
        backend: An LLM backend for the LLM distiller (default: from the settings).
        train_share: Share of each task's dialogues distilled.
        per_task: Only the first dialogues of each task (quick runs).
        share: Only the first share of each task's dialogues (a shorter stream).
        write: Store the final task skills (LanceDB, DuckDB) and publish their packages.
        progress: Called with ``(done, total)`` training dialogues.

    Returns:
        ``skills``, ``tasks``, ``purity``, ``recall@1``, ``llm_calls`` and run details.
    """
    t0 = time.perf_counter()
    if embed is None:
        from skillstream.embed import get_embedder

        embed = get_embedder(settings.embedding).encode
    cached = CachedEmbed(embed)
    split = split_dialogues(load_star_dialogues(path), train_share, per_task, share)
    if not split.train or not split.test:
        raise InputError(
            f"{path}: found no single-task STAR dialogues to split for the evaluation; expected "
            "a STAR JSONL file (see connectors.star)"
        )
    distiller = make_distiller(
        settings.distillation, settings.llm, settings.storage.home, cached, backend
    )
    core = TaskSkillDistiller(
        distiller,
        cached,
        publisher=None,
        full=False,
        min_steps=settings.distillation.min_steps,
        recall_k=settings.distillation.recall_k,
        consolidate_threshold=settings.distillation.merge_threshold,
        trust=trust_rules(settings.distillation),
    )
    state = OwnerTaskSkills(OWNER)
    train_blocks = [block_of(d) for d in split.train]
    test_blocks = [block_of(d) for d in split.test]
    if distiller.name == "rules":
        _prime(cached, train_blocks + test_blocks, settings)
    t_prime = time.perf_counter() - t0

    results: list[TaskSkillResult] = []
    for i, block in enumerate(train_blocks, 1):
        results.extend(core.distill_block(state, block))
        if progress is not None:
            progress(i, len(train_blocks))
    t_distill = time.perf_counter() - t0

    skills = [s for s in state.skills.values() if s.status == TaskSkillStatus.ACTIVE]
    majority: dict[str, str] = {}
    pure = total = 0
    for s in skills:
        counts = Counter(split.task_of[c] for c in s.source_conversation_ids)
        task, n = counts.most_common(1)[0]
        majority[s.id] = task
        pure += n
        total += sum(counts.values())

    past = [(s, b) for s, b in ((dialogue_steps(b), b) for b in train_blocks) if s]
    past_vecs = cached([query_of(b, settings) for _, b in past]) if past else None
    hits = 0
    served_tasks = set(majority.values())
    no_skill = sum(1 for b in test_blocks if split.task_of[b.conversation_id] not in served_tasks)
    cover: list[tuple[float, float]] = []
    for block in test_blocks:
        query, request = query_of(block, settings), request_text(block.messages)
        vecs = cached([query, request] if request else [query])
        found = recall(query, vecs[0], skills, k=1, request=vecs[1] if request else None)
        if found and majority[found[0].skill.id] == split.task_of[block.conversation_id]:
            hits += 1
        actual = dialogue_steps(block)
        if actual:
            mine = found[0].skill.procedure if found else []
            nearest = past[int(np.argmax(past_vecs @ vecs[0]))][0] if past_vecs is not None else []
            cover.append((step_recall(actual, mine), step_recall(actual, nearest)))
    text_of = {b.conversation_id: "\n".join(m.text for m in b.messages) for b in train_blocks}
    grounded = [
        not invented(s, [text_of.get(c, "") for c in s.source_conversation_ids]) for s in skills
    ]
    made_up = [t for r in results for t in r.invented]

    if write:
        _write(settings, skills, cached)
    actions = Counter(r.action for r in results)
    calls = [c for r in results for c in r.llm_calls]
    tasks = sorted({split.task_of[d["id"]] for d in split.train + split.test})
    return {
        "skills": len(skills),
        "candidates": sum(
            1 for s in state.skills.values() if s.status == TaskSkillStatus.CANDIDATE
        ),
        "tasks": len(tasks),
        "purity": round(pure / total, 4) if total else 0.0,
        "recall@1": round(hits / len(test_blocks), 4),
        "no_skill_dialogues": no_skill,
        "recall@1_with_skill": (
            round(hits / (len(test_blocks) - no_skill), 4) if len(test_blocks) > no_skill else 0.0
        ),
        "step_recall": _mean([c[0] for c in cover]),
        "baseline_step_recall": _mean([c[1] for c in cover]),
        "no_skill_step_recall": 0.0,
        "step_dialogues": len(cover),
        "grounded_share": _mean([1.0 if g else 0.0 for g in grounded]),
        "concrete_tokens": sum(len(concrete_tokens(s)) for s in skills),
        "invented_tokens": len(made_up),
        "invented_examples": sorted(set(made_up))[:20],
        "llm_calls": len([c for c in calls if not c.cached]),
        "llm_calls_cached": len([c for c in calls if c.cached]),
        "distiller": distiller.name,
        "train_dialogues": len(train_blocks),
        "test_dialogues": len(test_blocks),
        "segments": dict(sorted(actions.items())),
        "seconds": round(time.perf_counter() - t0, 1),
        "seconds_embedding_prime": round(t_prime, 1),
        "seconds_distill": round(t_distill - t_prime, 1),
        "per_task_skills": dict(sorted(Counter(majority.values()).items())),
    }


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def dialogue_steps(block: ConversationBlock) -> list[str]:
    """The steps a dialogue states, in order (its offline draft's procedure; none when it states
    no step)."""
    for seg in segment_block(block, _no_embed, shift_threshold=-1.0):
        draft = draft_of(seg)
        if draft is not None:
            return list(draft.procedure)
    return []


def query_of(block: ConversationBlock, settings: Settings) -> str:
    """The recall query for a held-out dialogue (see the module docstring)."""
    for seg in segment_block(
        block, lambda texts: _no_embed(texts), shift_threshold=-1.0
    ):  # one segment: no embedding needed
        draft = draft_of(seg)
        if draft is not None:
            return draft.search_text()
    return " ".join(m.text for m in block.messages if m.role == "user")


def _no_embed(texts: Any) -> Any:
    import numpy as np

    return np.ones((len(texts), 1), dtype=np.float32)


def _prime(cached: CachedEmbed, blocks: list[ConversationBlock], settings: Settings) -> None:
    """Embed in large batches what the sequential pass will ask for (exchanges, queries)."""
    texts: list[str] = []
    for block in blocks:
        seen: list[list[str]] = []

        def record(t: Any, seen: list[list[str]] = seen) -> Any:
            seen.append(list(t))
            return _no_embed(t)

        segments = segment_block(
            block, record, shift_threshold=settings.distillation.shift_threshold
        )
        for batch in seen:
            texts.extend(batch)
        texts.extend(request_text(seg.messages) for seg in segments)
        texts.append(request_text(block.messages))
        for seg in segment_block(block, _no_embed, shift_threshold=-1.0):
            draft = draft_of(seg)
            if draft is not None:
                texts.append(draft.search_text())
    cached.prime(texts)


def _write(settings: Settings, skills: list, embed: Callable) -> None:
    from skillstream.distill.record import TaskSkillResult
    from skillstream.services.publishing import Publisher
    from skillstream.storage.home import open_stores
    from skillstream.storage.writer import write_results

    publisher = Publisher.from_settings(settings.storage)
    out = []
    for s in skills:
        s.package_url = publisher.publish(s)
        out.append(TaskSkillResult(s.owner_id, "created", skill=s))
    dim = len(skills[0].vector) if skills and skills[0].vector else 384
    with open_stores(settings, dim) as stores:
        write_results(stores, out)
