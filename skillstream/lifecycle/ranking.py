"""Search ranking: relevance combined with confidence, recency and reinforcement.

Two rules (setting ``rank_rule``). ``product``, the default, multiplies as the recall skill of the
seed does ("confidence x recency x reinforcedCount"), on top of the search's relevance::

    score = relevance / best relevance among the candidates
          * confidence
          * (1 - w_recency       * (1 - 0.5 ** (age / recency_half_life)))
          * (1 - w_reinforcement * (1 - min(1, log(1 + reinforcement) / log(11))))

Recency and reinforcement are factors between ``1 - w`` and 1 rather than raw numbers: a raw
recency of a year-old memory (2^-12) or a raw count of 0 would zero out memories the question is
about. ``weighted`` is the weighted sum::

    score = w_relevance     * relevance / best relevance among the candidates
          + w_confidence    * confidence
          + w_recency       * 0.5 ** (age / recency_half_life)
          + w_reinforcement * min(1, log(1 + reinforcement) / log(11))

``age`` is the event time of the search (``--now``, default the store's latest event time) minus
the memory's last confirmation (valid from, created, updated or reinforced, whichever is latest).
Weights default to 0.6 / 0.2 / 0.1 / 0.1 and are set with ``rank_weights`` (``product`` reads
only the recency and reinforcement weights). Access does not count
toward recency, so searching does not change later rankings; it only keeps memories from decaying.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from skillstream.lifecycle.clock import latest
from skillstream.lifecycle.params import LifecycleParams

_LOG11 = math.log(11.0)


def recency(hit: dict[str, Any], now: datetime | None, params: LifecycleParams) -> float:
    """``0.5 ** (age / half-life)``; 1 for a memory confirmed at or after ``now``."""
    t = latest(
        *(hit.get(c) for c in ("valid_from", "created_at", "updated_at", "last_reinforced_at"))
    )
    if t is None or now is None:
        return 0.0
    age = (now - t).total_seconds()
    if age <= 0:
        return 1.0
    return 0.5 ** (age / params.recency_half_life.total_seconds())


def reinforcement_score(count: int | None) -> float:
    return min(1.0, math.log1p(max(0, count or 0)) / _LOG11)


def rank(
    hits: list[dict[str, Any]], now: datetime | None, params: LifecycleParams, k: int
) -> list[dict[str, Any]]:
    """Score ``hits`` (each with the store's ``score`` as relevance) and return the best ``k``.

    Each returned hit keeps its relevance as ``relevance``, gets its combined ``score`` and the
    ``recency`` used; ties keep the order of ``hits`` (the store's ranking: of two hits with one
    fused relevance, the vector search's better one comes first), never an order of ids, which
    are hashes and say nothing about the query.
    """
    w = params.weights
    best = max((float(h.get("score") or 0.0) for h in hits), default=0.0)
    out = []
    for h in hits:
        rel = float(h.get("score") or 0.0)
        r = dict(h)
        r["relevance"] = rel
        r["recency"] = round(recency(h, now, params), 6)
        relative = rel / best if best > 0 else 0.0
        confidence = float(h.get("confidence") or 0.0)
        reinforced = reinforcement_score(h.get("reinforcement"))
        if params.rank_rule == "weighted":
            score = (
                w["relevance"] * relative
                + w["confidence"] * confidence
                + w["recency"] * r["recency"]
                + w["reinforcement"] * reinforced
            )
        else:
            score = (
                relative
                * confidence
                * (1 - w["recency"] * (1 - r["recency"]))
                * (1 - w["reinforcement"] * (1 - reinforced))
            )
        r["score"] = round(score, 6)
        out.append(r)
    out.sort(key=lambda r: -r["score"])  # stable: ties keep the store's order
    return out[:k]
