"""Record isolation in the memory flow: what fails for one record becomes a dead letter or a failed
span with its reason, and every valid record around it is stored (real LanceDB and DuckDB)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSink, TestingSource, run_main

from skillstream.connectors.files import FileSource
from skillstream.extract import Extraction
from skillstream.flows.operators import SpanLogic
from skillstream.model import DeadLetter, Span
from skillstream.rules import RulesExecutor
from skillstream.spans import SpanBuilder
from skillstream.storage.catalog import Catalog
from tests.factories import conversation_rows, flow_of, make_message, run_flow, write_jsonl


def _read(settings, query: str) -> list[dict]:
    cat = Catalog(settings.storage.catalog, read_only=True)
    try:
        return cat.sql(query).to_pylist()
    finally:
        cat.close()


def _memories(settings) -> list[dict]:
    """Every memory row of the home's LanceDB table (text, event time, status)."""
    from skillstream.storage.lance import MemoryIndex

    idx = MemoryIndex(settings.storage.lancedb, 384, settings.storage.storage_options)
    return idx.table.to_arrow().select(["text", "event_ts", "status"]).to_pylist()


def bad_records() -> list[bytes]:
    """Records that pass JSON decoding but cannot be stored as they are."""
    ts = '"timestamp": "2024-03-01T10:30:00Z"'
    return [
        # a lone surrogate in the content: broke the tokenizer and the message-id hash
        ('{"conversation_id": "a", "role": "user", "content": "x \\ud800", ' + ts + "}").encode(),
        # with a message id given, the content went straight to the tokenizer
        (
            '{"conversation_id": "a", "role": "user", "message_id": "m-sur", '
            '"content": "tail \\udfff", ' + ts + "}"
        ).encode(),
        # a lone surrogate in an identifier
        ('{"conversation_id": "a\\ud801", "role": "user", "content": "hi", ' + ts + "}").encode(),
        # NUL in an identifier
        ('{"conversation_id": "a", "user_id": "o\\u0000", "role": "user", "content": "hi", ' + ts)
        .encode()
        .rstrip()
        + b"}",
        # content made only of NUL characters
        (
            '{"conversation_id": "a", "role": "user", "content": "\\u0000\\u0000", ' + ts + "}"
        ).encode(),
    ]


def test_bad_records_among_valid_ones_lose_no_valid_record(tmp_path, settings):
    rows = conversation_rows("a", 30) + conversation_rows("b", 30)
    bad = bad_records()
    lines: list = []
    for i, row in enumerate(rows):
        lines.append(row)
        if i % 12 == 5 and bad:
            lines.append(bad.pop())
    assert not bad
    # a valid message whose content holds NUL characters: kept, without them
    nul = dict(rows[0], message_id="a-nul", content="I like \x00green tea.")
    nul["timestamp"] = (
        datetime.fromisoformat(rows[-1]["timestamp"]) + timedelta(minutes=1)
    ).isoformat()
    path = write_jsonl(tmp_path / "mixed.jsonl", [*lines, nul])

    run_flow(settings, FileSource(path))

    dead = _read(settings, "select stage, reason from dead_letters order by reason")
    assert len(dead) == 5
    assert sum("lone surrogate" in d["reason"] for d in dead) == 3
    assert sum("NUL" in d["reason"] for d in dead) == 2
    covered = {
        r["m"]
        for r in _read(
            settings, "select distinct unnest(message_ids) as m from spans where status = 'done'"
        )
    }
    valid = {r["message_id"] for r in rows} | {"a-nul"}
    assert covered == valid  # 0 valid records lost
    texts = [r["text"] for r in _memories(settings)]
    assert texts and not any("\x00" in t for t in texts)


def test_a_message_the_span_builder_cannot_take_is_a_dead_letter_and_its_conversation_goes_on():
    """Whatever raises while a message is added to its span (here: the token count of one text)
    refuses that message only."""

    def count(text: str) -> int:
        if "unreadable" in text:
            raise ValueError("tokenizer cannot read this text")
        return len(text.split())

    builder = SpanBuilder(count, budget=1000)
    msgs = [make_message(f"message {i} about tea", i=i) for i in range(6)]
    msgs.insert(3, make_message("unreadable text", i=99))
    flow = Dataflow("isolation")
    keyed = op.key_on("key", op.input("in", flow, TestingSource(msgs)), lambda m: m.conversation_id)
    out: list = []
    spans = op.stateful("spans", keyed, lambda resume: SpanLogic(builder, resume))
    op.output("out", op.key_rm("unkeyed", spans), TestingSink(out))
    run_main(flow)

    dead = [x for x in out if isinstance(x, DeadLetter)]
    got = [x for x in out if isinstance(x, Span)]
    assert len(dead) == 1 and "tokenizer cannot read this text" in dead[0].reason
    assert dead[0].stage == "spans" and "unreadable text" in (dead[0].payload or "")
    assert [m.message_id for s in got for m in s.messages] == [
        m.message_id for m in msgs if m.message_id != msgs[3].message_id
    ]


