"""Runs on a shared catalog announce themselves: a lease row, renewed while the run goes on.

A DuckDB-file home has one run at a time (``storage.lock``). A shared catalog takes many writers
and has no lock, so a command that must not overlap a run there (``forget``) asks the catalog
which runs are alive: each run (process 0 of a cluster) writes a ``run_leases`` row before it
reads the home, renews its ``heartbeat_at`` every ``BEAT_S`` seconds from a thread, and deletes
the row when it ends. A row not renewed for ``STALE_S`` seconds belongs to a run that died.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from skillstream.settings import StorageSettings

log = logging.getLogger(__name__)

TABLE = "run_leases"
BEAT_S = 5.0
"""How often a run renews its lease."""
STALE_S = 30.0
"""A lease not renewed for this long belongs to a run that died."""


@contextmanager
def run_lease(storage: StorageSettings, beat_s: float = BEAT_S) -> Iterator[str]:
    """Hold a lease on the shared catalog of ``storage`` for the ``with`` block; its id."""
    from skillstream.storage.catalog import open_catalog

    lease = uuid.uuid4().hex
    now = datetime.now(UTC)
    row = {
        "lease_id": lease,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started_at": now,
        "heartbeat_at": now,
    }
    with open_catalog(storage) as cat:
        cat.run_transaction(lambda c: c.upsert(TABLE, [row]))
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(beat_s):
            try:
                with open_catalog(storage) as cat:
                    cat.run_transaction(
                        lambda c: c.con.execute(
                            f"UPDATE {TABLE} SET heartbeat_at = ? WHERE lease_id = ?",
                            [datetime.now(UTC), lease],
                        )
                    )
            except Exception as e:  # noqa: BLE001 - a missed beat is retried at the next one
                log.warning("could not renew the run lease: %s", e)

    beat = threading.Thread(target=renew, name="run-lease", daemon=True)
    beat.start()
    try:
        yield lease
    finally:
        stop.set()
        beat.join(timeout=beat_s + 5)
        try:
            with open_catalog(storage) as cat:
                cat.run_transaction(
                    lambda c: c.con.execute(f"DELETE FROM {TABLE} WHERE lease_id = ?", [lease])
                )
        except Exception as e:  # noqa: BLE001 - a stale lease expires on its own
            log.warning("could not release the run lease: %s", e)


def live_runs(cat: Any, stale_s: float = STALE_S) -> list[dict[str, Any]]:
    """The runs whose leases were renewed in the last ``stale_s`` seconds."""
    if not cat.has(TABLE):
        return []
    since = datetime.now(UTC) - timedelta(seconds=stale_s)
    cur = cat.con.execute(
        f"SELECT host, pid, CAST(started_at AS VARCHAR) FROM {TABLE} WHERE heartbeat_at >= ?",
        [since],
    )
    return [{"host": h, "pid": p, "started_at": s} for h, p, s in cur.fetchall()]


def refuse_live_runs(cat: Any, home: str, what: str, then: str = "") -> None:
    """Raise ``HomeBusyError`` while a run writes the shared catalog (its lease is alive).

    Args:
        cat: The open catalog.
        home: The home, as the message names it.
        what: What the caller does only while no run writes ("forget erases", "reembed moves a
            home").
        then: A sentence to add (what was already done, what to do next).
    """
    from skillstream.storage.lock import HomeBusyError

    runs = live_runs(cat)
    if not runs:
        return
    who = ", ".join(f"pid {r['pid']} on {r['host']} since {r['started_at']}" for r in runs)
    raise HomeBusyError(
        f"the shared catalog of {home} is being written by {len(runs)} run(s) ({who}); {what} "
        f"while no run writes: wait for them to finish (a run that died frees its lease after "
        f"{STALE_S:g} s).{then}"
    )
