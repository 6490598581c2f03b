"""In-process counters the CLI reads to show progress (Bytewax workers are threads of a process)."""

from __future__ import annotations

import threading
from collections import Counter

_lock = threading.Lock()
_counts: Counter[str] = Counter()


def bump(name: str, n: int = 1) -> None:
    with _lock:
        _counts[name] += n


def snapshot() -> dict[str, int]:
    with _lock:
        return dict(_counts)


def reset() -> None:
    with _lock:
        _counts.clear()


def counter(name: str):
    """A pass-through function for ``op.inspect`` that counts items."""

    def _inspect(step_id: str, item: object) -> None:
        bump(name)

    return _inspect
