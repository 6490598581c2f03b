"""Session summaries: one per session, stored as a searchable memory and as a table row.

A session is closed once its last memory is older than the idle gap at the maintenance time (or
when maintenance is told to close every session, ``maintain --close-sessions``). Its summary is a
memory of kind ``summary`` (key ``summary|<session_id>``, type ``LongTermMemory``) whose text is a
narrative and the key facts, so ordinary search finds it, plus a row in ``session_summaries`` with
the narrative, the key facts, the topics and the token count (the seed's memory-summary).

The summary is built from the session's memories only (extractive, no LLM): the narrative says
when and who spoke and then, in one sentence, what the three memories closest to the session's
mean vector say, in time order; key facts are up to eight memories spread evenly over the session
in time order; topics are the most frequent tags; the emotional context (the seed's
``emotionalContext``, only in the table row) is the tones its memories speak in
(``skillstream.lifecycle.tone``). Its
times come from the session itself (first and last memory), never from when maintenance ran, so
every path to the same memories gives the same summary. A summary is rebuilt when a memory of its
session was created after the summary's time (a late span); its ``created_at`` is the time of the
session's last memory. The scope is the most restrictive scope of
the session's memories (session, then private, then fleet), so a summary never shows a fact to
someone who could not read the fact itself.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import datetime

import numpy as np

from skillstream.embed import Embed
from skillstream.ids import prefixed_id
from skillstream.lifecycle.params import LifecycleParams
from skillstream.lifecycle.reorganizer import sentence
from skillstream.lifecycle.states import ChangeLog
from skillstream.lifecycle.tone import emotional_context
from skillstream.memories import LIVE, OwnerMemories
from skillstream.model import Memory, SessionSummaryRow
from skillstream.prompts import render
from skillstream.vectors import LaterVectors
from skillstream.vocab import LifecycleEvent, MemoryKind, MemoryStatus, MemoryType

TABLE = "session_summaries"

SUMMARY_KIND = MemoryKind.SUMMARY
MAX_FACTS = 8
NARRATIVE_FACTS = 3
MAX_TOPICS = 5
_SCOPE_ORDER = {"session": 0, "private": 1, "fleet": 2}


def summary_id(owner_id: str, session_id: str) -> str:
    return prefixed_id("mem", owner_id, "summary", session_id)


def _summarised(m: Memory) -> bool:
    """Whether ``m`` counts in its session's summary (not a summary, not merged or expired)."""
    return bool(
        m.session_id
        and m.kind != SUMMARY_KIND
        and m.status not in (MemoryStatus.MERGED, MemoryStatus.EXPIRED)
        and m.created_at
    )


def sessions(
    state: OwnerMemories, only: dict[str, Iterable[str]] | None = None
) -> dict[str, list[Memory]]:
    """The owner's memories by the session that created them (not summaries, not merged or expired
    ones), oldest first; with ``only``, just those sessions, from the member ids it gives."""
    out: dict[str, list[Memory]] = {}
    if only is None:
        for m in state.items.values():
            if _summarised(m):
                out.setdefault(m.session_id, []).append(m)  # type: ignore[arg-type]
    else:
        for sid, ids in only.items():
            items = [m for m in (state.get(i) for i in ids) if m is not None and _summarised(m)]
            if items:
                out[sid] = [m for m in items if m.session_id == sid]
    for items in out.values():
        items.sort(key=lambda m: (m.created_at, m.id))
    return {sid: items for sid, items in out.items() if items}


def up_to_date(state: OwnerMemories, session_id: str, items: list[Memory]) -> bool:
    """Whether ``session_id`` needs nothing more from ``summarize`` whatever the time: its summary
    is no longer live (left alone), or no memory of the session is newer than its summary."""
    current = state.get(summary_id(state.owner_id, session_id))
    if current is None:
        return not items
    return current.status not in LIVE or (
        current.created_at is not None and (not items or items[-1].created_at <= current.created_at)  # type: ignore[operator]
    )


