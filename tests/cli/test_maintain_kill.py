"""``skillstream maintain`` killed with SIGKILL at five moments of its write, then run again: the
home must equal one that was maintained without interruption.

The killed command is a real subprocess of the CLI whose process sends itself SIGKILL at a chosen
moment (after the LanceDB upsert, after the LanceDB delete, inside the catalog transaction, after
the commit, after the index upkeep); the second ``maintain`` is the plain command. Both stores are
compared with a home maintained once: the catalog's memories, events, summaries and relations
(without the wall-clock ``recorded_at``), and LanceDB's memories.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import duckdb
import lancedb
import pytest
from click.testing import CliRunner

from skillstream.cli import cli
from tests.factories import conversation_rows, write_jsonl
from tests.servers.processes import cli_env, die_with_parent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
]

KILLER = """
import os, signal, sys

from skillstream.storage.catalog import Catalog
from skillstream.storage.lance import MemoryIndex

def die(*_):
    os.kill(os.getpid(), signal.SIGKILL)

def after(cls, name):
    orig = getattr(cls, name)
    def wrapped(self, *a, **k):
        out = orig(self, *a, **k)
        die()
        return out
    setattr(cls, name, wrapped)

def inside_commit():
    orig = Catalog.upsert
    def wrapped(self, table, rows, **k):
        if table != "memory_meta":  # the next write of the same transaction
            die()
        return orig(self, table, rows, **k)
    Catalog.upsert = wrapped

moment = sys.argv.pop(1)
{
    "after_lance_upsert": lambda: after(MemoryIndex, "upsert"),
    "after_lance_delete": lambda: after(MemoryIndex, "delete"),
    "inside_catalog_transaction": inside_commit,
    "after_catalog_commit": lambda: after(Catalog, "run_transaction"),
    "after_index_upkeep": lambda: after(MemoryIndex, "optimize"),
}[moment]()
from skillstream.cli import main
main()
"""

MOMENTS = (
    "after_lance_upsert",
    "after_lance_delete",
    "inside_catalog_transaction",
    "after_catalog_commit",
    "after_index_upkeep",
)
MAINTAIN = ("maintain", "--close-sessions", "--now", "2026-01-01T00:00:00+00:00")


def maintain(home: Path, *, kill_at: str | None = None, script: Path | None = None):
    args = ["--home", str(home), *MAINTAIN]
    if kill_at is None:
        cmd = [sys.executable, "-c", "from skillstream.cli import main; main()", *args]
    else:
        assert script is not None
        cmd = [sys.executable, str(script), kill_at, *args]
    return subprocess.run(
        cmd,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=die_with_parent,
    )


def state(home: Path) -> dict[str, list]:
    """Both stores, without wall-clock columns, in a stable order."""
    con = duckdb.connect(str(home / "catalog.duckdb"), read_only=True)
    out = {}
    try:
        for table, key in (
            ("memory_meta", "id"),
            ("memory_events", "event_id"),
            ("session_summaries", "summary_id"),
            ("memory_relations", "relation_id"),
        ):
            cols = [
                r[0]
                for r in con.execute(f'DESCRIBE "{table}"').fetchall()
                if r[0] not in ("recorded_at",)
            ]
            select = ", ".join(f'"{c}"' for c in cols)
            query = f'SELECT {select} FROM "{table}" ORDER BY "{key}"'
            out[table] = con.execute(query).fetch_arrow_table().to_pylist()
    finally:
        con.close()
    db = lancedb.connect(str(home / "lancedb"), read_consistency_interval=timedelta(0))
    lance = db.open_table("memories").to_arrow().select(["id", "version", "status", "text"])
    out["lance"] = sorted(lance.to_pylist(), key=lambda r: r["id"])
    return out


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("maintain-kill")
    rows = [r for c in ("ana", "ben", "cy") for r in conversation_rows(c, 60)]
    path = write_jsonl(root / "chat.jsonl", rows)
    res = CliRunner().invoke(cli, ["--home", str(root / "base"), "run", "--source", str(path)])
    assert res.exit_code == 0, res.output
    return root / "base"


@pytest.fixture(scope="module")
def uninterrupted(base, tmp_path_factory) -> dict[str, list]:
    home = tmp_path_factory.mktemp("maintained") / "home"
    shutil.copytree(base, home)
    done = maintain(home)
    assert done.returncode == 0, done.stderr
    got = state(home)
    assert got != state(base)  # maintenance changed the home: the comparison means something
    assert got["session_summaries"] and got["memory_events"]
    return got


@pytest.mark.parametrize("moment", MOMENTS)
def test_maintain_killed_then_run_again_equals_an_uninterrupted_maintain(
    base, uninterrupted, tmp_path, moment
):
    home = tmp_path / "home"
    shutil.copytree(base, home)
    script = tmp_path / "killer.py"
    script.write_text(KILLER)
    killed = maintain(home, kill_at=moment, script=script)
    assert killed.returncode == -9, killed.stderr
    again = maintain(home)
    assert again.returncode == 0, again.stderr
    got = state(home)
    for name, rows in uninterrupted.items():
        assert got[name] == rows, name
