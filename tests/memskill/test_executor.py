"""The MemSkill LLM executor with a scripted LLM: prompts, answer shapes, validation."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from skillstream.extract import ExtractionInput, MemorySkill
from skillstream.llm import LLMFailure
from skillstream.memories import OwnerMemories
from skillstream.memskill.executor import (
    OPERATIONS_SCHEMA,
    MemSkillExecutor,
    check_operations,
    parse_answer,
    parse_blocks,
    parse_event_time,
)
from skillstream.memskill.seeds import DELETE, INSERT, PRIMITIVES, SKIP, UPDATE
from skillstream.spans import render_span
from skillstream.vocab import Op
from tests.factories import make_span
from tests.memskill.conftest import ScriptedLLM, make_memory

SPAN = make_span(
    [
        ("user", "I moved to Lisbon last month."),
        ("assistant", "How do you like it?"),
        ("user", "I love it, and I started working as a nurse."),
    ]
)
MEMS = [
    make_memory(0, "The user lives in Porto."),
    make_memory(1, "The user is a teacher."),
    make_memory(2, "The user has a cat named Miso.", kind="event"),
]


def inp(skills=PRIMITIVES, retrieved=MEMS, span=SPAN) -> ExtractionInput:
    return ExtractionInput(
        span, render_span(span), list(retrieved), list(skills), OwnerMemories(span.owner_id)
    )


def run(answers, *, skills=PRIMITIVES, retrieved=MEMS, structured=True, span=SPAN, retries=2):
    llm = ScriptedLLM(answers, max_retries=retries)
    ex = MemSkillExecutor(llm, structured=structured, max_tokens=300)
    return ex.execute(inp(skills, retrieved, span)), llm


# ------------------------------------------------------------------------------------ prompt
def test_prompt_holds_span_date_numbered_memories_and_the_acting_skills_only():
    res, llm = run([{"operations": []}], skills=[INSERT, UPDATE, SKIP])
    (req,) = llm.requests
    system, user = (c for _, c in req.messages)
    assert req.purpose == "extract" and req.span_id == SPAN.span_id and req.max_tokens == 300
    assert req.schema == OPERATIONS_SCHEMA
    assert system.startswith("You keep the long-term memory of an assistant.")
    assert "The conversation took place on 2024-05-08 (Wednesday)." in user
    assert 'User said, "I moved to Lisbon last month."' in user
    assert "[2024-05-08 13:56 UTC]" in user
    assert "0. The user lives in Porto. (fact, 2024-05-01)" in user
    assert "2. The user has a cat named Miso. (event, 2024-05-03)" in user
    assert "## Memory skill: insert" in user and "## Memory skill: update" in user
    assert "Allowed action: UPDATE" in user
    assert "## Memory skill: skip" not in user and "## Memory skill: delete" not in user
    assert "Use only these actions: INSERT, UPDATE." in user
    assert "Purpose: keep facts, events" in user
    assert "third person" in user and "absolute dates" in user
    assert "ACTION: INSERT" not in user  # blocks are described in text mode only
    # order: span, memories, skills, rules, answer
    order = [
        user.index(s)
        for s in (
            "# Conversation span",
            "# Retrieved memories",
            "# Memory skills to apply",
            "# Rules",
            "# Answer",
        )
    ]
    assert order == sorted(order)
    assert res.memory_skills == ["insert", "update", "skip"]


def test_no_memories_gives_the_none_line_and_text_mode_describes_blocks():
    _, llm = run(["[]"], retrieved=[], structured=False)
    user = llm.requests[0].messages[1][1]
    assert "(none: no memories are stored yet, so UPDATE and DELETE cannot be used)" in user
    assert "ACTION: INSERT\nMEMORY_ITEM:" in user
    assert llm.requests[0].schema is None


def test_chinese_span_gets_the_chinese_prompt():
    zh = make_span(
        [("user", "我上个月搬到了里斯本，现在在医院做护士。"), ("assistant", "恭喜你！")]
    )
    assert zh.lang == "zh"
    _, llm = run([{"operations": []}], span=zh, retrieved=[])
    system, user = (c for _, c in llm.requests[0].messages)
    assert system.startswith("你负责维护一个助手的长期记忆")
    assert "这段对话发生在 2024-05-08（星期三）" in user
    assert "## 记忆技能：insert" in user and "（无：还没有任何已存记忆" in user
    assert "第三人称" in user


def test_english_span_gets_the_english_prompt():
    _, llm = run([{"operations": []}])
    assert "这段对话" not in llm.requests[0].messages[1][1]


def test_only_noop_skills_selected_makes_no_call():
    res, llm = run([], skills=[SKIP])
    assert llm.requests == [] and res.ops == [] and res.llm_calls == []
    assert res.memory_skills == ["skip"]


def test_empty_selection_means_the_primitives():
    res, llm = run([{"operations": []}], skills=[])
    assert "## Memory skill: delete" in llm.requests[0].messages[1][1]
    assert res.memory_skills == ["insert", "update", "delete", "skip"]


# ------------------------------------------------------------------------------------ answers
GOOD = {
    "operations": [
        {
            "action": "INSERT",
            "text": "The user moved to Lisbon in April 2024.",
            "kind": "event",
            "key": "user|residence",
            "tags": ["Move", "city", "move"],
            "event_time": "2024-04",
        },
        {
            "action": "UPDATE",
            "index": 1,
            "text": "The user works as a nurse (no longer a teacher).",
        },
        {"action": "DELETE", "index": 0},
        {"action": "NOOP"},
    ]
}


def test_json_answer_becomes_operations_with_targets_and_provenance():
    res, _ = run([GOOD])
    assert res.rejected == []
    ins, upd, dele = res.ops
    assert (ins.op, ins.text, ins.kind, ins.key, ins.tags) == (
        Op.INSERT,
        "The user moved to Lisbon in April 2024.",
        "event",
        "user|residence",
        ("move", "city"),
    )
    assert ins.event_ts == datetime(2024, 4, 1, tzinfo=UTC)
    assert ins.memory_skill == "insert" and ins.source_message_ids == tuple(SPAN.message_ids)
    assert (upd.op, upd.target_id, upd.text, upd.kind) == (
        Op.UPDATE,
        "mem_1",
        "The user works as a nurse (no longer a teacher).",
        "fact",
    )
    assert (dele.op, dele.target_id, dele.memory_skill) == (Op.DELETE, "mem_0", "delete")
    assert [c.status for c in res.llm_calls] == ["ok"]


@pytest.mark.parametrize(
    "answer",
    [
        '[{"action": "insert", "text": "The user likes tea."}]',
        'Sure! ```json\n{"operations": [{"action": '
        '"INSERT", "text": "The user likes tea.",}]}\n```',
        '{"action": "INSERT", "text": "The user likes tea."}',
        '{"ops": [{"action": "INSERT", "text": "The user likes tea."}]}',
        "ACTION: INSERT\nMEMORY_ITEM: The user likes tea.",
        "Here you go:\n\n**ACTION:** INSERT\n**MEMORY_ITEM:** The user likes\ntea.\n",
    ],
)
def test_text_mode_accepts_json_shapes_and_blocks(answer):
    res, _ = run([answer], structured=False)
    assert [(o.op, o.text) for o in res.ops] == [(Op.INSERT, "The user likes tea.")]


def test_block_format_with_update_and_delete():
    text = (
        "ACTION: UPDATE\nMEMORY_INDEX: 2\nUPDATED_MEMORY: The user has two cats, Miso and Tofu.\n\n"
        "ACTION: DELETE\nMEMORY_INDEX: 0\n\nACTION: NOOP\n"
    )
    assert parse_blocks(text) == [
        {"action": "UPDATE", "index": "2", "text": "The user has two cats, Miso and Tofu."},
        {"action": "DELETE", "index": "0"},
        {"action": "NOOP"},
    ]
    res, _ = run([text], structured=False)
    assert [(o.op, o.target_id) for o in res.ops] == [(Op.UPDATE, "mem_2"), (Op.DELETE, "mem_0")]


def test_malformed_answer_is_asked_again_then_used():
    res, llm = run(
        ["I think the user moved.", {"operations": [{"action": "INSERT", "text": "A."}]}],
        structured=False,
    )
    assert len(llm.requests) == 2 and [o.text for o in res.ops] == ["A."]
    assert [c.status for c in res.llm_calls] == ["error", "ok"]


def test_structured_answer_not_matching_the_schema_is_asked_again():
    bad = {"operations": [{"action": "MERGE", "text": "x"}]}
    res, llm = run([bad, "{not json", {"operations": []}])
    assert len(llm.requests) == 3 and res.ops == []
    assert [c.status for c in res.llm_calls] == ["error", "error", "ok"]


def test_answers_that_never_become_usable_raise_llm_failure_with_every_call():
    with pytest.raises(LLMFailure) as e:
        run(["nope", '{"answer": 1}', TimeoutError("timed out")], structured=False, retries=2)
    assert e.value.attempts == 3 and [c.status for c in e.value.calls] == ["error"] * 3


@pytest.mark.parametrize(
    "data, message",
    [
        ({"result": []}, "expected an object with an 'operations' list"),
        ({"operations": "INSERT x"}, "'operations' should be a list"),
        (42, "expected a JSON object"),
        ("no blocks here", "no JSON and no 'ACTION:' block"),
    ],
)
def test_parse_answer_rejects_answers_without_operations(data, message):
    with pytest.raises(ValueError, match=message):
        parse_answer(data)


def test_parse_answer_null_operations_is_empty():
    assert parse_answer({"operations": None}) == []


# ------------------------------------------------------------------------------------ validation
def check(items, skills=PRIMITIVES, retrieved=MEMS):
    acting = [s for s in skills if s.action != "NOOP"]
    return check_operations(items, retrieved, acting, SPAN)


@pytest.mark.parametrize(
    "item, reason",
    [
        (
            {"action": "UPDATE", "index": 3, "text": "x"},
            "index 3 is out of range (retrieved memories: 0-2)",
        ),
        ({"action": "DELETE", "index": -1}, "index -1 is out of range (retrieved memories: 0-2)"),
        ({"action": "DELETE"}, "DELETE needs an integer 'index' into the retrieved memories"),
        ({"action": "DELETE", "index": "first"}, "DELETE needs an integer 'index'"),
        ({"action": "DELETE", "index": True}, "DELETE needs an integer 'index'"),
        ({"action": "UPDATE", "index": 0, "text": "  "}, "UPDATE needs a non-empty 'text'"),
        ({"action": "INSERT"}, "INSERT needs a non-empty 'text'"),
        ({"action": "INSERT", "text": "x" * 2001}, "'text' has 2001 characters, more than 2000"),
        ({"action": "MERGE", "text": "x"}, "unknown action 'MERGE'"),
        ("INSERT the user likes tea", "an operation must be a JSON object"),
    ],
)
def test_invalid_operations_are_rejected_with_a_reason(item, reason):
    ops, rejected = check([item])
    assert ops == [] and len(rejected) == 1 and rejected[0][1].startswith(reason)


def test_index_into_an_empty_list_says_none_were_listed():
    _, rejected = check([{"action": "DELETE", "index": 0}], retrieved=[])
    assert rejected[0][1] == "index 0 is out of range (retrieved memories: none were listed)"


def test_actions_of_unselected_skills_are_rejected():
    ops, rejected = check(
        [{"action": "DELETE", "index": 0}, {"action": "INSERT", "text": "The user likes tea."}],
        skills=[INSERT, SKIP],
    )
    assert [o.op for o in ops] == [Op.INSERT]
    assert rejected == [
        (
            '{"action": "DELETE", "index": 0}',
            "action DELETE is not allowed by the selected memory skills (allowed: INSERT)",
        )
    ]


def test_a_memory_changed_twice_keeps_the_first_change():
    ops, rejected = check(
        [{"action": "UPDATE", "index": 1, "text": "New."}, {"action": "DELETE", "index": "1"}]
    )
    assert [(o.op, o.target_id) for o in ops] == [(Op.UPDATE, "mem_1")]
    assert rejected[0][1] == "memory 1 is already changed by UPDATE (operation 0)"


def test_string_index_and_unknown_kind_and_named_skill():
    custom = MemorySkill("capture-dates", "Keep dates.", "Purpose: dates", "INSERT", 2)
    ops, rejected = check(
        [
            {"action": "UPDATE", "index": "2", "text": "Miso is a grey cat."},
            {"action": "INSERT", "text": "X.", "kind": "anecdote", "skill": "capture-dates"},
            {"action": "INSERT", "text": "Y.", "skill": "no-such-skill"},
        ],
        skills=[INSERT, UPDATE, custom],
    )
    assert rejected == []
    assert ops[0].target_id == "mem_2" and ops[0].kind == "event"
    assert (ops[1].kind, ops[1].memory_skill) == ("fact", "capture-dates")
    assert ops[2].memory_skill == "insert"


@pytest.mark.parametrize(
    "value, expected",
    [
        ("2024-04-05", datetime(2024, 4, 5, tzinfo=UTC)),
        ("2024", datetime(2024, 1, 1, tzinfo=UTC)),
        ("2024-04-05T10:00:00+02:00", datetime(2024, 4, 5, 8, tzinfo=UTC)),
        ("2024-04-05 (Friday)", datetime(2024, 4, 5, tzinfo=UTC)),
        ("last week", None),
        ("", None),
        (None, None),
        ("2024-13-01", None),
    ],
)
def test_event_time_parsing(value, expected):
    assert parse_event_time(value) == expected


def test_delete_and_update_primitive_names_are_the_memory_skills_of_their_ops():
    ops, _ = check([{"action": "DELETE", "index": 2}], skills=[DELETE])
    assert ops[0].memory_skill == "delete" and ops[0].kind == "event"
