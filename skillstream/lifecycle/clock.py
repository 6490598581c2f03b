"""Event time for the lifecycle: durations, ``--now`` values and maintenance ticks.

Nothing in the lifecycle reads the wall clock to decide anything. Decay, expiry, summaries and
ranking take an explicit event time: a span's end time inside the flow, ``--now`` (or the store's
latest event time) on the command line. A backfill of last year's logs therefore walks through the
same states a live run went through.

Maintenance ticks fall on fixed boundaries of event time (multiples of the interval since the Unix
epoch, UTC), so the ticks a conversation sees depend only on its own timestamps.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta

from skillstream.errors import InputError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_duration(value: str | float | int | timedelta | None) -> timedelta | None:
    """Read ``"30d"``, ``"12h"``, ``"90m"``, ``"45s"``, ``"2w"``, seconds, or ``"never"``.

    Args:
        value: The duration; ``None``, ``""``, ``"never"`` and ``"none"`` mean no duration.

    Returns:
        The duration, or ``None`` for "never".

    Raises:
        InputError: for anything else, naming the accepted forms.
    """
    if value is None or isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise InputError(f"duration {value!r}: expected e.g. '30d', '12h', '45s' or 'never'")
    if isinstance(value, (int, float)):
        if value < 0 or not math.isfinite(value):
            raise InputError(f"duration {value!r} must be a finite number of seconds >= 0")
        return timedelta(seconds=float(value))
    text = str(value).strip().lower()
    if text in ("", "never", "none", "forever"):
        return None
    m = _DURATION.match(text)
    if not m:
        raise InputError(
            f"duration {value!r} is not understood: expected a number with an optional unit "
            "s, m, h, d or w (e.g. '30d', '12h', '45s') or 'never'"
        )
    return timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2).lower()])


def parse_time(value: str | datetime | None) -> datetime | None:
    """Read an ISO 8601 time (``2024-05-01``, ``2024-05-01T12:00:00Z``) as UTC; naive means UTC.

    Raises:
        InputError: when the text is not ISO 8601.
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        ts = value
    else:
        try:
            ts = datetime.fromisoformat(str(value).strip())
        except ValueError:
            raise InputError(
                f"time {value!r} is not ISO 8601; write e.g. 2024-05-01 or 2024-05-01T12:00:00Z"
            ) from None
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


def tick_index(ts: datetime, interval: timedelta) -> int:
    """The number of whole maintenance intervals between the epoch and ``ts``."""
    return math.floor((ts - EPOCH) / interval)


def tick_time(index: int, interval: timedelta) -> datetime:
    """The event time of tick ``index`` (the start of that interval)."""
    return EPOCH + interval * index


def latest(*times: datetime | None) -> datetime | None:
    """The latest of the given times, ignoring ``None``."""
    present = [t for t in times if t is not None]
    return max(present) if present else None
