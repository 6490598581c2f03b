"""The README's Python example and the API's docstring examples run as doctests."""

from __future__ import annotations

import doctest
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
