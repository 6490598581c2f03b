"""A trained controller against the default (every skill): the checkpoint records both figures on
its validation conversations, and ``memory-skills activate`` refuses one that lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from skillstream.cli import cli
from skillstream.eval.training_harness import TrainOptions, train_controller
from skillstream.memskill.controller import (
    checkpoint_meta,
    lost_to_default,
    save_scorer,
    scorer_net,
)
from skillstream.memskill.seeds import PRIMITIVES
from skillstream.rules import RulesExecutor
from skillstream.rules.skills import RULE_SKILLS
from skillstream.settings import Settings
from tests.factories import write_locomo


def test_a_trained_checkpoint_records_its_figures_and_the_defaults(
    tmp_path: Path, embedder, one_thread
) -> None:
    data = write_locomo(tmp_path / "logs.json", samples=3, sessions=3, turns=8)
    opts = TrainOptions(
        data=str(data),
        reward="unlabelled",
        k=2,
        updates=1,
        lr=3e-3,
        seed=1,
        runs=1,
        val=("conv-2",),
    )
    report = train_controller(
        opts,
        Settings.from_keys(home=str(tmp_path / "home")),
        embedder,
        RulesExecutor(categories=True),
        list(PRIMITIVES) + list(RULE_SKILLS),
        tmp_path / "c.pt",
    )
    figures = json.loads(checkpoint_meta(tmp_path / "c.pt")["validation"])
    assert figures == {
        "conversations": ["conv-2"],
        "trained": report["val"]["trained"],
        "default": report["val"]["all"],
    }


def checkpoint(
    path: Path, dim: int, trained: tuple[float, int], default: tuple[float, int]
) -> Path:
    torch.manual_seed(0)
    figures = {
        "conversations": ["conv-43", "conv-44"],
        "trained": {"recall@10": trained[0], "memories": trained[1]},
        "default": {"recall@10": default[0], "memories": default[1]},
    }
    return save_scorer(
        scorer_net(dim),
        path,
        k=2,
        skills=",".join(s.name for s in PRIMITIVES),
        validation=json.dumps(figures),
    )


@pytest.mark.parametrize(
    "trained, default, lost",
    [
        ((0.491, 2622), (0.685, 4688), True),  # fewer memories, much less recall
        ((0.685, 4700), (0.685, 4688), True),  # the same recall with more memories
        ((0.685, 3000), (0.685, 4688), False),  # the same recall with fewer memories
        ((0.70, 5000), (0.685, 4688), False),  # more recall
    ],
)
def test_lost_to_default(trained, default, lost) -> None:
    meta = {
        "validation": json.dumps(
            {
                "trained": {"recall@10": trained[0], "memories": trained[1]},
                "default": {"recall@10": default[0], "memories": default[1]},
            }
        )
    }
    assert (lost_to_default(meta) is not None) == lost
    assert lost_to_default({}) is None  # an older checkpoint without the figures


def test_activate_refuses_a_controller_that_lost_unless_forced(tmp_path: Path, embedder) -> None:
    losing = checkpoint(tmp_path / "lose.pt", embedder.dim, (0.491, 2622), (0.685, 4688))
    home = tmp_path / "home"
    runner = CliRunner()
    res = runner.invoke(cli, ["--home", str(home), "memory-skills", "activate", str(losing)])
    assert res.exit_code == 2
    assert "recalled 0.4910 at 10 with 2622 memories" in res.output
    assert "default (every skill) 0.6850 with 4688" in res.output
    assert not (home / "controller.json").exists()
    res = runner.invoke(
        cli, ["--home", str(home), "memory-skills", "activate", str(losing), "--force"]
    )
    assert res.exit_code == 0, res.output
    assert "warning:" in res.stderr and "0.4910" in res.stderr
    assert (home / "controller.json").exists()
    winning = checkpoint(tmp_path / "win.pt", embedder.dim, (0.70, 4000), (0.685, 4688))
    res = runner.invoke(
        cli, ["--home", str(tmp_path / "h2"), "memory-skills", "activate", str(winning)]
    )
    assert res.exit_code == 0 and "warning" not in res.stderr
