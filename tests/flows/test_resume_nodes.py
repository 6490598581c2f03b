"""A run that meets an owner whose spans are partly in the ledger (a resume or a rerun) ends with
the topic nodes of one uninterrupted run: the maintenance ticks before the ledger's spans are
skipped with them instead of re-clustering the later state at an earlier time."""

from __future__ import annotations

from bytewax.testing import run_main

from skillstream.connectors.files import FileSource
from skillstream.settings import Settings
from skillstream.storage.catalog import Catalog
from tests.factories import conversation_rows, flow_of, write_jsonl

SESSION = 40
"""``conversation_rows`` starts a session every 40 messages (10 hours apart)."""


def _settings(path) -> Settings:
    return Settings.load(
        home=str(path),
        epoch_interval_s=0.0,
        span_tokens=128,
        maintenance_interval_s=6 * 3600,  # several ticks per conversation
        distill=False,
    )


def _sql(settings: Settings, q: str) -> list[dict]:
    cat = Catalog(settings.storage.catalog, read_only=True)
    try:
        return cat.sql(q).to_pylist()
    finally:
        cat.close()


def _state(settings: Settings) -> tuple[list[dict], list[dict], list[dict]]:
    memories = _sql(settings, "SELECT id, kind, text, status, version FROM memory_meta ORDER BY id")
    events = _sql(
        settings,
        "SELECT event_id, memory_id, event, event_ts, version FROM memory_events ORDER BY 1",
    )
    links = _sql(
        settings,
        "SELECT relation_id, source_id, target_id, rank, version, change FROM memory_relations "
        "ORDER BY 1",
    )
    return memories, events, links


def test_a_rerun_over_a_committed_prefix_writes_the_nodes_of_one_run(tmp_path):
    rows = conversation_rows("conv0", 4 * SESSION) + conversation_rows("conv1", 3 * SESSION)
    full = write_jsonl(tmp_path / "all.jsonl", rows)
    # the prefix ends between sessions, so its spans are the full run's first spans
    cut = [r for r in rows if int(r["message_id"].rsplit("-", 1)[1]) < 2 * SESSION]
    prefix = write_jsonl(tmp_path / "prefix.jsonl", cut)

    once = _settings(tmp_path / "once")
    run_main(flow_of(once, FileSource(full)))
    twice = _settings(tmp_path / "twice")
    run_main(flow_of(twice, FileSource(prefix)))
    nodes_after_prefix = _sql(twice, "SELECT id, version FROM memory_meta WHERE kind = 'topic'")
    run_main(flow_of(twice, FileSource(full)))  # the prefix's spans are in the ledger

    memories, events, links = _state(once)
    nodes = [m for m in memories if m["kind"] == "topic"]
    # the case that matters: nodes exist after the prefix and change after it
    assert nodes_after_prefix and nodes
    assert {(n["id"], n["version"]) for n in nodes} != {
        (n["id"], n["version"]) for n in nodes_after_prefix
    }
    assert all(n["text"].endswith(".") and "; " in n["text"] for n in nodes)
    assert links
    assert _state(twice) == (memories, events, links)
