"""FileSource inside real Bytewax dataflows: one and two workers, recovery after a crash."""

from __future__ import annotations

from datetime import timedelta

import bytewax.operators as op
import pytest
from bytewax.dataflow import Dataflow
from bytewax.errors import BytewaxRuntimeError
from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.testing import TestingSink, cluster_main, run_main

from skillstream.connectors.files import FileSource
from skillstream.model import DeadLetter, Message
from tests.factories import chat_rows, read_source, write_csv, write_jsonl, write_parquet


def _flow(source: FileSource, oks: list, errs: list) -> Dataflow:
    flow = Dataflow("connectors_test")
    items = op.input("in", flow, source)
    split = op.branch("split", items, lambda item: isinstance(item, Message))
    op.output("oks", split.trues, TestingSink(oks))
    op.output("errs", split.falses, TestingSink(errs))
    return flow


def _inputs(tmp_path):
    rows = chat_rows(12)
    write_jsonl(tmp_path / "a.jsonl", [*rows[:4], b"{oops", *rows[4:6]])
    write_parquet(tmp_path / "b.parquet", rows[6:9])
    write_csv(tmp_path / "c.csv", rows[9:])
    return FileSource(tmp_path, batch_size=2)


def test_run_main_reads_every_file_and_splits_dead_letters(tmp_path):
    source = _inputs(tmp_path)
    oks: list = []
    errs: list = []
    run_main(_flow(source, oks, errs))
    assert len(oks) == 12 and all(isinstance(m, Message) for m in oks)
    assert [(e.reason.split(":")[0], e.source) for e in errs] == [
        ("broken JSON", str(tmp_path / "a.jsonl"))
    ]
    # Per file, the flow keeps the file's order.
    for key in source.list_parts():
        assert [m for m in oks if m.source == key] == [
            m for m in read_source(FileSource(key)) if isinstance(m, Message)
        ]


def test_two_workers_read_each_file_once(tmp_path):
    source = _inputs(tmp_path)
    oks: list = []
    errs: list = []
    cluster_main(_flow(source, oks, errs), [], 0, worker_count_per_proc=2)
    expected = read_source(source)

    def key(item):
        return (item.source, str(item.position))

    assert sorted(map(key, oks + errs)) == sorted(map(key, expected))
    assert len(oks) == 12 and len(errs) == 1
    assert all(isinstance(e, DeadLetter) for e in errs)


def test_recovery_after_a_crash_resumes_where_the_snapshot_was(tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", chat_rows(20))
    (tmp_path / "recovery").mkdir()
    init_db_dir(tmp_path / "recovery", 1)
    crash = {"on": True}

    def fail_once(m: Message | DeadLetter) -> Message | DeadLetter:
        if crash["on"] and isinstance(m, Message) and m.text.startswith("message number 12 "):
            raise RuntimeError("simulated crash")
        return m

    def build(out: list) -> Dataflow:
        flow = Dataflow("connectors_recovery")
        items = op.input("in", flow, FileSource(path, batch_size=3))
        op.output("out", op.map("fail_once", items, fail_once), TestingSink(out))
        return flow

    recovery = RecoveryConfig(str(tmp_path / "recovery"))
    first: list = []
    with pytest.raises(BytewaxRuntimeError) as crashed:
        run_main(build(first), epoch_interval=timedelta(0), recovery_config=recovery)
    causes, err = [], crashed.value
    while err is not None:
        causes.append(str(err))
        err = err.__cause__
    assert causes[-1] == "simulated crash"
    crash["on"] = False
    second: list = []
    run_main(build(second), epoch_interval=timedelta(0), recovery_config=recovery)

    numbers = [int(m.text.split()[2]) for m in first + second]
    assert numbers == list(range(20))  # one batch per epoch: nothing lost, nothing repeated
