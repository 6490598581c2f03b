"""A process killed (SIGKILL) while it creates the catalog file leaves a home that still opens.

The file is built under a temporary name and linked into place only when every table exists, so a
kill at any moment leaves either no catalog (the next writer creates it) or a whole one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from skillstream import tables as declared
from skillstream.errors import InputError
from skillstream.flows.runner import Runner
from skillstream.settings import Settings
from skillstream.storage.catalog import Catalog, catalog_exists

REPO = Path(__file__).resolve().parents[2]

CREATE = """
import sys, time
from skillstream.storage import catalog

pause = sys.argv[2] == "pause"
ddl = catalog.table_ddl

def slow_ddl(*args, **kwargs):
    # Stop inside the creation: the file exists, one table does, the others do not yet.
    print("creating", flush=True)
    if pause:
        time.sleep(600)
    return ddl(*args, **kwargs)

catalog.table_ddl = slow_ddl
catalog.Catalog(sys.argv[1]).close()
print("done", flush=True)
"""


def start(path: Path, mode: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-c", CREATE, str(path), mode],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def assert_home_opens(home: Path) -> None:
    """Whatever the kill left: the ledger reads, and a writer opens the catalog with every table."""
    settings = Settings.from_keys(home=str(home))
    assert Runner(settings).read_home().done_spans == frozenset()
    if catalog_exists(settings.storage):
        with Catalog(settings.storage.catalog, read_only=True) as cat:
            assert cat.processed_span_ids() == set()
    else:
        with pytest.raises(InputError, match="does not exist"):
            Catalog(settings.storage.catalog, read_only=True)
    with Catalog(settings.storage.catalog) as cat:
        assert set(declared.CATALOG_TABLES) <= cat._relations()
        assert cat.count("spans") == 0
    leftovers = [p.name for p in home.iterdir() if ".creating-" in p.name]
    assert leftovers == []  # a dead creator's temporary file is removed by the next creator


def test_kill_between_the_file_and_its_tables(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    path = home / "catalog.duckdb"
    proc = start(path, "pause")
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "creating", proc.stderr.read() if proc.stderr else ""
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert any(".creating-" in p.name for p in home.iterdir())  # killed mid-creation
    assert not path.exists()
    assert_home_opens(home)


@pytest.mark.slow
def test_kill_at_many_moments_of_the_creation(tmp_path):
    """Kills spread over the whole creation (from start-up to the last table)."""
    delays = [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0]
    for k, delay in enumerate(delays):
        home = tmp_path / f"home{k}"
        home.mkdir()
        proc = start(home / "catalog.duckdb", "go")
        try:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() == "creating":  # the first table is being made
                time.sleep(delay / 100)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert_home_opens(home)


def test_a_file_left_without_tables_opens(tmp_path):
    """A catalog file without tables (left by an older version killed mid-creation) reads as an
    empty ledger, and a writer adds the tables."""
    home = tmp_path / "home"
    home.mkdir()
    duckdb.connect(str(home / "catalog.duckdb")).close()
    assert_home_opens(home)
