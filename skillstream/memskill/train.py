"""Training the controller: rollouts through the real pipeline, rewards, PPO updates.

An *episode* is one conversation built from scratch (a fresh memory per episode, as in the
reference): ``Episode.run(controller)`` pushes its spans through a ``MemoryPipeline`` whose
controller is a ``RolloutController`` and returns the recorded ``Step``s with their rewards. The
``RolloutController`` samples the skills by Gumbel-Top-K from the scorer being trained and records,
per span, the state, the selected skills in order, their joint log-probability and the critic's
value; the pipeline's ``observe`` hook adds what the executor did (operations, memories written,
LLM tokens). Nothing of this exists at inference: the flow's controller is a plain
``TopKController`` and its pipeline has no ``observe`` hook.

``Trainer.fit`` alternates ``episodes_per_update`` rollouts and one ``ppo_update`` and reports the
mean reward of each update (the training curve). With a ``MemoryBudget`` each span also pays the
budget's current price per memory it inserted, and the price follows the constraint after every
update; with an ``evaluate`` function the trainer scores its deterministic policy every few updates
and keeps the best checkpoint within the budget (``skillstream.memskill.budget``). Everything is
seeded: the same seed, data and bank give the same checkpoint, and ``state``/``load_state`` let an
interrupted run continue after its last completed update with the same result.

``RandomK`` and ``EverySkill`` are the baselines a trained controller is compared with, and
``average_weights`` merges the weights several runs chose. ``skillstream.eval.training_harness``
runs all this on chat-log files (reading them, building the episodes' pipelines, keeping state in
a home), which core may not do.
"""

from __future__ import annotations

import copy
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from skillstream.embed import Embed
from skillstream.extract import Extraction, MemorySkill
from skillstream.memskill.budget import Candidate, MemoryBudget, pick
from skillstream.memskill.controller import (
    Selection,
    TopKController,
    TorchScorer,
    controller_state,
    gumbel_top_k,
    joint_log_prob,
    scorer_net,
    top_k,
)
from skillstream.memskill.ppo import PPOConfig, Step, gae, ppo_update
from skillstream.model import Memory, Span
from skillstream.vocab import Op


class RolloutController(TopKController):
    """A Top-K controller that samples (Gumbel-Top-K) and records a ``Step`` per span.

    Args:
        embed: Embeds skill descriptions.
        net: The scorer network being trained (actor and critic).
        k: Skills per span.
        fusion: State fusion of the retrieved memories.
        seed: Seed of the sampling noise (mixed with the episode number and the span).
        explore: Sample (training) or take the plain Top-K (evaluation of the same net).
        bias: Extra logit per skill name (the designer's exploration bias toward new skills).
    """

    def __init__(
        self,
        embed: Embed,
        net: Any,
        *,
        k: int = 3,
        fusion: str = "mean",
        seed: int = 0,
        explore: bool = True,
        bias: dict[str, float] | None = None,
    ) -> None:
        super().__init__(embed, TorchScorer(net), k=k, fusion=fusion, explore=explore, seed=seed)
        self.net = net
        self.bias = dict(bias or {})
        self.steps: list[Step] = []
        self.episode = 0

    def decide(
        self,
        span_vector: np.ndarray,
        retrieved: Sequence[Memory],
        skills: Sequence[MemorySkill],
        *,
        explore: bool | None = None,
        rng: np.random.Generator | None = None,
    ) -> Selection:
        import torch

        skills = list(skills)
        state = controller_state(span_vector, retrieved, self.fusion)
        with_vec = any(m.vector is not None for m in retrieved)
        z = self.logits(state, skills, with_vec)
        bias = np.array([self.bias.get(s.name, 0.0) for s in skills], dtype=np.float64)
        z = z + bias
        if self.explore if explore is None else explore:
            key = zlib.crc32(np.asarray(span_vector, dtype=np.float32).tobytes())
            rng = rng or np.random.default_rng([self.seed, self.episode, key, len(self.steps)])
            idx = gumbel_top_k(z, self.k, rng)
        else:
            idx = top_k(z, self.k)
        with torch.no_grad():
            value = float(self.net.value(torch.from_numpy(state.astype(np.float32))))
        lp = joint_log_prob(z, idx)
        self.steps.append(
            Step(
                state=state,
                order=idx,
                mask=np.isfinite(z),
                log_prob=lp,
                value=value,
                bias=bias if bias.any() else None,
                info={"skills": [skills[i].name for i in idx]},
            )
        )
        return Selection([skills[i] for i in idx], idx, z, lp, state)

    def observe(self, span: Span, extraction: Extraction, changed: list[Memory]) -> None:
        """The pipeline's ``observe`` hook: what the executor did for the last decided span."""
        if not self.steps:
            return
        info = self.steps[-1].info
        if info is None or "span" in info:
            return  # the span's selection was not recorded (no skills or no vector)
        info["span"] = span.span_id
        info["ops"] = [op.op.value for op in extraction.ops]
        info["written"] = [m.id for m in changed]
        info["inserted"] = sum(1 for op in extraction.ops if op.op == Op.INSERT)
        info["tokens"] = sum(
            int(c.prompt_tokens or 0) + int(c.completion_tokens or 0) for c in extraction.llm_calls
        )


