"""Contradictions: detecting them, resolving them, and the ``contradictions`` table.

A new memory contradicts an existing live memory about the same subject (the same key; for an
UPDATE, its target) when

* one says the opposite of the other: exactly one of them is negated ("no longer", "not", 不...;
  idioms such as "can't wait" or "no doubt" do not count) and otherwise they say the same thing
  (half of their content words in common, at most 4 words differ, and with vectors cosine >= 0.75);
  or
* the key names a single-valued slot (home, job, name, age, diet, relationship, ...), both
  statements are short (at most 15 words) and the new text replaces a few words (at most 4) of the
  old value with others ("lives in Oslo" -> "lives in Bergen").

A refinement, which keeps every content word of the old text ("is a nurse" -> "is a nurse at
St. Mary's"), is never a contradiction.

Reported speech ("Maria said ...") is never taken as a contradiction. These are text params: an LLM
executor usually settles changes itself with UPDATE and DELETE operations; the rules catch what
reaches the store unsettled, and an UPDATE that replaces a slot's value is recorded the same way, so
the old value keeps its validity period instead of being overwritten.

Automatic resolution (``resolve``), in this order:

0. when the new memory comes from an UPDATE of the old one (the executor, rules or LLM, said that
   the statement replaces it, as a correction does), the new one wins (rule ``updated``): a
   plan's validity starts at its planned date, so "newer" below would keep a plan for April over
   its correction made in March;
1. the newer memory (later ``valid_from``) that was also confirmed more recently (created or
   reinforced later) wins;
2. otherwise the one more than ``contradiction_confidence_gap`` (0.3) more confident wins;
3. otherwise it stays ``unresolved`` and both memories stay live.

A fourth resolution, ``merge``, is a person's (``skillstream contradictions --resolve ID --as merge
[--text ...]``): both memories are merged into a new consolidated version (``consolidated_into``
relations), whose text is the given one, or by default both statements joined.

An unresolved contradiction older than ``contradiction_escalate_after_s`` (7 days of event time) is
escalated once, by maintenance: an ``escalated`` event on each of its memories, on the memory event
stream (the ``memory_events`` table, and the Kafka event topic when the flow publishes there),
at the time it fell due (:func:`escalate`).

The loser is not deleted: it is archived with ``valid_to`` set to the time the winner holds from
(``invalidated`` event), so "what did we believe on date X" stays answerable::

    SELECT text FROM memories WHERE owner_id = ? AND status <> 'merged'
      AND valid_from <= X AND (valid_to IS NULL OR valid_to > X)
"""

from __future__ import annotations

import re
from datetime import datetime

from skillstream.ids import prefixed_id
from skillstream.lifecycle.clock import latest
from skillstream.lifecycle.params import LifecycleParams
from skillstream.lifecycle.states import ChangeLog
from skillstream.memories import LIVE, OwnerMemories
from skillstream.model import ContradictionRow, Memory
from skillstream.text import CJK
from skillstream.vocab import LifecycleEvent, MemoryKind, MemoryStatus

TABLE = "contradictions"

KEEP_A, KEEP_B, DISCARD_BOTH, UNRESOLVED = "keep-a", "keep-b", "discard-both", "unresolved"
MERGE = "merge"
RESOLUTIONS = (KEEP_A, KEEP_B, MERGE, DISCARD_BOTH, UNRESOLVED)
CONFLICT_KINDS = frozenset(
    {MemoryKind.FACT, MemoryKind.PREFERENCE, MemoryKind.PLAN, MemoryKind.OPINION}
)
SINGLE_VALUED = frozenset(
    {
        "name",
        "origin",
        "home",
        "job",
        "age",
        "birthday",
        "diet",
        "allergy",
        "relationship",
        "study",
        "名字",
        "籍贯",
        "住址",
        "工作",
        "年龄",
        "饮食",
        "过敏",
        "感情",
        "学业",
    }
)
SAME_THING_SIMILARITY = 0.75

