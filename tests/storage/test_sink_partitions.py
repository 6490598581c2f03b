"""How the store sink deals its partitions out: one for a DuckDB file, one per owner shard over
every worker of every process for a shared catalog (no database is opened here)."""

from __future__ import annotations

import threading

from skillstream.settings import Settings
from skillstream.storage.sinks import PARTITION, ResultSink, part_name

from .conftest import DIM, make_dead_letter, make_result

LAKE = "ducklake:postgres://me@127.0.0.1:5432/db"


def test_a_duckdb_file_has_one_partition(tmp_path):
    sink = ResultSink(Settings.from_keys(home=str(tmp_path)), DIM, shards=4, cluster=(1, 2, 2))
    assert sink.list_parts() == [PARTITION]
    assert sink.route(make_result(0, "a")) == (PARTITION, make_result(0, "a"))
    assert sink.part_fn("anything") == 0
    assert sink.shards_of(1) == {0, 1, 2, 3}


def test_a_shared_catalog_has_one_writer_per_shard_over_every_worker(tmp_path):
    settings = Settings.from_keys(home=str(tmp_path), catalog=LAKE)
    shards, processes, workers = 8, 2, 2
    sinks = [
        ResultSink(settings, DIM, shards=shards, cluster=(p, processes, workers))
        for p in range(processes)
    ]
    listed: list[list[str]] = []
    for sink in sinks:  # each process's sink, asked by each of its worker threads
        together = threading.Barrier(workers)  # worker threads live as long as the run

        def ask(s: ResultSink = sink, b: threading.Barrier = together) -> None:
            b.wait()
            listed.append(s.list_parts())
            b.wait()

        threads = [threading.Thread(target=ask) for _ in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    every = [name for names in listed for name in names]
    assert sorted(every) == [part_name(i) for i in range(shards)]  # each partition listed once
    assert all(len(names) == shards // (processes * workers) for names in listed)
    assert sinks[0].shards_of(0) | sinks[1].shards_of(1) == set(range(shards))
    assert not sinks[0].shards_of(0) & sinks[1].shards_of(1)
    for p, sink in enumerate(sinks):
        mine = {part_name(i) for i in sink.shards_of(p)}
        assert mine == {n for names in listed[p * workers : (p + 1) * workers] for n in names}
        assert sink.list_parts() in listed[p * workers : (p + 1) * workers]  # same thread, same

    sink = sinks[0]
    key, _ = sink.route(make_result(0, "owner-7"))
    assert key == sink.shard("owner-7") and sink.part_fn(key) == int(key) < shards
    assert sink.owns(0)("owner-7") == (int(key) in sink.shards_of(0))
    dead_key, _ = sink.route(make_dead_letter(3))
    assert dead_key.isdigit()
