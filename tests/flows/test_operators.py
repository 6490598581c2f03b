"""The public operators in a user's own flow give the same stores as ``skillstream run``."""

from __future__ import annotations

import json

import bytewax.operators as op
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, run_main
from click.testing import CliRunner

from skillstream.cli import cli
from skillstream.connectors.records import parse_record
from skillstream.flows.memory import default_sample
from skillstream.flows.operators import admit_messages, distil_task_skills, extract_memories, store
from skillstream.flows.runner import Runner
from skillstream.model import Message, SpanResult
from skillstream.settings import Settings
from skillstream.storage.catalog import Catalog

pytestmark = pytest.mark.slow


def stored(settings: Settings) -> tuple[list[dict], list[tuple], list[tuple]]:
    """Memory rows, the span ledger and the task-skill versions of a home."""
    cat = Catalog(settings.storage.catalog, read_only=True)
    try:
        memories = cat.sql(
            "select id, owner_id, text, kind, memory_type, status, version, span_id, "
            "source_message_ids, event_ts from memory_meta order by id"
        ).to_pylist()
        spans = [
            tuple(r.values())
            for r in cat.sql(
                "select span_id, status, memory_ids from spans order by span_id"
            ).to_pylist()
        ]
        skills = [
            tuple(r.values())
            for r in cat.sql(
                "select owner_id, name, version, change from task_skill_versions "
                "order by owner_id, name, version"
            ).to_pylist()
        ]
        return memories, spans, skills
    finally:
        cat.close()


def test_a_user_flow_with_its_own_steps_stores_what_run_stores(tmp_path):
    sample = default_sample()
    # the reference: the command itself
    run_home = tmp_path / "run-home"
    res = CliRunner().invoke(
        cli, ["--home", str(run_home), "run", "--source", str(sample)], catch_exceptions=False
    )
    assert res.exit_code == 0, res.output

    # the user's flow: their own records (with heartbeats mixed in), their own parsing and
    # filtering steps, skillstream's operators in between, and their own step on the results
    records: list[dict] = []
    for path in sorted(sample.glob("*.jsonl")):
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            records.append({"kind": "chat", "file": path.name, "line": i, "row": json.loads(line)})
            records.append({"kind": "heartbeat", "file": path.name, "line": i})
    settings = Settings.load(home=str(tmp_path / "user-home"))
    seen: list[str] = []

    flow = Dataflow("user-flow")
    raw = op.input("in", flow, TestingSource(records, batch_size=7))
    chats = op.filter("only-chat", raw, lambda r: r["kind"] == "chat")
    parsed = op.map(
        "parse",
        chats,
        lambda r: parse_record(r["row"], source=r["file"], position=r["line"]),
    )
    messages = op.filter("valid", parsed, lambda m: isinstance(m, Message))
    parts = Runner(settings).parts()
    admission = admit_messages("admit", messages, parts.window)
    results = extract_memories("memories", admission.admitted, parts.extraction)
    assert parts.distillation is not None
    skills = distil_task_skills("skills", admission.admitted, parts.distillation)
    spans = op.filter("my-spans", results, lambda r: isinstance(r, SpanResult))
    op.inspect("my-audit", spans, lambda step, r: seen.append(r.span.span_id))
    store("store", results, skills, admission.refused, sink=parts.sink)
    run_main(flow)

    mine = stored(settings)
    theirs = stored(Settings.load(home=str(run_home)))
    assert len(mine[0]) > 5 and mine[2], "the sample gives memories and a task skill"
    assert [m["id"] for m in mine[0]] == [m["id"] for m in theirs[0]]
    differ = [(a, b) for a, b in zip(mine[0], theirs[0], strict=True) if a != b]
    assert differ == []
    assert mine[1:] == theirs[1:]
    assert sorted(seen) == [s[0] for s in mine[1]]
