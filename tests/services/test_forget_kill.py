"""A ``forget`` killed (SIGKILL) at each step, then run again, ends where an uninterrupted
``forget`` ends; between the two the home opens."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from skillstream.settings import Settings
from skillstream.storage.catalog import open_catalog
from skillstream.storage.erasure import message_hash, owner_hash, read_salt
from tests.servers.processes import cli_env, run_cli
from tests.services import forget_home as fh

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
]

KILL = """
import os, signal, sys
from skillstream.settings import Settings
from skillstream.services.forget import forget_owner
from skillstream.storage import forget_catalog, forget_files, forget_lance

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

home, owner, point = sys.argv[1:4]
if point == "recovery":        # after the tombstones and the audit row
    forget_files.scrub_recovery = die
elif point == "lance":         # LanceDB rows deleted, their files not yet rewritten
    forget_lance._rewrite = die
elif point == "catalog-bytes":  # catalog rows deleted, the file not yet written anew
    forget_catalog.rewrite_file = die
elif point == "replace":       # the new catalog file complete, not yet in place
    forget_catalog.os.replace = die
forget_owner(Settings.load(home=home), owner, recovery_dirs=[os.path.join(home, "recovery")])
"""


def forget(home: Path) -> None:
    run_cli(
        "forget",
        "--owner",
        fh.TARGET,
        "--yes",
        "--recovery-dir",
        str(home / "recovery"),
        env=cli_env(home),
    )


def end_state(home: Path) -> dict[str, Any]:
    """What a finished erasure leaves, store by store (times and ids of the run left out)."""
    settings = Settings.load(home=str(home))
    out: dict[str, Any] = {o: fh.owner_content(settings, o) for o in (fh.TARGET, fh.OTHER)}
    with open_catalog(settings.storage, read_only=True) as cat:
        salt = read_salt(cat)
        assert salt is not None
        hashes = cat.sql("SELECT message_hash FROM erased_messages").column(0).to_pylist()
        audit = cat.sql("SELECT owner_hash, status, messages FROM erasures").to_pylist()
        out["counts"] = {t: cat.count(t) for t in ("memory_meta", "spans", "llm_calls")}
    # each home has its own salt: the hashes are compared with those of the owner's ids
    ids = {r["message_id"] for r in fh.rows() if r["user_id"] == fh.TARGET}
    out["tombstones"] = sorted(hashes) == sorted(message_hash(salt, fh.TARGET, m) for m in ids)
    out["audit"] = [
        {**a, "owner_hash": a["owner_hash"] == owner_hash(salt, fh.TARGET)} for a in audit
    ]
    snaps = []
    for part in sorted((home / "recovery").glob("*.sqlite3")):
        con = sqlite3.connect(part)
        snaps += [
            (part.name, *r)
            for r in con.execute(
                "SELECT step_id, state_key, snap_epoch, ser_change FROM snaps ORDER BY 1, 2, 3"
            )
        ]
        con.close()
    out["recovery"] = snaps
    con = sqlite3.connect(home / "llm-cache.sqlite")
    out["cache"] = sorted(r[0] for r in con.execute("SELECT request_hash FROM llm_responses"))
    con.close()
    out["artifacts"] = sorted(
        str(p.relative_to(home)) for p in (home / "artifacts").rglob("*") if p.is_file()
    )
    out["marked"] = fh.marked(fh.files(home))
    return out


@pytest.fixture(scope="module")
def uninterrupted(built_home: Path, tmp_path_factory) -> dict[str, Any]:
    home = Path(shutil.copytree(built_home, tmp_path_factory.mktemp("whole") / "home"))
    forget(home)
    return end_state(home)


@pytest.mark.parametrize("point", ["recovery", "lance", "catalog-bytes", "replace"])
def test_a_killed_forget_run_again_ends_as_an_uninterrupted_one(home, point, uninterrupted):
    proc = subprocess.run(
        [sys.executable, "-c", KILL, str(home), fh.TARGET, point],
        env=cli_env(home),
        capture_output=True,
        timeout=600,
    )
    assert proc.returncode == -9, proc.stderr.decode()[-3000:]
    # the home opens, and says an erasure began
    settings = Settings.load(home=str(home))
    with open_catalog(settings.storage, read_only=True) as cat:
        rows = cat.sql("SELECT status FROM erasures").column(0).to_pylist()
    assert rows == ["started"]
    forget(home)
    state = end_state(home)
    assert state["marked"] == {}
    assert state == uninterrupted
    assert state["tombstones"] is True and state["audit"][0]["owner_hash"] is True
    assert json.dumps(state["audit"]).count("done") == 1
