"""The server's searches recorded behind the answer.

A search recorded where it is made opens the catalog for writing, which costs several times the
search itself (measured on a LoCoMo dev home: about 0.7 s a search recorded in place, 0.1 s
without). So the server answers from a search that records nothing, and a thread records the
searches afterwards, in order, a batch per catalog open: their ``queries`` rows, the hits' access
times, and the first activation of hits still ``generated`` (``MemorySearch.record``, the same
rule as the CLI's). A search is recorded within about ``interval`` seconds; while another process
holds the catalog, the batch waits and is tried again. The batch left at shutdown is recorded
before the process ends. Recording rewrites the hits' rows in LanceDB (their access times), which
leaves small files behind; after a batch the recorder compacts the table when the table's index
policy says enough of them have gathered (``LanceTable.optimize``), as a run does when it ends.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from skillstream.lifecycle.policy import Reader

log = logging.getLogger(__name__)

MAX_PENDING = 10_000
"""Searches held for recording at most; beyond it the oldest are dropped (with a warning)."""


@dataclass(frozen=True)
class Made:
    """One search to record."""

    reader: Reader
    query: str
    strategy: str
    k: int
    hits: list[dict[str, Any]]
    at: datetime | None
    made_at: datetime


class Recorder:
    """Records searches in a background thread.

    Args:
        open_search: Opens a recording ``MemorySearch`` (raises when the catalog is held); its
            ``close`` closes what it opened.
        lock: Held while a batch is recorded (the server's lock on its stores).
        interval: Seconds between two batches.
        after: Called under ``lock`` once a batch is written (the server notes that the
            catalog it wrote still has the same clock).
    """

    def __init__(
        self,
        open_search: Callable[[], Any],
        lock: Any,
        interval: float = 0.5,
        after: Callable[[], None] | None = None,
    ) -> None:
        self.open_search = open_search
        self.lock = lock
        self.after = after
        self.interval = interval
        self.pending: deque[Made] = deque()
        self.dropped = 0
        self.recorded = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="skillstream-recorder", daemon=True)
        self._thread.start()

    def add(self, made: Made) -> None:
        with self._lock:
            if len(self.pending) >= MAX_PENDING:
                self.pending.popleft()
                self.dropped += 1
                if self.dropped == 1 or self.dropped % 1000 == 0:
                    log.warning(
                        "%d searches were not recorded: the catalog stayed busy", self.dropped
                    )
            self.pending.append(made)

    def flush(self) -> int:
        """Record what is pending now; returns how many were recorded (0 while it is busy)."""
        with self._lock:
            batch = list(self.pending)
        if not batch:
            return 0
        with self.lock:
            try:
                search = self.open_search()
            except Exception as e:  # a run holds the catalog: try again at the next turn
                log.debug("search records wait: %s", e)
                return 0
            done = 0
            try:
                search.record_many(
                    [(m.reader, m.query, m.strategy, m.k, m.hits, m.at, m.made_at) for m in batch]
                )
                self.recorded += len(batch)
                done = len(batch)
                # access times rewrite rows: fold the small files they leave once there are
                # many (the table's own policy), or a long-lived server's searches slow down
                search.index.optimize()
            except Exception:  # the batch is tried again at the next turn
                log.exception("recording %d searches failed", len(batch))
            finally:
                search.close()
                with self._lock:
                    for _ in range(done):
                        self.pending.popleft()
                if self.after is not None:
                    self.after()
        return done

    def stop(self) -> None:
        """Stop the thread and record what is left."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        self.flush()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.flush()
            except Exception:  # a failed batch is tried again; the server goes on
                log.exception("recording searches failed")
