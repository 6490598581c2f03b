"""Rewards for training the controller: how useful the memories built from a conversation are.

A reward scores the memories an episode (one conversation, fresh memory) ended with against
*queries*: a text, the message ids it needs (its evidence), and optionally the pool of message ids a
memory must cite to be searchable for it. Two ways to get queries:

* **evidence** (labelled): the questions of LoCoMo-format data and their evidence turns;
* **qa** (labelled, needs an LLM): the same questions with their gold answers; the LLM answers each
  from its top memories and the token F1 of the answer is the query's score (``answer_score``);
* **unlabelled**: from the chat log alone. For every later session of a conversation, each user turn
  of at least ``min_words`` words is compared (embedding cosine) with every raw turn of the earlier
  sessions; when its best match reaches ``threshold`` the later turn *refers back* to that earlier
  turn, and it becomes a query whose evidence is that turn and whose pool is the earlier sessions.
  At most ``max_queries`` per conversation (the strongest matches). No annotation is needed.

Score: for each query the pool's live memories are ranked by cosine with the query (top ``k``);
evidence recall@k is the share of its evidence turns cited by them. The episode's score is the
mean over queries. ``credit`` splits it exactly over memories: each covered evidence turn credits
the best-ranked memory citing it with ``1 / (len(evidence) * n_queries)``; the credits sum to the
score. The trainer gives each span the credit of the memories it last wrote, minus a cost per memory
it inserted (``memory_cost``) and per LLM token it paid (``token_cost``), so a selection that keeps
everything is not automatically best. (The reference code puts 60% of the episode's score on the
last step and spreads 40%; the exact split is a departure that assigns credit where it is earned.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from skillstream.lifecycle.clusters import unit_rows
from skillstream.model import Memory, Message


@dataclass(frozen=True)
class Query:
    """One thing the memories should answer: its text, vector and evidence message ids."""

    text: str
    evidence: tuple[str, ...]
    vector: np.ndarray
    pool: frozenset[str] | None = None
    """Only memories citing one of these message ids are searched (``None``: all)."""
    answer: str | None = None
    """The gold answer (the ``qa`` reward)."""


@dataclass(frozen=True)
class Score:
    """An episode's score and its split over memories."""

    recall: float
    credit: dict[str, float]
    """memory id -> its share of ``recall``."""
    queries: int
    per_query: list[tuple[Query, float]] = field(default_factory=list)
    """Each query with its own recall (the designer's hard cases come from these)."""


def score(memories: Sequence[Memory], queries: Sequence[Query], k: int = 10) -> Score:
    """Evidence recall@k of ``queries`` over ``memories`` (live ones with vectors), with credit."""
    mems = [m for m in memories if m.vector is not None]
    usable = [q for q in queries if q.evidence]
    if not usable:
        return Score(0.0, {}, 0)
    credit: dict[str, float] = {}
    if not mems:
        return Score(0.0, credit, len(usable), [(q, 0.0) for q in usable])
    mat = unit_rows(np.stack([np.asarray(m.vector, dtype=np.float32) for m in mems]))
    cites = [set(m.source_message_ids or ()) for m in mems]
    total = 0.0
    per_query: list[tuple[Query, float]] = []
    for q in usable:
        sims = mat @ np.asarray(q.vector, dtype=np.float32)
        idx = [i for i in np.argsort(-sims, kind="stable") if q.pool is None or cites[i] & q.pool]
        top = idx[:k]
        share = 1.0 / (len(q.evidence) * len(usable))
        hit = 0
        for ev in q.evidence:
            for i in top:
                if ev in cites[i]:
                    credit[mems[i].id] = credit.get(mems[i].id, 0.0) + share
                    total += share
                    hit += 1
                    break
        per_query.append((q, hit / len(q.evidence)))
    return Score(total, credit, len(usable), per_query)


