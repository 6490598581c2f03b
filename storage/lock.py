"""One run per home at a time: an exclusive lock on a file beside the catalog.

``skillstream run`` holds the lock for the whole run. A second run on the same home fails at once
with ``HomeBusyError`` naming the process that holds it, instead of racing the first one for the
catalog. The lock is the operating system's (``flock``): it goes away with the process that held
it, so a killed run never leaves a stale lock behind. The file itself stays; it holds the holder's
process id and start time, for the message.

The file lies in the catalog's folder (the catalog is always a local file, also for a home on
S3), so two runs on the same machine are kept apart. In a Bytewax cluster only process 0 takes it.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from skillstream.errors import TransientError

LOCK_FILE = "run.lock"


class HomeBusyError(TransientError):
    """Another run holds the home's run lock."""


def lock_path(catalog: str) -> Path:
    """The run-lock file of the home whose catalog is ``catalog``."""
    return Path(catalog).parent / LOCK_FILE


@contextmanager
def run_lock(catalog: str, home: str) -> Iterator[Path]:
    """Hold the home's run lock for the ``with`` block.

    Args:
        catalog: The home's catalog file (its folder must exist).
        home: The home, as the user named it (for the message).

    Raises:
        HomeBusyError: another process holds the lock.
    """
    path = lock_path(catalog)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", errors="replace").strip()
            raise HomeBusyError(
                f"home {home} is in use by another run ({holder or 'unknown process'}); "
                "wait for it to finish, or use another --home"
            ) from None
        os.ftruncate(fd, 0)
        started = datetime.now(UTC).isoformat(timespec="seconds")
        os.pwrite(fd, f"pid {os.getpid()}, started {started}\n".encode(), 0)
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
