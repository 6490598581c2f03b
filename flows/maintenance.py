"""The clock-driven maintenance operator of the memory flow.

It sits between the owner-shard keying and the extraction step and watches the event time of each
owner's spans. When an owner's next span lies past a maintenance boundary (multiples of
``maintenance_interval_s`` since the epoch, UTC), it emits a ``MaintenanceTick(owner, boundary)``
just before that span, naming it; the extraction step runs
``skillstream.lifecycle.maintain_owner`` on the owner's state at the boundary time and sends the
``MaintenanceResult`` to the store sink with the span results. The first span of an owner in a run
also gets a tick (catching up a state hydrated from the store).

A state hydrated from the store (a rerun, or an owner first seen after a resume) already holds
what the ticks before the spans of the ledger changed: those ticks are skipped with their spans.
Running them again would maintain a later state at an earlier time, and a step that is not
monotone in time (the reorganizer, which clusters what existed at the tick) would rewrite its
nodes back to an earlier clustering.

Why per owner: the ticks an owner gets depend only on that owner's own timestamps, which arrive in
order, so one worker or many, one backfill or a live run cut into pieces, an owner's memories go
through the same maintenance at the same event times. A global clock (the largest event time of
all owners) would maintain an owner ahead of spans of its own that are still on their way. An owner
who stops talking is maintained when it speaks again, or by ``skillstream maintain``.

The operator's state is one integer per owner (the last boundary index), snapshotted for recovery.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import bytewax.operators as op
from bytewax.dataflow import Stream
from bytewax.operators import StatefulBatchLogic

from skillstream.lifecycle.clock import tick_index, tick_time
from skillstream.lifecycle.maintenance import MaintenanceTick
from skillstream.model import Span


class ClockLogic(StatefulBatchLogic[Span, Any, dict]):
    """Per shard: the last maintenance boundary each owner passed; emits ticks before spans."""

    def __init__(self, interval: timedelta, resume: dict[str, int] | None) -> None:
        self.interval = interval
        self.last: dict[str, int] = dict(resume) if resume else {}

    def on_batch(self, values: list[Span]) -> tuple[Iterable[Any], bool]:
        out: list[Any] = []
        for span in values:
            idx = tick_index(span.end_ts, self.interval)
            prev = self.last.get(span.owner_id)
            if prev is None or idx > prev:
                tick = MaintenanceTick(
                    span.owner_id, tick_time(idx, self.interval), span_id=span.span_id
                )
                out.append(tick)
                self.last[span.owner_id] = idx
            out.append(span)
        return out, StatefulBatchLogic.RETAIN

    def snapshot(self) -> dict[str, int]:
        return dict(self.last)


def maintenance_clock(step_id: str, up: Stream, interval: timedelta | None) -> Stream:
    """Insert maintenance ticks into a stream of ``(shard, Span)``; a no-op without an interval."""
    if interval is None:
        return up
    return op.stateful_batch(step_id, up, lambda resume: ClockLogic(interval, resume))
