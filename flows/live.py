"""Open spans and task segments across time and runs: the part of the span and block steps that a
live stream and ``Home.add`` need (thin Bytewax wiring of ``skillstream.quiet`` and
``skillstream.held``).

Each conversation's open state (the messages of its open span, or of its open task segment), kept
per owner (the steps are keyed by ``skillstream.ids.conversation_key``: two owners who use one
conversation id each have their own):

* **closes when its conversation goes quiet** (``skillstream.quiet``): the step asks Bytewax to call
  it back (``StatefulLogic.notify_at``) at the wall-clock time the state would close, and closes it
  then if nothing came in between. Bytewax's stateful operator was chosen over its windowing
  operators because a span is not a window of fixed length: it closes on a token budget, a session
  change or a gap, per conversation, and the notification is the one mechanism Bytewax gives a
  keyed state to act without an item;
* **is held in the home when the input ends without closing it** (``Home.add``, which goes on at
  the next call; a run stopped by a signal, which goes on at the next run), and given back the
  first time the next run sees the conversation;
* **never takes a message twice**: a message the state already holds is a replay and is dropped,
  and a closed span loses the messages that are already inside a done span
  (``skillstream.ledger``), so no message is extracted twice whatever the cut.

After a restart (a state restored from Bytewax's snapshot, or given back from the home by a live
run), the conversation's quiet time counts from the restart, so that a replay has the idle gap to
deliver the rest of a conversation before its span closes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
from bytewax.operators import StatefulLogic

from skillstream.held import Held, OpenState, Released, Wake
from skillstream.ids import conversation_key
from skillstream.ledger import DoneMessages
from skillstream.model import Message
from skillstream.quiet import IdleRule, StreamClock, wall_time

__all__ = ["OpenLogic", "OpenSpans", "WakeSource", "conversation_of"]


def conversation_of(item: Message | Wake) -> str:
    """The key of the owner's conversation a message or a wake belongs to."""
    return conversation_key(item.owner_id, item.conversation_id)


@dataclass
class OpenSpans:
    """How one stage (spans or task segments) treats open states across time and runs; the run
    builds one per stage (``Runner.parts()``), sharing the clock and the stop.

    Attributes:
        rule: When a quiet conversation's state closes in processing time.
        clock: The stream's event time in this process.
        held: States held in the home, by owner and conversation id (each is taken once).
        done: Messages already inside a done span (memory extraction only).
        done_spans: Span ids in the ledger (their spans pass whole: the extraction skips them).
        stop: Set when the run was asked to stop: every open state is held at the input's end.
        hold: Hold open states at the input's end (``Home.add``), except those whose
            conversation is already quiet.
        floor: Quiet time of a state restored or given back counts from no earlier than this
            (seconds since the epoch; a live run's start, 0 for ``Home.add``).
    """

    rule: IdleRule
    clock: StreamClock = field(default_factory=StreamClock)
    held: dict[tuple[str, str], OpenState] = field(default_factory=dict)
    done: DoneMessages = field(default_factory=DoneMessages)
    done_spans: frozenset[str] = frozenset()
    stop: threading.Event = field(default_factory=threading.Event)
    hold: bool = False
    floor: float = 0.0

    def is_done(self, message: Message) -> bool:
        return bool(len(self.done)) and self.done.done(message)


S = TypeVar("S")


