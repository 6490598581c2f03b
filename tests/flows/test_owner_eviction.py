"""Evicting idle owners from the extraction state and reading them back from the store changes
nothing: the same memories (every column), the same events, also across an abort and resume."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.testing import TestingSource, run_main

from skillstream.connectors.records import parse_record
from skillstream.settings import Settings
from skillstream.storage.catalog import Catalog
from skillstream.storage.lance import MemoryIndex
from tests.factories import conversation_rows, flow_of, run_flow

# written at run time (the wall clock of the run), so they differ between any two runs
_RUN_TIME = {"recorded_at", "processed_at"}


def _messages() -> list:
    rows = []
    for i, owner in enumerate(("ann", "bob", "cat", "dan")):
        rows += conversation_rows(f"conv-{owner}", 70 - 9 * i, owner=owner)
    rows.sort(key=lambda r: (r["timestamp"], r["message_id"]))
    return [parse_record(r, source="t", position=i) for i, r in enumerate(rows)]


def _settings(home, **keys) -> Settings:
    return Settings.load(home=str(home), epoch_interval_s=0.0, span_tokens=96, **keys)


def _memories(settings: Settings) -> dict[str, dict]:
    idx = MemoryIndex(settings.storage.lancedb, 384, settings.storage.storage_options)
    out = {}
    for r in idx.table.to_arrow().to_pylist():
        out[r["id"]] = {k: v for k, v in r.items() if k not in _RUN_TIME}
    return out


def _events(settings: Settings) -> list[tuple]:
    cat = Catalog(settings.storage.catalog, read_only=True)
    try:
        rows = cat.sql("SELECT * FROM memory_events ORDER BY event_id").to_pylist()
    finally:
        cat.close()
    return [tuple(sorted((k, str(v)) for k, v in r.items() if k not in _RUN_TIME)) for r in rows]


def _same(a: Settings, b: Settings) -> None:
    ma, mb = _memories(a), _memories(b)
    assert sorted(ma) == sorted(mb)
    for mid, row in ma.items():
        other = dict(mb[mid])
        va, vb = row.get("vector"), other.pop("vector", None)
        assert (va is None) == (vb is None)
        if va is not None:
            # the model's last bits depend on which texts share its batch (the embedder
            # coalesces the calls of concurrent owners), in any run
            np.testing.assert_allclose(np.asarray(va), np.asarray(vb), atol=1e-6)
        assert {k: v for k, v in row.items() if k != "vector"} == other, mid
    assert _events(a) == _events(b)


def test_evicted_owners_come_back_with_the_same_results(tmp_path):
    messages = _messages()
    kept = _settings(tmp_path / "kept")
    counts = run_flow(kept, TestingSource(messages, batch_size=4))
    assert counts.get("owners_evicted", 0) == 0

    evicting = _settings(tmp_path / "evicting", owner_state_max=1)
    counts = run_flow(evicting, TestingSource(messages, batch_size=4))
    assert counts.get("owners_evicted", 0) > 4  # owners left and came back many times
    assert counts.get("owners_rehydrated", 0) > 4
    assert len(_memories(kept)) > 20
    _same(kept, evicting)


def test_eviction_with_abort_and_resume_gives_the_same_rows(tmp_path):
    messages = _messages()
    clean = _settings(tmp_path / "clean")
    run_main(flow_of(clean, TestingSource(messages, batch_size=4)))

    settings = _settings(tmp_path / "home", owner_state_max=1)
    rec = tmp_path / "recovery"
    rec.mkdir()
    init_db_dir(rec, 1)
    cut = len(messages) // 2
    inp = messages[:cut] + [TestingSource.ABORT()] + messages[cut:]
    for _ in range(2):
        flow = flow_of(settings, TestingSource(inp, batch_size=4))
        run_main(flow, epoch_interval=timedelta(0), recovery_config=RecoveryConfig(str(rec)))
    assert sorted(_memories(settings)) == sorted(_memories(clean))
    _same(clean, settings)


def test_snapshots_hold_only_the_owners_in_memory(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from skillstream.flows.operators import ExtractLogic
    from skillstream.flows.runner import Runner
    from tests.factories import make_span

    settings = _settings(tmp_path / "home", owner_state_max=2)
    spans = [
        make_span([("user", f"I live in Lisbon and I love {food}.")], conversation_id=owner)
        for owner, food in (("ann", "bread"), ("bob", "figs"), ("cat", "tea"), ("dan", "rice"))
    ]
    pipeline = Runner(settings).memory_pipeline()
    logic = ExtractLogic(pipeline, ThreadPoolExecutor(2), None, max_owners=2)
    logic.on_batch(spans)
    snap = logic.snapshot()
    owners = sorted(k for k in snap if not k.startswith("\x00"))
    assert len(owners) == 2
    evicted = next(v for k, v in snap.items() if k.startswith("\x00"))
    assert sorted([*owners, *evicted]) == ["ann", "bob", "cat", "dan"]
    assert all(not hasattr(e, "memories") for e in evicted.values())


def test_without_recovery_extraction_hands_bytewax_an_empty_snapshot(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from skillstream.flows.operators import ExtractLogic
    from skillstream.flows.runner import Runner
    from tests.factories import make_span

    settings = _settings(tmp_path / "home")
    span = make_span([("user", "I live in Lisbon and I love figs.")], conversation_id="ann")
    pipeline = Runner(settings).memory_pipeline()
    kept = ExtractLogic(pipeline, ThreadPoolExecutor(1), None)
    dropped = ExtractLogic(pipeline, ThreadPoolExecutor(1), None, snapshots=False)
    for logic in (kept, dropped):
        logic.on_batch([span])
    assert list(kept.snapshot()) == ["ann"] and kept.snapshot()["ann"] is not kept.owners["ann"]
    assert dropped.snapshot() == {} and list(dropped.owners) == ["ann"]
    # a run snapshots only with a recovery folder
    assert Runner(settings).parts().extraction.snapshots is False
    assert Runner(settings, recovery_dir=tmp_path / "rec").parts().extraction.snapshots is True