def answer_score(
    memories: Sequence[Memory],
    queries: Sequence[Query],
    answer_f1: Callable[[Query, list[Memory]], float],
    k: int = 10,
) -> Score:
    """The QA reward: each query's top ``k`` memories (ranked as in ``score``) go to
    ``answer_f1`` (an LLM answers from them; token F1 against the gold answer), and the mean F1
    over the queries is the score. A query's share, ``F1 / n_queries``, is split equally over the
    memories it was shown. Queries without a gold answer are left out."""
    mems = [m for m in memories if m.vector is not None]
    usable = [q for q in queries if q.answer]
    if not usable:
        return Score(0.0, {}, 0)
    credit: dict[str, float] = {}
    per_query: list[tuple[Query, float]] = []
    total = 0.0
    mat = (
        unit_rows(np.stack([np.asarray(m.vector, dtype=np.float32) for m in mems]))
        if mems
        else None
    )
    cites = [set(m.source_message_ids or ()) for m in mems]
    for q in usable:
        top: list[int] = []
        if mat is not None:
            sims = mat @ np.asarray(q.vector, dtype=np.float32)
            order = np.argsort(-sims, kind="stable")
            top = [int(i) for i in order if q.pool is None or cites[i] & q.pool][:k]
        f1 = float(answer_f1(q, [mems[i] for i in top]))
        per_query.append((q, f1))
        share = f1 / len(usable)
        total += share
        for i in top:
            credit[mems[i].id] = credit.get(mems[i].id, 0.0) + share / len(top)
    return Score(total, credit, len(usable), per_query)


def unlabelled_queries(
    messages: Sequence[Message],
    vectors: np.ndarray,
    *,
    threshold: float = 0.6,
    min_words: int = 5,
    max_queries: int = 60,
) -> list[Query]:
    """Queries of one conversation from later turns that refer back to earlier sessions.

    Args:
        messages: The conversation's messages in order.
        vectors: Their unit embeddings ``(n, d)``, in the same order.
        threshold: Lowest cosine of a later turn with its best earlier turn.
        min_words: Shortest later turn considered (short replies match anything).
        max_queries: The strongest matches kept.
    """
    sessions: list[str] = []
    for m in messages:
        if m.session_id not in sessions:
            sessions.append(m.session_id)
    rank = {s: i for i, s in enumerate(sessions)}
    found: list[tuple[float, int, Query]] = []
    vecs = np.asarray(vectors, dtype=np.float32)
    for j, m in enumerate(messages):
        r = rank[m.session_id]
        if r == 0 or m.role != "user" or len(m.text.split()) < min_words:
            continue
        earlier = [i for i, e in enumerate(messages) if rank[e.session_id] < r]
        sims = vecs[earlier] @ vecs[j]
        best = int(np.argmax(sims))
        if float(sims[best]) < threshold:
            continue
        src = messages[earlier[best]]
        pool = frozenset(messages[i].message_id for i in earlier)
        found.append((float(sims[best]), j, Query(m.text, (src.message_id,), vecs[j], pool)))
    found.sort(key=lambda t: (-t[0], t[1]))
    return [q for _, _, q in sorted(found[:max_queries], key=lambda t: t[1])]


def step_rewards(
    n_steps: int,
    written: Sequence[Iterable[str]],
    inserted: Sequence[int],
    tokens: Sequence[int],
    result: Score,
    *,
    memory_cost: float = 0.0,
    token_cost: float = 0.0,
) -> list[float]:
    """Per-span rewards: credit of the memories each span last wrote, minus its costs.

    Args:
        n_steps: Spans of the episode.
        written: Per span, the ids of the memories it inserted or changed.
        inserted: Per span, how many memories it inserted.
        tokens: Per span, the LLM tokens it paid (0 offline).
        result: The episode's ``score``.
        memory_cost: Cost per inserted memory.
        token_cost: Cost per LLM token.
    """
    last: dict[str, int] = {}
    for t, ids in enumerate(written):
        for mid in ids:
            last[mid] = t
    out = [-memory_cost * inserted[t] - token_cost * tokens[t] for t in range(n_steps)]
    for mid, c in result.credit.items():
        if mid in last:
            out[last[mid]] += c
    return out