_NEGATION = re.compile(
    r"\b(?:not|no|never|no longer|none|nothing|stopped|quit|cannot)\b|n't\b|不|没|别|再也",
    re.IGNORECASE,
)
_IDIOMS = re.compile(
    r"\b(?:can(?:no|')?t wait|couldn't wait|no doubt|no matter|not only|never forget|can(?:no|')?t "
    r"believe|couldn't be (?:happier|prouder|more)|no wonder|no problem|never mind|not bad)\b",
    re.IGNORECASE,
)
"""Negative words that do not negate anything ("I can't wait", "no doubt")."""
MAX_SLOT_WORDS = 15
"""A slot change is only read from short statements: in a long one the slot phrase is incidental."""
MAX_VALUE_WORDS = 4
"""... and only when few words change: more means a different statement, not a new value."""
_REPORTED = re.compile(r"\b(?:said|says|asked|told)\b|说", re.IGNORECASE)
_WORD = re.compile(r"[\w']+", re.UNICODE)
_STOP = frozenset(
    "a an the and or but of to in on at for with by from as is are was were be been being "
    "am do does did has have had having it its this that these those there their they them "
    "he she his her him i me my we our you your also just really very so too still now then "
    "than into about any some more most much many not no never longer none nothing stopped "
    "quit cannot".split()
)


def _stem(word: str) -> str:
    """A crude stem that makes like/likes/liked/liking and hike/hiking agree."""
    w = word.lower().strip("'")
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s"):
        if len(w) > len(suffix) + 2 and w.endswith(suffix) and not w.endswith("ss"):
            w = w[: -len(suffix)]
            break
    return w.rstrip("e") or w


def content_words(text: str) -> set[str]:
    """Stemmed content words (for Chinese: character pairs) without negations or stop words."""
    if CJK.search(text):
        chars = CJK.findall(_NEGATION.sub("", text))
        return {a + b for a, b in zip(chars, chars[1:])}
    words = (w.lower() for w in _WORD.findall(text.replace("n't", " ")))
    return {_stem(w) for w in words if w not in _STOP and len(w) > 1}


def negated(text: str) -> bool:
    """Whether the statement is negated (an odd number of negations, idioms left out)."""
    return len(_NEGATION.findall(_IDIOMS.sub(" ", text))) % 2 == 1


def single_valued(key: str | None) -> bool:
    """Whether a key names a slot with one current value per subject."""
    if not key:
        return False
    head = key.rsplit("|", 1)[-1]
    return bool(set(_WORD.findall(head.lower())) & SINGLE_VALUED) or head in SINGLE_VALUED


def conflict(
    old: Memory, new_text: str, new_kind: str, key: str | None, similarity: float | None
) -> str | None:
    """A description of how ``new_text`` contradicts ``old``, or ``None`` when it does not."""
    if old.kind not in CONFLICT_KINDS or new_kind not in CONFLICT_KINDS:
        return None
    if _REPORTED.search(old.text) or _REPORTED.search(new_text):
        return None
    a, b = content_words(old.text), content_words(new_text)
    if not a or not b:
        return None
    if negated(old.text) != negated(new_text):
        same = len(a & b) / len(a | b) >= 0.5 and len(a ^ b) <= MAX_VALUE_WORDS
        if similarity is not None:
            same = same and similarity >= SAME_THING_SIMILARITY
        if same:
            return f"opposite statements: {old.text!r} vs {new_text!r}"
    if a <= b:
        return None  # a refinement: every word of the old text is still there
    short = max(len(old.text.split()), len(new_text.split())) <= MAX_SLOT_WORDS
    if single_valued(key) and short:
        gone, added = sorted(a - b), sorted(b - a)
        if gone and added and len(gone) <= MAX_VALUE_WORDS and len(added) <= MAX_VALUE_WORDS:
            slot = (key or "").rsplit("|", 1)[-1]
            return f"{slot} changed: {' '.join(gone)} -> {' '.join(added)}"
    return None


def confirmed_at(m: Memory) -> datetime | None:
    """When the memory was last confirmed: created, or reinforced, whichever is later."""
    return latest(m.valid_from, m.created_at, m.last_reinforced_at)


