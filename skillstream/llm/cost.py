"""What LLM tokens cost, from the prices the user configured (setting ``llm_prices``).

A price is per million tokens, input (prompt) and output (completion) apart, in whatever currency
the user wrote them in. A model with no configured price has no cost: ``None``, never a guess.
Answers from the response cache were not billed and cost nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

Prices = Mapping[str, Mapping[str, float]]
"""Model name -> ``{"input": price, "output": price}`` per million tokens."""

PER = 1_000_000


def token_cost(
    prices: Prices, model: str, prompt_tokens: int, completion_tokens: int
) -> float | None:
    """The cost of ``prompt_tokens`` and ``completion_tokens`` of ``model``; ``None`` when
    ``prices`` has no price for it.

    >>> token_cost({"m": {"input": 0.15, "output": 0.6}}, "m", 2_000_000, 500_000)
    0.6
    >>> token_cost({}, "m", 10, 10) is None
    True
    """
    price = prices.get(model)
    if price is None:
        return None
    return (prompt_tokens * price["input"] + completion_tokens * price["output"]) / PER
