"""The activated controller (``<home>/controller.json``) is one layer of ``Settings.load``:
explicit > environment > activated controller > ``skillstream.toml`` > default, and a
``memory_skill_scorer`` named by any other layer keeps the whole activation out."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from skillstream.errors import ConfigError
from skillstream.settings import CONTROLLER_FILE, KEYS, Settings, env_var

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for key in KEYS:
        monkeypatch.delenv(env_var(key), raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def activate(home: Path, k: int | None = 3) -> str:
    home.mkdir(exist_ok=True)
    ckpt = str(home / "artifacts" / "controllers" / "abc.pt")
    record: dict[str, Any] = {"checkpoint": ckpt, "version": "torch:abc", "skills": []}
    if k is not None:
        record["k"] = k
    (home / CONTROLLER_FILE).write_text(json.dumps(record))
    return ckpt


def selection(s: Settings) -> tuple[str, str, int]:
    e = s.extraction
    return e.memory_skill_selection, e.memory_skill_scorer, e.memory_skill_k


def test_without_an_activation_the_defaults_hold(tmp_path):
    assert selection(Settings.load(home=str(tmp_path))) == ("auto", "", 3)


def test_an_activation_selects_top_k_with_its_checkpoint_and_k(tmp_path):
    ckpt = activate(tmp_path, k=4)
    assert selection(Settings.load(home=str(tmp_path))) == ("top_k", ckpt, 4)
    ckpt = activate(tmp_path, k=None)
    assert selection(Settings.load(home=str(tmp_path))) == ("top_k", ckpt, 3)


def test_the_activation_beats_the_file_and_loses_to_environment_and_options(tmp_path, monkeypatch):
    ckpt = activate(tmp_path, k=4)
    (tmp_path / "skillstream.toml").write_text(
        'memory_skill_k = 6\nmemory_skill_selection = "gumbel"\n'
    )
    assert selection(Settings.load(home=str(tmp_path))) == ("top_k", ckpt, 4)
    monkeypatch.setenv("SKILLSTREAM_MEMORY_SKILL_K", "7")
    assert selection(Settings.load(home=str(tmp_path))) == ("top_k", ckpt, 7)
    got = Settings.load(home=str(tmp_path), memory_skill_k=8, memory_skill_selection="all")
    assert selection(got) == ("all", ckpt, 8)


@pytest.mark.parametrize("where", ["file", "environment", "explicit"])
def test_a_scorer_named_elsewhere_keeps_the_activation_out(tmp_path, monkeypatch, where):
    activate(tmp_path, k=4)
    explicit = {}
    if where == "file":
        (tmp_path / "skillstream.toml").write_text('memory_skill_scorer = "mine.pt"\n')
    elif where == "environment":
        monkeypatch.setenv("SKILLSTREAM_MEMORY_SKILL_SCORER", "mine.pt")
    else:
        explicit["memory_skill_scorer"] = "mine.pt"
    got = Settings.load(home=str(tmp_path), **explicit)
    assert selection(got) == ("auto", "mine.pt", 3)


def test_only_load_reads_the_activation(tmp_path):
    activate(tmp_path)
    assert selection(Settings.from_keys(home=str(tmp_path))) == ("auto", "", 3)


def test_a_remote_home_has_no_activation(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    activate(tmp_path / "s3:")  # what a path-minded reader of s3://... would look at
    (tmp_path / "s3:" / "bucket").mkdir()
    activate(tmp_path / "s3:" / "bucket")
    assert selection(Settings.load(home="s3://bucket")) == ("auto", "", 3)


def test_a_broken_record_is_an_error_naming_the_file(tmp_path):
    (tmp_path / CONTROLLER_FILE).write_text("{not json")
    with pytest.raises(ConfigError, match=re.escape(CONTROLLER_FILE)):
        Settings.load(home=str(tmp_path))
    (tmp_path / CONTROLLER_FILE).write_text('{"checkpoint": "c.pt", "k": "many"}')
    with pytest.raises(ConfigError, match="memory_skill_k of the activated controller"):
        Settings.load(home=str(tmp_path))


def test_nothing_but_the_settings_reads_the_activation():
    readers = [
        str(path.relative_to(ROOT))
        for folder in ("skillstream", "flows", "connectors", "storage", "benchmarks")
        for path in (ROOT / folder).rglob("*.py")
        if not path.is_symlink()
        and re.search(r"controller\.json|CONTROLLER_FILE|with_active_controller", path.read_text())
    ]
    assert sorted(readers) == ["skillstream/cli/memory_skills.py", "skillstream/settings.py"]
