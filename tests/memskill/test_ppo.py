"""PPO math of the controller trainer against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from skillstream.memskill.controller import scorer_net
from skillstream.memskill.ppo import (
    PPOConfig,
    Step,
    entropy,
    gae,
    policy_loss,
    ppo_update,
    value_loss,
)


def test_gae_by_hand() -> None:
    # two steps, the second ends the episode; gamma 0.5, lambda 0.5 keep the numbers readable
    adv, ret = gae([1.0, 2.0], [0.5, 1.0], [False, True], gamma=0.5, lam=0.5)
    d1 = 2.0 - 1.0  # r1 + 0 - V1
    d0 = 1.0 + 0.5 * 1.0 - 0.5  # r0 + gamma V1 - V0
    assert adv[1] == pytest.approx(d1)
    assert adv[0] == pytest.approx(d0 + 0.5 * 0.5 * d1)
    assert ret == pytest.approx(adv + np.array([0.5, 1.0]))


def test_gae_stops_at_episode_end() -> None:
    adv, _ = gae([1.0, 5.0], [0.0, 0.0], [True, True], gamma=0.9, lam=0.9)
    assert adv.tolist() == pytest.approx([1.0, 5.0])


def test_clipped_policy_loss_by_hand() -> None:
    new = torch.log(torch.tensor([1.5, 0.5, 1.1]))
    old = torch.zeros(3)
    adv = torch.tensor([1.0, -1.0, 2.0])
    # ratios 1.5, 0.5, 1.1; clip 0.2: min(1.5, 1.2)*1 = 1.2; min(-0.5, -0.8) = -0.8; 1.1*2 = 2.2
    want = -(1.2 - 0.8 + 2.2) / 3
    assert float(policy_loss(new, old, adv, 0.2)) == pytest.approx(want, rel=1e-6)


def test_value_loss_and_entropy_by_hand() -> None:
    assert float(value_loss(torch.tensor([1.0, 3.0]), torch.tensor([0.0, 1.0]))) == 2.5
    logits = torch.tensor([[0.0, 0.0, float("-inf")]])
    assert float(entropy(logits)) == pytest.approx(math.log(2))


def test_a_gradient_step_lowers_the_loss_on_a_fixed_batch() -> None:
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    dim, n = 8, 4
    net = scorer_net(dim, hidden=16)
    skills = rng.normal(size=(n, dim)).astype(np.float32)
    steps = []
    for i in range(16):
        state = rng.normal(size=2 * dim).astype(np.float32)
        steps.append(Step(state, [i % n], np.ones(n, bool), math.log(1 / n), 0.0, reward=1.0))
    adv = np.array([1.0 if s.order[0] == 0 else -1.0 for s in steps])
    ret = np.ones(16)
    cfg = PPOConfig(lr=1e-2, epochs=1, minibatch=16, target_kl=10.0, normalise_advantages=False)

    def loss() -> float:
        from skillstream.memskill.controller import joint_log_prob_torch
        from skillstream.memskill.ppo import masked_logits

        with torch.no_grad():
            st = torch.from_numpy(np.stack([s.state for s in steps]))
            lg = masked_logits(net, st, torch.from_numpy(skills), torch.ones(16, n, dtype=bool))
            new = torch.stack([joint_log_prob_torch(lg[j], s.order) for j, s in enumerate(steps)])
            old = torch.tensor([s.log_prob for s in steps])
            p = policy_loss(new, old, torch.tensor(adv, dtype=torch.float32), cfg.clip)
            v = value_loss(net.value(st), torch.tensor(ret, dtype=torch.float32))
            return float(p + cfg.value_coef * v - cfg.entropy_coef * entropy(lg))

    before = loss()
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    stats = ppo_update(net, opt, steps, adv, ret, skills, cfg, rng)
    assert stats["minibatches"] == 1
    assert loss() < before


def test_kl_early_stop() -> None:
    torch.manual_seed(1)
    rng = np.random.default_rng(1)
    net = scorer_net(4, hidden=8)
    skills = rng.normal(size=(3, 4)).astype(np.float32)
    # a recorded log-prob of 0 is above any the net gives a 3-way choice: KL > 0 at once
    steps = [
        Step(rng.normal(size=8).astype(np.float32), [0], np.ones(3, bool), 0.0, 0.0)
        for _ in range(8)
    ]
    cfg = PPOConfig(epochs=4, minibatch=4, target_kl=0.0)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    stats = ppo_update(net, opt, steps, np.ones(8), np.zeros(8), skills, cfg, rng)
    assert stats["stopped"] == 1.0
    assert stats["minibatches"] == 1
