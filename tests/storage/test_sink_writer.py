"""The store sink writes on a thread of its own: batches are written in order, an epoch's snapshot
waits until everything handed in is written, and a failed write stops the writing and fails the
flow once."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from skillstream.settings import Settings
from skillstream.storage import sinks
from skillstream.storage.sinks import ResultSink


@pytest.fixture
def part(tmp_path, monkeypatch):
    written: list[list] = []
    gate = threading.Event()
    fail_on: set[str] = set()

    def write(stores, values):
        gate.wait(10)
        if set(values) & fail_on:
            raise RuntimeError("the catalog refused the write")
        written.append(list(values))
        return SimpleNamespace(memories=0)

    monkeypatch.setattr(sinks, "write_results", write)
    settings = Settings.from_keys(home=str(tmp_path))
    p = ResultSink(settings, 384).build_part("store", sinks.PARTITION, None)
    yield SimpleNamespace(part=p, written=written, gate=gate, fail_on=fail_on)


def test_a_batch_is_written_while_the_flow_goes_on_and_a_snapshot_waits_for_it(part):
    part.part.write_batch(["a", "b"])  # returns before the write (held by the gate)
    assert part.written == []
    snapped = threading.Event()
    t = threading.Thread(target=lambda: (part.part.snapshot(), snapped.set()))
    t.start()
    assert not snapped.wait(0.3)  # the epoch's snapshot waits for the write
    part.gate.set()
    assert snapped.wait(10)
    assert part.written == [["a", "b"]]
    part.part.write_batch(["c"])
    part.part.close()
    assert part.written == [["a", "b"], ["c"]]  # in order, all written by close


def test_a_failed_write_stops_the_writing_and_is_raised_once(part):
    part.gate.set()
    part.fail_on.add("bad")
    part.part.write_batch(["ok"])
    part.part.write_batch(["bad"])
    with pytest.raises(RuntimeError, match="refused"):
        part.part.snapshot()
    part.part.close()  # Bytewax closes the partition while it unwinds: no second error
    assert part.written == [["ok"]]


def test_batches_after_a_failed_one_are_not_written(part):
    part.fail_on.add("bad")
    part.part.write_batch(["bad"])
    part.part.write_batch(["after"])  # queued behind the failing write
    part.gate.set()
    with pytest.raises(RuntimeError, match="refused"):
        part.part.snapshot()
    part.part.close()
    assert part.written == []  # a later batch's ledger rows never commit before an earlier one
