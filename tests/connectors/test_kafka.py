"""The Kafka source and the memory-event sink against a real broker (tansu), without a flow."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from skillstream.connectors.kafka import (
    KafkaAddress,
    KafkaMessageSource,
    decode_record,
    ensure_topic,
    kafka_source,
    list_partitions,
    memory_events_sink,
    message_record,
    parse_kafka_uri,
)
from skillstream.connectors.kafka_events import MemoryEventSink
from skillstream.connectors.records import parse_record
from skillstream.errors import InputError
from skillstream.model import DeadLetter, MaintenanceResult, Message
from skillstream.settings import Settings
from skillstream.storage.rows import as_dict
from tests.servers.kafka import consume_all, produce_values
from tests.servers.ports import free_port
from tests.storage.conftest import T0, make_result

pytestmark = pytest.mark.usefixtures("clean_env")


def rec(conv: str, i: int, **kw) -> dict:
    row = {
        "conversation_id": conv,
        "user_id": f"owner-{conv}",
        "message_id": f"{conv}-{i}",
        "role": "user" if i % 2 == 0 else "assistant",
        "content": f"message {i} of {conv}",
        "timestamp": f"2024-05-08T13:{i:02d}:00Z",
    }
    row.update(kw)
    return row


def drain_part(part, limit: int | None = None) -> list:
    out: list = []
    batches = 0
    while limit is None or batches < limit:
        try:
            batch = part.next_batch()
        except StopIteration:
            break
        batches += 1
        out.extend(batch)
    return out


def read_source(source: KafkaMessageSource) -> dict[str, list]:
    out = {}
    for key in source.list_parts():
        part = source.build_part("read", key, None)
        try:
            out[key] = drain_part(part)
        finally:
            part.close()
    return out


# ---------------------------------------------------------------------------------- addresses


def test_parse_kafka_uri_accepts_brokers_and_topics():
    assert parse_kafka_uri("kafka://127.0.0.1:9092/chats") == KafkaAddress(
        ("127.0.0.1:9092",), ("chats",)
    )
    a = parse_kafka_uri("kafka://h1:9092,h2:9093/chats,chats.eu")
    assert a.brokers == ("h1:9092", "h2:9093") and a.topics == ("chats", "chats.eu")
    assert a.bootstrap == "h1:9092,h2:9093"


@pytest.mark.parametrize(
    "uri, words",
    [
        ("127.0.0.1:9092/chats", "kafka://HOST:PORT/TOPIC"),
        ("kafka://127.0.0.1:9092", "no topic"),
        ("kafka://127.0.0.1:9092/", "no topic"),
        ("kafka:///chats", "no broker"),
        ("kafka://localhost/chats", "is not HOST:PORT"),
        ("kafka://h:1/bad topic", "not a valid Kafka topic name"),
    ],
)
def test_parse_kafka_uri_refuses_bad_addresses(uri, words):
    with pytest.raises(InputError, match=words):
        parse_kafka_uri(uri)


def test_a_sink_address_takes_one_topic():
    with pytest.raises(InputError, match="expected one topic"):
        parse_kafka_uri("kafka://h:1/a,b", single_topic=True)


# ---------------------------------------------------------------------------------- records


def test_decode_record_gives_the_message_a_file_gives():
    row = rec("c1", 3, metadata={"image_caption": "a dog"})
    got = decode_record(json.dumps(row).encode(), b"c1", topic="chats", partition=2, offset=41)
    want = parse_record(row, source="kafka:chats", position="chats:2:41")
    assert isinstance(got, Message) and got == want
    assert (got.source, got.position) == ("kafka:chats", None)


def test_key_and_kafka_timestamp_fill_missing_fields():
    row = rec("c1", 1)
    del row["conversation_id"], row["timestamp"]
    ms = int(datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp() * 1000)
    got = decode_record(
        json.dumps(row).encode(),
        b"conv-from-key",
        topic="t",
        partition=0,
        offset=0,
        timestamp=(1, ms),
    )
    assert got.conversation_id == "conv-from-key"
    assert got.ts == datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    # A value that names its conversation keeps it, whatever the key says.
    got = decode_record(
        json.dumps(rec("c1", 1)).encode(), b"other", topic="t", partition=0, offset=0
    )
    assert got.conversation_id == "c1"


@pytest.mark.parametrize(
    "value, reason",
    [
        (None, "empty record value"),
        (b"   ", "empty record value"),
        (b"caf\xe9", "invalid UTF-8 at byte 3"),
        (b'{"conversation_id": "c1", ', "broken JSON"),
        (b"[1, 2]", "expected a JSON object, got array"),
        (
            json.dumps(
                {"conversation_id": "c", "role": "user", "timestamp": "2024-01-01"}
            ).encode(),
            "missing required field 'content'",
        ),
    ],
)
def test_undecodable_records_are_dead_letters_with_topic_partition_and_offset(value, reason):
    got = decode_record(value, None, topic="chats", partition=1, offset=7)
    assert isinstance(got, DeadLetter)
    assert (got.source, got.position, got.stage) == ("kafka:chats", "chats:1:7", "parse")
    assert got.reason.startswith(reason)
    again = decode_record(value, None, topic="chats", partition=1, offset=7)
    assert again.id == got.id  # a replay gives the same dead letter


def test_message_record_round_trips_through_the_parser():
    row = rec(
        "c9",
        4,
        agent_id="helper",
        name="Ana",
        session_id="c9/s2",
        metadata={"image_caption": "a cat", "n": 1},
    )
    m = parse_record(row, source="file.jsonl", position=10)
    back = parse_record(message_record(m), source="kafka:t", position="t:0:0")
    assert replace(back, source=None, position=None) == replace(m, source=None, position=None)


# ---------------------------------------------------------------------------------- broker


def test_source_reads_every_partition_to_its_end_with_no_tail(kafka_broker, topic_name):
    rows = [rec(f"c{c}", i) for i in range(12) for c in range(4)]
    items = [(r["conversation_id"].encode(), json.dumps(r).encode()) for r in rows]
    items += [(b"c0", b"not json"), (b"c1", None)]
    produce_values(kafka_broker, topic_name, items, partitions=3)

    src = kafka_source(f"kafka://{kafka_broker}/{topic_name}", Settings.from_keys(), tail=False)
    assert sorted(src.list_parts()) == [f"{p}-{topic_name}" for p in range(3)]
    by_part = read_source(src)
    got = [x for xs in by_part.values() for x in xs]
    messages = [x for x in got if isinstance(x, Message)]
    dead = [x for x in got if isinstance(x, DeadLetter)]
    assert sorted(m.message_id for m in messages) == sorted(r["message_id"] for r in rows)
    assert sorted(d.reason.split(":")[0] for d in dead) == [
        "broken JSON",
        "empty record value; expected a JSON chat message",
    ]
    # key = conversation: a conversation lives in one partition, in the order it was produced
    for conv in ("c0", "c1", "c2", "c3"):
        homes = [
            k
            for k, xs in by_part.items()
            if any(getattr(x, "conversation_id", None) == conv for x in xs)
        ]
        assert len(homes) == 1
        seq = [
            x.message_id for x in by_part[homes[0]] if getattr(x, "conversation_id", None) == conv
        ]
        assert seq == [f"{conv}-{i}" for i in range(12)]
    for d in dead:
        topic, part, offset = d.position.split(":")
        assert topic == topic_name and f"{part}-{topic}" in by_part and int(offset) >= 0


def test_snapshot_and_resume_round_trip(kafka_broker, topic_name):
    rows = [rec("c1", i) for i in range(25)]
    produce_values(
        kafka_broker, topic_name, [(b"c1", json.dumps(r).encode()) for r in rows], partitions=1
    )
    address = parse_kafka_uri(f"kafka://{kafka_broker}/{topic_name}")
    src = KafkaMessageSource(address, tail=False, batch_size=4)
    (key,) = src.list_parts()
    part = src.build_part("read", key, None)
    first: list = []
    while len(first) < 10:  # a poll may return fewer records than the batch size
        first.extend(part.next_batch())
    state = part.snapshot()
    part.close()
    assert state == len(first)  # the offset of the next record
    resumed = src.build_part("read", key, state)
    try:
        rest = drain_part(resumed)
    finally:
        resumed.close()
    assert [m.message_id for m in first + rest] == [r["message_id"] for r in rows]
    with pytest.raises(InputError, match="is not one of"):
        src.build_part("read", "0-another-topic", None)


def test_missing_topic_and_unreachable_broker_are_clear_errors(kafka_broker, topic_name):
    with pytest.raises(InputError, match=f"topic '{topic_name}' does not exist"):
        kafka_source(f"kafka://{kafka_broker}/{topic_name}", Settings.from_keys(), tail=False)
    address = parse_kafka_uri(f"kafka://127.0.0.1:{free_port()}/x")
    with pytest.raises(InputError, match="no answer from the Kafka broker"):
        list_partitions(address, timeout=1)
    with pytest.raises(InputError, match="bad Kafka client configuration"):
        kafka_source(f"kafka://{kafka_broker}/x", Settings.from_keys(), {"no.such.property": "1"})


def test_ensure_topic_creates_once(kafka_broker, topic_name):
    address = parse_kafka_uri(f"kafka://{kafka_broker}/{topic_name}")
    assert ensure_topic(address, 2) == (2, True)
    assert ensure_topic(address, 5) == (2, False)
    with pytest.raises(InputError, match="at least 1 partition"):
        ensure_topic(address, 0)


# ---------------------------------------------------------------------------------- event sink


def test_event_sink_publishes_one_record_per_change_keyed_by_owner(kafka_broker, topic_name):
    settings = Settings.from_keys(kafka_events_partitions=2)
    sink = memory_events_sink(f"kafka://{kafka_broker}/{topic_name}", settings)
    assert isinstance(sink, MemoryEventSink)
    results = [
        make_result(1, "u1"),
        make_result(2, "u2"),
        make_result(3, "u1"),
        make_result(4, "u3", status="skipped"),
        make_result(5, "u3", status="failed"),
    ]
    expired = replace(make_result(6, "u2").memories[0], status="expired", conversation_id="c-u2")
    upkeep = MaintenanceResult(
        owner_id="u2",
        at=T0,
        memories=[expired],
        events=[
            replace(
                results[1].events[0],
                event_id="evt_maint",
                memory_id=expired.id,
                event="expired",
                span_id=None,
                new_status="expired",
            )
        ],
    )
    results.append(upkeep)
    part = sink.build("events", 0, 1)
    part.write_batch(results[:2])
    part.write_batch([("k", r) for r in results[2:]])
    part.close()

    records = consume_all(kafka_broker, topic_name)
    expected = [e for r in results[:3] for e in r.events] + upkeep.events
    assert len(records) == len(expected) == 7
    values = [json.loads(m.value()) for m in records]
    assert sorted(v["event_id"] for v in values) == sorted(e.event_id for e in expected)
    assert all(m.key().decode() == v["owner_id"] for m, v in zip(records, values))
    assert {m.partition() for m in records} <= {0, 1}
    first = next(v for v in values if v["event_id"] == expected[0].event_id)
    mem = results[0].memories[0]
    want = {
        "schema": 1,
        **as_dict(expected[0]),
        "conversation_id": "c-u1",
        "memory": first["memory"],
    }
    want["event_ts"] = want["recorded_at"] = "2024-05-08T13:56:00+00:00"
    assert first == want
    assert (first["event"], first["memory_id"], first["owner_id"], first["span_id"]) == (
        "created",
        mem.id,
        "u1",
        "spn_u1_1",
    )
    assert first["memory"]["text"] == mem.text and first["memory"]["version"] == 1
    assert "vector" not in first["memory"]
    headers = dict(records[0].headers())
    assert headers["event_id"].decode() == values[0]["event_id"]
    maint = next(v for v in values if v["event_id"] == "evt_maint")
    assert (
        maint["event"],
        maint["span_id"],
        maint["conversation_id"],
        maint["memory"]["status"],
    ) == ("expired", None, "c-u2", "expired")
    # one owner's events keep their order inside its partition
    u1 = [v["span_id"] for v in values if v["owner_id"] == "u1"]
    assert u1 == ["spn_u1_1", "spn_u1_1", "spn_u1_3", "spn_u1_3"]


def test_run_with_a_missing_topic_says_what_to_do(tmp_path, kafka_broker, topic_name):
    from click.testing import CliRunner

    from skillstream.cli import cli

    result = CliRunner().invoke(
        cli,
        [
            "--home",
            str(tmp_path / "h"),
            "run",
            "--source",
            f"kafka://{kafka_broker}/{topic_name}",
            "--no-tail",
        ],
    )
    assert isinstance(result.exception, InputError)
    assert f"Kafka topic '{topic_name}' does not exist" in str(result.exception)
    assert "skillstream produce" in str(result.exception)
