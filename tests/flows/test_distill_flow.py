"""Task-skill distillation inside the memory flow: blocks, the store sink, recovery, the switch."""

from __future__ import annotations

from datetime import timedelta

import bytewax.operators as op
import pytest
from bytewax.dataflow import Dataflow
from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.testing import TestingSink, TestingSource, run_main

from skillstream.connectors.files import FileSource, read_all
from skillstream.flows.distill import BlockLogic
from skillstream.flows.memory import default_sample
from skillstream.settings import Settings
from skillstream.storage.catalog import Catalog
from tests.factories import flow_of, make_message

pytestmark = pytest.mark.slow


def versions(settings: Settings) -> list[tuple]:
    cat = Catalog(settings.storage.catalog, read_only=True)
    try:
        return [
            tuple(r.values())
            for r in cat.sql(
                "select owner_id, name, version, change from "
                "task_skill_versions order by owner_id, name, version"
            ).to_pylist()
        ]
    finally:
        cat.close()


def test_blocks_close_on_session_change_idle_gap_and_end_of_input():
    settings = Settings.from_keys(home="/nonexistent", idle_gap_s=600)
    m = [make_message(f"message {i}", i=i) for i in range(3)]  # s1, one minute apart
    m.append(make_message("after a gap", i=30))  # 27 minutes later
    m.append(make_message("new session", i=31, session_id="s2"))
    m.append(make_message("other conversation", i=0, conversation_id="c2"))
    flow = Dataflow("blocks")
    keyed = op.key_on("key", op.input("in", flow, TestingSource(m)), lambda x: x.conversation_id)
    gap = settings.spans.idle_gap
    blocks = op.stateful("blocks", keyed, lambda resume: BlockLogic(gap, resume))
    out: list = []
    op.output("out", op.key_rm("rm", blocks), TestingSink(out))
    run_main(flow)
    got = sorted([[x.text for x in b.messages] for b in out])
    assert got == [
        ["after a gap"],
        ["message 0", "message 1", "message 2"],
        ["new session"],
        ["other conversation"],
    ]


def test_the_switch_turns_distillation_off(tmp_path):
    settings = Settings.from_keys(home=str(tmp_path / "home"), epoch_interval_s=0.0, distill=False)
    run_main(flow_of(settings, FileSource(str(default_sample() / "deploy-omar.jsonl"))))
    assert versions(settings) == []
    assert not (tmp_path / "home" / "artifacts" / "task-skills").exists()


def test_abort_and_resume_with_recovery_gives_the_same_task_skill_versions(tmp_path):
    messages = [x for x in read_all(FileSource(str(default_sample() / "deploy-omar.jsonl")))]
    assert len(messages) == 13
    rec = tmp_path / "recovery"
    rec.mkdir()
    init_db_dir(rec, 1)
    settings = Settings.from_keys(home=str(tmp_path / "home"), epoch_interval_s=0.0)
    inp = messages[:10] + [TestingSource.ABORT()] + messages[10:]
    for _ in range(2):
        flow = flow_of(settings, TestingSource(inp, batch_size=2))
        run_main(flow, epoch_interval=timedelta(0), recovery_config=RecoveryConfig(str(rec)))
    assert versions(settings) == [
        ("omar", "deploy-flask-app", 1, "created"),
        ("omar", "deploy-flask-app", 2, "updated"),
    ]
    root = tmp_path / "home" / "artifacts" / "task-skills" / "omar" / "deploy-flask-app"
    assert sorted(p.name for p in root.iterdir()) == ["v2"]  # v1 was a candidate: no package
