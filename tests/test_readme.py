"""The README's Python examples run: its doctest, and its plain ``python`` blocks (the dataflow
example) as scripts; so do the API's docstring examples."""

from __future__ import annotations

import contextlib
import doctest
import io
import re
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """The examples' temporary folders go under pytest's tmp_path; nothing lands in the cwd."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.slow
def test_the_readme_python_example_runs(scratch):
    result = doctest.testfile(
        str(ROOT / "README.md"), module_relative=False, optionflags=FLAGS, verbose=False
    )
    assert result.attempted >= 5
    assert result.failed == 0
    assert any(scratch.iterdir()), "the example stored its home under the temporary folder"


def script_blocks() -> list[str]:
    """The README's ``python`` blocks that are scripts, not doctests."""
    blocks = re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M)
    return [b for b in blocks if not b.lstrip().startswith(">>>")]


def test_the_readme_has_the_dataflow_example():
    [block] = script_blocks()
    for name in ("admit_messages", "extract_memories", "distil_task_skills", "store", "Settings"):
        assert f"skillstream.{name}" in block, name


@pytest.mark.slow
@pytest.mark.parametrize("block", script_blocks(), ids=lambda b: b.splitlines()[0])
def test_the_readme_python_scripts_run(block, scratch):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, str(ROOT / "README.md"), "exec"), {"__name__": "__readme__"})
    # the script prints what it stored; its last comment says what that is
    expected = [line[2:] for line in block.strip().splitlines() if line.startswith("# ")][-1]
    assert out.getvalue().strip() == expected
    assert any(scratch.iterdir()), "the example stored its home under the temporary folder"


@pytest.mark.parametrize("module", ["skillstream", "skillstream.api"])
def test_the_api_docstring_examples_run(module, scratch):
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=FLAGS, verbose=False)
    assert result.failed == 0


def test_help_lists_every_public_name():
    import pydoc

    import skillstream

    text = pydoc.render_doc(skillstream, renderer=pydoc.plaintext)
    assert f"VERSION\n    {skillstream.__version__}" in text
    for name in skillstream.__all__:
        assert name in text or name == "__version__", name
    for name in ("run", "add", "search", "sql", "history", "task_skills", "to_polars"):
        assert name in text, name
