"""What the LLM cost a home: calls, billed tokens and their cost per purpose, in all and per
1,000 turns (``skillstream stats --cost`` and the server's charts page).

A cost comes from the prices the user configured (setting ``llm_prices``, see ``llm/cost.py``);
a model without a price has none, and the report names it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

COST_SQL = (
    "SELECT purpose, model, count(*) FILTER (WHERE NOT cached) AS calls, "
    "count(*) FILTER (WHERE cached) AS cached, "
    "coalesce(sum(prompt_tokens) FILTER (WHERE NOT cached), 0) AS prompt_tokens, "
    "coalesce(sum(completion_tokens) FILTER (WHERE NOT cached), 0) AS completion_tokens "
    "FROM llm_calls WHERE {owners} GROUP BY ALL ORDER BY ALL"
)
"""LLM calls by purpose and model: HTTP attempts (each retry is one, as each is billed), cached
answers, and the billed tokens (a cached answer is not billed)."""
TURNS_SQL = "SELECT coalesce(sum(len(message_ids)), 0) AS n FROM spans WHERE {owners}"
"""Turns: the messages admitted into the stored spans."""


def cost_report(calls: list[dict[str, Any]], turns: int, prices: Any) -> dict[str, Any]:
    """``stats --cost``: per purpose, the calls, cached answers, billed tokens and cost in all
    and per 1,000 turns; the cost is ``None`` when a model the purpose used has no price.

    Args:
        calls: Rows of :data:`COST_SQL`.
        turns: Messages of the stored spans.
        prices: Setting ``llm_prices``.
    """
    from skillstream.llm.cost import token_cost

    by: dict[str, dict[str, Any]] = {}
    for r in calls:
        zero = {"calls": 0, "cached": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0}
        p = by.setdefault(r["purpose"], {"purpose": r["purpose"], "models": [], **zero})
        p["models"].append(r["model"])
        for k in ("calls", "cached", "prompt_tokens", "completion_tokens"):
            p[k] += int(r[k])
        c = token_cost(prices, r["model"], int(r["prompt_tokens"]), int(r["completion_tokens"]))
        p["cost"] = None if c is None or p["cost"] is None else p["cost"] + c
    per = 1000.0 / turns if turns else None
    out = []
    for p in by.values():
        p["per_1000_turns"] = {
            k: (None if per is None or p[k] is None else round(p[k] * per, 6))
            for k in ("calls", "prompt_tokens", "completion_tokens", "cost")
        }
        if p["cost"] is not None:
            p["cost"] = round(p["cost"], 6)
        out.append(p)
    unpriced = sorted({r["model"] for r in calls if r["model"] not in prices})
    return {"turns": turns, "purposes": out, "unpriced_models": unpriced}


def read_cost(catalog: Any, prices: Any, owners: Sequence[str] | None = None) -> dict[str, Any]:
    """:func:`cost_report` of a home's catalog: of every owner, or of ``owners`` only."""
    where, params = "TRUE", []
    if owners is not None:
        where = "owner_id IN (" + ", ".join("?" for _ in owners) + ")" if owners else "FALSE"
        params = list(owners)
    if not catalog.has("llm_calls"):
        return cost_report([], 0, prices)
    calls = catalog.sql(COST_SQL.format(owners=where), params).to_pylist()
    turns = int(catalog.sql(TURNS_SQL.format(owners=where), params).to_pylist()[0]["n"])
    return cost_report(calls, turns, prices)
