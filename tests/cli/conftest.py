"""Shared by the CLI tests: a home built once from the bundled sample (read it, never change
it), and ways to call the command line in this process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillstream.cli import cli, main


def console(capsys, monkeypatch, *args: str) -> tuple[int, str, str]:
    """Run the console script's ``main`` in this process: (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["skillstream", *args])
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main()
    out = capsys.readouterr()
    code = stop.value.code
    return (code if isinstance(code, int) else (0 if code is None else 1)), out.out, out.err


def invoke(home: Path | str, *args: str, exit_code: int = 0) -> str:
    res = CliRunner().invoke(cli, ["--home", str(home), *args], catch_exceptions=False)
    assert res.exit_code == exit_code, res.output
    return res.stdout


@pytest.fixture(scope="session")
def sample_home(tmp_path_factory) -> Path:
    """A home ``skillstream run`` filled from the bundled sample (read it, never change it)."""
    home = tmp_path_factory.mktemp("sample") / "home"
    invoke(home, "run")
    return home
