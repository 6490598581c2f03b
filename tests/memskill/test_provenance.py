"""LLM memories cite the turns they come from; the whole span is a marked fallback; memory types
come from the vocabulary."""

from __future__ import annotations

from skillstream.memskill.executor import MAX_TURNS, WHOLE_SPAN, memory_types, operations_schema
from skillstream.vocab import MemoryType
from tests.memskill.test_executor import MEMS, SPAN, run


def test_operations_cite_their_turns_and_the_prompt_numbers_them() -> None:
    answer = {
        "operations": [
            {"action": "INSERT", "text": "The user moved to Lisbon.", "turns": [0]},
            {"action": "UPDATE", "index": 1, "text": "The user is a nurse.", "turns": [2]},
        ]
    }
    res, llm = run([answer])
    ins, upd = res.ops
    ids = SPAN.message_ids
    assert ins.source_message_ids == (ids[0],)
    assert upd.source_message_ids == (ids[2],) and upd.target_id == MEMS[1].id
    assert WHOLE_SPAN not in ins.reason and WHOLE_SPAN not in upd.reason
    user = llm.requests[0].messages[1][1]
    assert '[0] User said, "I moved to Lisbon last month."' in user
    assert '[2] User said, "I love it, and I started working as a nurse."' in user


def test_missing_or_invalid_turns_fall_back_to_the_whole_span_marked() -> None:
    answer = {
        "operations": [
            {"action": "INSERT", "text": "The user moved to Lisbon."},
            {"action": "INSERT", "text": "The user loves Lisbon.", "turns": [7, "x"]},
        ]
    }
    res, _ = run([answer], structured=False)  # a text answer is not checked against the schema
    for op in res.ops:
        assert op.source_message_ids == tuple(SPAN.message_ids)
        assert op.reason.endswith(WHOLE_SPAN)


def test_cited_turns_are_capped_and_deduplicated() -> None:
    span_turns = list(range(len(SPAN.message_ids))) * 3
    answer = {"operations": [{"action": "INSERT", "text": "x y z", "turns": span_turns}]}
    res, _ = run([answer])
    (op,) = res.ops
    assert len(op.source_message_ids) <= MAX_TURNS
    assert len(set(op.source_message_ids)) == len(op.source_message_ids) == 3


def test_memory_type_is_chosen_from_the_vocabulary() -> None:
    allowed = memory_types()
    assert MemoryType.SKILL not in allowed and MemoryType.USER in allowed
    schema = operations_schema()
    insert = schema["properties"]["operations"]["items"]["anyOf"][0]
    assert insert["properties"]["memory_type"]["enum"] == allowed
    answer = {
        "operations": [
            {"action": "INSERT", "text": "The user is a nurse.", "memory_type": "usermemory"},
            {"action": "INSERT", "text": "The user moved.", "memory_type": "Bogus"},
            {"action": "INSERT", "text": "The user loves Lisbon."},
        ]
    }
    res, llm = run([answer], structured=False)
    assert [op.memory_type for op in res.ops] == [MemoryType.USER, None, None]
    user = llm.requests[0].messages[1][1]
    assert " | ".join(allowed) in user
