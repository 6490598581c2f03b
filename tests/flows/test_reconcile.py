"""A run that stops between the store sink's LanceDB write and its catalog commit.

The catalog transaction of one batch is made to fail after LanceDB took the batch: LanceDB is then
ahead of the ledger. The next run must roll LanceDB back to the committed rows before owners are
hydrated, so the uncommitted spans run again on the state they first saw and give exactly the rows
of an uninterrupted run (same ids, texts, statuses and versions).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bytewax.testing import run_main

from skillstream.connectors.files import FileSource
from skillstream.embed import get_embedder
from skillstream.flows.runner import Runner
from skillstream.settings import Settings
from skillstream.storage.catalog import Catalog
from skillstream.storage.lance import MemoryIndex
from skillstream.storage.reconcile import reconcile_memories
from tests.factories import conversation_rows, flow_of, write_jsonl


def rows_of(settings: Settings) -> list[tuple]:
    idx = MemoryIndex(settings.storage.lancedb, 384, settings.storage.storage_options)
    table = idx.table.scan(columns=["id", "text", "status", "version"]).to_pylist()
    return sorted((r["id"], r["text"], r["status"], r["version"]) for r in table)


def committed(settings: Settings) -> dict[str, int]:
    with Catalog(settings.storage.catalog, read_only=True) as cat:
        return {
            r["id"]: r["version"]
            for r in cat.sql("select id, version from memory_meta").to_pylist()
        }


def home(tmp_path, name: str) -> Settings:
    return Settings.load(
        home=str(tmp_path / name), epoch_interval_s=0.0, span_tokens=96, distill=False
    )


def crash_after_lance(monkeypatch, settings: Settings, src, at: int, table: str = "spans") -> None:
    """Run the flow; the ``at``-th write to the catalog ``table`` raises inside its transaction."""
    real, seen = Catalog.upsert, {"n": 0}

    def upsert(self, name, rows, **kw):
        if name == table and rows:
            seen["n"] += 1
            if seen["n"] == at:
                raise RuntimeError("stopped between the LanceDB write and the catalog commit")
        return real(self, name, rows, **kw)

    monkeypatch.setattr(Catalog, "upsert", upsert)
    with pytest.raises(Exception, match="stopped between"):
        run_main(flow_of(settings, FileSource(str(src), batch_size=4)))
    monkeypatch.setattr(Catalog, "upsert", real)


@pytest.fixture
def source(tmp_path):
    # the same people come back in every conversation, so later spans change earlier memories
    rows = []
    for c in range(3):
        rows += conversation_rows(f"conv{c}", 40, owner="u1")
    return write_jsonl(tmp_path / "in.jsonl", rows)


def test_resume_after_a_stop_between_the_writes_equals_an_uninterrupted_run(
    tmp_path, monkeypatch, source
):
    clean = home(tmp_path, "clean")
    run_main(flow_of(clean, FileSource(source, batch_size=4)))
    expected = rows_of(clean)

    s = home(tmp_path, "crashed")
    crash_after_lance(monkeypatch, s, source, at=3)
    ahead = {r[0]: r[3] for r in rows_of(s)}
    assert ahead != committed(s)  # LanceDB holds rows (or versions) the catalog never committed

    run_main(flow_of(s, FileSource(source, batch_size=4)))
    assert rows_of(s) == expected
    assert {r[0]: r[3] for r in rows_of(s)} == committed(s)


def test_without_reconciling_the_resumed_run_reinforces_its_own_output(
    tmp_path, monkeypatch, source
):
    """The failure the reconcile step prevents (shows the test above can fail)."""
    clean = home(tmp_path, "clean")
    run_main(flow_of(clean, FileSource(source, batch_size=4)))

    s = home(tmp_path, "crashed")
    crash_after_lance(monkeypatch, s, source, at=3)
    monkeypatch.setattr(Runner, "_reconcile", lambda self, sink: None)
    run_main(flow_of(s, FileSource(source, batch_size=4)))
    assert rows_of(s) != rows_of(clean)


def test_reconcile_deletes_rolls_back_and_restores(tmp_path, monkeypatch, source):
    s = home(tmp_path, "h")
    crash_after_lance(monkeypatch, s, source, at=3)
    index = MemoryIndex(s.storage.lancedb, 384, s.storage.storage_options)
    want = committed(s)
    # a committed memory lost from LanceDB comes back too
    lost = sorted(want)[0]
    index.table.delete(f"id = '{lost}'")

    with Catalog(s.storage.catalog, read_only=True) as cat:
        done = reconcile_memories(cat, index, get_embedder().encode)
    assert done.deleted + done.rolled_back > 0 and done.restored == 1
    assert {r[0]: r[3] for r in rows_of(s)} == want
    with Catalog(s.storage.catalog, read_only=True) as cat:
        assert reconcile_memories(cat, index, get_embedder().encode).changed == 0  # idempotent


def task_skills_of(settings: Settings) -> tuple[list[tuple], list[tuple]]:
    """(LanceDB task skills as (name, version), catalog versions as (name, version))."""
    import lancedb

    tbl = lancedb.connect(settings.storage.lancedb).open_table("task_skills")
    lance = sorted(
        (r["name"], r["version"]) for r in tbl.to_arrow().select(["name", "version"]).to_pylist()
    )
    with Catalog(settings.storage.catalog, read_only=True) as cat:
        rows = cat.sql("select name, version from task_skill_versions").to_pylist()
    versions = sorted((r["name"], r["version"]) for r in rows)
    return lance, versions


def test_task_skills_written_to_lancedb_but_not_committed_are_distilled_again(
    tmp_path, monkeypatch
):
    sample = Path(__file__).resolve().parents[2] / "data" / "sample"
    clean = Settings.load(home=str(tmp_path / "clean"), epoch_interval_s=0.0)
    run_main(flow_of(clean, FileSource(str(sample), batch_size=4)))
    lance, versions = task_skills_of(clean)
    assert lance == [("deploy-flask-app", 2)]
    assert versions == [("deploy-flask-app", 1), ("deploy-flask-app", 2)]

    s = Settings.load(home=str(tmp_path / "crashed"), epoch_interval_s=0.0)
    crash_after_lance(monkeypatch, s, sample, at=1, table="task_skills")
    assert task_skills_of(s)[0]  # LanceDB holds a task skill the catalog never committed

    run_main(flow_of(s, FileSource(str(sample), batch_size=4)))
    assert task_skills_of(s) == (lance, versions)
    assert rows_of(s) == rows_of(clean)
