"""A memory budget for training: a constraint on memories stored, priced by a Lagrange multiplier.

A fixed cost per stored memory only slides the trained controller along the recall/memory
trade-off: too low and it buys recall with memories, too high and it stores too little. Training
instead solves the constrained problem

    maximise recall  subject to  memories per span <= budget

through its Lagrangian ``recall - price * (memories - budget * spans)``. Each span pays ``price``
per memory it inserts (on top of any fixed cost); after every PPO update the price follows the
constraint by multiplicative dual ascent on the update's rollouts,

    price <- price * exp(step * (used / (budget * scale) - 1)),

where ``scale`` is the ratio of the memories per span of the sampled rollouts to those of the
deterministic controller with the same weights (the rollouts right after an evaluation): the
budget binds the Top-K controller that is deployed, not its exploring version,

rising while the rollouts store more than the budget and falling while they store less, kept within
``[floor, ceiling]`` (a factor ``span`` either side of the starting price). Every evaluation of the
deterministic controller takes one more step of the same rule on what it stored (scale 1): that is
the deployed controller's own count, exact where the rollouts' is an estimate. The checkpoint kept
is the one with the best recall among those evaluated (deterministic Top-K on the training
conversations) that stay within the budget (``Candidate``, ``pick``), so a run never returns a
controller that breaks its budget on the data it saw. The budget itself is the memories per span
of the cosine controller on the training conversations (``memory-skills train --budget cosine``)
or a number the user gives. The starting price is the *marginal* value of a memory near the
budget (``marginal_price``): the recall that selecting every skill adds over the cosine controller
per extra memory it stores. A memory's mean value (recall per stored memory) is higher, since the
memories a controller adds last are worth less than the first ones; starting there made the trained
controller shed memories well below the budget before the price came down.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from skillstream.errors import ConfigError


@dataclass
class MemoryBudget:
    """The budget (memories per span) and its current price (reward per inserted memory).

    Args:
        per_span: Memories per span allowed.
        price: Starting price.
        step: Dual ascent step on the log-price.
        span: The price stays within ``[price / span, price * span]`` of the starting price.
    """

    per_span: float
    price: float
    step: float = 1.0
    span: float = 100.0

    def __post_init__(self) -> None:
        if not self.per_span > 0:
            raise ConfigError(
                f"the memory budget must be > 0 memories per span, got {self.per_span}"
            )
        if not self.price > 0:
            raise ConfigError(f"the starting memory price must be > 0, got {self.price}")
        if self.step < 0 or self.span < 1:
            raise ConfigError("the budget's dual step must be >= 0 and its span >= 1")
        self.floor = self.price / self.span
        self.ceiling = self.price * self.span

    def update(self, memories: float, spans: float, scale: float = 1.0) -> float:
        """One dual ascent step from rollouts that stored ``memories`` over ``spans``.

        ``scale`` converts the budget to the rollouts' measure: sampled rollouts store fewer (or
        more) memories than the deterministic controller they train, so the trainer passes the
        ratio of the two seen at its latest evaluation and the budget binds the deployed policy.
        """
        if spans <= 0:
            return self.price
        used = memories / spans
        target = self.per_span * scale
        moved = self.price * math.exp(self.step * (used / target - 1.0))
        self.price = min(self.ceiling, max(self.floor, moved))
        return self.price

    def state(self) -> dict[str, float]:
        """Everything ``from_state`` needs to continue (a resumed run)."""
        return {
            "per_span": self.per_span,
            "price": self.price,
            "step": self.step,
            "span": self.span,
            "floor": self.floor,
            "ceiling": self.ceiling,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> MemoryBudget:
        b = cls(float(state["per_span"]), float(state["price"]), float(state["step"]))
        b.span = float(state["span"])
        b.floor = float(state["floor"])
        b.ceiling = float(state["ceiling"])
        return b


@dataclass(frozen=True)
class Candidate:
    """A checkpoint evaluated on the training conversations (deterministic Top-K)."""

    update: int
    recall: float
    memories: int
    spans: int


def pick(candidates: Sequence[Candidate], budget: float | None) -> Candidate | None:
    """The best candidate within ``budget`` memories per span (``None``: no limit).

    Best: the highest recall, then the fewest memories, then the earliest update.
    """
    ok = [c for c in candidates if budget is None or c.memories <= budget * c.spans + 1e-9]
    if not ok:
        return None
    return min(ok, key=lambda c: (-c.recall, c.memories, c.update))


def marginal_price(
    low: tuple[float, int], high: tuple[float, int], episodes: int, floor: float = 1e-6
) -> float:
    """The recall one more memory buys between two controllers, per episode.

    Args:
        low: (recall, memories) of the controller the budget comes from (the cosine one).
        high: (recall, memories) of one that stores more (every skill selected).
        episodes: The conversations both were built over (memories are their sum).
        floor: The smallest price returned (a positive start for the multiplicative ascent).

    Returns:
        ``(high recall - low recall) / ((high memories - low memories) / episodes)``; when ``high``
        stores no more memories or gains no recall, the mean value ``low recall / (low memories /
        episodes)`` instead.
    """
    n = max(int(episodes), 1)
    extra = (high[1] - low[1]) / n
    gain = high[0] - low[0]
    if extra > 0 and gain > 0:
        return max(gain / extra, floor)
    return max(max(low[0], 1e-3) / max(low[1] / n, 1.0), floor)
