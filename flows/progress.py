"""The counters of one run: messages, dead letters, spans by status, memory changes.

Every run has its own :class:`Counters` (the runner makes it and hands it to the operators), so
two runs in one process count apart. Bytewax workers of a process are threads, so a counter is
bumped under a lock; the CLI's progress bar reads a snapshot while the run goes on.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable


class Counters:
    """Named counts, safe to bump from the worker threads of one run.

    >>> c = Counters()
    >>> c.bump("spans_done"); c.bump("spans_done", 2); c.snapshot()
    {'spans_done': 3}
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def bump(self, name: str, n: int = 1) -> None:
        """Add ``n`` to ``name``."""
        with self._lock:
            self._counts[name] += n

    def snapshot(self) -> dict[str, int]:
        """The counts now, as a plain dict."""
        with self._lock:
            return dict(self._counts)

    def counter(self, name: str) -> Callable[[str, object], None]:
        """A pass-through function for ``op.inspect`` that counts the items it sees."""

        def _inspect(step_id: str, item: object) -> None:
            self.bump(name)

        return _inspect
