"""Helpers shared by the LLM benchmarks: a recording OpenAI-protocol stub that answers like a model.

The stub (``tests/servers/openai_stub.py``, a real HTTP server on loopback) answers every extraction
request with one INSERT per turn of the span it was sent, in the third person, so memories
accumulate as they would with a real model and later prompts list retrieved memories.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.servers.openai_stub import OpenAIStub  # noqa: E402

_TURN = re.compile(
    r'^(?P<speaker>[^\n"]+?) said, "(?P<text>.*?)"(?: and shared .*)?$', re.MULTILINE
)

__all__ = ["OpenAIStub", "StubProcess", "insert_each_turn", "prompt_text", "write_results"]


def prompt_text(body: dict[str, Any]) -> str:
    """All message contents of a recorded chat request."""
    return "\n".join(str(m.get("content") or "") for m in body.get("messages", []))


def insert_each_turn(body: dict[str, Any]) -> str:
    """One INSERT per turn of the span in the request's user message."""
    user = [m["content"] for m in body.get("messages", []) if m.get("role") == "user"]
    ops = [
        {
            "action": "INSERT",
            "text": f"{m.group('speaker').strip()} said that {m.group('text')}",
            "kind": "fact",
        }
        for m in _TURN.finditer(user[0] if user else "")
    ]
    return json.dumps({"operations": ops})


def write_results(out: str, result: dict[str, Any], table: list[str]) -> tuple[Path, Path]:
    """Write ``result`` as JSON to ``out`` and ``table`` (markdown lines) next to it as ``.md``."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    md = path.with_suffix(".md")
    md.write_text("\n".join(table) + "\n")
    return path, md


def _serve(latency_s: float, out: Any, stop: Any) -> None:
    with OpenAIStub(insert_each_turn, latency_s=latency_s) as stub:
        out.put(stub.url)
        stop.wait()
        out.put({"count": stub.count, "max_in_flight": stub.max_in_flight})


class StubProcess:
    """The stub in a child process, so it does not share the measured process's CPU and GIL.

    ``url`` is its base URL; after the ``with`` block, ``count`` and ``max_in_flight`` hold what
    the stub saw.
    """

    def __init__(self, latency_s: float = 0.0) -> None:
        self.latency_s = latency_s
        self.url = ""
        self.count = 0
        self.max_in_flight = 0

    def __enter__(self) -> StubProcess:
        ctx = mp.get_context("spawn")
        self._out = ctx.Queue()
        self._stop = ctx.Event()
        self._proc = ctx.Process(
            target=_serve, args=(self.latency_s, self._out, self._stop), daemon=True
        )
        self._proc.start()
        self.url = self._out.get(timeout=120)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        stats = self._out.get(timeout=60)
        self.count, self.max_in_flight = stats["count"], stats["max_in_flight"]
        self._proc.join(timeout=30)
