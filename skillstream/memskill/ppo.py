"""PPO for the controller's scorer: one decision per span, the Top-K joint log-probability as the
action's log-probability (MemSkill, appendix A.4).

The pieces, each testable on its own:

* ``gae``: generalised advantage estimation over one episode's steps (numpy);
* ``policy_loss``: the clipped surrogate ``-mean(min(r A, clip(r, 1-e, 1+e) A))`` with
  ``r = exp(logp_new - logp_old)``;
* ``value_loss``: ``mean((V - R)^2)``;
* ``entropy``: the entropy of the first pick's distribution (softmax over the unmasked logits);
* ``ppo_update``: epochs of shuffled minibatches of ``policy + value_coef * value - entropy_coef *
  entropy``, gradient-norm clipping, and an early stop when the approximate KL divergence of a
  minibatch, ``mean((r - 1) - log r)`` (never negative), passes ``1.5 * target_kl``.

Defaults are the reference implementation's (REFERENCE-NOTES.md): gamma 0.99, lambda 0.95, clip
0.2, entropy 0.01, value 0.5, grad-clip 0.5, minibatch 32, 4 epochs, KL stop 0.02, 4 episodes per
update. Departures, each a field that callers set: the learning rate is 1e-3 instead of 1e-4 (a run
here has tens of updates, not thousands), and advantages are normalised per update batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from skillstream.memskill.controller import joint_log_prob_torch


@dataclass(frozen=True)
class PPOConfig:
    """PPO hyperparameters (see the module docstring for where they come from)."""

    gamma: float = 0.99
    lam: float = 0.95
    clip: float = 0.2
    entropy_coef: float = 0.01
    value_coef: float = 0.5
    lr: float = 1e-3
    grad_clip: float = 0.5
    minibatch: int = 32
    epochs: int = 4
    target_kl: float = 0.02
    episodes_per_update: int = 4
    normalise_advantages: bool = True


@dataclass
class Step:
    """One recorded decision: what a trainer needs to replay it under new weights."""

    state: np.ndarray
    order: list[int]
    """Selected skill positions, in selection order."""
    mask: np.ndarray
    """Which skills could be selected (``False``: masked out, logit ``-inf``)."""
    log_prob: float
    value: float
    reward: float = 0.0
    done: bool = False
    bias: np.ndarray | None = None
    """Extra logits the behaviour policy added (exploration toward new skills), replayed in the
    update so the ratio compares like with like."""
    info: dict[str, Any] | None = None


def gae(
    rewards: Sequence[float],
    values: Sequence[float],
    dones: Sequence[bool],
    gamma: float = 0.99,
    lam: float = 0.95,
    last_value: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and returns by GAE.

    ``delta_t = r_t + gamma * V_{t+1} * (1 - done_t) - V_t``;
    ``A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}``; ``R_t = A_t + V_t``.
    ``last_value`` is the value after the final step (0 when the episode ended).
    """
    n = len(rewards)
    adv: np.ndarray = np.zeros(n, dtype=np.float64)
    nxt_adv = 0.0
    nxt_val = float(last_value)
    for t in range(n - 1, -1, -1):
        live = 0.0 if dones[t] else 1.0
        delta = float(rewards[t]) + gamma * nxt_val * live - float(values[t])
        nxt_adv = delta + gamma * lam * live * nxt_adv
        adv[t] = nxt_adv
        nxt_val = float(values[t])
    return adv, adv + np.asarray(values, dtype=np.float64)


def _torch() -> Any:
    import torch

    return torch


def policy_loss(new_logp: Any, old_logp: Any, adv: Any, clip: float) -> Any:
    """The clipped surrogate loss (to minimise)."""
    torch = _torch()
    ratio = torch.exp(new_logp - old_logp)
    return -torch.min(ratio * adv, torch.clamp(ratio, 1.0 - clip, 1.0 + clip) * adv).mean()


def value_loss(values: Any, returns: Any) -> Any:
    """Mean squared error of the critic against the returns."""
    return ((values - returns) ** 2).mean()


def entropy(logits: Any) -> Any:
    """Mean entropy of the first pick's distribution over rows of masked logits (``-inf``)."""
    torch = _torch()
    finite = torch.isfinite(logits)
    logp = torch.log_softmax(logits, dim=-1).masked_fill(~finite, 0.0)  # no 0 * -inf (NaN grads)
    p = torch.softmax(logits, dim=-1)
    return -(p * logp).sum(-1).mean()


def masked_logits(net: Any, states: Any, skills: Any, masks: Any) -> Any:
    """The scorer's logits ``(B, N)`` with masked skills at ``-inf``."""
    return net(states, skills).masked_fill(~masks, float("-inf"))


def ppo_update(
    net: Any,
    optimizer: Any,
    steps: Sequence[Step],
    advantages: np.ndarray,
    returns: np.ndarray,
    skill_vectors: np.ndarray,
    config: PPOConfig,
    rng: np.random.Generator,
) -> dict[str, float]:
    """One PPO update of ``net`` (actor and critic) on ``steps``.

    Returns:
        Mean policy loss, value loss, entropy and approximate KL of the minibatches run, the number
        of minibatches, and ``stopped`` (1.0 when the KL stop ended the update early).
    """
    torch = _torch()
    net.train()
    n = len(steps)
    states = torch.from_numpy(np.stack([s.state for s in steps]).astype(np.float32))
    masks = torch.from_numpy(np.stack([s.mask for s in steps]).astype(bool))
    width = len(steps[0].mask)
    biases = torch.from_numpy(
        np.stack([s.bias if s.bias is not None else np.zeros(width) for s in steps]).astype(
            np.float32
        )
    )
    skills = torch.from_numpy(np.ascontiguousarray(skill_vectors, dtype=np.float32))
    old = torch.tensor([s.log_prob for s in steps], dtype=torch.float32)
    adv = torch.tensor(advantages, dtype=torch.float32)
    if config.normalise_advantages and n > 1:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    ret = torch.tensor(returns, dtype=torch.float32)
    stats = {"policy": 0.0, "value": 0.0, "entropy": 0.0, "kl": 0.0, "minibatches": 0.0}
    stopped = False
    for _ in range(config.epochs):
        order = rng.permutation(n)
        for start in range(0, n, config.minibatch):
            idx = order[start : start + config.minibatch]
            ti = torch.from_numpy(idx.astype(np.int64))
            logits = masked_logits(net, states[ti], skills, masks[ti]) + biases[ti]
            new = torch.stack(
                [joint_log_prob_torch(logits[j], steps[i].order) for j, i in enumerate(idx)]
            )
            p_loss = policy_loss(new, old[ti], adv[ti], config.clip)
            v_loss = value_loss(net.value(states[ti]), ret[ti])
            ent = entropy(logits)
            loss = p_loss + config.value_coef * v_loss - config.entropy_coef * ent
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), config.grad_clip)
            optimizer.step()
            log_ratio = new.detach() - old[ti]
            kl = float(((log_ratio.exp() - 1.0) - log_ratio).mean())
            stats["policy"] += float(p_loss.detach())
            stats["value"] += float(v_loss.detach())
            stats["entropy"] += float(ent.detach())
            stats["kl"] += kl
            stats["minibatches"] += 1
            if kl > 1.5 * config.target_kl:
                stopped = True
                break
        if stopped:
            break
    m = max(stats["minibatches"], 1.0)
    out = {k: (v / m if k != "minibatches" else v) for k, v in stats.items()}
    out["stopped"] = 1.0 if stopped else 0.0
    net.eval()
    return out