def resolve(a: Memory, b: Memory, params: LifecycleParams) -> tuple[str, str | None]:
    """Settle ``a`` (existing) vs ``b`` (new): ``(resolution, rule)`` (see the module docstring)."""
    fa, fb = a.valid_from or a.created_at, b.valid_from or b.created_at
    ca, cb = confirmed_at(a), confirmed_at(b)
    if fa is not None and fb is not None and ca is not None and cb is not None:
        if fb > fa and cb > ca:
            return KEEP_B, "newer"
        if fa > fb and ca > cb:
            return KEEP_A, "newer"
    gap = round(a.confidence - b.confidence, 6)
    if gap > params.contradiction_confidence_gap:
        return KEEP_A, "confidence"
    if -gap > params.contradiction_confidence_gap:
        return KEEP_B, "confidence"
    return UNRESOLVED, None


def invalidate(log: ChangeLog, loser: Memory, winner: Memory, rule: str, at: datetime) -> None:
    """Archive the loser; its validity ends when the winner's begins (never before its own)."""
    start = loser.valid_from or loser.created_at or at
    win = winner.valid_from or winner.created_at or at
    log.transition(
        loser,
        MemoryStatus.ARCHIVED,
        LifecycleEvent.INVALIDATED,
        f"contradicted by {winner.id} ({rule})",
        at,
        valid_to=max(start, win),
    )


def row(
    a: Memory,
    b: Memory,
    description: str,
    resolution: str,
    rule: str | None,
    *,
    detected_at: datetime,
    detected_by: str,
    span_id: str | None,
    recorded_at: datetime,
    resolved_at: datetime | None = None,
) -> ContradictionRow:
    """A ``contradictions`` row (the id hashes the owner and both memory ids)."""
    winner = {KEEP_A: a.id, KEEP_B: b.id}.get(resolution)
    return ContradictionRow(
        contradiction_id=prefixed_id("ctr", a.owner_id, a.id, b.id),
        owner_id=a.owner_id,
        memory_a=a.id,
        memory_b=b.id,
        key=a.key or b.key,
        description=description[:1000],
        detected_at=detected_at,
        detected_by=detected_by,
        span_id=span_id,
        resolution=resolution,
        rule=rule,
        winner_id=winner,
        resolved_at=resolved_at,
        recorded_at=recorded_at,
    )


def settle(
    log: ChangeLog,
    a: Memory,
    b: Memory,
    description: str,
    at: datetime,
    params: LifecycleParams,
    *,
    updated: bool = False,
) -> str:
    """Record the contradiction between ``a`` and ``b`` detected at ``at`` and apply its resolution.

    ``updated``: ``b`` comes from an UPDATE of ``a``, and replaces it (rule ``updated``).

    Returns:
        The resolution (``keep-a``, ``keep-b`` or ``unresolved``).
    """
    resolution, rule = (KEEP_B, "updated") if updated else resolve(a, b, params)
    if resolution == KEEP_B:
        invalidate(log, a, b, rule or "", at)
    elif resolution == KEEP_A:
        invalidate(log, b, a, rule or "", at)
    log.rows.contradictions.append(
        row(
            a,
            b,
            description,
            resolution,
            rule,
            detected_at=at,
            detected_by=log.actor,
            span_id=log.span_id,
            recorded_at=log.recorded_at,
            resolved_at=None if resolution == UNRESOLVED else at,
        )
    )
    return resolution


def escalate(log: ChangeLog, state: OwnerMemories, at: datetime, params: LifecycleParams) -> int:
    """Escalate the owner's unresolved contradictions that fell due by ``at``; returns how many.

    A contradiction one of whose memories is no longer live is dropped from the open ones (it was
    settled, or will be by ``skillstream maintain``). Each escalation is an ``escalated`` event on
    both memories at ``detected_at + contradiction_escalate_after``; the memories themselves do not
    change.
    """
    n = 0
    for cid, (a_id, b_id, detected) in sorted(state.open_contradictions.items()):
        a, b = state.get(a_id), state.get(b_id)
        live = (*LIVE, MemoryStatus.FROZEN)
        if a is None or b is None or a.status not in live or b.status not in live:
            del state.open_contradictions[cid]
            continue
        due = detected + params.contradiction_escalate_after
        if cid in state.escalated or due > at:
            continue
        why = f"contradiction {cid} unresolved since {detected:%Y-%m-%d}: needs a person"
        for m in (a, b):
            log.log(m, LifecycleEvent.ESCALATED, why, due, m.copy(), changed=False)
        state.escalated.add(cid)
        n += 1
    return n