def _spread(items: list[Memory], n: int) -> list[Memory]:
    if len(items) <= n:
        return items
    return [items[(i * len(items)) // n] for i in range(n)]


def central(items: list[Memory], n: int) -> list[Memory]:
    """The ``n`` memories that best stand for the session, in time order.

    With vectors: the closest to the session's mean vector (ties by id). Without: the first, the
    last and ones spread evenly between.
    """
    if len(items) <= n:
        return items
    with_vec = [m for m in items if m.vector is not None]
    if len(with_vec) < len(items):
        picked = {id(m) for m in _spread(items[:-1], n - 1)} | {id(items[-1])}
        return [m for m in items if id(m) in picked]
    mat = np.asarray([m.vector for m in items], dtype=np.float32)
    centre = mat.sum(axis=0)
    sims = mat @ centre
    best = sorted(range(len(items)), key=lambda i: (-round(float(sims[i]), 5), items[i].id))[:n]
    return [items[i] for i in sorted(best)]


def _join(names: list[str], lang: str) -> str:
    if lang == "zh":
        return "、".join(names)
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def build(owner_id: str, session_id: str, items: list[Memory]) -> tuple[Memory, SessionSummaryRow]:
    """The summary memory (without vector) and its table row for one session's memories (the row's
    ``version``, ``token_count`` and ``recorded_at`` are set once the memory is stored)."""
    langs = Counter(m.lang for m in items)
    lang = "zh" if langs.get("zh", 0) > len(items) / 2 else "en"
    speakers = list(dict.fromkeys(m.subject for m in items if m.subject))[:4]
    tags = Counter(t for m in items for t in m.tags)
    topics = [t for t, _ in sorted(tags.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_TOPICS]]
    facts = [m.text for m in _spread(items, MAX_FACTS)]
    start, end = items[0].created_at, items[-1].created_at
    assert start is not None and end is not None
    narrative_facts = "\n".join(f"- {f}" for f in facts)
    text = render(
        "lifecycle_summary",
        lang,
        date=start.strftime("%Y-%m-%d"),
        speakers=_join(speakers, lang) or ("参与者" if lang == "zh" else "The participants"),
        narrative=sentence([m.text for m in central(items, NARRATIVE_FACTS)], lang),
        facts=narrative_facts,
    ).strip()
    narrative = text.split("\n", 1)[0]
    sources = list(dict.fromkeys(s for m in items for s in m.source_message_ids))
    scope = min((m.scope for m in items), key=lambda s: _SCOPE_ORDER.get(s, -1))
    sid = summary_id(owner_id, session_id)
    memory = Memory(
        id=sid,
        owner_id=owner_id,
        text=text,
        kind=SUMMARY_KIND,
        scope=scope,
        memory_type=MemoryType.LONG_TERM,
        agent_id=items[-1].agent_id,
        conversation_id=items[-1].conversation_id,
        key=f"summary|{session_id}",
        subject=items[-1].conversation_id,
        tags=topics,
        valid_from=start,
        event_ts=end,
        created_at=end,
        updated_at=end,
        source_message_ids=sources,
        span_id=items[-1].span_id,
        lang=lang,
        session_id=session_id,
    )
    table_row = SessionSummaryRow(
        emotional_context=emotional_context(m.text for m in items),
        summary_id=sid,
        owner_id=owner_id,
        conversation_id=items[-1].conversation_id,
        session_id=session_id,
        narrative=narrative,
        key_facts=facts,
        topics=topics,
        n_memories=len(items),
        start_ts=start,
        end_ts=end,
    )
    return memory, table_row


def summarize(
    log: ChangeLog,
    state: OwnerMemories,
    at: datetime,
    params: LifecycleParams,
    embed: Embed | None,
    *,
    close_all: bool = False,
    token_count: Callable[[str], int] | None = None,
    later: LaterVectors | None = None,
    only: dict[str, Iterable[str]] | None = None,
) -> int:
    """Write or refresh the summaries of the owner's closed sessions; returns how many changed.

    With ``later``, the summaries get their vectors when the caller settles it, not now. With
    ``only`` (session id -> ids of its memories), just those sessions are looked at: the caller
    knows every other one is up to date.
    """
    todo: list[tuple[Memory, SessionSummaryRow, Memory | None]] = []
    for session_id, items in sorted(sessions(state, only).items()):
        if not close_all and items[-1].created_at + params.idle_gap > at:  # type: ignore[operator]
            continue
        current = state.get(summary_id(state.owner_id, session_id))
        last = items[-1].created_at
        assert last is not None  # sessions() keeps only memories with a creation time
        if current is not None and (
            current.status not in LIVE
            or (current.created_at is not None and last <= current.created_at)
        ):
            continue  # up to date: no memory of the session is newer than the summary
        memory, table_row = build(state.owner_id, session_id, items)
        todo.append((memory, table_row, current))
    if not todo:
        return 0
    now = embed is not None and later is None
    vectors = embed([m.text for m, _, _ in todo]) if now else None  # type: ignore[misc]
    rows = []
    targets = []
    for i, (memory, table_row, current) in enumerate(todo):
        if vectors is not None:
            memory.vector = vectors[i]  # type: ignore[assignment]
        if current is None:
            memory.confidence = params.default_confidence
            state.put(memory)
            log.log(
                memory,
                LifecycleEvent.CREATED,
                f"session {table_row.session_id} closed",
                memory.created_at,
            )
            target = memory
        else:
            old = current.copy()
            for name in (
                "text",
                "tags",
                "source_message_ids",
                "span_id",
                "event_ts",
                "scope",
                "lang",
                "created_at",
            ):
                setattr(current, name, getattr(memory, name))
            current.updated_at = memory.updated_at
            if vectors is not None:
                current.vector = memory.vector
            current.version += 1
            log.log(
                current,
                LifecycleEvent.UPDATED,
                "session summary refreshed with later memories",
                memory.updated_at,
                old,
            )
            target = current
        targets.append(target)
        table_row = dataclasses.replace(
            table_row,
            version=target.version,
            token_count=token_count(target.text) if token_count else len(target.text.split()),
            recorded_at=log.recorded_at,
        )
        rows.append(table_row)
    if later is not None:
        later.want(targets)
    log.rows.session_summaries.extend(rows)
    return len(todo)
