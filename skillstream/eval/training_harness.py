"""The harness that trains and compares memory-skill controllers on chat-log files
(``memory-skills train`` and ``evolve``).

The training itself (``RolloutController``, ``Trainer``, PPO, the rewards and the budget) is core,
in ``skillstream.memskill``. This module is what it needs around it and core may not import: it
reads the files through the connectors, builds each episode with the pipeline of the services,
scores LoCoMo answers with the evaluation's scoring, and keeps resumable state and checkpoints in
the home's artifact store.

A conversation of the file is one training episode: its spans go through the pipeline of the
settings (the configured executor; the offline ``rules`` one by default) from an empty memory, the
controller being trained chooses the memory skills of each span, and the reward scores the memories
the conversation ended with (``skillstream.memskill.rewards``):

* ``evidence``: the LoCoMo questions of the conversation and their evidence turns;
* ``unlabelled``: later turns that refer back to earlier sessions, found without labels.

The validation conversations are then built once per policy, without exploration: ``all`` (every
skill), ``random`` (K skills drawn uniformly, seeded), ``untrained`` (the cosine controller of the
flow) and ``trained`` (the new scorer). Each gets ``recall@10`` of the file's questions (evidence
reward) or of the unlabelled queries, over the conversation's live memories ranked by cosine with
the question, and ``memories``, the number of live memories stored. The search here is the plain
cosine ranking the reward uses, not the hybrid searcher of ``eval locomo``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from skillstream.embed import Pending
from skillstream.errors import ConfigError, InputError
from skillstream.extract import Controller, Executor, MemorySkill
from skillstream.memskill.budget import MemoryBudget, marginal_price, pick
from skillstream.memskill.controller import (
    COSINE_TEMPERATURE,
    CosineScorer,
    TopKController,
    save_scorer,
)
from skillstream.memskill.ppo import PPOConfig, Step
from skillstream.memskill.rewards import (
    Query,
    answer_score,
    score,
    step_rewards,
    unlabelled_queries,
)
from skillstream.memskill.train import (
    CachedEmbed,
    EverySkill,
    RandomK,
    RolloutController,
    Trainer,
    average_weights,
    finish_episode,
)
from skillstream.model import Memory, Message, Span
from skillstream.settings import Settings
from skillstream.spans import SpanBuilder, SpanState

REWARDS = ("evidence", "unlabelled", "qa")
RECALL_K = 10


def carried_bank(skills: Sequence[MemorySkill]) -> str:
    """The checkpoint's ``bank``: JSON rows of the skills trained with that are not built in (the
    primitives and the rules categories are named in ``skills`` only), so that wherever the
    checkpoint is used it selects from the bank it was trained on (``checkpoint_bank``)."""
    from skillstream.memskill.seeds import PRIMITIVES
    from skillstream.memskill.versions import skill_row
    from skillstream.rules.skills import RULE_SKILLS

    builtin = set(PRIMITIVES) | set(RULE_SKILLS)
    rows = [skill_row(s) for s in skills if s not in builtin]
    return json.dumps(rows, ensure_ascii=False) if rows else ""


def validation_meta(val: dict[str, dict[str, float]], convs: Sequence[Conversation]) -> str:
    """The checkpoint's ``validation``: the trained controller's figures on the validation
    conversations next to the default's (every skill selected), which ``memory-skills activate``
    compares; empty without validation conversations."""
    if not convs or "trained" not in val or "all" not in val:
        return ""
    figures = {
        "conversations": [c.conversation_id for c in convs],
        "trained": val["trained"],
        "default": val["all"],
    }
    return json.dumps(figures)


@dataclass
class Conversation:
    """One conversation of the data: its messages, spans and reward queries."""

    conversation_id: str
    owner_id: str
    messages: list[Message]
    spans: list[Span]
    queries: list[Query]


class _Embedder:
    """The ``Embedder`` shape ``build_pipeline`` wants, over a cached embedding function."""

    def __init__(self, encode: CachedEmbed, dim: int) -> None:
        self.encode = encode
        self.dim = dim

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]

    def encode_query(self, text: str) -> np.ndarray:
        return self.encode_one(text)

    def submit(self, texts: Sequence[str]) -> Pending:
        return Pending.of(np.asarray(self.encode(texts), dtype=np.float32))


def load_conversations(
    path: str | Path, fmt: str, settings: Settings, embed: CachedEmbed, reward: str
) -> list[Conversation]:
    """The conversations of a chat-log file, cut into spans, with their reward queries.

    Raises:
        InputError: an unreadable file, or the evidence reward on data without questions.
    """
    from skillstream.connectors.files import FileSource, read_all
    from skillstream.tokens import get_counter

    if reward not in REWARDS:
        raise InputError(f"--reward must be one of {REWARDS}, got {reward!r}")
    source = FileSource(str(path), format=fmt, max_chars=settings.spans.max_message_chars)
    by_conv: dict[str, list[Message]] = {}
    for item in read_all(source):
        if isinstance(item, Message):
            by_conv.setdefault(item.conversation_id, []).append(item)
    qa = _locomo_questions(path) if reward in ("evidence", "qa") else {}
    if reward in ("evidence", "qa") and not qa:
        raise InputError(
            f"{str(path)!r} holds no LoCoMo questions; use --reward unlabelled for plain chat logs"
        )
    counter = get_counter(settings.embedding.model)
    out = []
    for cid, msgs in by_conv.items():
        builder = SpanBuilder(counter.count, settings.spans.span_tokens, settings.spans.idle_gap)
        state = SpanState()
        spans: list[Span] = []
        for m in msgs:
            spans.extend(builder.add(state, m))
        spans.extend(builder.flush(state))
        if reward in ("evidence", "qa"):
            questions = qa.get(cid, [])
            vecs = embed([q for q, _, _ in questions]) if questions else np.zeros((0, 0))
            queries = [Query(q, ev, v, answer=a) for (q, ev, a), v in zip(questions, vecs)]
        else:
            vecs = embed([m.text for m in msgs])
            queries = unlabelled_queries(msgs, vecs)
        out.append(Conversation(cid, msgs[0].owner_id, msgs, spans, queries))
    return out


def _locomo_questions(
    path: str | Path,
) -> dict[str, list[tuple[str, tuple[str, ...], str | None]]]:
    from skillstream.connectors.locomo import load_locomo, load_locomo_qa, sample_records
    from skillstream.eval.scoring import clean_evidence

    try:
        samples = load_locomo(path)
    except InputError:
        return {}
    qas = load_locomo_qa(path)
    out: dict[str, list[tuple[str, tuple[str, ...], str | None]]] = {}
    for sample in samples:
        sid = str(sample["sample_id"])
        known = {
            str(r["message_id"])
            for r in sample_records(sample)
            if isinstance(r, dict) and r.get("message_id")
        }
        for qa in qas.get(sid, []):
            kept, _ = clean_evidence(qa.evidence, known)
            if kept and qa.category != 5:
                out.setdefault(sid, []).append((qa.question, tuple(kept), qa.answer))
    return out


@dataclass
class BuildResult:
    """The memories one conversation ended with, and the recorded steps of a rollout."""

    memories: list[Memory]
    steps: list[Step]


def build(
    conv: Conversation,
    settings: Settings,
    embedder: _Embedder,
    executor: Executor,
    skills: Sequence[MemorySkill],
    controller: Controller,
    observe: Callable[..., None] | None = None,
) -> list[Memory]:
    """Run one conversation through a fresh pipeline; its live memories at the end."""
    from skillstream.services.pipeline import build_pipeline

    pipe = build_pipeline(
        settings,
        embedder,  # type: ignore[arg-type]
        executor=executor,
        memory_skills=list(skills),
        maintenance=False,
    )
    pipe.controller = controller
    pipe.observe = observe
    state = pipe.new_state(conv.owner_id)
    pipe.process_owner(state, conv.spans)
    return state.memories.live()


class ConversationEpisode:
    """A conversation as a training episode (``skillstream.memskill.train.Episode``)."""

    def __init__(
        self,
        conv: Conversation,
        settings: Settings,
        embedder: _Embedder,
        executor: Executor,
        skills: Sequence[MemorySkill],
        memory_cost: float,
        token_cost: float,
        grader: Any = None,
    ) -> None:
        self.name = conv.conversation_id
        self.grader = grader
        """A ``QAGrader`` for the ``qa`` reward (``None``: evidence recall)."""
        self.conv = conv
        self.settings = settings
        self.embedder = embedder
        self.executor = executor
        self.skills = list(skills)
        self.memory_cost = memory_cost
        self.token_cost = token_cost
        self.scores: list[tuple[Query, float]] = []
        """Each query's recall in the last rollout (for the designer's hard-case buffer)."""
        self.cited: set[str] = set()
        """The message ids the memories of the last rollout cite (for the offline designer)."""

    def run(self, controller: RolloutController) -> tuple[list[Step], dict[str, float]]:
        start = len(controller.steps)
        mems = build(
            self.conv,
            self.settings,
            self.embedder,
            self.executor,
            self.skills,
            controller,
            controller.observe,
        )
        steps = [s for s in controller.steps[start:] if s.info and "span" in s.info]
        result = score(mems, self.conv.queries, RECALL_K)
        figures = {"recall": result.recall, "memories": float(len(mems))}
        if self.grader is not None:
            result = answer_score(mems, self.conv.queries, self.answer_f1, RECALL_K)
            figures["f1"] = result.recall
        self.scores = result.per_query
        self.cited = {i for m in mems for i in m.source_message_ids}
        infos = [s.info or {} for s in steps]
        rewards = step_rewards(
            len(steps),
            [i.get("written", []) for i in infos],
            [int(i.get("inserted", 0)) for i in infos],
            [int(i.get("tokens", 0)) for i in infos],
            result,
            memory_cost=self.memory_cost,
            token_cost=self.token_cost,
        )
        return finish_episode(steps, rewards), figures

    def answer_f1(self, query: Query, memories: list[Memory]) -> float:
        """The grader's answer to ``query`` from ``memories``, scored by token F1 (0 on failure)."""
        from skillstream.eval.scoring import token_f1
        from skillstream.llm import LLMFailure

        hits = [{"text": m.text, "event_ts": m.event_ts} for m in memories]
        try:
            answer, _ = self.grader.answer(query.text, hits)
        except LLMFailure:
            return 0.0
        return token_f1(answer, query.answer or "")


