"""write_results and the Bytewax ResultSink against real LanceDB and DuckDB files."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.testing import TestingSource, cluster_main, run_main

from skillstream.errors import InputError
from skillstream.model import ContradictionRow, TableRows
from skillstream.storage import sinks
from skillstream.storage.home import open_stores
from skillstream.storage.writer import write_results

from .conftest import DIM, free_port, make_dead_letter, make_memory, make_result
from .flow_app import OWNERS, build, items

REPO = Path(__file__).resolve().parents[2]
TABLES = ("memory_meta", "memory_events", "spans", "dead_letters", "llm_calls")


def counts(stores) -> dict[str, int]:
    stores.refresh()
    out = {t: stores.catalog.count(t) for t in TABLES}
    out["lance"] = stores.index.count()
    out["memories_view"] = stores.catalog.count("memories")
    return out


@pytest.fixture
def stores(settings):
    s = open_stores(settings, DIM)
    yield s
    s.close()


def test_replay_changes_nothing(stores):
    batch = [make_result(n, owner) for owner in ("a", "b'c") for n in range(3)]
    batch += [make_dead_letter(1)]
    write_results(stores, batch)
    first = counts(stores)
    snapshot = {
        t: stores.catalog.sql(f'SELECT * FROM "{t}" ORDER BY 1').to_pylist() for t in TABLES
    }
    write_results(stores, batch)  # a replay after a crash
    assert counts(stores) == first
    assert first == {
        "memory_meta": 12,
        "memory_events": 12,
        "spans": 6,
        "dead_letters": 1,
        "llm_calls": 6,
        "lance": 12,
        "memories_view": 12,
    }
    again = {t: stores.catalog.sql(f'SELECT * FROM "{t}" ORDER BY 1').to_pylist() for t in TABLES}
    assert again == snapshot


def test_ledger_rows(stores):
    result = make_result(4, "o'x")
    write_results(stores, [("key", result)])
    (row,) = stores.catalog.sql("SELECT * FROM spans").to_pylist()
    span = result.span
    assert row["span_id"] == span.span_id
    assert (row["owner_id"], row["conversation_id"], row["session_id"], row["seq"]) == (
        "o'x",
        "c-o'x",
        "s1",
        4,
    )
    assert (row["start_ts"], row["end_ts"]) == (span.start_ts, span.end_ts)
    assert row["message_ids"] == span.message_ids
    assert (row["status"], row["extractor"], row["memory_skills"], row["n_ops"]) == (
        "done",
        "rules",
        ["insert"],
        2,
    )
    assert row["memory_ids"] == [m.id for m in result.memories]
    assert row["processed_at"] == result.processed_at
    assert stores.catalog.processed_span_ids() == {span.span_id}


def test_skipped_results_write_nothing(stores):
    write_results(stores, [make_result(1, status="skipped")])
    assert set(counts(stores).values()) == {0}


def test_failed_span_is_recorded_but_not_processed(stores):
    failed = make_result(2, memories=[], status="failed")
    failed.error = "LLM timed out"
    write_results(stores, [failed])
    assert stores.catalog.processed_span_ids() == set()
    assert stores.catalog.sql("SELECT error FROM spans").to_pylist() == [{"error": "LLM timed out"}]


def test_memories_deduped_across_results_by_version(stores):
    older = make_result(1, memories=[make_memory(1, text="old", version=1)])
    newer = make_result(2, memories=[make_memory(1, text="new", version=2)])
    write_results(stores, [newer, older])  # order inside a batch does not matter
    assert [m.text for m in stores.index.owner_memories("u1")] == ["new"]
    assert stores.catalog.sql("SELECT text, version FROM memory_meta").to_pylist() == [
        {"text": "new", "version": 2}
    ]
    write_results(stores, [older])  # a late replay of the older span cannot roll back
    assert stores.catalog.sql("SELECT text FROM memory_meta").to_pylist() == [{"text": "new"}]
    assert [m.text for m in stores.index.owner_memories("u1")] == ["new"]


def contradiction(n: int, resolution: str | None = "unresolved") -> ContradictionRow:
    return ContradictionRow(
        contradiction_id=f"ctr_{n}",
        owner_id="u1",
        memory_a=f"m{n}a",
        memory_b=f"m{n}b",
        resolution=resolution,  # type: ignore[arg-type]
    )


def test_typed_rows_go_to_their_tables(stores):
    rows = TableRows(contradictions=[contradiction(1), contradiction(2)])
    summary = write_results(stores, [make_result(1, rows=rows)])
    write_results(stores, [make_result(1, rows=rows)])
    assert summary.tables == {"contradictions": 2}
    assert stores.catalog.count("contradictions") == 2
    assert stores.catalog.sql(
        "SELECT memory_a, resolution FROM contradictions ORDER BY 1"
    ).to_pylist() == [
        {"memory_a": "m1a", "resolution": "unresolved"},
        {"memory_a": "m2a", "resolution": "unresolved"},
    ]


def test_failure_in_catalog_leaves_no_ledger_row(stores):
    bad = make_result(1, rows=TableRows(contradictions=[contradiction(1, resolution=None)]))
    with pytest.raises(InputError, match="is required"):
        write_results(stores, [bad])
    assert stores.catalog.count("spans") == 0
    assert stores.catalog.count("memory_meta") == 0  # the transaction rolled back
    write_results(stores, [make_result(1)])  # the replay then succeeds
    assert stores.catalog.processed_span_ids() == {"spn_u1_1"}


def test_rejects_other_items(stores):
    with pytest.raises(InputError, match="SpanResult and DeadLetter"):
        write_results(stores, [("k", {"not": "a result"})])


EXPECTED = {
    "memory_meta": 24,
    "memory_events": 24,
    "spans": 12,
    "dead_letters": 2,
    "llm_calls": 12,
    "lance": 24,
    "memories_view": 24,
}


def _counts_of(settings):
    with open_stores(settings, DIM, read_only=True) as s:
        return counts(s)


@pytest.fixture
def count_opens(monkeypatch):
    opened = []
    real = sinks.open_stores

    def counting(*args, **kwargs):
        opened.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(sinks, "open_stores", counting)
    return opened


def test_sink_in_dataflow_twice(settings, count_opens):
    run_main(build(settings, items()))
    assert _counts_of(settings) == EXPECTED
    run_main(build(settings, items()))  # the whole input replayed
    assert _counts_of(settings) == EXPECTED
    assert len(count_opens) == 2


def test_sink_with_two_workers(settings, count_opens):
    cluster_main(build(settings, items()), [], 0, worker_count_per_proc=2)
    assert len(count_opens) == 1  # one partition: one worker opens the stores
    assert _counts_of(settings) == EXPECTED


def test_sink_resumes_after_crash(settings, tmp_path):
    rec = tmp_path / "recovery"
    rec.mkdir()
    init_db_dir(rec, 1)
    source = items()
    source.insert(7, TestingSource.ABORT())
    flow = build(settings, source)
    config = RecoveryConfig(str(rec))
    run_main(flow, epoch_interval=timedelta(0), recovery_config=config)
    partial = _counts_of(settings)
    assert 0 < partial["spans"] < 12
    run_main(flow, epoch_interval=timedelta(0), recovery_config=config)
    assert _counts_of(settings) == EXPECTED


@pytest.mark.slow
def test_sink_in_two_processes(tmp_path):
    """Two Bytewax processes with two workers each: one of them writes the DuckDB file."""
    home = tmp_path / "home"
    addresses = f"127.0.0.1:{free_port()};127.0.0.1:{free_port()}"
    env = dict(os.environ, STORE_TEST_HOME=str(home), PYTHONPATH=str(REPO))
    cmd = [
        sys.executable,
        "-m",
        "bytewax.run",
        "tests.storage.flow_app:flow",
        "-w",
        "2",
        "-a",
        addresses,
    ]
    procs = [
        subprocess.Popen(
            cmd + ["-i", str(i)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    outputs = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=90)
            outputs.append(out)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], outputs
    from skillstream.settings import Settings

    assert _counts_of(Settings.from_keys(home=str(home))) == EXPECTED
    assert len(OWNERS) * 3 == EXPECTED["spans"]
