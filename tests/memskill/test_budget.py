"""The memory budget: dual ascent on the price of a memory, checkpoint choice within the budget."""

from __future__ import annotations

import math

import numpy as np
import pytest

from skillstream.errors import ConfigError
from skillstream.memskill.budget import Candidate, MemoryBudget, marginal_price, pick


def test_the_price_rises_over_budget_falls_under_it_and_stays_in_bounds() -> None:
    b = MemoryBudget(per_span=2.0, price=0.01, step=1.0, span=10.0)
    assert b.update(memories=40, spans=10) == pytest.approx(0.01 * math.e)  # 4 per span: 2x
    assert b.update(memories=20, spans=10) == pytest.approx(0.01 * math.e)  # on budget: unchanged
    assert b.update(memories=0, spans=10) == pytest.approx(0.01)  # none stored: halved in log
    for _ in range(20):
        b.update(memories=1000, spans=10)
    assert b.price == pytest.approx(0.1)  # the ceiling
    for _ in range(40):
        b.update(memories=0, spans=10)
    assert b.price == pytest.approx(0.001)  # the floor
    assert b.update(memories=5, spans=0) == b.price


def test_the_scale_moves_the_target_to_the_rollouts_measure() -> None:
    # rollouts store 20% fewer than the deployed controller: 1.6 per span in them is on budget
    b = MemoryBudget(per_span=2.0, price=0.01, step=1.0)
    assert b.update(memories=16, spans=10, scale=0.8) == pytest.approx(0.01)
    assert b.update(memories=20, spans=10, scale=0.8) > 0.01


def test_budget_state_round_trips_and_bad_values_are_refused() -> None:
    b = MemoryBudget(1.5, 0.002, 0.5)
    b.update(30, 10)
    c = MemoryBudget.from_state(b.state())
    assert c.state() == b.state()
    assert c.update(3, 10) == b.update(3, 10)
    with pytest.raises(ConfigError, match="memories per span"):
        MemoryBudget(0.0, 0.01)
    with pytest.raises(ConfigError, match="price"):
        MemoryBudget(1.0, 0.0)


def test_pick_takes_the_best_recall_within_the_budget() -> None:
    cands = [
        Candidate(0, 0.40, 100, 50),
        Candidate(4, 0.55, 140, 50),  # over a budget of 2 per span
        Candidate(8, 0.45, 100, 50),
        Candidate(12, 0.45, 90, 50),  # same recall, fewer memories
    ]
    assert pick(cands, 2.0) == cands[3]
    assert pick(cands, None) == cands[1]
    assert pick(cands, 1.0) is None


def test_the_starting_price_is_what_one_more_memory_buys() -> None:
    # cosine: 0.40 recall with 400 memories over 4 conversations; every skill: 0.60 with 800
    assert marginal_price((0.40, 400), (0.60, 800), 4) == pytest.approx(0.20 / 100)
    # below the mean value of a memory (0.40 / 100): the last memories are worth less
    assert marginal_price((0.40, 400), (0.60, 800), 4) < 0.40 / 100
    # nothing to learn from the larger controller: the mean value
    assert marginal_price((0.40, 400), (0.40, 800), 4) == pytest.approx(0.40 / 100)
    assert marginal_price((0.40, 400), (0.60, 400), 4) == pytest.approx(0.40 / 100)


def test_every_evaluation_moves_the_price_by_the_deployed_controllers_count() -> None:
    from skillstream.memskill.seeds import PRIMITIVES
    from skillstream.memskill.train import Trainer

    def embed(texts):
        return np.ones((len(texts), 4), np.float32) / 2.0

    trainer = Trainer(embed, 4, list(PRIMITIVES), k=2, prior=0.05)
    trainer.budget = MemoryBudget(per_span=2.0, price=0.01, step=1.0)
    over = trainer.consider(lambda net: (0.5, 150, 50))  # 3 per span
    assert trainer.budget.price == pytest.approx(0.01 * np.exp(0.5))
    assert trainer.best is None and over.memories == 150
    under = trainer.consider(lambda net: (0.4, 80, 50))  # 1.6 per span
    assert trainer.budget.price == pytest.approx(0.01 * np.exp(0.5) * np.exp(-0.2))
    assert trainer.best == under and trainer.best_weights is not None
