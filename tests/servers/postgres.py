"""A real PostgreSQL server for the DuckLake catalog tests, from the machine's own binaries.

``initdb`` into a temporary folder, then ``pg_ctl start`` on a free 127.0.0.1 port (its Unix socket
in that folder too, never in /var/run). The binaries are looked up on ``PATH`` and in Debian's
``/usr/lib/postgresql/<version>/bin``; ``scripts/setup.sh test`` installs Debian's ``postgresql``
package when neither has them. PostgreSQL refuses to run as root, so under root the server runs as
the ``postgres`` user (which that package creates).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.servers.ports import free_port

USER = "postgres"
"""The database superuser the tests connect as (trust authentication, loopback only)."""


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL binaries on this machine, or the server did not start."""


def bin_dir() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``, or ``None``."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    return versions[-1].parent if versions else None


@dataclass
class Postgres:
    """A running server: its port and a way to make databases."""

    port: int
    bin: Path
    run_as: list[str]

    def create_database(self, name: str) -> str:
        """Create a database; returns the ``SKILLSTREAM_CATALOG`` value of a DuckLake on it."""
        subprocess.run(
            [str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, name],
            check=True,
            capture_output=True,
            timeout=60,
        )
        return f"ducklake:postgres://{USER}@127.0.0.1:{self.port}/{name}"


def _runner() -> list[str]:
    """The prefix that runs a server command as a non-root user."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam(USER)
    except KeyError:
        raise PostgresUnavailable(
            "running as root and there is no 'postgres' user to run the server as; install "
            "Debian's postgresql package (scripts/setup.sh test does)"
        ) from None
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", USER, "--"]
    return [shutil.which("su") or "su", USER, "-s", "/bin/sh", "-c", '"$0" "$@"']


@contextlib.contextmanager
def postgres_server() -> Iterator[Postgres]:
    """Start PostgreSQL in a temporary folder on a free loopback port; stop and remove it after."""
    found = bin_dir()
    if found is None:
        raise PostgresUnavailable(
            "no PostgreSQL binaries (initdb, pg_ctl) on PATH or in /usr/lib/postgresql/*/bin; "
            "run 'bash scripts/setup.sh test', which installs Debian's postgresql package"
        )
    run_as = _runner()
    root = Path(tempfile.mkdtemp(prefix="skillstream-pg-"))
    data, log = root / "data", root / "server.log"
    if run_as:
        uid = pwd.getpwnam(USER)
        os.chown(root, uid.pw_uid, uid.pw_gid)
    port = free_port()
    try:
        subprocess.run(
            [
                *run_as,
                str(found / "initdb"),
                "-D",
                str(data),
                "-A",
                "trust",
                "-U",
                USER,
                "-E",
                "UTF8",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        options = (
            f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c max_connections=200 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        started = subprocess.run(
            [*run_as, str(found / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60"]
            + ["-o", options, "start"],
            capture_output=True,
            timeout=120,
        )
        if started.returncode != 0:
            text = log.read_text() if log.exists() else ""
            raise PostgresUnavailable(f"PostgreSQL did not start: {started.stderr!r}\n{text}")
        try:
            yield Postgres(port, found, run_as)
        finally:
            subprocess.run(
                [*run_as, str(found / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                capture_output=True,
                timeout=60,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