class OpenLogic(StatefulLogic[Any, Any, Any], Generic[S]):
    """A conversation's open state with the quiet close, the hold and the replay rules of the
    module docstring; subclasses say how messages close a state (:meth:`accept`, :meth:`close`).

    The state type has ``messages`` (a list) and ``last_seen`` (seconds since the epoch).
    """

    stage = ""

    def __init__(self, resume: S | None, live: OpenSpans) -> None:
        self.live = live
        self.state: S | None = self.copy(resume) if resume is not None else None
        self.restored = resume is not None

    # --------------------------------------------------------------- subclass hooks
    def copy(self, state: S) -> S:
        raise NotImplementedError

    def fresh(self, now: float) -> S:
        """A new empty state."""
        raise NotImplementedError

    def give_back(self, held: OpenState, messages: list[Message], last_seen: float) -> S:
        """The state of ``held`` with only ``messages`` (those not already done)."""
        raise NotImplementedError

    def accept(self, state: S, message: Message) -> list[Any]:
        """Add a new message; return what it closes."""
        raise NotImplementedError

    def close(self, state: S) -> list[Any]:
        """Close the open state; return what it closes."""
        raise NotImplementedError

    # --------------------------------------------------------------- the rules
    def _state(self, conversation_id: str, owner_id: str, now: float) -> tuple[S, list[Any]]:
        out: list[Any] = []
        if self.state is None:
            held = self.live.held.pop((owner_id, conversation_id), None)
            if held is None:
                self.state = self.fresh(now)
            else:
                done = [self.live.is_done(m) for m in held.messages]
                keep = [m for m, d in zip(held.messages, done, strict=True) if not d]
                gone = tuple(m.message_id for m, d in zip(held.messages, done, strict=True) if d)
                if gone:  # rows that outlived their span: let the store forget them
                    out.append(Released(self.stage, owner_id, conversation_id, gone))
                seen = max(held.last_seen, self.live.floor)
                self.state = self.give_back(held, keep, seen)
        elif self.restored:
            seen = float(getattr(self.state, "last_seen", 0.0) or 0.0)
            self.state.last_seen = max(seen, self.live.floor)  # type: ignore[attr-defined]
        self.restored = False
        return self.state, out

    def on_item(self, value: Any) -> tuple[Iterable[Any], bool]:
        now = time.time()
        state, out = self._state(value.conversation_id, value.owner_id, now)
        if isinstance(value, Wake):
            return out, StatefulLogic.RETAIN
        self.live.clock.see(value.ts, now)
        state.last_seen = now  # type: ignore[attr-defined]
        held: list[Message] = state.messages  # type: ignore[attr-defined]
        if any(m.message_id == value.message_id for m in held):
            return out, StatefulLogic.RETAIN  # a replay of a message the state holds
        if self.live.is_done(value) and any(not self.live.is_done(m) for m in held):
            return out, StatefulLogic.RETAIN  # already in a done span: it joins no new one
        out.extend(self.accept(state, value))
        return out, StatefulLogic.RETAIN

    def _quiet(self, state: Any, now: float) -> bool:
        return bool(state.messages) and self.live.rule.closes(
            state.messages[-1].ts, state.last_seen, self.live.clock, now
        )

    def notify_at(self) -> datetime | None:
        state: Any = self.state
        if state is None or not state.messages:
            return None
        due = self.live.rule.due(state.messages[-1].ts, state.last_seen, self.live.clock)
        return None if due is None else wall_time(due)

    def on_notify(self) -> tuple[Iterable[Any], bool]:
        state = self.state
        if state is not None and self._quiet(state, time.time()):
            return self.close(state), StatefulLogic.RETAIN
        return [], StatefulLogic.RETAIN

    def on_eof(self) -> tuple[Iterable[Any], bool]:
        """Close the open state, or hold it in the home (a stop; ``Home.add`` unless the
        conversation is quiet). A state of messages that are all in done spans is a replay: it
        closes (the extraction skips it) and is never held."""
        state: Any = self.state
        if state is None or not state.messages:
            return [], StatefulLogic.DISCARD
        fresh = any(not self.live.is_done(m) for m in state.messages)
        holding = fresh and (
            self.live.stop.is_set() or (self.live.hold and not self._quiet(state, time.time()))
        )
        if holding:
            first = state.messages[0]
            return [
                Held(self.stage, first.owner_id, first.conversation_id, self.held_state(state))
            ], StatefulLogic.DISCARD
        return self.close(state), StatefulLogic.DISCARD

    def held_state(self, state: S) -> OpenState:
        s: Any = state
        return OpenState(tuple(s.messages), int(getattr(s, "seq", 0)), float(s.last_seen))

    def snapshot(self) -> Any:
        return self.copy(self.state) if self.state is not None else None


class WakeSource(FixedPartitionedSource[Wake, None]):
    """A ``Wake`` for every conversation held in the home, emitted at every start of the flow
    (one partition; it keeps no resume state, so a resumed run wakes them again)."""

    def __init__(self, wakes: Iterable[Wake] = ()) -> None:
        self.wakes = list(wakes)

    def list_parts(self) -> list[str]:
        return ["held"]

    def build_part(
        self, step_id: str, for_part: str, resume_state: None
    ) -> StatefulSourcePartition[Wake, None]:
        return _WakePartition(self.wakes)


class _WakePartition(StatefulSourcePartition[Wake, None]):
    def __init__(self, wakes: list[Wake]) -> None:
        self._wakes: list[Wake] | None = list(wakes)

    def next_batch(self) -> list[Wake]:
        if self._wakes is None:
            raise StopIteration
        out, self._wakes = self._wakes, None
        return out

    def snapshot(self) -> None:
        return None


class Stoppable(FixedPartitionedSource[Any, Any]):
    """A source whose partitions end (as at the end of the input) once ``stop`` is set: the flow
    then drains and every open state is held (``OpenSpans.stop``). The inner source's partitions,
    resume states and wake-ups are kept as they are."""

    def __init__(self, inner: FixedPartitionedSource, stop: threading.Event) -> None:
        self.inner = inner
        self.stop = stop

    def list_parts(self) -> list[str]:
        return self.inner.list_parts()

    def build_part(
        self, step_id: str, for_part: str, resume_state: Any
    ) -> StatefulSourcePartition[Any, Any]:
        return _StoppablePartition(
            self.inner.build_part(step_id, for_part, resume_state), self.stop
        )


class _StoppablePartition(StatefulSourcePartition[Any, Any]):
    def __init__(self, inner: StatefulSourcePartition, stop: threading.Event) -> None:
        self._inner = inner
        self._stop = stop

    def next_batch(self) -> list[Any]:
        if self._stop.is_set():
            raise StopIteration
        return list(self._inner.next_batch())

    def next_awake(self) -> datetime | None:
        if self._stop.is_set():
            return None
        return self._inner.next_awake()

    def snapshot(self) -> Any:
        return self._inner.snapshot()

    def close(self) -> None:
        self._inner.close()
