"""The evaluations write files only where the user points: nothing lands in the current folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillstream.cli import cli
from tests.eval.test_skills import star_file

pytestmark = pytest.mark.slow


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_eval_writes_nothing_into_the_current_folder(locomo_file, tmp_path, monkeypatch):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    star = star_file(tmp_path)
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("SKILLSTREAM_HOME", raising=False)
    runner = CliRunner()

    res = runner.invoke(
        cli, ["eval", "locomo", str(locomo_file), "--k", "1,3"], catch_exceptions=False
    )
    assert res.exit_code == 0, res.output
    assert "recall@3" in res.stdout
    res = runner.invoke(cli, ["eval", "skills", str(star)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["skills"] > 0
    assert files_under(cwd) == []

    # asked for: the report, the JSON and the details go where they are pointed, and only there
    out = tmp_path / "out"
    res = runner.invoke(
        cli,
        ["eval", "locomo", str(locomo_file), "--k", "1,3", "--json", str(out / "r.json")]
        + ["--report-dir", str(out / "reports"), "--details", str(out / "q.jsonl")],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    assert files_under(cwd) == []
    written = files_under(out)
    assert "r.json" in written and "q.jsonl" in written
    assert any(name.startswith("reports" + os.sep) and name.endswith(".md") for name in written)
