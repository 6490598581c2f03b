"""When a quiet conversation's open span closes on a live stream (pure logic, no Bytewax).

Spans and task segments close on event time: the next message of the conversation comes more than
``idle_gap`` after the last one. On a live stream the conversation that is over sends no next
message, so its open span also closes in *processing time*, once both of these hold:

* **The conversation is quiet**: no message of it has arrived for ``idle_gap`` of wall-clock time.
* **The stream's event time has moved on**: the stream's event time, as this process sees it,
  is more than ``idle_gap`` past the span's last message. That event time is the latest message
  timestamp seen, advanced by the wall-clock time since the last message of any conversation
  arrived (:class:`StreamClock`; Bytewax's event clock does the same with a system-time wait).

The second rule is what keeps a replay or a backfill through a live source cutting the spans event
time cuts: while messages flow faster than real time, the stream's event time follows their
timestamps and a conversation closes only when the data has passed its gap. On a live stream whose
timestamps follow the wall clock both rules agree, and a span closes ``idle_gap`` after its last
message arrived. A message of the conversation arriving after the close starts a new span; as its
timestamp is then more than ``idle_gap`` past the span's last one, event time would have cut there
too.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

__all__ = ["IdleRule", "StreamClock"]


@dataclass
class StreamClock:
    """The stream's event time as one process sees it: the latest message timestamp, advanced by
    the wall-clock time since the last arrival of any message. Shared by the process's workers."""

    latest: datetime | None = None
    """The largest message timestamp seen."""
    arrived: float | None = None
    """Wall-clock time (seconds since the epoch) of the last arrival."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def see(self, ts: datetime, now: float) -> None:
        """A message with timestamp ``ts`` arrived at wall-clock time ``now``."""
        with self._lock:
            if self.latest is None or ts > self.latest:
                self.latest = ts
            if self.arrived is None or now > self.arrived:
                self.arrived = now

    def event_time(self, now: float) -> datetime | None:
        """The stream's event time at wall-clock time ``now`` (``None`` before any message)."""
        latest, arrived = self.latest, self.arrived
        if latest is None or arrived is None:
            return None
        return latest + timedelta(seconds=max(0.0, now - arrived))


@dataclass(frozen=True)
class IdleRule:
    """Closes a quiet conversation's open span in processing time (see the module docstring).

    Attributes:
        gap: The idle gap (setting ``idle_gap_s``).
        live: Whether spans close in processing time at all (a live source); a finite source
            closes them at its end.
    """

    gap: timedelta
    live: bool = False

    def due(self, last_ts: datetime, last_seen: float, clock: StreamClock) -> float | None:
        """Wall-clock time at which an open span closes, if nothing of its conversation comes.

        Args:
            last_ts: Event time of the span's last message.
            last_seen: Wall-clock time its conversation was last heard from.
            clock: The stream's event time.

        Returns:
            Seconds since the epoch, or ``None`` when the rule is off. The answer moves later as
            other messages keep the stream's event time data-driven: check :meth:`closes` when
            the time comes.
        """
        if not self.live:
            return None
        gap = self.gap.total_seconds()
        wall = last_seen + gap
        latest, arrived = clock.latest, clock.arrived
        if latest is None or arrived is None:
            return wall
        event = arrived + (last_ts - latest).total_seconds() + gap
        return max(wall, event)

    def closes(self, last_ts: datetime, last_seen: float, clock: StreamClock, now: float) -> bool:
        """Whether an open span closes at wall-clock time ``now``."""
        due = self.due(last_ts, last_seen, clock)
        return due is not None and now >= due


def wall_time(seconds: float) -> datetime:
    """Seconds since the epoch as an aware UTC datetime (what Bytewax's ``notify_at`` takes)."""
    return datetime.fromtimestamp(seconds, UTC)
