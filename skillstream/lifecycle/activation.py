"""Generated -> activated: the first use of a memory.

A new memory is ``generated``: stored, searchable, seen by extraction, but nothing has used it.
Its first use makes it ``activated`` (event ``activated``, at the event time of the use):

* a recorded search returns it (``skillstream search``, the services API, the MCP server's search
  tool), at the search's event time;
* an extraction retrieved it for a span, at the span's end time.

Activation changes nothing else about the memory: ranking, decay and capacity treat both live
statuses alike. It says which memories were ever used, as the seed's lifecycle does.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from skillstream.lifecycle.states import ChangeLog
from skillstream.model import Memory
from skillstream.vocab import LifecycleEvent, MemoryStatus


def activate(log: ChangeLog, memories: Iterable[Memory], at: datetime, reason: str) -> int:
    """Activate the ``generated`` ones of ``memories`` at ``at``; returns how many changed."""
    n = 0
    for m in memories:
        if m.status == MemoryStatus.GENERATED:
            log.transition(m, MemoryStatus.ACTIVATED, LifecycleEvent.ACTIVATED, reason, at)
            n += 1
    return n
