"""The top-level flows/, connectors/ and storage/ folders resolve as skillstream.* everywhere: the
import system (through the install), the wheel's package list, and the checkers (through the tree
scripts/layout.py builds)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAPPED = ["flows", "connectors", "storage"]


def setuptools_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def build_layout(dest: Path) -> Path:
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "layout.py"), str(dest), "--root", str(ROOT)],
        check=True,
        capture_output=True,
    )
    return dest


@pytest.mark.parametrize("name", MAPPED)
def test_mapped_packages_import_from_the_top_level_folders(name):
    mod = importlib.import_module(f"skillstream.{name}")
    assert Path(mod.__file__).resolve().parent == ROOT / name
    assert not os.path.lexists(ROOT / "skillstream" / name), "no link or copy inside skillstream/"


def test_no_generic_top_level_modules_are_importable_from_elsewhere(tmp_path):
    code = (
        "import importlib.util as u; print([n for n in "
        "('flows','connectors','storage') if u.find_spec(n)])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_the_package_list_names_every_folder_of_the_package():
    """setuptools takes the list as it is: a folder missing from it is left out of the wheel."""
    config = setuptools_config()
    packages = set(config["packages"])
    mapping = config["package-dir"]
    assert {f"skillstream.{name}": name for name in MAPPED}.items() <= mapping.items()
    assert set(mapping) <= packages
    found = set()
    for name, folder in mapping.items():
        for path in [ROOT / folder, *(ROOT / folder).rglob("*")]:
            if path.is_dir() and path.name != "__pycache__":
                parts = path.relative_to(ROOT / folder).parts
                found.add(".".join((name, *parts)))
    assert found - packages == set(), "folders missing from [tool.setuptools] packages"
    assert packages - found == set(), "packages without a folder"


def test_the_layout_for_the_checkers_is_the_installed_tree(tmp_path):
    layout = build_layout(tmp_path / "layout")
    for name in MAPPED:
        assert (layout / "skillstream" / name).resolve() == ROOT / name
    assert (layout / "skillstream" / "api.py").resolve() == ROOT / "skillstream" / "api.py"
    assert (layout / "skillstream" / "prompts" / "en").is_dir()


def test_type_checker_resolves_the_mapped_packages(tmp_path):
    pytest.importorskip("mypy")
    layout = build_layout(tmp_path / "layout")
    code = (
        "from skillstream.flows.memory import build_flow\n"
        "from skillstream.storage.lance import MemoryIndex\n"
        "from skillstream.connectors.files import FileSource\n"
        "reveal_type(build_flow)\nreveal_type(MemoryIndex)\nreveal_type(FileSource)\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--follow-imports=silent", "--no-incremental", "-c", code],
        cwd=ROOT,
        env={**os.environ, "MYPYPATH": str(layout)},
        capture_output=True,
        text=True,
    )
    assert "Cannot find implementation" not in out.stdout, out.stdout
    assert "skillstream.flows.memory.FlowParts" in out.stdout
    assert "def (parts: skillstream.flows.memory.FlowParts" in out.stdout
