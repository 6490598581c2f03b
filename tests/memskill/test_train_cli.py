"""``memory-skills train`` on unlabelled logs, ``activate`` + ``run`` with the checkpoint."""

from __future__ import annotations

import json
from typing import Any

import duckdb
import torch
from click.testing import CliRunner

from skillstream.cli import cli
from skillstream.eval.training_harness import TrainOptions, train_controller
from skillstream.memskill.controller import checkpoint_version
from skillstream.memskill.seeds import PRIMITIVES
from skillstream.rules import RulesExecutor
from skillstream.rules.skills import RULE_SKILLS
from skillstream.settings import Settings
from tests.factories import write_locomo


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
        budget="none",
        select_every=0,
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


def test_an_interrupted_run_resumes_to_the_same_checkpoint(tmp_path, embedder, one_thread) -> None:
    data = write_locomo(tmp_path / "logs.json", samples=3, sessions=3, turns=8)
    opts = TrainOptions(
        data=str(data), reward="unlabelled", k=2, updates=4, lr=3e-3, seed=5, select_every=2
    )
    skills = list(PRIMITIVES) + list(RULE_SKILLS)

    def train(home: str, out: str, **kw: Any) -> dict:
        settings = Settings.from_keys(home=str(tmp_path / home))
        ex = RulesExecutor(categories=True)
        return train_controller(opts, settings, embedder, ex, skills, tmp_path / out, **kw)

    whole = train("a", "whole.pt")
    assert whole["resumed_from"] is None
    assert whole["budget"]["source"] == "cosine" and whole["budget"]["memories_per_span"] > 0
    assert [c["update"] for c in whole["candidates"]] == [0, 2, 4]
    assert whole["selected_update"] in (0, 2, 4)
    chosen = next(c for c in whole["candidates"] if c["update"] == whole["selected_update"])
    cosine = whole["candidates"][0]
    assert chosen["memories"] <= cosine["memories"] and chosen["recall"] >= cosine["recall"]
    assert whole["stored"].endswith(f"controllers/{checkpoint_version(tmp_path / 'whole.pt')}.pt")

    assert train("b", "part.pt", stop_after=2) == {"updates": 2, "interrupted": True}
    assert not (tmp_path / "part.pt").exists()
    resumed = train("b", "part.pt")
    assert resumed["resumed_from"] == 2
    assert resumed["curve"] == whole["curve"]
    assert resumed["candidates"] == whole["candidates"]
    assert resumed["val"] == whole["val"]
    assert whole["correction"] == "skill"  # the default: one learned logit per skill
    assert torch.load(tmp_path / "whole.pt", weights_only=True)["correction"] == "skill"
    a = torch.load(tmp_path / "whole.pt", weights_only=True)["state_dict"]
    b = torch.load(tmp_path / "part.pt", weights_only=True)["state_dict"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    # --fresh (resume=False) starts over: no resumed state
    assert train("b", "again.pt", resume=False)["resumed_from"] is None


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


def test_evolve_snapshots_every_cycle_and_resumes(tmp_path, embedder, one_thread) -> None:
    from skillstream.eval.training_harness import evolve_controller
    from skillstream.memskill.designer import Designer
    from skillstream.storage.artifacts import ArtifactStore
    from tests.memskill.conftest import ScriptedLLM
    from tests.memskill.test_designer import ANALYSIS, GOOD_EDIT

    data = write_locomo(tmp_path / "logs.json", samples=3, sessions=3, turns=8)
    settings = Settings.from_keys(home=str(tmp_path / "home"))
    opts = TrainOptions(data=str(data), reward="unlabelled", k=2, updates=1, lr=3e-3, seed=2)
    skills = list(PRIMITIVES) + list(RULE_SKILLS)

    def run(answers: list, **kw: Any) -> tuple[dict, list]:
        designer = Designer(ScriptedLLM(answers), max_changes=3)
        ex = RulesExecutor(categories=True)
        return evolve_controller(
            opts,
            settings,
            embedder,
            ex,
            skills,
            designer,
            tmp_path / "e.pt",
            cycles=2,
            patience=5,
            **kw,
        )

    part, _ = run([ANALYSIS, GOOD_EDIT], stop_after=1)
    assert part == {"interrupted": True, "cycles": 1}
    store = ArtifactStore(settings.storage.artifacts)
    files = store.list("memskill/evolve")
    assert any(f.endswith("cycle-0/controller.pt") for f in files)
    bank = next(f for f in files if f.endswith("cycle-0/bank.json"))
    assert "trip-dates" in {s["name"] for s in json.loads(store.get(bank))}
    report, best = run([ANALYSIS, {"changes": []}])
    assert report["resumed_from"] == 1
    assert [r["cycle"] for r in report["cycles"]] == [0, 1]
    assert len(report["snapshots"]) == 2
    assert report["stored"].endswith(f"controllers/{checkpoint_version(tmp_path / 'e.pt')}.pt")
    # the best cycle's bank: cycle 1 trained with the designer's new skill, cycle 0 without it
    assert ("trip-dates" in {s.name for s in best}) == (report["best_cycle"] == 1)


def test_several_runs_average_their_chosen_checkpoints(tmp_path, embedder, one_thread) -> None:
    """``runs`` trains one run per seed, each as it would train alone (the same chosen update),
    and keeps the average of their chosen weights when it is within the budget on the training
    conversations, else the best single one."""
    data = write_locomo(tmp_path / "logs.json", samples=3, sessions=3, turns=8)
    skills = list(PRIMITIVES) + list(RULE_SKILLS)

    def train(home: str, out: str, **kw: Any) -> dict:
        opts = TrainOptions(
            data=str(data), reward="unlabelled", k=2, updates=2, lr=3e-3, select_every=1, **kw
        )
        settings = Settings.from_keys(home=str(tmp_path / home))
        ex = RulesExecutor(categories=True)
        return train_controller(opts, settings, embedder, ex, skills, tmp_path / out)

    alone = [train(f"s{seed}", f"s{seed}.pt", seed=seed) for seed in (3, 4)]
    both = train("both", "both.pt", seed=3, runs=2)
    assert [r["seed"] for r in both["runs"]] == [3, 4]
    assert [r["selected_update"] for r in both["runs"]] == [a["selected_update"] for a in alone]
    assert both["val"]["untrained"] == alone[0]["val"]["untrained"]
    weights = [torch.load(tmp_path / f"s{s}.pt", weights_only=True)["state_dict"] for s in (3, 4)]
    kept = torch.load(tmp_path / "both.pt", weights_only=True)["state_dict"]
    if both["averaged"] is not None:  # the average, within the budget
        budget = both["budget"]["memories_per_span"]
        assert both["averaged"]["memories"] <= budget * both["averaged"]["spans"] + 1e-9
        for k in kept:
            assert torch.allclose(kept[k], (weights[0][k] + weights[1][k]) / 2)
    else:  # one of the runs' own choice
        assert any(all(torch.equal(kept[k], w[k]) for k in kept) for w in weights)
