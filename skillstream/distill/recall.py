"""Recall of an owner's related task skills: hybrid search over name, description and triggers.

Two rankings are fused with reciprocal-rank fusion (the same fusion LanceDB's hybrid search uses):

* **vector**: cosine similarity between the query embedding and each task skill's vector (the
  embedding of its ``search_text``: title, name, description, triggers);
* **lexical**: BM25 of the query's terms over the same text;
* **prototype**: for a skill distilled from segments, its :func:`affinity` to the query and the
  user's request: the cosine of the query to the mean of the drafts merged into the skill, averaged
  with the cosine of the request to the mean of their users' requests. A mean over many segments is
  a steadier picture of a task than any one rendered text.

It runs in memory over the task skills the distiller holds for an owner (tens to hundreds), so the
flow never waits on a store for it; ``store.TaskSkillIndex.search`` is the LanceDB counterpart for
the API. Each hit keeps its cosine so callers can apply a similarity threshold.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from skillstream.distill.record import TaskSkill
from skillstream.distill.steps import terms
from skillstream.vocab import TaskSkillStatus

RRF_K = 60


@dataclass(frozen=True)
class RecallHit:
    """A recalled task skill with its fused score and the two signals behind it."""

    skill: TaskSkill
    score: float
    cosine: float
    lexical: float


def bm25_scores(query: str, docs: Sequence[str], k1: float = 1.2, b: float = 0.75) -> list[float]:
    """BM25 score of ``query`` against each document (terms from ``steps.terms``)."""
    q = set(terms(query))
    toks = [terms(d) for d in docs]
    n = len(toks)
    if not n or not q:
        return [0.0] * n
    avg = sum(len(t) for t in toks) / n or 1.0
    df: Counter[str] = Counter()
    for t in toks:
        df.update(set(t) & q)
    out = []
    for t in toks:
        tf = Counter(t)
        s = 0.0
        for term in q:
            f = tf.get(term, 0)
            if not f:
                continue
            idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
            s += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len(t) / avg))
        out.append(s)
    return out


def prototype(skill: TaskSkill, key: str = "centroid") -> np.ndarray | None:
    """A skill's unit mean of the vectors summed under ``key`` in its stats (``centroid``: its
    drafts; ``requests``: their requests); for ``centroid``, its vector when it has none."""
    total = skill.stats.get(key)
    if total:
        c = np.asarray(total, dtype=np.float32)
        n = float(np.linalg.norm(c))
        if n:
            return c / n
    if key != "centroid":
        return None
    return np.asarray(skill.vector, dtype=np.float32) if skill.vector is not None else None


def affinity(
    vector: np.ndarray | None, request: np.ndarray | None, skill: TaskSkill
) -> float | None:
    """How alike a query (and the user's request) is to a skill's prototypes: the mean of the
    cosines that can be taken (query to drafts' mean, request to requests' mean); ``None`` when
    neither can."""
    query = [
        None if v is None else np.asarray(v, dtype=np.float32).reshape(-1)
        for v in (vector, request)
    ]
    return mean_cosine(query, [prototype(skill, "centroid"), prototype(skill, "requests")])


def mean_cosine(a: Sequence[np.ndarray | None], b: Sequence[np.ndarray | None]) -> float | None:
    """The mean of the dot products of the pairs ``a[i], b[i]`` where both are present and of the
    same width (unit vectors: cosines); ``None`` when no pair is."""
    cos = [
        float(np.dot(x, y))
        for x, y in zip(a, b)
        if x is not None and y is not None and x.shape == y.shape
    ]
    return sum(cos) / len(cos) if cos else None


def recall(
    query: str,
    vector: np.ndarray | None,
    skills: Sequence[TaskSkill],
    *,
    k: int = 5,
    statuses: Sequence[str] = (TaskSkillStatus.ACTIVE,),
    request: np.ndarray | None = None,
) -> list[RecallHit]:
    """The ``k`` task skills most related to a query, best first.

    Args:
        query: Query text (a segment's name, description and triggers, or a user's request).
        vector: Unit embedding of the query; without it only the lexical ranking counts.
        skills: Candidate task skills (one owner's); those without a vector rank by text only.
        k: Hits to return.
        statuses: Allowed statuses.
        request: Unit embedding of the user's request, when the query comes from a segment.

    Returns:
        Hits whose fused score is positive (a skill matching neither way is not recalled).
    """
    pool = [s for s in skills if s.status in statuses]
    if not pool or k <= 0:
        return []
    lexical = bm25_scores(query, [s.search_text() for s in pool])
    cosine = [0.0] * len(pool)
    if vector is not None:
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        for i, s in enumerate(pool):
            if s.vector is not None and len(s.vector) == q.shape[0]:
                cosine[i] = float(np.dot(q, np.asarray(s.vector, dtype=np.float32)))
    fused = [0.0] * len(pool)
    if vector is not None:
        for rank, i in enumerate(sorted(range(len(pool)), key=lambda i: -cosine[i])):
            if pool[i].vector is not None:
                fused[i] += 1.0 / (RRF_K + rank + 1)
    for rank, i in enumerate(sorted(range(len(pool)), key=lambda i: -lexical[i])):
        if lexical[i] > 0:
            fused[i] += 1.0 / (RRF_K + rank + 1)
    near = [affinity(vector, request, s) if s.stats.get("centroid") else None for s in pool]
    ranked = sorted(
        (i for i in range(len(pool)) if near[i] is not None), key=lambda i: -(near[i] or 0.0)
    )
    for rank, i in enumerate(ranked):
        fused[i] += 1.0 / (RRF_K + rank + 1)
    order = sorted(range(len(pool)), key=lambda i: (-fused[i], -cosine[i], pool[i].name))
    return [RecallHit(pool[i], fused[i], cosine[i], lexical[i]) for i in order[:k] if fused[i] > 0]
