"""Fixtures of the services tests: the moto S3 bucket the task-skill tests publish to, and a home
with an owner to forget (built once per session, copied for each test that changes it)."""

import shutil
from pathlib import Path

import pytest

from tests.distill.conftest import s3  # noqa: F401 - fixture


@pytest.fixture(scope="session")
def built_home(tmp_path_factory) -> Path:
    """A home built by ``tests.services.forget_home.build`` (its recovery folder inside it)."""
    from tests.services import forget_home as fh

    root = tmp_path_factory.mktemp("forget")
    home = root / "home"
    fh.build(home, fh.write(root / "chat.jsonl", fh.rows()), home / "recovery")
    return home


@pytest.fixture
def home(built_home: Path, tmp_path: Path) -> Path:
    """A copy of the built home for one test."""
    return Path(shutil.copytree(built_home, tmp_path / "home"))