def compare(
    convs: Sequence[Conversation],
    settings: Settings,
    embedder: _Embedder,
    executor: Executor,
    skills: Sequence[MemorySkill],
    controllers: dict[str, Controller],
) -> dict[str, dict[str, float]]:
    """``recall@10`` and ``memories`` of each controller on ``convs`` (summed memories, mean
    recall over every query of every conversation)."""
    out = {}
    for name, ctrl in controllers.items():
        recalls: list[float] = []
        n_mem = 0
        for conv in convs:
            mems = build(conv, settings, embedder, executor, skills, ctrl)
            n_mem += len(mems)
            r = score(mems, conv.queries, RECALL_K)
            recalls.extend([r.recall] * r.queries)
        out[name] = {
            f"recall@{RECALL_K}": round(float(np.mean(recalls)) if recalls else 0.0, 4),
            "memories": n_mem,
        }
    return out


@dataclass
class TrainOptions:
    """What ``memory-skills train`` was asked for."""

    data: str
    fmt: str = "locomo"
    reward: str = "evidence"
    train: tuple[str, ...] = ()
    val: tuple[str, ...] = ()
    k: int = 3
    updates: int = 30
    seed: int = 0
    memory_cost: float = 0.0
    token_cost: float = 0.0
    lr: float = 1e-3
    episodes_per_update: int = 4
    budget: str = "cosine"
    """``cosine`` (the cosine controller's memories per span on the training conversations), a
    number of memories per span, or ``none`` (only the fixed ``memory_cost``)."""
    prior: float = COSINE_TEMPERATURE
    """Cosine prior temperature of the fresh network (0: a network without the prior)."""
    correction: str = "skill"
    """What the fresh network's learned correction sees: ``skill`` (the skill's description only,
    the same for every span) or ``state`` (the span's state too; see ``scorer_net``)."""
    select_every: int = 1
    """Evaluate the deterministic policy on the training conversations every this many updates and
    keep the best checkpoint within the budget (0: keep the last weights)."""
    runs: int = 1
    """Independent runs (seeds ``seed`` on) whose chosen checkpoints are averaged."""
    dual_step: float = 2.0

    def key(self, skills: Sequence[MemorySkill]) -> str:
        """What a resumable run's state is filed under: every option and the bank."""
        import hashlib

        text = json.dumps(
            [
                {k: v for k, v in vars(self).items() if k != "runs"},  # each run has its own
                [(s.name, s.version, s.description, s.instruction) for s in skills],
                str(Path(self.data).resolve()),
            ],
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def parse_budget(value: str) -> float | str | None:
    """``--budget``: ``cosine``, ``none`` or a positive number of memories per span.

    Raises:
        ConfigError: anything else.
    """
    v = value.strip().lower()
    if v in ("cosine", "none"):
        return None if v == "none" else "cosine"
    try:
        n = float(v)
    except ValueError:
        n = float("nan")
    if not n > 0 or n == float("inf"):
        raise ConfigError(
            f"--budget must be 'cosine', 'none' or a positive number of memories per span, got "
            f"{value!r}"
        )
    return n


def split(
    convs: Sequence[Conversation], train: Sequence[str], val: Sequence[str]
) -> tuple[list[Conversation], list[Conversation]]:
    """The training and validation conversations (default: the last third validates)."""
    ids = [c.conversation_id for c in convs]
    unknown = sorted((set(train) | set(val)) - set(ids))
    if unknown:
        raise InputError(f"--train/--val name conversations not in the data: {unknown}")
    if not train and not val:
        n_val = max(1, len(convs) // 3) if len(convs) > 1 else 0
        return list(convs[: len(convs) - n_val]), list(convs[len(convs) - n_val :])
    tr = [c for c in convs if c.conversation_id in set(train)] if train else []
    va = [c for c in convs if c.conversation_id in set(val)] if val else []
    if not tr:
        tr = [c for c in convs if c.conversation_id not in set(val)]
    if not va:
        va = [c for c in convs if c.conversation_id not in set(train)]
    if not tr:
        raise InputError("no training conversations left after --val")
    return tr, va


def _figures(
    convs: Sequence[Conversation],
    settings: Settings,
    embedder: _Embedder,
    executor: Executor,
    skills: Sequence[MemorySkill],
    controller: Controller,
) -> tuple[float, int, int]:
    """(recall@10, memories, spans) of one deterministic controller on ``convs``."""
    got = compare(convs, settings, embedder, executor, skills, {"c": controller})["c"]
    return float(got[f"recall@{RECALL_K}"]), int(got["memories"]), sum(len(c.spans) for c in convs)


class RunState:
    """Where a resumable run keeps its state: ``memskill/<kind>/<key>/`` in the artifact store."""

    def __init__(self, settings: Settings, kind: str, key: str) -> None:
        from skillstream.storage.artifacts import ArtifactStore

        self.store = ArtifactStore(settings.storage.artifacts, settings.storage.storage_options)
        self.prefix = f"memskill/{kind}/{key}"

    def put(self, name: str, data: Any) -> str:
        """``torch.save`` ``data`` as ``name`` (written whole, then replacing the old one)."""
        import io

        import torch

        buf = io.BytesIO()
        torch.save(data, buf)
        return self.store.put(f"{self.prefix}/{name}", buf.getvalue())

    def get(self, name: str) -> Any | None:
        import io

        import torch

        rel = f"{self.prefix}/{name}"
        if not self.store.exists(rel):
            return None
        return torch.load(io.BytesIO(self.store.get(rel)), map_location="cpu", weights_only=True)

    def save_trainer(self, trainer: Trainer, name: str = "trainer.pt", **extra: Any) -> str:
        tensors, meta = trainer.state()
        return self.put(name, {**tensors, "meta": json.dumps({**meta, **extra})})

    def load_trainer(self, trainer: Trainer, name: str = "trainer.pt") -> dict[str, Any] | None:
        """Load ``trainer`` from the saved state; the saved JSON, or ``None`` when there is none."""
        data = self.get(name)
        if data is None:
            return None
        meta = json.loads(data["meta"])
        trainer.load_state(data, meta)
        return meta


def store_checkpoint(settings: Settings, path: str | Path) -> str:
    """Copy a checkpoint into the artifact store as ``controllers/<version>.pt``; its URL."""
    from skillstream.memskill.controller import checkpoint_version
    from skillstream.storage.artifacts import ArtifactStore

    store = ArtifactStore(settings.storage.artifacts, settings.storage.storage_options)
    rel = f"controllers/{checkpoint_version(path)}.pt"
    return store.put(rel, Path(path).read_bytes())


def train_controller(
    opts: TrainOptions,
    settings: Settings,
    embedder: Any,
    executor: Executor,
    skills: Sequence[MemorySkill],
    out: str | Path,
    *,
    on_update: Callable[[dict[str, float]], None] | None = None,
    curve_dir: str | Path | None = None,
    resume: bool = True,
    stop_after: int | None = None,
    grader: Any = None,
) -> dict[str, Any]:
    """Train a scorer, save it at ``out`` and compare the policies on the validation set.

    With a budget (``opts.budget``) each inserted memory pays the budget's price, adapted by dual
    ascent, and the checkpoint kept is the best one within the budget on the training
    conversations (``skillstream.memskill.budget``). The trainer's state is saved in the artifact
    store after every update; with ``resume`` a run with the same options continues from it.

    With ``opts.runs`` above 1, that many independent runs are trained (seeds ``seed`` to
    ``seed + runs - 1``) and the scorer kept is the average of their chosen checkpoints, when it is
    within the budget on the training conversations and recalls at least what the untrained
    controller does there; otherwise the best single one (``pick``). A run's choice depends on its
    one trajectory; the average of several is what they agree on (for the skill correction, one
    logit per skill, it is the average of their logits).

    Args:
        stop_after: Stop after this many updates in total, without validating (an interrupted run).
        grader: A ``QAGrader`` answering with an LLM, for the ``qa`` reward (required by it).

    Returns:
        The report (the ``--json`` contract): ``val`` with ``all``, ``random``, ``untrained``,
        ``trained`` (each ``recall@10`` and ``memories``), ``seconds``, ``curve`` and the options.
        An interrupted run (``stop_after``) returns only ``updates`` and ``interrupted``.
    """
    t0 = time.perf_counter()
    embed = CachedEmbed(embedder.encode)
    emb = _Embedder(embed, int(embedder.dim))
    convs = load_conversations(opts.data, opts.fmt, settings, embed, opts.reward)
    tr, va = split(convs, opts.train, opts.val)
    if opts.reward == "qa" and grader is None:
        raise ConfigError("the qa reward needs an LLM to answer the questions (--llm openai)")
    fusion = settings.extraction.memory_skill_fusion
    runs: list[_Run] = []
    for r in range(max(1, opts.runs)):
        one = dataclasses.replace(opts, seed=opts.seed + r, runs=1)
        run = _train_run(
            one, settings, embed, emb, executor, skills, tr, on_update, resume, stop_after, grader
        )
        if run is None:
            return {"updates": stop_after, "interrupted": True}
        runs.append(run)
    first = runs[0]
    trainer = first.trainer
    averaged: tuple[float, int, int] | None = None
    if len(runs) > 1:
        trainer.net.load_state_dict(average_weights([run.weights for run in runs]))
        averaged = _figures(
            tr,
            settings,
            emb,
            executor,
            skills,
            RolloutController(embed, trainer.net, k=opts.k, fusion=fusion, explore=False),
        )
        chosen = [run.chosen for run in runs if run.chosen is not None]
        limit = first.trainer.budget.per_span if first.trainer.budget is not None else None
        floor = first.trainer.candidates[0].recall if first.trainer.candidates else 0.0
        within = limit is None or averaged[1] <= limit * averaged[2] + 1e-9
        if not (within and averaged[0] >= floor) and chosen:
            best = pick(chosen, limit) or chosen[0]
            keep = next(run for run in runs if run.chosen is best)
            trainer.net.load_state_dict(keep.weights)
            averaged = None
    else:
        trainer.net.load_state_dict(first.weights)
    trained = RolloutController(embed, trainer.net, k=opts.k, fusion=fusion, explore=False)
    untrained_torch = RolloutController(
        embed, first.untrained, k=opts.k, fusion=fusion, explore=False
    )
    controllers: dict[str, Controller] = {
        "all": EverySkill(),
        "random": RandomK(opts.k, opts.seed),
        "untrained": TopKController(embed, CosineScorer(), k=opts.k, fusion=fusion),
        "trained": trained,
    }
    if opts.prior <= 0:
        controllers["untrained_net"] = untrained_torch
    val = compare(va, settings, emb, executor, skills, controllers)
    ckpt = save_scorer(
        trainer.net,
        out,
        k=opts.k,
        reward=opts.reward,
        seed=opts.seed,
        skills=",".join(s.name for s in skills),
        bank=carried_bank(skills),
        updates=opts.updates,
        selected_update=first.selected,
        runs=len(runs),
        curve=json.dumps(first.curve.points),
        validation=validation_meta(val, va),
    )
    stored = store_checkpoint(settings, ckpt)
    budget = trainer.budget
    report: dict[str, Any] = {
        "val": val,
        "seconds": round(time.perf_counter() - t0, 1),
        "checkpoint": str(ckpt),
        "stored": stored,
        "train_conversations": [c.conversation_id for c in tr],
        "val_conversations": [c.conversation_id for c in va],
        "reward": opts.reward,
        "k": opts.k,
        "updates": opts.updates,
        "seed": opts.seed,
        "memory_cost": opts.memory_cost,
        "budget": None
        if budget is None
        else {
            "memories_per_span": round(budget.per_span, 4),
            "final_price": budget.price,
            "source": opts.budget,
        },
        "prior": opts.prior,
        "correction": opts.correction,
        "selected_update": first.selected,
        "candidates": [vars(c) for c in first.trainer.candidates],
        "resumed_from": first.resumed,
        "skills": [s.name for s in skills],
        "curve": first.curve.points,
        "skill_rewards": first.trainer.skill_rewards,
    }
    if len(runs) > 1:
        report["runs"] = [
            {
                "seed": opts.seed + i,
                "selected_update": run.selected,
                "train": None if run.chosen is None else vars(run.chosen),
                "resumed_from": run.resumed,
            }
            for i, run in enumerate(runs)
        ]
        report["averaged"] = (
            None
            if averaged is None
            else {"recall@10": round(averaged[0], 4), "memories": averaged[1], "spans": averaged[2]}
        )
    if curve_dir is not None:
        write_curve(first.curve.points, curve_dir)
    return report


@dataclass
class _Run:
    """One training run: its trainer, the weights it chose and how it got there."""

    trainer: Trainer
    weights: dict[str, Any]
    chosen: Any
    selected: int
    curve: Any
    resumed: int | None
    untrained: Any


def _train_run(
    opts: TrainOptions,
    settings: Settings,
    embed: CachedEmbed,
    emb: _Embedder,
    executor: Executor,
    skills: Sequence[MemorySkill],
    tr: Sequence[Conversation],
    on_update: Callable[[dict[str, float]], None] | None,
    resume: bool,
    stop_after: int | None,
    grader: Any,
) -> _Run | None:
    """Train one run (resumed from its saved state, with ``resume``); ``None`` when it stopped
    after ``stop_after`` updates."""
    budget_opt = parse_budget(opts.budget)
    cfg = PPOConfig(lr=opts.lr, episodes_per_update=opts.episodes_per_update)
    fusion = settings.extraction.memory_skill_fusion
    trainer = Trainer(
        embed,
        emb.dim,
        skills,
        k=opts.k,
        fusion=fusion,
        config=cfg,
        seed=opts.seed,
        prior=opts.prior,
        correction=opts.correction,
    )
    untrained_net = _clone(trainer.net)
    episodes = [
        ConversationEpisode(
            c,
            settings,
            emb,
            executor,
            skills,
            opts.memory_cost,
            opts.token_cost,
            grader if opts.reward == "qa" else None,
        )
        for c in tr
    ]

    def evaluate(net: Any) -> tuple[float, int, int]:
        ctrl = RolloutController(embed, net, k=opts.k, fusion=fusion, explore=False)
        return _figures(tr, settings, emb, executor, skills, ctrl)

    run = RunState(settings, "train", opts.key(skills))
    resumed = run.load_trainer(trainer) if resume else None
    if resumed is None:
        cosine_train: tuple[float, int, int] | None = None
        if budget_opt is not None:
            cosine = TopKController(embed, CosineScorer(), k=opts.k, fusion=fusion)
            cosine_train = _figures(tr, settings, emb, executor, skills, cosine)
            recall, memories, spans = cosine_train
            per_span = budget_opt if isinstance(budget_opt, float) else memories / max(spans, 1)
            every = _figures(tr, settings, emb, executor, skills, EverySkill())
            price = marginal_price((recall, memories), (every[0], every[1]), len(tr))
            trainer.budget = MemoryBudget(per_span, price, opts.dual_step)
        if opts.select_every > 0:
            if opts.prior > 0 and cosine_train is not None:
                trainer.consider(lambda net: cosine_train)  # the fresh net selects as cosine does
            else:
                trainer.consider(evaluate)
        run.save_trainer(trainer)
    target = stop_after if stop_after is not None else opts.updates
    curve = trainer.fit(
        episodes,
        0,
        on_update,
        evaluate=evaluate if opts.select_every > 0 else None,
        every=opts.select_every,
        until=min(target, opts.updates),
        save=run.save_trainer,
    )
    if stop_after is not None and stop_after < opts.updates:
        return None
    weights = trainer.best_weights if trainer.best_weights is not None else trainer.net.state_dict()
    return _Run(
        trainer,
        {k: v.clone() for k, v in weights.items()},
        trainer.best,
        trainer.best.update if trainer.best is not None else opts.updates,
        curve,
        None if resumed is None else int(resumed["updates"]),
        untrained_net,
    )


def _clone(net: Any) -> Any:
    import copy

    return copy.deepcopy(net)


def _evidence_of(
    convs: Sequence[Conversation], episodes: Sequence[ConversationEpisode]
) -> Callable[[Query], list[tuple[str, bool]]]:
    """For the offline designer: a training query's evidence turns, each with its text and whether
    a memory of its conversation's last rollout cites it (message ids repeat across
    conversations: LoCoMo's ``D1:3`` is in every one, so a query is looked up with its own)."""
    conv_of = {(q.text, tuple(q.evidence)): c.conversation_id for c in convs for q in c.queries}
    texts = {(c.conversation_id, m.message_id): m.text for c in convs for m in c.messages}
    episode = {ep.name: ep for ep in episodes}

    def evidence(q: Query) -> list[tuple[str, bool]]:
        cid = conv_of.get((q.text, tuple(q.evidence)))
        if cid is None:
            return []
        cited = episode[cid].cited
        return [(texts.get((cid, e), ""), e in cited) for e in q.evidence]

    return evidence


def write_curve(points: Sequence[dict[str, float]], folder: str | Path) -> list[Path]:
    """The training curve as ``curve.json`` and ``curve.png`` in ``folder``: the rollouts' mean
    reward and recall per update, and the Top-K controller's recall at each checkpoint
    evaluation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    (d / "curve.json").write_text(json.dumps(list(points), indent=2) + "\n")
    fig, ax = plt.subplots(figsize=(6, 3.5))
    xs = [p["update"] for p in points]
    for key in ("reward", "recall"):
        if points and key in points[0]:
            ax.plot(xs, [p[key] for p in points], label=key)
    chosen = [p for p in points if "train_recall" in p]
    if chosen:  # the deterministic controller's recall at each checkpoint evaluation
        ax.plot(
            [p["update"] for p in chosen],
            [p["train_recall"] for p in chosen],
            "o--",
            label="recall, Top-K",
        )
    ax.set_xlabel("PPO update")
    ax.set_ylabel("per episode")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(d / "curve.png", dpi=100)
    plt.close(fig)
    return [d / "curve.json", d / "curve.png"]


def evolve_controller(
    opts: TrainOptions,
    settings: Settings,
    embedder: Any,
    executor: Executor,
    skills: Sequence[MemorySkill],
    designer: Any | None,
    out: str | Path,
    *,
    cycles: int = 5,
    patience: int = 2,
    on_cycle: Callable[[dict[str, Any]], None] | None = None,
    resume: bool = True,
    stop_after: int | None = None,
) -> tuple[dict[str, Any], list[MemorySkill]]:
    """Alternate PPO training (``opts.updates`` per cycle) and designer rounds.

    The validation reward of a cycle is the trained controller's mean recall@10 on the validation
    conversations minus ``opts.memory_cost`` per memory and conversation. After every cycle the
    artifact store receives its snapshot, ``memskill/evolve/<key>/cycle-<n>/controller.pt`` and
    ``bank.json``, and the run's state (``evolve.pt``); with ``resume`` the same run continues after
    its last completed cycle. ``stop_after`` ends the run after that many cycles (an interruption).
    ``designer`` ``None`` designs offline (``memskill.offline_designer``): skills by example from
    the training conversations' evidence turns that no memory of the last rollouts cites.

    Returns:
        The report (cycles, best cycle and reward, snapshots, ``seconds``) and the best bank.
    """
    import tempfile

    from skillstream.memskill.designer import EvolveReport, evolve, skill_row

    t0 = time.perf_counter()
    embed = CachedEmbed(embedder.encode)
    emb = _Embedder(embed, int(embedder.dim))
    convs = load_conversations(opts.data, opts.fmt, settings, embed, opts.reward)
    tr, va = split(convs, opts.train, opts.val)
    cfg = PPOConfig(lr=opts.lr, episodes_per_update=opts.episodes_per_update)
    fusion = settings.extraction.memory_skill_fusion
    trainer = Trainer(
        embed,
        emb.dim,
        skills,
        k=opts.k,
        fusion=fusion,
        config=cfg,
        seed=opts.seed,
        prior=opts.prior,
        correction=opts.correction,
    )
    episodes = [
        ConversationEpisode(c, settings, emb, executor, skills, opts.memory_cost, opts.token_cost)
        for c in tr
    ]
    offline = "-offline" if designer is None else ""
    run = RunState(settings, "evolve", opts.key(skills) + f"-{cycles}-{patience}{offline}")
    if designer is None:
        from skillstream.memskill.offline_designer import OfflineDesigner

        designer = OfflineDesigner(_evidence_of(tr, episodes))

    def train(t: Trainer) -> list[tuple[Query, float]]:
        t.fit(episodes, opts.updates)
        return [pair for ep in episodes for pair in ep.scores]

    def validate(t: Trainer) -> float:
        ctrl = RolloutController(embed, t.net, k=opts.k, fusion=fusion, explore=False)
        got = compare(va, settings, emb, executor, t.skills, {"trained": ctrl})["trained"]
        return got[f"recall@{RECALL_K}"] - opts.memory_cost * got["memories"] / max(len(va), 1)

    snapshots: list[str] = []

    class Interrupted(Exception):
        pass

    def cycle_done(state: dict[str, Any], report: EvolveReport) -> None:
        n = int(state["next"]) - 1
        with tempfile.TemporaryDirectory() as tmp:
            path = save_scorer(trainer.net, Path(tmp) / "c.pt", k=opts.k, cycle=n)
            url = run.store.put(f"{run.prefix}/cycle-{n}/controller.pt", path.read_bytes())
        bank = json.dumps([skill_row(s) for s in trainer.skills], indent=2).encode()
        run.store.put(f"{run.prefix}/cycle-{n}/bank.json", bank)
        snapshots.append(url)
        best = report.best.weights if report.best is not None else None
        run.save_trainer(trainer, "evolve.pt", loop=state, snapshots=snapshots)
        run.put("best.pt", {"weights": best})
        if stop_after is not None and n + 1 >= stop_after and not state.get("stopped"):
            raise Interrupted

    previous = run.get("evolve.pt") if resume else None
    loop: tuple[dict[str, Any], dict[str, Any] | None] | None = None
    if previous is not None:
        meta = json.loads(previous["meta"])
        trainer.load_state(previous, meta)
        best_saved = run.get("best.pt") or {}
        loop = (meta["loop"], best_saved.get("weights"))
        snapshots = list(meta.get("snapshots", []))
    try:
        result = evolve(
            trainer,
            designer,
            train,
            validate,
            cycles=cycles,
            patience=patience,
            seed=opts.seed,
            resume=loop,
            on_cycle=cycle_done,
        )
    except Interrupted:
        return {"interrupted": True, "cycles": len(snapshots)}, list(trainer.skills)
    best = result.best
    if best is not None:
        trainer.net.load_state_dict(best.weights)
    best_skills = list(best.skills) if best is not None else list(skills)
    final = RolloutController(embed, trainer.net, k=opts.k, fusion=fusion, explore=False)
    val = compare(va, settings, emb, executor, best_skills, {"all": EverySkill(), "trained": final})
    save_scorer(
        trainer.net,
        out,
        k=opts.k,
        reward=opts.reward,
        seed=opts.seed,
        skills=",".join(s.name for s in best_skills),
        bank=carried_bank(best_skills),
        updates=trainer.updates,
        curve=json.dumps(trainer.curve.points),
        validation=validation_meta(val, va),
    )
    stored = store_checkpoint(settings, out)
    for row in result.cycles:
        if on_cycle is not None:
            on_cycle(row)
    report = {
        "cycles": result.cycles,
        "best_cycle": best.cycle if best else None,
        "best_reward": best.reward if best else None,
        "skills": [s.name for s in best_skills],
        "val": val,
        "checkpoint": str(out),
        "stored": stored,
        "snapshots": snapshots,
        "resumed_from": None if loop is None else int(loop[0]["next"]),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    return report, best_skills
