"""The commands people run most import only what they use: with the embedding cache warm,
``search``, ``stats``, ``sql`` and a ``run`` with nothing new import neither ``torch`` nor
``lancedb`` (the two largest imports), and ``search`` finds what it finds in-process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from skillstream.embed import Embedder
from tests.cli.conftest import invoke

pytestmark = pytest.mark.slow

HEAVY = ("torch", "lancedb", "transformers", "sentence_transformers")

PROBE = (
    "import atexit, json, sys\n"
    "atexit.register(lambda: sys.stderr.write('IMPORTED ' + json.dumps("
    f"[m for m in {HEAVY!r} if m in sys.modules]) + '\\n'))\n"
    "from skillstream.cli import main\n"
    "main()\n"
)


def imported(home, *args: str) -> tuple[list[str], str]:
    """What a ``skillstream`` process with ``args`` imported of :data:`HEAVY`, and its output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLSTREAM_")}
    env["SKILLSTREAM_EMBED_CACHE"] = str(Embedder().cache)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "--home", str(home), *args],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    line = next(x for x in done.stderr.splitlines() if x.startswith("IMPORTED "))
    return json.loads(line.removeprefix("IMPORTED ")), done.stdout


@pytest.fixture
def home(sample_home, tmp_path):
    """A copy of the sample home just after its run (a search records accesses, so each test
    starts from the same state)."""
    copy = tmp_path / "home"
    shutil.copytree(sample_home, copy)
    Embedder().encode_query("warm the embedding cache")  # as any earlier command of the home
    return copy


def test_search_imports_neither_torch_nor_lancedb_and_finds_the_same(home, tmp_path):
    twin = tmp_path / "twin"
    shutil.copytree(home, twin)
    query = "where is Maya travelling"
    want = invoke(twin, "search", query, "--owner", "maya", "--k", "3", "--json")
    got, out = imported(home, "search", query, "--owner", "maya", "--k", "3", "--json")
    assert got == []
    hits = json.loads(out)
    assert [h["id"] for h in hits] == [h["id"] for h in json.loads(want)]
    assert len(hits) == 3


@pytest.mark.parametrize(
    "args",
    [("stats",), ("sql", "select count(*) from memories"), ("run",)],
    ids=["stats", "sql", "run-nothing-new"],
)
def test_reading_and_a_run_with_nothing_new_import_neither(home, args):
    got, out = imported(home, *args)
    assert got == []
    assert out.strip()


def test_a_run_with_nothing_new_after_searches_imports_neither(home):
    # a recorded search rewrites the access times of its hits: rows the full-text index has not
    # folded in yet; a run that stores nothing leaves that upkeep to the next run that does
    for query in ("Lisbon", "deploy", "garden"):
        invoke(home, "search", query, "--k", "5")
    got, out = imported(home, "run")
    assert got == []
    assert "0 memory changes" in out