class CachedEmbed:
    """An ``Embed`` that remembers every text's vector: episodes repeat the same spans, statements
    and queries, so a training run embeds each distinct text once."""

    def __init__(self, embed: Embed) -> None:
        self.embed = embed
        self.cache: dict[str, np.ndarray] = {}

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if missing:
            for t, v in zip(missing, np.asarray(self.embed(missing), dtype=np.float32)):
                self.cache[t] = v
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self.cache[t] for t in texts])


class Episode(Protocol):
    """One trainable unit (a conversation): runs a controller over it and returns rewarded steps."""

    name: str

    def run(self, controller: RolloutController) -> tuple[list[Step], dict[str, float]]:
        """Steps with ``reward`` set (the last one ``done``) and the episode's figures."""
        ...


@dataclass
class Curve:
    """The training curve: one point per PPO update."""

    points: list[dict[str, float]] = field(default_factory=list)

    def add(self, **values: float) -> None:
        self.points.append({k: float(v) for k, v in values.items()})


class Trainer:
    """PPO training of a scorer over episodes (see the module docstring).

    Args:
        embed: Embeds skill descriptions (and is the state's embedder's width).
        dim: Embedding width.
        skills: The bank the controller selects from (fixed during ``fit``).
        k: Skills per span while training.
        config: PPO hyperparameters.
        seed: Seeds the network's initial weights, minibatch order and sampling noise.
        net: Continue training this network instead of a fresh one.
        prior: Cosine prior temperature of a fresh network (0: none; see ``scorer_net``).
        correction: What a fresh network's learned correction sees (``state`` or ``skill``).
        budget: Prices inserted memories by a Lagrange multiplier (``MemoryBudget``).
    """

    def __init__(
        self,
        embed: Embed,
        dim: int,
        skills: Sequence[MemorySkill],
        *,
        k: int = 3,
        fusion: str = "mean",
        config: PPOConfig | None = None,
        seed: int = 0,
        net: Any = None,
        prior: float = 0.0,
        correction: str = "state",
        budget: MemoryBudget | None = None,
    ) -> None:
        import torch

        self.config = config = config or PPOConfig()
        self.seed = seed
        self.skills = list(skills)
        self.k = k
        torch.manual_seed(seed)
        self.net = net if net is not None else scorer_net(dim, prior=prior, correction=correction)
        self.net.eval()
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=config.lr)
        self.controller = RolloutController(embed, self.net, k=k, fusion=fusion, seed=seed)
        self.rng = np.random.default_rng(seed)
        self.updates = 0
        self.curve = Curve()
        self.skill_rewards: dict[str, list[float]] = {}
        """Per skill name, the reward of every rollout step that selected it (bank statistics)."""
        self.budget = budget
        self.cursor = 0
        self.order: list[int] = []
        self.candidates: list[Candidate] = []
        """Checkpoints evaluated by ``consider`` (deterministic Top-K on the training data)."""
        self.best: Candidate | None = None
        self.best_weights: dict[str, Any] | None = None
        self.scale = 1.0
        """Rollout memories per span over the deterministic policy's, at the latest evaluation."""

    def skill_vectors(self) -> np.ndarray:
        return self.controller.skill_vectors(self.skills)

    def set_skills(self, skills: Sequence[MemorySkill], bias: dict[str, float] | None = None):
        """Change the bank (designer) and the exploration bias toward new skills."""
        self.skills = list(skills)
        self.controller.bias = dict(bias or {})

    def rollout(self, episode: Episode) -> tuple[list[Step], dict[str, float]]:
        """One exploring run of ``episode`` with the current weights."""
        self.controller.steps = []
        self.controller.explore = True
        self.controller.episode += 1
        if hasattr(episode, "skills"):
            episode.skills = list(self.skills)  # the designer may have changed the bank
        return episode.run(self.controller)

    def update(self, episodes: Sequence[Episode]) -> dict[str, float]:
        """Roll out ``episodes`` once each, then one PPO update; returns the curve point."""
        batch: list[Step] = []
        advs: list[np.ndarray] = []
        rets: list[np.ndarray] = []
        rewards: list[float] = []
        figures: dict[str, list[float]] = {}
        price = self.budget.price if self.budget is not None else 0.0
        used = spans = 0.0
        for ep in episodes:
            steps, figs = self.rollout(ep)
            if not steps:
                continue
            if self.budget is not None:
                for s in steps:
                    s.reward -= price * float((s.info or {}).get("inserted", 0))
                inserted = sum(int((s.info or {}).get("inserted", 0)) for s in steps)
                used += float(figs.get("memories", inserted))
                spans += len(steps)
            a, r = gae(
                [s.reward for s in steps],
                [s.value for s in steps],
                [s.done for s in steps],
                self.config.gamma,
                self.config.lam,
            )
            batch.extend(steps)
            for s in steps:
                for name in (s.info or {}).get("skills", []):
                    self.skill_rewards.setdefault(name, []).append(float(s.reward))
            advs.append(a)
            rets.append(r)
            rewards.append(float(sum(s.reward for s in steps)))
            for key, v in figs.items():
                figures.setdefault(key, []).append(v)
        stats: dict[str, float] = {}
        if batch:
            stats = ppo_update(
                self.net,
                self.optimizer,
                batch,
                np.concatenate(advs),
                np.concatenate(rets),
                self.skill_vectors(),
                self.config,
                self.rng,
            )
        self.updates += 1
        point = {
            "update": float(self.updates),
            "reward": float(np.mean(rewards)) if rewards else 0.0,
            **{k: float(np.mean(v)) for k, v in figures.items()},
            **stats,
        }
        if self.budget is not None:
            point["price"] = price
            point["memories_per_span"] = used / spans if spans else 0.0
            last = self.candidates[-1] if self.candidates else None
            if last is not None and last.update == self.updates - 1 and last.memories and spans:
                # these rollouts sampled the weights that evaluation built deterministically
                self.scale = (used / spans) / (last.memories / last.spans)
            point["scale"] = self.scale
            self.budget.update(used, spans, self.scale)
        self.curve.add(**point)
        return point

    def consider(self, evaluate: Callable[[Any], tuple[float, int, int]]) -> Candidate:
        """Evaluate the current weights (``evaluate(net) -> (recall, memories, spans)``), take a
        dual step on the memories they stored and keep them when they are the best within the
        budget so far."""
        recall, memories, spans = evaluate(self.net)
        cand = Candidate(self.updates, float(recall), int(memories), int(spans))
        self.candidates.append(cand)
        if self.budget is not None:
            self.budget.update(memories, spans)  # the deployed controller's own count
        limit = self.budget.per_span if self.budget is not None else None
        if pick(self.candidates, limit) == cand:
            self.best = cand
            self.best_weights = copy.deepcopy(self.net.state_dict())
        return cand

    def fit(
        self,
        episodes: Sequence[Episode],
        updates: int,
        on_update: Callable[[dict[str, float]], None] | None = None,
        *,
        evaluate: Callable[[Any], tuple[float, int, int]] | None = None,
        every: int = 0,
        until: int | None = None,
        save: Callable[[Trainer], Any] | None = None,
    ) -> Curve:
        """PPO updates, each on ``episodes_per_update`` episodes drawn in turn.

        Args:
            episodes: The training episodes.
            updates: How many updates to run (from the current one).
            on_update: Called with each update's curve point.
            evaluate: Scores the weights for checkpoint selection (``consider``).
            every: Call ``consider`` after every ``every`` updates and after the last one.
            until: Run up to this total number of updates instead (a resumed run).
            save: Called after each completed update (``state`` for a resumable run).
        """
        n = self.config.episodes_per_update
        if len(self.order) != len(episodes):
            self.order = list(range(len(episodes)))
            self.cursor = 0
        end = until if until is not None else self.updates + updates
        while self.updates < end:
            chosen = []
            for _ in range(min(n, len(episodes))):
                if self.cursor % len(self.order) == 0:
                    self.rng.shuffle(self.order)
                chosen.append(episodes[self.order[self.cursor % len(self.order)]])
                self.cursor += 1
            point = self.update(chosen)
            if (
                evaluate is not None
                and every > 0
                and (self.updates % every == 0 or self.updates == end)
            ):
                cand = self.consider(evaluate)
                point["train_recall"] = cand.recall
                point["train_memories"] = float(cand.memories)
                self.curve.points[-1].update(
                    train_recall=cand.recall, train_memories=float(cand.memories)
                )
            if save is not None:
                save(self)
            if on_update is not None:
                on_update(point)
        return self.curve

    def state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The trainer's state after its last completed update: tensors (``torch.save``) and the
        rest as JSON-ready values. ``load_state`` continues from it with the same result."""
        tensors = {
            "net": self.net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "best": self.best_weights,
        }
        meta = {
            "updates": self.updates,
            "cursor": self.cursor,
            "order": list(self.order),
            "episode": self.controller.episode,
            "rng": self.rng.bit_generator.state,
            "curve": self.curve.points,
            "skill_rewards": self.skill_rewards,
            "candidates": [vars(c) for c in self.candidates],
            "best": None if self.best is None else vars(self.best),
            "budget": None if self.budget is None else self.budget.state(),
            "scale": self.scale,
            "skills": [s.name for s in self.skills],
        }
        return tensors, meta

    def load_state(self, tensors: dict[str, Any], meta: dict[str, Any]) -> None:
        """Continue from ``state`` (same data, bank and options)."""
        self.net.load_state_dict(tensors["net"])
        self.optimizer.load_state_dict(tensors["optimizer"])
        self.best_weights = tensors.get("best")
        self.updates = int(meta["updates"])
        self.cursor = int(meta["cursor"])
        self.order = [int(i) for i in meta["order"]]
        self.controller.episode = int(meta["episode"])
        self.rng.bit_generator.state = meta["rng"]
        self.curve = Curve([dict(p) for p in meta["curve"]])
        self.skill_rewards = {k: list(v) for k, v in meta["skill_rewards"].items()}
        self.candidates = [Candidate(**c) for c in meta["candidates"]]
        self.best = Candidate(**meta["best"]) if meta.get("best") else None
        self.scale = float(meta.get("scale", 1.0))
        if meta.get("budget") is not None:
            self.budget = MemoryBudget.from_state(meta["budget"])


def finish_episode(
    steps: list[Step],
    rewards: Sequence[float],
) -> list[Step]:
    """Set each step's reward and mark the last step as the episode's end."""
    for s, r in zip(steps, rewards):
        s.reward = float(r)
        s.done = False
    if steps:
        steps[-1].done = True
    return steps


class RandomK:
    """K skills drawn uniformly without replacement (seeded per span): a baseline."""

    def __init__(self, k: int, seed: int) -> None:
        self.k = k
        self.rng = np.random.default_rng(seed)

    def select(
        self, span_vector: Any, retrieved: Sequence[Memory], skills: Sequence[MemorySkill]
    ) -> list[MemorySkill]:
        idx = sorted(self.rng.choice(len(skills), size=min(self.k, len(skills)), replace=False))
        return [skills[int(i)] for i in idx]

    needs_span_vector = False


class EverySkill:
    """Every skill of the bank for every span: the baseline that stores the most."""

    needs_span_vector = False

    def select(
        self, span_vector: Any, retrieved: Sequence[Memory], skills: Sequence[MemorySkill]
    ) -> list[MemorySkill]:
        return list(skills)


def average_weights(states: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The element-wise mean of networks' weights (the same architecture)."""
    return {k: sum(s[k] for s in states) / len(states) for k in states[0]}
