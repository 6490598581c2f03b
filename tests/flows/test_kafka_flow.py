"""``skillstream produce`` and ``skillstream run`` on Kafka, through the CLI, in this process."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from skillstream.cli import cli
from skillstream.settings import Settings
from skillstream.storage.catalog import Catalog
from tests.factories import write_locomo
from tests.flows.conftest import memory_ids
from tests.servers.kafka import consume_all

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("clean_env")]


def invoke(*args: str) -> dict:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def catalog_rows(home, sql: str) -> list[dict]:
    settings = Settings.load(home=str(home))
    cat = Catalog(settings.storage.catalog, read_only=True)
    try:
        cat.attach_lance(settings.storage.lancedb, settings.storage.storage_options)
        return cat.sql(sql).to_pylist()
    finally:
        cat.close()


def test_produce_writes_canonical_records_keyed_by_conversation(tmp_path, kafka_broker, topic_name):
    data = write_locomo(tmp_path / "locomo.json", samples=3, sessions=2, turns=4)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"conversation_id": "x", "role": "user"}\n')
    out = invoke(
        "--home",
        str(tmp_path / "h"),
        "produce",
        str(data),
        str(bad),
        "--format",
        "auto",
        "--to",
        f"kafka://{kafka_broker}/{topic_name}",
        "--partitions",
        "3",
        "--json",
    )
    assert {
        k: out[k]
        for k in ("produced", "conversations", "invalid_records", "partitions", "topic_created")
    } == {
        "produced": 24,
        "conversations": 3,
        "invalid_records": 1,
        "partitions": 3,
        "topic_created": True,
    }
    records = consume_all(kafka_broker, topic_name)
    assert len(records) == 24
    values = [json.loads(r.value()) for r in records]
    assert all(r.key().decode() == v["conversation_id"] for r, v in zip(records, values))
    by_conv: dict[str, set[int]] = {}
    for r, v in zip(records, values):
        by_conv.setdefault(v["conversation_id"], set()).add(r.partition())
    assert sorted(by_conv) == ["conv-0", "conv-1", "conv-2"]
    assert all(len(p) == 1 for p in by_conv.values())
    first = next(
        v for v in values if v["conversation_id"] == "conv-0" and v["message_id"] == "D1:1"
    )
    assert first == {
        "conversation_id": "conv-0",
        "user_id": "conv-0",
        "session_id": "conv-0/session_1",
        "message_id": "D1:1",
        "role": "user",
        "name": "Ana",
        "content": first["content"],
        "timestamp": "2023-02-04T14:07:00+00:00",
    }
    # producing again into the existing topic appends and does not recreate it
    again = invoke(
        "--home",
        str(tmp_path / "h"),
        "produce",
        str(data),
        "--to",
        f"kafka://{kafka_broker}/{topic_name}",
        "--partitions",
        "5",
        "--json",
    )
    assert (again["produced"], again["partitions"], again["topic_created"]) == (24, 3, False)


def test_two_workers_no_tail_equal_the_file_run_and_events_match_the_log(
    tmp_path, kafka_broker, topic_name
):
    data = write_locomo(tmp_path / "locomo.json", samples=4, sessions=3, turns=8)
    uri = f"kafka://{kafka_broker}/{topic_name}"
    events_topic = f"{topic_name}-events"
    produced = invoke(
        "--home",
        str(tmp_path / "hk"),
        "produce",
        str(data),
        "--format",
        "locomo",
        "--to",
        uri,
        "--partitions",
        "3",
        "--json",
    )
    assert produced["produced"] == 96

    kafka_run = invoke(
        "--home",
        str(tmp_path / "hk"),
        "run",
        "--source",
        uri,
        "--no-tail",
        "--workers",
        "2",
        "--events-to",
        f"kafka://{kafka_broker}/{events_topic}",
        "--json",
    )
    file_run = invoke(
        "--home", str(tmp_path / "hf"), "run", "--source", str(data), "--format", "locomo", "--json"
    )
    assert kafka_run["messages"] == file_run["messages"] == 96
    assert kafka_run["dead_letters"] == file_run["dead_letters"] == 0
    assert kafka_run["spans_processed"] == file_run["spans_processed"] > 4

    k_ids = memory_ids(Settings.load(home=str(tmp_path / "hk")))
    f_ids = memory_ids(Settings.load(home=str(tmp_path / "hf")))
    assert len(k_ids) > 20 and k_ids == f_ids
    spans_sql = "select span_id, memory_ids from spans order by span_id"
    assert catalog_rows(tmp_path / "hk", spans_sql) == catalog_rows(tmp_path / "hf", spans_sql)

    # the event topic: one record per row of the lifecycle log, readable by a plain consumer
    log = catalog_rows(
        tmp_path / "hk", "select event_id, event, memory_id, owner_id from memory_events"
    )
    records = consume_all(kafka_broker, events_topic)
    values = [json.loads(r.value()) for r in records]
    assert len(values) == len(log) >= len(k_ids)
    assert sorted(
        (v["event_id"], v["event"], v["memory_id"], v["owner_id"]) for v in values
    ) == sorted((r["event_id"], r["event"], r["memory_id"], r["owner_id"]) for r in log)
    assert {v["event"] for v in values} >= {"created"}
    assert all(r.key().decode() == v["owner_id"] for r, v in zip(records, values))

    # a second run over the same topic finds every span in the ledger; whatever it still writes
    # to the lifecycle log (maintenance passes) reaches the topic too, once
    rerun = invoke(
        "--home",
        str(tmp_path / "hk"),
        "run",
        "--source",
        uri,
        "--no-tail",
        "--events-to",
        f"kafka://{kafka_broker}/{events_topic}",
        "--json",
    )
    assert (rerun["spans_processed"], rerun["spans_already_processed"]) == (
        0,
        kafka_run["spans_processed"],
    )
    after = [json.loads(r.value())["event_id"] for r in consume_all(kafka_broker, events_topic)]
    log = catalog_rows(tmp_path / "hk", "select event_id from memory_events")
    assert len(after) == len(set(after)) and set(after) == {r["event_id"] for r in log}
