"""The top-level flows/, connectors/ and storage/ folders resolve as skillstream.* everywhere."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", ["flows", "connectors", "storage"])
def test_namespace_packages_import_from_the_top_level_folders(name):
    mod = importlib.import_module(f"skillstream.{name}")
    assert Path(mod.__file__).resolve().parent == ROOT / name
    link = ROOT / "skillstream" / name
    assert link.is_symlink() and str(link.readlink()) == f"../{name}"


def test_no_generic_top_level_modules_are_importable_from_elsewhere(tmp_path):
    code = (
        "import importlib.util as u; print([n for n in "
        "('flows','connectors','storage') if u.find_spec(n)])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_type_checker_resolves_the_mapped_packages(tmp_path):
    pytest.importorskip("mypy")
    code = (
        "from skillstream.flows.memory import build_flow\n"
        "from skillstream.storage.lance import MemoryIndex\n"
        "from skillstream.connectors.files import FileSource\n"
        "reveal_type(build_flow)\nreveal_type(MemoryIndex)\nreveal_type(FileSource)\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--follow-imports=silent", "--no-incremental", "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert "Cannot find implementation" not in out.stdout, out.stdout
    assert "skillstream.flows.memory.FlowParts" in out.stdout
    assert "def (settings: skillstream.settings.Settings" in out.stdout