class _OneSpanBreaks(RulesExecutor):
    """The offline executor, except that it raises an unexpected error on one span's text."""

    def execute(self, inp) -> Extraction:
        if "cello" in inp.span_text:
            raise KeyError("unexpected")
        return super().execute(inp)


def test_an_unexpected_extraction_error_fails_its_span_only(tmp_path, settings):
    rows = []
    for c, fact in enumerate(
        [
            "I moved to Lisbon two years ago.",
            "Last week I started learning the cello.",
            "I prefer green tea over coffee.",
        ]
    ):
        rows.append(
            {
                "conversation_id": f"c{c}",
                "role": "user",
                "content": fact,
                "timestamp": f"2024-03-0{c + 1}T10:00:00Z",
            }
        )
    path = write_jsonl(tmp_path / "three.jsonl", rows)
    run_flow(settings, FileSource(path), executor=_OneSpanBreaks())
    spans = _read(settings, "select conversation_id as c, status, error from spans order by c")
    assert [(s["c"], s["status"]) for s in spans] == [
        ("c0", "done"),
        ("c1", "failed"),
        ("c2", "done"),
    ]
    assert "KeyError" in spans[1]["error"]
    failed = _read(settings, "select span_id, status from failed_spans")
    assert len(failed) == 1 and failed[0]["status"] == "pending"


def test_duplicate_message_ids_with_different_content_keep_the_first(tmp_path, settings):
    base = {"conversation_id": "d", "role": "user", "message_id": "same"}
    rows = [
        dict(base, content="I prefer green tea over coffee.", timestamp="2024-03-01T10:00:00Z"),
        dict(base, content="I moved to Lisbon two years ago.", timestamp="2024-03-01T10:01:00Z"),
        # an exact repeat is not a conflict (a replay delivers those)
        dict(base, content="I prefer green tea over coffee.", timestamp="2024-03-01T10:00:00Z"),
    ]
    path = write_jsonl(tmp_path / "dup.jsonl", rows)
    run_main(flow_of(settings, FileSource(path)))
    dead = _read(settings, "select stage, reason, payload from dead_letters")
    assert len(dead) == 1 and dead[0]["stage"] == "admit"
    assert "message_id 'same'" in dead[0]["reason"] and "Lisbon" in dead[0]["payload"]
    texts = " ".join(r["text"] for r in _memories(settings))
    assert "Lisbon" not in texts


def _messages_with_outliers() -> list[dict]:
    now = datetime.now(UTC)
    rows = conversation_rows("ana", 24, start=datetime(2025, 3, 1, 9, tzinfo=UTC), owner="ana")
    rows.insert(
        8,
        dict(
            rows[8],
            message_id="future",
            content="I will live on Mars.",
            timestamp="9999-12-31T23:59:59Z",
        ),
    )
    rows.insert(
        3,
        dict(
            rows[3],
            message_id="ancient",
            content="My name is Ana.",
            timestamp="0001-01-01T00:00:00Z",
        ),
    )
    rows.insert(
        12,
        dict(
            rows[12],
            message_id="soon",
            content="I will visit Oslo.",
            timestamp=(now + timedelta(days=3)).isoformat(),
        ),
    )
    return rows


def test_the_window_dead_letters_timestamps_outside_it(tmp_path, settings):
    path = write_jsonl(tmp_path / "outliers.jsonl", _messages_with_outliers())
    run_main(flow_of(settings, FileSource(path)))
    dead = {
        r["position"]: r
        for r in _read(settings, "select position, stage, reason, payload from dead_letters")
    }
    assert len(dead) == 3, dead
    assert all(r["stage"] == "admit" for r in dead.values())
    joined = " | ".join(r["reason"] for r in dead.values())
    assert (
        "before the earliest accepted time" in joined and joined.count("after the wall clock") == 2
    )
    rows = _memories(settings)
    assert rows and {r["event_ts"].year for r in rows if r["event_ts"]} == {2025}
    assert {r["status"] for r in rows} <= {"generated", "activated"}
