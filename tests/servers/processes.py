"""Subprocesses of the tests: ``skillstream`` commands run as a user runs them, and servers that
die with the pytest process that started them."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

_PRCTL = None
if sys.platform.startswith("linux"):
    import ctypes

    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl  # resolved here, not in the forked child


def die_with_parent() -> None:
    """``preexec_fn`` for test subprocesses: SIGKILL the child when pytest dies (Linux).

    Teardown stops what a test started; this covers a pytest that is itself killed (a CI timeout),
    which would otherwise leave a broker or a tailing run behind.
    """
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def cli_env(home: Path | str | None = None, **extra: str) -> dict[str, str]:
    """Environment for ``skillstream`` subprocesses: offline, unbuffered, no inherited settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLSTREAM_")}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1")
    if home is not None:
        env["SKILLSTREAM_HOME"] = str(home)
    env.update(extra)
    return env


def skillstream_cmd(*args: str) -> list[str]:
    exe = shutil.which("skillstream", path=str(Path(sys.executable).parent))
    if exe:
        return [exe, *args]
    return [sys.executable, "-c", "from skillstream.cli import main; main()", *args]


def run_cli(*args: str, env: dict[str, str], timeout: float = 300, cwd: Path | None = None):
    """Run ``skillstream ARGS`` to its end; fail the test with its output if it fails."""
    proc = subprocess.run(
        skillstream_cmd(*args),
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=die_with_parent,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"skillstream {' '.join(args)} exited with {proc.returncode}\n"
            f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-6000:]}"
        )
    return proc
