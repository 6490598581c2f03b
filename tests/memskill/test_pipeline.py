"""The MemSkill executor inside the pipeline: application order, provenance, failed spans."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from skillstream.failures import failed_span_row, span_from_row
from skillstream.memskill.controller import TopKController
from skillstream.memskill.executor import MemSkillExecutor
from skillstream.memskill.seeds import PRIMITIVES
from skillstream.pipeline import MemoryPipeline
from skillstream.spans import render_span
from tests.factories import make_span
from tests.memskill.conftest import ScriptedLLM, make_memory

NOW = datetime(2024, 6, 1, tzinfo=UTC)


def pipeline(llm, embedder, memories=(), controller=None):
    kw = {"controller": controller} if controller else {}
    p = MemoryPipeline(
        executor=MemSkillExecutor(llm),
        embed=embedder.encode,
        hydrate=lambda owner: [m.copy() for m in memories],
        memory_skills=list(PRIMITIVES),
        clock=lambda: NOW,
        **kw,
    )
    return p


def stored(embedder, texts):
    vecs = embedder.encode(texts)
    return [make_memory(i, t, vector=v) for i, (t, v) in enumerate(zip(texts, vecs))]


def test_updates_then_deletes_then_inserts_with_provenance(embedder):
    mems = stored(
        embedder, ["Sam lives in Porto.", "Sam is a teacher.", "Sam has a cat named Miso."]
    )
    span = make_span(
        [("user", "I moved to Lisbon and I work as a nurse now. Miso ran away, sadly.")]
    )
    llm = ScriptedLLM()
    p = pipeline(llm, embedder, mems)
    state = p.new_state("c1")
    retrieved = state.memories.retrieve(embedder.encode([render_span(span)])[0], 20)
    idx = {m.id: i for i, m in enumerate(retrieved)}
    llm.push(
        {
            "operations": [
                {"action": "INSERT", "text": "Sam moved to Lisbon in May 2024.", "kind": "event"},
                {"action": "DELETE", "index": idx["mem_2"]},
                {"action": "UPDATE", "index": idx["mem_1"], "text": "Sam works as a nurse."},
                {"action": "UPDATE", "index": 7, "text": "out of range"},
            ]
        }
    )
    (res,) = p.process_owner(state, [span])
    assert res.status == "done" and res.n_ops == 3 and res.extractor == "memskill"
    changes = [e for e in res.events if e.event != "activated"]
    assert [(e.event, e.memory_id) for e in changes] == [
        ("updated", "mem_1"),
        ("deleted", "mem_2"),
        ("created", changes[2].memory_id),
    ]
    # the memories the span retrieved were used for the first time: generated -> activated
    assert {e.memory_id for e in res.events if e.event == "activated"} <= {
        "mem_0",
        "mem_1",
        "mem_2",
    }
    assert all(e.span_id == span.span_id for e in res.events)
    by_id = {m.id: m for m in res.memories}
    assert by_id["mem_1"].text == "Sam works as a nurse." and by_id["mem_1"].span_id == span.span_id
    assert by_id["mem_1"].source_message_ids == [span.message_ids[0]]
    assert by_id["mem_2"].status == "deleted"
    new = by_id[changes[2].memory_id]
    assert (new.text, new.kind, new.span_id, new.source_message_ids) == (
        "Sam moved to Lisbon in May 2024.",
        "event",
        span.span_id,
        span.message_ids,
    )
    assert new.vector is not None and len(new.vector) == embedder.dim
    assert res.memory_skills == ["insert", "update", "delete", "skip"]
    # The prompt listed the retrieved memories in the order the indexes refer to.
    prompt = llm.requests[0].messages[1][1]
    assert f"{idx['mem_1']}. Sam is a teacher." in prompt


def test_selected_memory_skills_are_recorded_per_span(embedder):
    span = make_span([("user", "I adopted a puppy called Rex yesterday.")])
    llm = ScriptedLLM(
        [{"operations": [{"action": "INSERT", "text": "Sam adopted a puppy named Rex."}]}]
    )
    ctl = TopKController(embedder.encode, k=3)
    p = pipeline(llm, embedder, controller=ctl)
    (res,) = p.process_owner(p.new_state("c1"), [span])
    # Nothing stored yet: UPDATE and DELETE are masked, so K=3 leaves insert and skip.
    assert res.memory_skills == ["insert", "skip"]
    assert "## Memory skill: update" not in llm.requests[0].messages[1][1]


def test_a_failed_span_keeps_its_calls_and_its_messages_for_a_retry(embedder):
    span = make_span(
        [("user", "My password is [REDACTED:password] and I like jazz."), ("assistant", "Noted.")]
    )
    llm = ScriptedLLM(["garbage", "more garbage", "still garbage"], max_retries=2)
    p = pipeline(llm, embedder)
    (res,) = p.process_owner(p.new_state("c1"), [span])
    assert res.status == "failed" and res.attempts == 3 and len(res.llm_calls) == 3
    assert "LLM request 'extract'" in res.error and res.memories == []
    (row,) = res.rows.failed_spans
    assert (row.span_id, row.status, row.attempts, row.retries) == (
        span.span_id,
        "pending",
        3,
        0,
    )
    assert (
        json.loads(row.messages)[0]["text"] == "My password is [REDACTED:password] and I like jazz."
    )
    assert span_from_row(row) == span


def test_failed_span_row_round_trip_keeps_every_field():
    span = make_span([("user", "a"), ("assistant", "b"), ("user", "c")], conversation_id="conv-9")
    row = failed_span_row(span, "memskill", "boom", 4, NOW)
    assert span_from_row(row) == span
    assert row.error == "boom" and row.failed_at == NOW


def test_llm_failure_is_terminal_for_the_span_not_the_owner(embedder):
    s1 = make_span([("user", "I like tea.")])
    s2 = make_span([("user", "I like coffee.")], conversation_id="c1b")
    s2 = type(s2)(**{**s2.__dict__, "owner_id": "c1", "seq": 1})
    llm = ScriptedLLM(
        [LLMFailureAnswer(), {"operations": [{"action": "INSERT", "text": "Sam likes coffee."}]}],
        max_retries=0,
    )
    p = pipeline(llm, embedder)
    r1, r2 = p.process_owner(p.new_state("c1"), [s1, s2])
    assert (r1.status, r2.status) == ("failed", "done")
    assert [m.text for m in r2.memories] == ["Sam likes coffee."]


class LLMFailureAnswer(TimeoutError):
    """A scripted attempt that times out."""
