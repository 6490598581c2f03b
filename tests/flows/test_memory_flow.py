"""The memory flow end to end: real Bytewax runners, real LanceDB and DuckDB files."""

from __future__ import annotations

from datetime import timedelta

from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.testing import TestingSource, cluster_main, run_main

from skillstream.connectors.files import FileSource
from skillstream.connectors.records import parse_record
from skillstream.storage.catalog import Catalog
from tests.factories import conversation_rows, flow_of, run_flow, write_jsonl
from tests.flows.conftest import memory_ids


def catalog_rows(settings, sql):
    cat = Catalog(settings.storage.catalog, read_only=True)
    try:
        cat.attach_lance(settings.storage.lancedb, settings.storage.storage_options)
        return cat.sql(sql).to_pylist()
    finally:
        cat.close()


def test_file_flow_fills_both_stores_and_rerun_adds_nothing(tmp_path, settings):
    src = write_jsonl(
        tmp_path / "c.jsonl", conversation_rows("c1", 60) + conversation_rows("c2", 30)
    )
    counts = run_flow(settings, FileSource(src))
    ids = memory_ids(settings)
    assert len(ids) > 20
    (n,) = catalog_rows(settings, "select count(*) as n from memories")
    assert n["n"] == len(ids)
    spans = catalog_rows(settings, "select count(*) as n from spans where status = 'done'")[0]["n"]
    assert spans == counts["spans_done"] > 2
    # every memory points back at messages of its own conversation
    rows = catalog_rows(settings, "select conversation_id, source_message_ids from memories")
    assert all(
        r["source_message_ids"]
        and all(m.startswith(r["conversation_id"] + "-") for m in r["source_message_ids"])
        for r in rows
    )

    counts = run_flow(settings, FileSource(src))
    assert memory_ids(settings) == ids
    c = counts
    assert c.get("spans_done", 0) == 0 and c["spans_skipped"] == spans
    assert catalog_rows(
        settings,
        "select count(*) as n from memory_events where event in ('created', 'consolidated')",
    )[0]["n"] == len(ids)


def test_bad_records_become_dead_letters_and_the_rest_flows(tmp_path, settings):
    rows = conversation_rows("c1", 30)
    bad = [
        b'{"conversation_id": "c1", "role": "user", "content": "x", "timestamp": ',  # broken JSON
        b'{"conversation_id": "c1", "role": "user", '
        b'"timestamp": "2024-03-01T10:00:00Z"}',  # no text
        b'{"conversation_id": "c1", "role": "user", "content": "hi", "timestamp": "last tuesday"}',
        b'{"conversation_id": "c1", "role": "user", "content": '
        b'"caf\xe9", "timestamp": "2024-03-01T10:00:00Z"}',
    ]
    src = write_jsonl(tmp_path / "c.jsonl", rows, bad)
    counts = run_flow(settings, FileSource(src))
    dl = catalog_rows(settings, "select position, reason from dead_letters order by position")
    assert len(dl) == 4
    assert counts["messages"] == 30
    assert len(memory_ids(settings)) > 0


def test_two_workers_give_the_same_memories(tmp_path, settings):
    from skillstream.settings import Settings

    files = [
        write_jsonl(tmp_path / f"c{i}.jsonl", conversation_rows(f"c{i}", 40)) for i in range(4)
    ]
    run_main(flow_of(settings, FileSource([str(f) for f in files])))
    other = Settings.load(home=str(tmp_path / "home2"), epoch_interval_s=0.0, span_tokens=128)
    cluster_main(
        flow_of(other, FileSource([str(f) for f in files]), workers=2),
        [],
        0,
        worker_count_per_proc=2,
    )
    assert memory_ids(settings) == memory_ids(other)


def test_abort_and_resume_with_recovery_gives_the_same_memories(tmp_path, settings):
    from skillstream.settings import Settings

    rows = conversation_rows("c1", 80) + conversation_rows("c2", 50)
    rows.sort(key=lambda r: r["timestamp"])
    messages = [parse_record(r, source="t", position=i) for i, r in enumerate(rows)]

    clean = Settings.load(home=str(tmp_path / "clean"), epoch_interval_s=0.0, span_tokens=128)
    run_main(flow_of(clean, TestingSource(messages, batch_size=5)))
    expected = memory_ids(clean)

    rec = tmp_path / "recovery"
    rec.mkdir()
    init_db_dir(rec, 1)
    cut = len(messages) // 2
    inp = messages[:cut] + [TestingSource.ABORT()] + messages[cut:]
    flow = flow_of(settings, TestingSource(inp, batch_size=5))
    run_main(flow, epoch_interval=timedelta(0), recovery_config=RecoveryConfig(str(rec)))
    partial = memory_ids(settings)
    assert 0 < len(partial) < len(expected)
    flow = flow_of(settings, TestingSource(inp, batch_size=5))
    run_main(flow, epoch_interval=timedelta(0), recovery_config=RecoveryConfig(str(rec)))
    assert memory_ids(settings) == expected
