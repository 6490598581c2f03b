"""A home built from the bundled sample by ``skillstream run``, and ``skillstream serve`` over it
as a real process on a loopback port, with a full token and a token limited to one owner."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.servers.ports import free_port
from tests.servers.processes import cli_env, die_with_parent, run_cli, skillstream_cmd

FULL = "full-token-for-tests"
MAYA = "maya-only-token"


@dataclass
class Served:
    """A running ``skillstream serve``."""

    base: str
    home: Path
    proc: subprocess.Popen

    def call(
        self,
        path: str,
        *,
        token: str | None = FULL,
        body: Any = None,
        method: str | None = None,
    ) -> tuple[int, Any]:
        """``(status, parsed JSON or text)`` of one request."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                status, raw, kind = r.status, r.read(), r.headers.get("content-type", "")
        except urllib.error.HTTPError as e:
            status, raw, kind = e.code, e.read(), e.headers.get("content-type", "")
        return status, json.loads(raw) if "json" in kind else raw.decode("utf-8", "replace")


def retry(fn: Any, seconds: float = 60) -> Any:
    """``fn()``, tried again while the server holds the catalog for a moment (its recorder
    writes searches behind their answers)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return fn()
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def sql(home: Path, query: str, params: list | None = None) -> list[dict]:
    """Rows of a read-only query on the served home, from the test's own process."""
    import skillstream

    return retry(lambda: skillstream.open(home).sql(query, params).to_pylist())


def start(
    home: Path, tokens_file: Path | None, *extra: str, env: dict[str, str] | None = None
) -> Served:
    port = free_port()
    args = ["serve", "--addr", f"127.0.0.1:{port}", *extra]
    if tokens_file is not None:
        args += ["--tokens", str(tokens_file)]
    proc = subprocess.Popen(
        skillstream_cmd(*args),
        env=cli_env(home, **(env or {})),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=die_with_parent,
    )
    served = Served(f"http://127.0.0.1:{port}", home, proc)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr else ""
            pytest.fail(f"serve exited with {proc.returncode}: {err[-4000:]}")
        try:
            if served.call("/healthz", token=None)[0] == 200:
                return served
        except OSError:
            pass
        time.sleep(0.3)
    proc.kill()
    pytest.fail("serve did not answer /healthz in time")


def stop(served: Served) -> None:
    served.proc.terminate()
    try:
        served.proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        served.proc.kill()
        served.proc.wait()


def tokens_file(folder: Path) -> Path:
    path = folder / "tokens.toml"
    path.write_text(
        f'[[token]]\nvalue = "{FULL}"\n\n[[token]]\nvalue = "{MAYA}"\nowners = ["maya"]\n'
    )
    return path


@pytest.fixture(scope="session")
def sample_home(tmp_path_factory) -> Path:
    """The bundled sample run into a home once (owners lin, maya and omar)."""
    home = tmp_path_factory.mktemp("served") / "home"
    run_cli("run", env=cli_env(home), timeout=600)
    return home


@pytest.fixture(scope="session")
def served(sample_home, tmp_path_factory) -> Iterator[Served]:
    """``serve`` over a copy of the sample home with a full and a maya-only token (the copy
    lets tests that write use the sample home afresh)."""
    folder = tmp_path_factory.mktemp("serve")
    home = folder / "home"
    shutil.copytree(sample_home, home)
    s = start(home, tokens_file(folder))
    yield s
    stop(s)
