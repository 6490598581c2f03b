"""Session summaries (one per session, searchable) and lessons from outcome records."""

from __future__ import annotations

from dataclasses import asdict
from datetime import timedelta

from skillstream.apply import apply_ops
from skillstream.lifecycle.maintenance import maintain_owner
from skillstream.lifecycle.summaries import summary_id
from skillstream.memories import OwnerMemories
from skillstream.model import MemoryOp
from skillstream.vocab import Op
from tests.lifecycle.conftest import T0, lifecycle_params, span

MIN = timedelta(minutes=1)


def _session(recorded):
    state = OwnerMemories("o1")
    for at, op in [
        (
            T0,
            MemoryOp(
                Op.INSERT,
                "Caroline likes green tea",
                kind="preference",
                subject="Caroline",
                tags=("tea", "drinks"),
            ),
        ),
        (
            T0 + 5 * MIN,
            MemoryOp(Op.INSERT, "Melanie paints sunsets", subject="Melanie", tags=("painting",)),
        ),
        (
            T0 + 10 * MIN,
            MemoryOp(
                Op.INSERT,
                "Caroline plans a trip to Kyoto",
                kind="plan",
                subject="Caroline",
                tags=("travel", "kyoto"),
            ),
        ),
    ]:
        apply_ops(state, span([op.text], at=at), [op], recorded)
    return state


def test_a_closed_session_gets_one_summary(recorded):
    state = _session(recorded)
    assert (
        maintain_owner(state, T0 + 39 * MIN, lifecycle_params(), recorded_at=recorded) is None
    )  # still open (30 min gap)
    r = maintain_owner(state, T0 + 40 * MIN, lifecycle_params(), recorded_at=recorded)
    s = state.get(summary_id("o1", "s1"))
    assert s.text == (
        "2024-01-01: Caroline and Melanie spoke. Caroline likes green tea; Melanie paints "
        "sunsets; and Caroline plans a trip to Kyoto.\n"
        "Key facts:\n- Caroline likes green tea\n- Melanie "
        "paints sunsets\n- Caroline plans a trip to Kyoto"
    )
    assert (
        s.kind,
        s.key,
        s.scope,
        s.memory_type,
        s.status,
        s.session_id,
        s.valid_from,
        s.created_at,
    ) == (
        "summary",
        "summary|s1",
        "private",
        "LongTermMemory",
        "generated",
        "s1",
        T0,
        T0 + 10 * MIN,
    )
    assert len(s.source_message_ids) == 3
    assert [(e.event, e.memory_id, e.reason, e.event_ts) for e in r.events] == [
        ("created", s.id, "session s1 closed", T0 + 10 * MIN)
    ]
    (row,) = [asdict(x) for x in r.rows.session_summaries]
    assert {
        k: row[k]
        for k in ("summary_id", "session_id", "n_memories", "topics", "version", "token_count")
    } == {
        "summary_id": s.id,
        "session_id": "s1",
        "n_memories": 3,
        "version": 1,
        "token_count": 37,
        "topics": ["drinks", "kyoto", "painting", "tea", "travel"],
    }
    assert (
        row["narrative"]
        == "2024-01-01: Caroline and Melanie spoke. Caroline likes green tea; Melanie paints "
        "sunsets; and Caroline plans a trip to Kyoto."
    )
    assert row["emotional_context"] is None  # no word of this session carries a tone
    assert (
        maintain_owner(state, T0 + 50 * MIN, lifecycle_params(), recorded_at=recorded) is None
    )  # one per session
    # summaries are not shown to the extractor
    assert s not in state.retrieve(None, 10)


def test_the_summary_row_names_the_tone_of_the_session(recorded):
    state = OwnerMemories("o1")
    for i, text in enumerate(
        [
            "Sam is frustrated that the parcel is late again",
            "Sam is not happy with the courier",  # negated: no tone
            "Sam was annoyed by the hold music",
            "Sam said thanks once the refund came",
        ]
    ):
        apply_ops(state, span([text], at=T0 + i * MIN), [MemoryOp(Op.INSERT, text)], recorded)
    r = maintain_owner(state, T0 + 60 * MIN, lifecycle_params(), recorded_at=recorded)
    (row,) = r.rows.session_summaries
    assert row.emotional_context == "frustrated (frustrated, annoyed); grateful (thanks)"
    # the summary memory itself stays narrative and key facts; the tone is a column of the row
    assert state.get(row.summary_id).text.split("\n")[1] == "Key facts:"


def test_tones_in_chinese_and_negation():
    from skillstream.lifecycle.tone import emotional_context

    assert emotional_context(["她今天不开心", "她很担心考试", "考试让她很紧张"]) == (
        "anxious (担心, 紧张); sad (不开心)"
    )
    assert emotional_context(["Ana isn't worried about the move", "Ana never felt lonely"]) is None
    assert emotional_context(["Ana went to a funeral", "The fundraiser is on Friday"]) is None
    assert emotional_context(["Ana can't wait for the trip", "Ana is excited"]) == (
        "excited (can't wait, excited)"
    )


