"""A home built once from the bundled sample, shared by the CLI tests that only read it."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from skillstream.cli import cli


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
