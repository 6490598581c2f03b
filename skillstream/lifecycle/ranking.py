"""Search ranking: relevance combined with confidence, recency and reinforcement.

Relevance is absolute, so a score means the same in every search and for every kind of hit
(memories, task skills, summaries): the cosine similarity of the hit to the query (negative
counts as 0), raised by the full-text match::

    relevance = similarity + w_keyword * (1 - similarity) * keyword / max(best keyword, FLOOR)

where ``keyword`` is the hit's BM25 score for the query text, ``best keyword`` the highest among
the candidates and ``FLOOR`` :data:`KEYWORD_FLOOR`. A full-text match can lift a hit at most
``w_keyword`` of the way from its similarity to 1, so an exact word the embedding misses (a name,
an error code) still counts; the floor keeps a weak best match (one common word of the query)
from counting as a full one, so no hit is relevant only because it was the best of weak
candidates. A keyword-only search has no similarity: its relevance is the keyword share alone. A
hit that carries neither (rows from elsewhere) falls back to its store score over the best one.

The keyword weight (0.5) and the floor (6) were chosen on three LoCoMo dev conversations
(conv-26, 30, 41: evidence recall@10 0.649 with no keyword lift, 0.687 / 0.700 / 0.706 with
weights 0.15 / 0.3 / 0.5, 0.704 with 0.7; floors 0, 3 and 6 within 0.001 of each other) and
checked on the other three (``docs/lifecycle.md``, "Search ranking").

Two rules (setting ``rank_rule``). ``product``, the default, multiplies as the recall skill of the
seed does ("confidence x recency x reinforcedCount"), on top of the relevance::

    score = relevance
          * confidence
          * (1 - w_recency       * (1 - 0.5 ** (age / recency_half_life)))
          * (1 - w_reinforcement * (1 - min(1, log(1 + reinforcement) / log(11))))

Recency and reinforcement are factors between ``1 - w`` and 1 rather than raw numbers: a raw
recency of a year-old memory (2^-12) or a raw count of 0 would zero out memories the question is
about. ``weighted`` is the weighted sum::

    score = w_relevance     * relevance
          + w_confidence    * confidence
          + w_recency       * 0.5 ** (age / recency_half_life)
          + w_reinforcement * min(1, log(1 + reinforcement) / log(11))

``age`` is the event time of the search (``--now``, default the store's latest event time) minus
the memory's last confirmation (valid from, created, updated or reinforced, whichever is latest).
Weights default to 0.6 / 0.2 / 0.1 / 0.1 (keyword 0.5) and are set with ``rank_weights``
(``product`` reads the keyword, recency and reinforcement weights). Access does not count
toward recency, so searching does not change later rankings; it only keeps memories from decaying.

Hits that repeat each other are spread out (:func:`diversify`, setting ``rank_diversity``, 0.5):
the hits are taken one at a time, each time the one with the best

    score * (1 - d * max(0, its highest cosine to the hits taken before it))

(maximal marginal relevance, as a discount: a hit unlike those taken keeps its score, and no
discount lifts an irrelevant hit over a relevant one). Several memories restating one message
would otherwise fill the first places of a search while the next fact the question needs waits
below them. ``d`` was chosen on three LoCoMo dev conversations and checked on the other three
(``docs/lifecycle.md``, "Search ranking").
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

import numpy as np

from skillstream.lifecycle.clock import latest
from skillstream.lifecycle.clusters import unit_rows
from skillstream.lifecycle.params import LifecycleParams

_LOG11 = math.log(11.0)

KEYWORD_FLOOR = 6.0
"""A BM25 score below which the best full-text match of a search counts only in part (about what
a match of two or three of a question's words scores; one common word scores 1 to 2)."""


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


def relevance(
    hit: dict[str, Any], best_keyword: float, best_score: float, w_keyword: float
) -> float:
    """The hit's absolute relevance (see the module's description)."""
    similarity, keyword = hit.get("similarity"), hit.get("keyword")
    share = float(keyword) / max(best_keyword, KEYWORD_FLOOR) if keyword else 0.0
    if similarity is not None:
        s = max(0.0, float(similarity))
        return s + w_keyword * (1.0 - s) * share
    if keyword is not None:
        return share
    score = float(hit.get("score") or 0.0)
    return score / best_score if best_score > 0 else 0.0


def rank(
    hits: list[dict[str, Any]], now: datetime | None, params: LifecycleParams, k: int
) -> list[dict[str, Any]]:
    """Score ``hits`` (each with the store's ``similarity`` and ``keyword``, see
    ``LanceTable.search``) and return the best ``k``.

    Each returned hit gets its ``relevance``, its combined ``score`` and the ``recency`` used;
    ties keep the order of ``hits`` (the store's ranking), never an order of ids, which are
    hashes and say nothing about the query.
    """
    w = params.weights
    best_keyword = max((float(h.get("keyword") or 0.0) for h in hits), default=0.0)
    best_score = max((float(h.get("score") or 0.0) for h in hits), default=0.0)
    out = []
    for h in hits:
        r = dict(h)
        rel = round(relevance(h, best_keyword, best_score, w["keyword"]), 6)
        r["relevance"] = rel
        r["recency"] = round(recency(h, now, params), 6)
        confidence = float(h.get("confidence") or 0.0)
        reinforced = reinforcement_score(h.get("reinforcement"))
        if params.rank_rule == "weighted":
            score = (
                w["relevance"] * rel
                + w["confidence"] * confidence
                + w["recency"] * r["recency"]
                + w["reinforcement"] * reinforced
            )
        else:
            score = (
                rel
                * confidence
                * (1 - w["recency"] * (1 - r["recency"]))
                * (1 - w["reinforcement"] * (1 - reinforced))
            )
        r["score"] = round(score, 6)
        out.append(r)
    out.sort(key=lambda r: -r["score"])  # stable: ties keep the store's order
    return out[:k]


def diversify(
    hits: list[dict[str, Any]], vectors: list[Any], k: int, diversity: float
) -> list[dict[str, Any]]:
    """The best ``k`` of ``hits`` (ranked, best first, each with its ``score``) taken one at a
    time by maximal marginal relevance: each time the hit with the best ``score * (1 - diversity
    * max(0, highest cosine to the hits already taken))``, ``vectors[i]`` being the vector of
    ``hits[i]``. The hits keep their scores; only their order changes.

    A diversity of 0 (or fewer than two hits) keeps the ranking as it is; ties keep the ranking's
    order.
    """
    if diversity <= 0 or len(hits) < 2:
        return hits[:k]
    m = unit_rows(np.asarray(vectors, dtype=np.float32))
    score = np.asarray([float(h["score"]) for h in hits], dtype=np.float64)
    closest = np.zeros(len(hits))  # highest positive cosine to a hit taken so far
    taken: np.ndarray = np.zeros(len(hits), dtype=bool)
    order: list[int] = []
    for _ in range(min(k, len(hits))):
        value = np.where(taken, -np.inf, score * (1.0 - diversity * closest))
        best = int(np.argmax(value))  # the first of equal values: the ranking's order
        order.append(best)
        taken[best] = True
        closest = np.maximum(closest, m @ m[best])
    return [hits[i] for i in order]
