"""The import contracts of pyproject.toml (layers, and what core never imports) hold, and fail when
a forbidden import is added (see docs/architecture.md)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).parent / "lint-imports"
TREE = ("skillstream", "flows", "connectors", "storage")


def lint_imports(root: Path, layout: Path) -> subprocess.CompletedProcess[str]:
    """Run ``lint-imports`` on the installed tree of ``root``, built in ``layout`` by
    scripts/layout.py, from that folder, as `make checks` does (grimp reads skillstream/flows/ and
    the other mapped packages from the file tree, not through the install)."""
    assert LINT.exists(), "import-linter is not installed: install the test extra (make test)"
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "layout.py"), str(layout), "--root", str(root)],
        check=True,
        capture_output=True,
    )
    env = {**os.environ, "PYTHONPATH": str(layout)}
    return subprocess.run(
        [str(LINT), "--no-cache", "--no-logo"],
        cwd=layout,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_import_contracts_hold(tmp_path):
    out = lint_imports(ROOT, tmp_path / "layout")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 kept, 0 broken" in out.stdout


def test_every_module_of_the_package_has_a_layer():
    """A new top-level module or package must be placed in the layers, or nothing checks it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contracts = {c["id"]: c for c in config["contracts"]}
    placed = set(re.findall(r"skillstream\.(\w+)", " ".join(contracts["layers"]["layers"])))
    package = ROOT / "skillstream"
    names = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    names |= {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    assert names - placed == set(), "modules in no layer of pyproject.toml"
    core = {m.removeprefix("skillstream.") for m in contracts["core"]["source_modules"]}
    above = {"storage", "tables", "connectors", "services", "flows", "eval", "cli", "api", "server"}
    assert names - above - core == set(), "core modules missing from the core contract"


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("tree")
    for name in TREE:
        shutil.copytree(
            ROOT / name,
            dest / name,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def _append(path: Path, line: str) -> str:
    original = path.read_text()
    path.write_text(original + f"\n{line}\n")
    return original


@pytest.mark.parametrize(
    ("module", "line", "expected"),
    [
        (
            "skillstream/apply.py",
            "import skillstream.storage.catalog",
            "skillstream.apply -> skillstream.storage.catalog",
        ),
        (
            "skillstream/lifecycle/ranking.py",
            "def late():\n    import bytewax.operators",  # inside a function counts too
            "skillstream.lifecycle.ranking -> bytewax (l.",
        ),
        (
            "skillstream/distill/recall.py",
            "from skillstream.services import search",
            "skillstream.distill.recall -> skillstream.services",
        ),
        (
            "storage/catalog.py",  # a mapped package, checked under its skillstream.* name
            "import skillstream.flows.shards",
            "skillstream.storage.catalog -> skillstream.flows.shards",
        ),
    ],
)
def test_a_forbidden_import_breaks_the_contracts(tree_copy, module, line, expected):
    path = tree_copy / module
    original = _append(path, line)
    try:
        out = lint_imports(tree_copy, tree_copy / "build" / "layout")
    finally:
        path.write_text(original)
    assert out.returncode != 0, out.stdout
    assert "BROKEN" in out.stdout or "broken" in out.stdout
    assert expected in out.stdout, out.stdout
