"""The canonical record rules: every field, every kind of invalid input, redaction."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import pytest

from skillstream.connectors.records import (
    PAYLOAD_CHARS,
    parse_line,
    parse_record,
    parse_timestamp,
)
from skillstream.ids import prefixed_id
from skillstream.model import DeadLetter, Message
from skillstream.redact import DEFAULT_PATTERNS, Redactor

NOW = datetime(2025, 1, 1, tzinfo=UTC)
UTC = UTC
BASE = {
    "conversation_id": "c1",
    "role": "user",
    "content": "I moved to Lisbon last spring.",
    "timestamp": "2024-05-08T13:56:00Z",
}
REJECT_KEYS = Redactor(
    tuple(replace(p, action="reject") if p.name == "private_key" else p for p in DEFAULT_PATTERNS)
)
PRIVATE_KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----"


def parse(obj, **kw):
    kw.setdefault("source", "test.jsonl")
    kw.setdefault("position", 7)
    kw.setdefault("now", NOW)
    return parse_record(obj, **kw)


def ok(obj, **kw) -> Message:
    item = parse(obj, **kw)
    assert isinstance(item, Message), item
    return item


def bad(obj, **kw) -> DeadLetter:
    item = parse(obj, **kw)
    assert isinstance(item, DeadLetter), item
    return item


# ------------------------------------------------------------------------------- valid fields


def test_minimal_record_gets_every_default():
    m = ok(BASE)
    ts = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
    assert m == Message(
        message_id=prefixed_id("msg", "c1", ts.isoformat(), "user", BASE["content"]),
        conversation_id="c1",
        owner_id="c1",
        session_id="c1",
        role="user",
        speaker="User",
        text=BASE["content"],
        ts=ts,
        agent_id=None,
        metadata=None,
        source="test.jsonl",
        position=7,
    )


def test_message_id_is_deterministic_and_depends_on_content():
    assert ok(BASE).message_id == ok(dict(BASE)).message_id
    assert ok(BASE).message_id != ok({**BASE, "content": "Something else."}).message_id


def test_optional_fields_are_kept():
    m = ok(
        {
            **BASE,
            "user_id": "u9",
            "agent_id": "travel-bot",
            "session_id": "s2",
            "message_id": "m-1",
            "name": "Caroline",
            "metadata": {"b": 1, "a": "x"},
        }
    )
    assert (m.owner_id, m.agent_id, m.session_id, m.message_id, m.speaker) == (
        "u9",
        "travel-bot",
        "s2",
        "m-1",
        "Caroline",
    )
    assert json.loads(m.metadata) == {"a": "x", "b": 1}


def test_integer_ids_become_text_and_blank_optionals_are_absent():
    m = ok({**BASE, "conversation_id": 42, "user_id": "", "session_id": "  ", "metadata": ""})
    assert (m.conversation_id, m.owner_id, m.session_id, m.metadata) == ("42", "42", "42", None)


@pytest.mark.parametrize(
    ("raw", "role", "speaker"),
    [
        ("user", "user", "User"),
        ("Human", "user", "User"),
        ("assistant", "assistant", "Assistant"),
        ("AI", "assistant", "Assistant"),
        ("bot", "assistant", "Assistant"),
        ("wizard", "assistant", "Assistant"),
        ("system", "system", "System"),
        ("tool", "tool", "Tool"),
    ],
)
def test_roles_and_aliases(raw, role, speaker):
    m = ok({**BASE, "role": raw})
    assert (m.role, m.speaker) == (role, speaker)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2024-05-08T13:56:00Z", datetime(2024, 5, 8, 13, 56, tzinfo=UTC)),
        ("2024-05-08T15:56:00+02:00", datetime(2024, 5, 8, 13, 56, tzinfo=UTC)),
        ("2024-05-08 13:56:00", datetime(2024, 5, 8, 13, 56, tzinfo=UTC)),  # naive: UTC
        ("2024-05-08", datetime(2024, 5, 8, tzinfo=UTC)),
        (1715176560, datetime(2024, 5, 8, 13, 56, tzinfo=UTC)),
        (1715176560.5, datetime(2024, 5, 8, 13, 56, 0, 500000, tzinfo=UTC)),
        ("1715176560", datetime(2024, 5, 8, 13, 56, tzinfo=UTC)),  # a CSV cell
        (datetime(2024, 5, 8, 13, 56), datetime(2024, 5, 8, 13, 56, tzinfo=UTC)),
        (
            datetime(2024, 5, 8, 15, 56, tzinfo=timezone(timedelta(hours=2))),
            datetime(2024, 5, 8, 13, 56, tzinfo=UTC),
        ),
    ],
)
def test_timestamps_are_utc_aware(raw, expected):
    ts = ok({**BASE, "timestamp": raw}).ts
    assert ts == expected
    assert ts.utcoffset() == timedelta(0)
    assert parse_timestamp(raw) == expected


def test_openai_content_parts_are_joined():
    parts = [{"type": "text", "text": "first"}, {"type": "image_url", "image_url": {}}, "second"]
    assert ok({**BASE, "content": parts}).text == "first\nsecond"


def test_mapping_reads_renamed_columns():
    mapping = {"content": "text", "conversation_id": "thread", "timestamp": "sent_at"}
    record = {
        "text": "Hello there",
        "thread": "t-1",
        "sent_at": "2024-01-01T00:00:00",
        "role": "user",
    }
    m = ok(record, mapping=mapping)
    assert (m.text, m.conversation_id, m.ts) == (
        "Hello there",
        "t-1",
        datetime(2024, 1, 1, tzinfo=UTC),
    )
    # The canonical name is not read when a mapping renames the field.
    d = bad({**BASE}, mapping=mapping)
    assert d.reason == "missing required field 'conversation_id' (column 'thread')"


def test_position_text_is_only_kept_when_numeric():
    assert ok(BASE, position="12").position == 12
    assert ok(BASE, position="3:1200").position is None
    assert bad({}, position="3:1200").position == "3:1200"


# ---------------------------------------------------------------------------- invalid records

INVALID = [
    (
        {k: v for k, v in BASE.items() if k != "conversation_id"},
        "missing required field 'conversation_id'",
    ),
    ({k: v for k, v in BASE.items() if k != "role"}, "missing required field 'role'"),
    ({**BASE, "role": "robot"}, "role 'robot' is not one of user, assistant, system, tool"),
    ({k: v for k, v in BASE.items() if k != "content"}, "missing required field 'content'"),
    ({**BASE, "content": "   "}, "missing required field 'content'"),
    ({**BASE, "content": 12}, "field 'content' must be text, got number"),
    ({**BASE, "content": [{"type": "image_url"}]}, "field 'content' has no text parts"),
    ({**BASE, "content": "x" * 25000}, "message has 25000 characters; limit is 20000"),
    ({k: v for k, v in BASE.items() if k != "timestamp"}, "missing required field 'timestamp'"),
    ({**BASE, "timestamp": "yesterday"}, "timestamp 'yesterday' is not ISO 8601 or epoch seconds"),
    ({**BASE, "timestamp": True}, "timestamp True is not ISO 8601 or epoch seconds"),
    ({**BASE, "timestamp": 1e20}, "timestamp 1e+20 is out of range for epoch seconds"),
    ({**BASE, "user_id": ["a"]}, "field 'user_id' must be text, got array"),
    ({**BASE, "metadata": [1]}, "field 'metadata' must be a JSON object, got array"),
    ({**BASE, "metadata": "{not json"}, "field 'metadata' is not JSON text of an object"),
    (["not", "an", "object"], "expected a JSON object, got array"),
]


@pytest.mark.parametrize(("record", "reason"), INVALID)
def test_invalid_records_become_dead_letters(record, reason):
    d = bad(record)
    assert d.reason == reason
    assert (d.source, d.position, d.stage, d.recorded_at) == ("test.jsonl", "7", "parse", NOW)
    assert d.id == prefixed_id("dl", "test.jsonl", "7")
    assert d.payload == json.dumps(record)[:PAYLOAD_CHARS]


def test_reasons_are_distinct_per_kind():
    reasons = [reason for _, reason in INVALID]
    assert len(set(reasons)) == len(reasons) - 1  # two ways of missing content share one reason


def test_max_chars_is_configurable():
    assert ok({**BASE, "content": "x" * 30}, max_chars=30).text == "x" * 30
    assert (
        bad({**BASE, "content": "x" * 31}, max_chars=30).reason
        == "message has 31 characters; limit is 30"
    )


# ---------------------------------------------------------------------------------- redaction


def test_secrets_are_redacted_in_content_and_metadata():
    m = ok(
        {
            **BASE,
            "content": "my key is sk-proj-abcdefghijklmnop1234 ok",
            "metadata": {"note": ["password: hunter2!x"]},
        }
    )
    assert m.text == "my key is [REDACTED:openai_key] ok"
    assert json.loads(m.metadata) == {"note": ["password: [REDACTED:password]"]}
    assert "sk-proj" not in m.message_id


def test_rejected_secret_gives_a_dead_letter_without_payload():
    d = bad({**BASE, "content": f"here: {PRIVATE_KEY}"}, redactor=REJECT_KEYS)
    assert d.reason == "rejected: message matches sensitive-data pattern 'private_key'"
    assert d.payload is None


def test_rejected_secret_in_metadata_is_rejected_too():
    d = bad({**BASE, "metadata": {"k": PRIVATE_KEY}}, redactor=REJECT_KEYS)
    assert d.reason == "rejected: message matches sensitive-data pattern 'private_key'"
    assert d.payload is None


def test_dead_letter_payload_is_redacted_then_cut():
    record = {**BASE, "timestamp": "soon", "content": "token: abcdefghijklmnopqrst " + "y" * 900}
    d = bad(record)
    assert d.reason == "timestamp 'soon' is not ISO 8601 or epoch seconds"
    assert "abcdefghijklmnopqrst" not in d.payload
    assert "[REDACTED:api_key]" in d.payload
    assert len(d.payload) == PAYLOAD_CHARS


def test_invalid_record_holding_a_rejected_secret_keeps_no_payload():
    d = bad({**BASE, "role": "robot", "content": PRIVATE_KEY}, redactor=REJECT_KEYS)
    assert d.reason.startswith("role 'robot'")
    assert d.payload is None


# ---------------------------------------------------------------------------------- JSON lines


def line(raw: bytes, **kw):
    kw.setdefault("source", "f.jsonl")
    kw.setdefault("position", 0)
    kw.setdefault("now", NOW)
    return parse_line(raw, **kw)


def test_parse_line_reads_a_json_object():
    m = line(json.dumps(BASE).encode() + b"\r\n")
    assert isinstance(m, Message) and m.text == BASE["content"]


def test_parse_line_skips_blank_lines_and_a_bom():
    assert line(b"   \n") is None
    assert isinstance(line(b"\xef\xbb\xbf" + json.dumps(BASE).encode()), Message)


def test_broken_json_reason_names_the_decoder_error():
    d = line(b'{"conversation_id": "c1" "role": "user"}\n')
    assert d.reason == "broken JSON: Expecting ',' delimiter: line 1 column 26 (char 25)"
    assert d.payload == '{"conversation_id": "c1" "role": "user"}'


def test_invalid_utf8_reason_names_the_byte():
    raw = json.dumps(BASE).encode()[:40] + b"\xff\xfe" + b'"}'
    d = line(raw)
    assert d.reason == "invalid UTF-8 at byte 40"
    assert d.payload.startswith('{"conversation_id"') and "\ufffd" in d.payload


def test_broken_line_payload_is_redacted():
    d = line(b'{"content": "api_key=abcdefghijklmnop123", \n')
    assert d.reason.startswith("broken JSON: ")
    assert "abcdefghijklmnop123" not in d.payload
