"""Confidence and reinforcement, and merging near-duplicates.

* A new memory starts at the default confidence (0.7; lessons 0.6), never above the cap 0.95.
* Restating a memory (the same normalised text, a near-duplicate, or a confirmed lesson)
  reinforces it: ``reinforcement`` + 1, confidence + 0.05 up to 0.95, ``last_reinforced_at`` set
  to the event time, decay restarts, and a TTL from the policy restarts from that time.
* A new memory whose embedding has cosine similarity >= ``merge_threshold`` with a live memory of
  the same owner and scope is a near-duplicate: it is kept with status ``merged`` and
  ``merged_into`` naming the older memory, which is reinforced.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import numpy as np

from skillstream.lifecycle.clock import latest
from skillstream.lifecycle.params import LifecycleParams
from skillstream.lifecycle.states import ChangeLog
from skillstream.model import Memory
from skillstream.vocab import LifecycleEvent, MemoryKind, MemoryStatus

NO_MERGE_KINDS = frozenset({MemoryKind.SUMMARY, MemoryKind.LESSON})
"""Kinds that never merge by similarity (lessons are confirmed by key, summaries are per session).
"""


def clamp_confidence(value: float, rules: LifecycleParams) -> float:
    """A confidence within ``[0, cap]``, rounded to 6 digits."""
    return round(min(rules.confidence_cap, max(0.0, float(value))), 6)


def reinforce(
    log: ChangeLog,
    m: Memory,
    at: datetime,
    rules: LifecycleParams,
    reason: str,
    *,
    expiry: timedelta | None = None,
    source_ids: Sequence[str] = (),
) -> None:
    """Reinforce ``m`` at event time ``at`` and log a ``reinforced`` event."""
    old = m.copy()
    m.reinforcement += 1
    m.confidence = clamp_confidence(m.confidence + rules.reinforce_step, rules)
    m.last_reinforced_at = latest(m.last_reinforced_at, at)
    m.decay_steps = 0
    m.updated_at = at
    if expiry is not None and m.expires_at is not None:
        m.expires_at = max(m.expires_at, at + expiry)
    if source_ids:
        m.source_message_ids = list(dict.fromkeys([*m.source_message_ids, *source_ids]))
    m.version += 1
    log.log(m, LifecycleEvent.REINFORCED, reason, at, old)


class NearDuplicates:
    """Live memories of one owner with vectors, to find the nearest one for a new memory."""

    def __init__(self, memories: Sequence[Memory], threshold: float) -> None:
        self.threshold = threshold
        self.items: list[Memory] = []
        self._mat: np.ndarray | None = None  # rows 0..len(items)-1 hold the candidates' vectors
        for m in sorted(memories, key=_age_key):
            self.add(m)

    def add(self, m: Memory) -> None:
        """Make ``m`` a candidate (when it is live, has a vector and may merge)."""
        if m.vector is None or m.kind in NO_MERGE_KINDS or m.status != MemoryStatus.ACTIVATED:
            return
        v = np.asarray(m.vector, dtype=np.float32).reshape(-1)
        n = len(self.items)
        if self._mat is None:
            self._mat = np.empty((64, v.shape[0]), dtype=np.float32)
        elif n == self._mat.shape[0]:  # grow by doubling: adding stays amortised O(1)
            self._mat = np.concatenate([self._mat, np.empty_like(self._mat)])
        self._mat[n] = v
        self.items.append(m)

    def nearest(self, m: Memory, vector: np.ndarray) -> tuple[Memory, float] | None:
        """The live memory of ``m``'s scope most similar to ``vector`` at or above the threshold.

        Ties go to the older memory. Candidates that stopped being live meanwhile are skipped.
        """
        if self.threshold > 1 or not self.items or m.kind in NO_MERGE_KINDS:
            return None
        assert self._mat is not None
        sims = self._mat[: len(self.items)] @ np.asarray(vector, dtype=np.float32).reshape(-1)
        best: tuple[float, int] | None = None
        for i in np.flatnonzero(sims >= self.threshold - 1e-6):
            c = self.items[int(i)]
            if c.id == m.id or c.status != MemoryStatus.ACTIVATED or c.scope != m.scope:
                continue
            s = round(float(sims[i]), 6)
            if best is None or s > best[0]:
                best = (s, int(i))
        if best is None:
            return None
        return self.items[best[1]], best[0]


def merge_into(
    log: ChangeLog,
    dup: Memory,
    into: Memory,
    similarity: float,
    at: datetime,
    rules: LifecycleParams,
    *,
    expiry: timedelta | None = None,
) -> None:
    """Fold the new ``dup`` into ``into``: ``dup`` becomes ``merged``, ``into`` is reinforced."""
    log.transition(
        dup,
        MemoryStatus.MERGED,
        MemoryStatus.MERGED,
        f"near-duplicate of {into.id} (cosine {similarity:.3f})",
        at,
        merged_into=into.id,
    )
    reinforce(
        log, into, at, rules, f"merged {dup.id}", expiry=expiry, source_ids=dup.source_message_ids
    )


def _age_key(m: Memory) -> tuple:
    t = m.created_at
    return (t.timestamp() if t else 0.0, m.id)
