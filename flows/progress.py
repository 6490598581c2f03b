"""The counters of one run: messages, dead letters, spans by status, memory changes.

Every run has its own :class:`Counters` (the runner makes it and hands it to the operators), so
two runs in one process count apart. Bytewax workers of a process are threads, so a counter is
bumped under a lock; the CLI's progress bar reads a snapshot while the run goes on.

A count with a Prometheus series (:data:`SERIES`) also moves it when the process records metrics
(``skillstream.telemetry``); the series count for the process, the counters for the run.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

from skillstream import telemetry

SERIES = {
    "messages": ("MESSAGES", "read"),
    "erased": ("MESSAGES", "erased"),
    "admitted": ("MESSAGES", "admitted"),
    "spans_done": ("SPANS", "done"),
    "spans_skipped": ("SPANS", "skipped"),
    "spans_failed": ("SPANS", "failed"),
}
"""Count name -> (series of ``skillstream.metrics``, its label); ``dead_letters`` goes to
``DEAD_LETTERS`` by the stage that refused, ``memory_changes`` to ``MEMORY_CHANGES``."""


class Counters:
    """Named counts, safe to bump from the worker threads of one run.

    >>> c = Counters()
    >>> c.bump("spans_done"); c.bump("spans_done", 2); c.snapshot()
    {'spans_done': 3}
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def bump(self, name: str, n: int = 1, *, stage: str = "") -> None:
        """Add ``n`` to ``name`` (``stage``: which step refused a dead letter)."""
        with self._lock:
            self._counts[name] += n
        m = telemetry.metrics()
        if m is None:
            return
        if name in SERIES:
            series, label = SERIES[name]
            getattr(m, series).labels(label).inc(n)
        elif name == "dead_letters":
            m.DEAD_LETTERS.labels(stage or "source").inc(n)
        elif name == "memory_changes":
            m.MEMORY_CHANGES.inc(n)

    def snapshot(self) -> dict[str, int]:
        """The counts now, as a plain dict."""
        with self._lock:
            return dict(self._counts)

    def counter(self, name: str, *, stage: str = "") -> Callable[[str, object], None]:
        """A pass-through function for ``op.inspect`` that counts the items it sees."""

        def _inspect(step_id: str, item: object) -> None:
            self.bump(name, stage=stage)

        return _inspect
