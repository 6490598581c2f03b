"""``memory-skills train`` on unlabelled logs, ``activate`` + ``run`` with the checkpoint."""

from __future__ import annotations

import json
from collections.abc import Iterator

import duckdb
import pytest
import torch
from click.testing import CliRunner

from skillstream.cli import cli
from skillstream.eval.controller import TrainOptions, train_controller
from skillstream.memskill.controller import checkpoint_version
from skillstream.memskill.seeds import PRIMITIVES
from skillstream.rules import RulesExecutor
from skillstream.rules.skills import RULE_SKILLS
from skillstream.settings import Settings
from tests.factories import write_locomo


@pytest.fixture
def one_thread() -> Iterator[None]:
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_unlabelled_reward_rises_over_training(tmp_path, embedder, one_thread) -> None:
    data = write_locomo(tmp_path / "logs.json", samples=4, sessions=4, turns=10)
    settings = Settings.from_keys(home=str(tmp_path / "home"))
    opts = TrainOptions(
        data=str(data),
        reward="unlabelled",
        k=2,
        updates=14,
        lr=3e-3,
        seed=3,
        val=("conv-3",),
        memory_cost=0.0,
    )
    report = train_controller(
        opts,
        settings,
        embedder,
        RulesExecutor(categories=True),
        list(PRIMITIVES) + list(RULE_SKILLS),
        tmp_path / "c.pt",
        curve_dir=tmp_path / "curve",
    )
    rewards = [p["reward"] for p in report["curve"]]
    assert len(rewards) == 14
    first, last = sum(rewards[:4]) / 4, sum(rewards[-4:]) / 4
    assert last > first, rewards
    assert (tmp_path / "curve" / "curve.png").stat().st_size > 0
    assert set(report["val"]) >= {"all", "random", "untrained", "trained"}
    for row in report["val"].values():
        assert set(row) >= {"recall@10", "memories"}


def test_activate_then_run_records_the_controller_and_calls_no_llm(tmp_path, embedder) -> None:
    from skillstream.memskill.controller import save_scorer, scorer_net

    torch.manual_seed(0)
    ckpt = save_scorer(
        scorer_net(embedder.dim),
        tmp_path / "c.pt",
        k=2,
        skills=",".join(s.name for s in list(PRIMITIVES) + list(RULE_SKILLS)),
    )
    home = tmp_path / "home"
    runner = CliRunner()
    out = runner.invoke(cli, ["--home", str(home), "memory-skills", "activate", str(ckpt)])
    assert out.exit_code == 0, out.output
    version = f"torch:{checkpoint_version(ckpt)}"
    assert json.loads(out.output)["version"] == version
    assert sorted(json.loads(out.output)["added_skills"]) == sorted(s.name for s in RULE_SKILLS)
    data = write_locomo(tmp_path / "logs.json", samples=1, sessions=2, turns=6)
    out = runner.invoke(
        cli, ["--home", str(home), "run", "--source", str(data), "--format", "locomo"]
    )
    assert out.exit_code == 0, out.output
    con = duckdb.connect(str(home / "catalog.duckdb"), read_only=True)
    try:
        rows = con.sql("SELECT controller, memory_skills FROM spans").fetchall()
        calls = con.sql("SELECT count(*) FROM llm_calls").fetchone()
    finally:
        con.close()
    assert rows and {r[0] for r in rows} == {version}
    assert all(len(r[1]) <= 2 for r in rows)  # Top-K with the checkpoint's K
    assert calls == (0,)
    out = runner.invoke(cli, ["--home", str(home), "memory-skills", "list", "--json"])
    names = {r["name"] for r in json.loads(out.output)}
    assert names >= {s.name for s in RULE_SKILLS}
