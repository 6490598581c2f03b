"""Confidence and reinforcement, and merging near-duplicates.

* A new memory starts at the default confidence (0.7; lessons 0.6), never above the cap 0.95.
* Restating a memory (the same normalised text, a near-duplicate, or a confirmed lesson)
  reinforces it: ``reinforcement`` + 1, confidence + 0.05 up to 0.95, ``last_reinforced_at`` set
  to the event time, decay restarts, and a TTL from the policy restarts from that time.
* A new memory whose embedding has cosine similarity >= ``merge_threshold`` with a live memory of
  the same owner and scope is a near-duplicate: both are consolidated into a new version
  (:func:`consolidate`) and kept with status ``merged`` and ``merged_into`` naming it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import numpy as np

from skillstream.ids import prefixed_id
from skillstream.lifecycle.clock import latest
from skillstream.lifecycle.params import LifecycleParams
from skillstream.lifecycle.states import ChangeLog
from skillstream.memories import LIVE
from skillstream.model import Memory, MemoryRelationRow
from skillstream.vocab import LifecycleEvent, MemoryKind, MemoryStatus

NO_MERGE_KINDS = frozenset({MemoryKind.SUMMARY, MemoryKind.LESSON, MemoryKind.TOPIC})
"""Kinds that never merge by similarity (lessons are confirmed by key, summaries are per session,
topic nodes belong to the reorganizer)."""
CONSOLIDATED_INTO = "consolidated_into"
"""The ``memory_relations`` relation from a merged memory to the version that replaced it."""


def clamp_confidence(value: float, params: LifecycleParams) -> float:
    """A confidence within ``[0, cap]``, rounded to 6 digits."""
    return round(min(params.confidence_cap, max(0.0, float(value))), 6)


def reinforce(
    log: ChangeLog,
    m: Memory,
    at: datetime,
    params: LifecycleParams,
    reason: str,
    *,
    expiry: timedelta | None = None,
    source_ids: Sequence[str] = (),
) -> None:
    """Reinforce ``m`` at event time ``at`` and log a ``reinforced`` event."""
    old = m.copy()
    m.reinforcement += 1
    m.confidence = clamp_confidence(m.confidence + params.reinforce_step, params)
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
        if m.vector is None or m.kind in NO_MERGE_KINDS or m.status not in LIVE:
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
            if c.id == m.id or c.status not in LIVE or c.scope != m.scope:
                continue
            s = round(float(sims[i]), 6)
            if best is None or s > best[0]:
                best = (s, int(i))
        if best is None:
            return None
        return self.items[best[1]], best[0]


def consolidated_id(owner_id: str, ids: Sequence[str]) -> str:
    """The id of the version that consolidates ``ids`` (the same merged set, the same id)."""
    return prefixed_id("mem", owner_id, "consolidated", *sorted(ids))


def _words(text: str) -> int:
    return len(text.split())


def consolidate(
    log: ChangeLog,
    dup: Memory,
    into: Memory,
    similarity: float,
    at: datetime,
    params: LifecycleParams,
    *,
    expiry: timedelta | None = None,
) -> Memory:
    """Merge the new ``dup`` and the older ``into`` into a new consolidated version.

    The seed's Merged stage: overlapping records are compressed into an updated, stable entry.
    The new memory keeps the more informative text of the two (more words; on a tie the newer)
    and lives in the session that restated it; see :func:`merge_versions` for the rest.

    Returns:
        The new memory (logged ``consolidated``; its vector is the kept text's).
    """
    keep = dup if _words(dup.text) >= _words(into.text) else into
    return merge_versions(
        log,
        [into, dup],
        keep,
        at,
        params,
        reason=f"cosine {similarity:.3f}",
        weight=similarity,
        expiry=expiry,
    )


def merge_versions(
    log: ChangeLog,
    olds: Sequence[Memory],
    keep: Memory,
    at: datetime,
    params: LifecycleParams,
    *,
    text: str | None = None,
    reason: str,
    weight: float | None = None,
    expiry: timedelta | None = None,
) -> Memory:
    """Replace ``olds`` (oldest first) by one new version with ``keep``'s text (or ``text``).

    The new memory has the union of their sources and tags, their reinforcements plus one (the
    restatement), the highest confidence plus one reinforcement step, the earliest ``valid_from``
    and the newest memory's session and span. Every old memory becomes ``merged`` with
    ``merged_into`` naming it (its row and events stay), and ``memory_relations`` gets one
    ``consolidated_into`` row per old memory. Without ``text`` the new memory reuses ``keep``'s
    vector; with it, the caller embeds the text.
    """
    first, last = olds[0], olds[-1]
    new = Memory(
        id=consolidated_id(first.owner_id, [m.id for m in olds]),
        owner_id=first.owner_id,
        text=text or keep.text,
        kind=first.kind,
        scope=first.scope,
        memory_type=first.memory_type,
        agent_id=last.agent_id or first.agent_id,
        conversation_id=last.conversation_id,
        key=next((m.key for m in olds if m.key), None),
        subject=keep.subject or first.subject,
        tags=sorted({t for m in olds for t in m.tags}),
        confidence=clamp_confidence(
            max(m.confidence for m in olds) + params.reinforce_step, params
        ),
        status=(
            MemoryStatus.ACTIVATED
            if any(m.status == MemoryStatus.ACTIVATED for m in olds)
            else MemoryStatus.GENERATED
        ),
        event_ts=last.event_ts,
        valid_from=latest_or_first(*(m.valid_from for m in olds)),
        created_at=at,
        updated_at=at,
        last_accessed_at=latest(*(m.last_accessed_at for m in olds)),
        last_reinforced_at=at,
        reinforcement=sum(m.reinforcement for m in olds) + 1,
        expires_at=(at + expiry if expiry is not None else latest(*(m.expires_at for m in olds))),
        source_message_ids=list(dict.fromkeys(s for m in olds for s in m.source_message_ids)),
        span_id=last.span_id,
        lang=keep.lang,
        session_id=last.session_id,
        vector=None if text else keep.vector,
    )
    for old in olds:
        log.transition(
            old,
            MemoryStatus.MERGED,
            MemoryStatus.MERGED,
            f"consolidated into {new.id} ({reason})",
            at,
            merged_into=new.id,
        )
        log.rows.memory_relations.append(
            MemoryRelationRow(
                relation_id=prefixed_id("rel", old.id, new.id, CONSOLIDATED_INTO),
                owner_id=new.owner_id,
                source_id=old.id,
                target_id=new.id,
                relation=CONSOLIDATED_INTO,
                weight=weight,
                version=new.version,
                event_ts=at,
                recorded_at=log.recorded_at,
            )
        )
    log.log(new, LifecycleEvent.CONSOLIDATED, f"consolidates {', '.join(m.id for m in olds)}", at)
    return new


def latest_or_first(*times: datetime | None) -> datetime | None:
    """The earliest of the given times, ignoring ``None``."""
    present = [t for t in times if t is not None]
    return min(present) if present else None


def _age_key(m: Memory) -> tuple:
    t = m.created_at
    return (t.timestamp() if t else 0.0, m.id)