def test_a_late_memory_refreshes_the_summary_and_scope_is_the_strictest(recorded):
    state = _session(recorded)
    maintain_owner(state, T0 + 40 * MIN, lifecycle_params(), recorded_at=recorded)
    apply_ops(
        state,
        span(["late"], at=T0 + 2 * 60 * MIN),
        [MemoryOp(Op.INSERT, "Caroline is busy today", subject="Caroline", scope="session")],
        recorded,
    )
    r = maintain_owner(state, T0 + 3 * 60 * MIN, lifecycle_params(), recorded_at=recorded)
    s = state.get(summary_id("o1", "s1"))
    assert [(e.event, e.reason) for e in r.events] == [
        ("updated", "session summary refreshed with later memories")
    ]
    assert (s.version, s.scope, s.created_at, s.text.count("\n- ")) == (
        2,
        "session",
        T0 + 120 * MIN,
        4,
    )


def test_chinese_sessions_get_chinese_summaries(recorded):
    state = OwnerMemories("o1")
    apply_ops(
        state,
        span(["我喜欢咖啡"], at=T0, lang="zh"),
        [MemoryOp(Op.INSERT, "用户喜欢咖啡。", kind="preference", subject="用户", tags=("咖啡",))],
        recorded,
    )
    maintain_owner(state, T0 + 60 * MIN, lifecycle_params(), recorded_at=recorded)
    assert (
        state.get(summary_id("o1", "s1")).text
        == "2024-01-01：用户 交谈。用户喜欢咖啡。\n要点：\n- 用户喜欢咖啡。"
    )


def _outcome(**o):
    return {"outcome": o}


def test_outcome_records_become_lessons_that_are_confirmed_again(recorded):
    state = OwnerMemories("o1")
    ok = _outcome(
        type="task_result", task="book a train ticket", success=True, domain="travel", ref="run-1"
    )
    r = apply_ops(state, span(["done"], at=T0, metadata=[ok]), [], recorded)
    (lesson,) = state.items.values()
    assert (
        lesson.text,
        lesson.kind,
        lesson.key,
        lesson.confidence,
        lesson.memory_type,
        lesson.tags,
    ) == (
        "Task 'book a train ticket' succeeded.",
        "lesson",
        "lesson|travel|book a train ticket|good",
        0.6,
        "LongTermMemory",
        ["run-1", "task_result", "travel"],
    )
    assert [e.reason for e in r.events] == ["outcome record (task_result)"]
    again = _outcome(
        type="task_result", task="Book a train ticket!", success=True, domain="Travel", ref="run-2"
    )
    r = apply_ops(state, span(["done again"], at=T0 + MIN, metadata=[again]), [], recorded)
    assert [(e.event, e.reason) for e in r.events] == [
        ("reinforced", "lesson confirmed by a new outcome")
    ]
    assert (lesson.confidence, lesson.reinforcement) == (0.65, 1)

    r = apply_ops(
        state,
        span(
            ["r1", "r2", "r3", "r4", "r5"],
            at=T0 + 2 * MIN,
            metadata=[
                _outcome(
                    type="task_result",
                    task="book a train ticket",
                    success=False,
                    feedback="the site timed out",
                ),
                _outcome(type="score", task="write a proposal", score=3, max=10),
                _outcome(
                    type="feedback",
                    feedback="answers are too long",
                    lesson="Keep answers short",
                    domain="style",
                ),
                _outcome(type="bogus"),
                None,
            ],
        ),
        [],
        recorded,
    )
    texts = sorted((m.text, m.key) for m in state.items.values() if m.id != lesson.id)
    assert texts == [
        ("Keep answers short", "lesson|style|keep answers short"),
        (
            "Task 'book a train ticket' failed. Feedback: the site timed out",
            "lesson|general|book a train ticket|poor",
        ),
        (
            "Task 'write a proposal' scored 3 out of 10, a poor result.",
            "lesson|general|write a proposal|poor",
        ),
    ]
    ((what, why),) = r.refused
    assert what.startswith("outcome in message o1-s1-") and why == (
        "outcome type 'bogus' is not one of task_result, score, feedback"
    )


def test_lessons_in_chinese_and_malformed_scores(recorded):
    state = OwnerMemories("o1")
    r = apply_ops(
        state,
        span(
            ["完成", "完成了"],
            at=T0,
            lang="zh",
            metadata=[
                _outcome(type="score", task="订火车票", score=0.9),
                _outcome(type="score", task="x", score="high"),
            ],
        ),
        [],
        recorded,
    )
    assert [m.text for m in state.items.values()] == ["任务“订火车票”得分 0.9/1，结果良好。"]
    assert (
        r.refused[0][1]
        == "a score outcome needs a number 'score' (and a positive 'max', default 1)"
    )
