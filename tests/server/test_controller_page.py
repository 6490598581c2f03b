"""The memory-skills page draws the training curve that the active controller's checkpoint
carries."""

from __future__ import annotations

import json

from skillstream.memskill.controller import checkpoint_version, save_scorer, scorer_net
from skillstream.server.home import ServedHome
from skillstream.settings import CONTROLLER_FILE, Settings


def test_the_active_controllers_curve_is_read_from_its_checkpoint(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    points = [{"update": float(i), "reward": 0.1 * i} for i in range(4)]
    ckpt = save_scorer(scorer_net(8), tmp_path / "c.pt", k=3, curve=json.dumps(points))
    (home / CONTROLLER_FILE).write_text(
        json.dumps({"checkpoint": str(ckpt), "version": "torch:abc", "k": 3, "skills": []})
    )
    served = ServedHome(Settings.load(home=str(home)))  # the activation is a layer of load
    record, curve = served.controller()
    assert record is not None
    assert record["version"] == checkpoint_version(ckpt) and record["k"] == 3
    assert curve == points


def test_no_controller_means_no_curve(tmp_path):
    served = ServedHome(Settings.from_keys(home=str(tmp_path / "home")))
    assert served.controller() == (None, [])
