"""Which messages a conversation lets into its spans: the timestamp window and duplicate ids.

A message that passed validation can still be unfit for a conversation's spans. Each rule below
turns such a message into a dead letter (stage ``admit``) with its reason; the message is kept in
the dead letter's payload (redacted as it was parsed), nothing else of it is used:

* **Too early**: its timestamp is before ``earliest`` (default 1970-01-01 UTC). A year-1 message
  would otherwise give a whole span, and the memories cut from it, an event time of 0001-01-01.
* **From the future**: its timestamp is more than ``future`` past the wall clock when the message
  is admitted. One message dated 9999-12-31 would otherwise move its owner's lifecycle clock to
  that date and expire every other memory of the owner.
* **Late**: its timestamp is more than ``lateness`` before the conversation's watermark (the latest
  timestamp admitted so far in the conversation).
* **Duplicate id**: its ``message_id`` was already admitted in this conversation with different
  content (role, speaker, text or timestamp), in this run or in an earlier one (the home's span
  ledger and held messages, ``TimeWindow.edited``). The first one is kept: an edited message needs
  a new id, or two memories that disagree would cite one message. An exact repeat (same id, same
  content) passes: a replay delivers exact repeats, and ids make them harmless downstream.

A conversation is one owner's: two owners (or two tenants) that use the same conversation and
message ids are admitted apart (the step is keyed by ``skillstream.ids.conversation_key``).

The lifecycle clock follows the admitted messages' event time only, so no single message outside
the window can move it. The state is per conversation and small: the watermark and a digest per
admitted message id.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from skillstream.ids import prefixed_id
from skillstream.ledger import content_digest
from skillstream.model import DeadLetter, Message

STAGE = "admit"
PAYLOAD_CHARS = 500
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class TimeWindow:
    """The accepted timestamps: not before ``earliest``, at most ``future`` past the wall clock,
    at most ``lateness`` before the conversation's watermark (``None``: that bound is off); and
    ``edited``, which says whether the home already holds a message of the same owner,
    conversation and id with other content (``Runner.parts()`` sets it from the home)."""

    earliest: datetime | None = EPOCH
    future: timedelta | None = timedelta(days=1)
    lateness: timedelta | None = None
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC), compare=False)
    edited: Callable[[Message], bool] | None = field(default=None, compare=False)


@dataclass
class Admitted:
    """One conversation's admission state: its watermark and a digest per admitted message id."""

    watermark: datetime | None = None
    digests: dict[str, str] = field(default_factory=dict)

    def copy(self) -> Admitted:
        return Admitted(self.watermark, dict(self.digests))


def refusal(window: TimeWindow, state: Admitted, message: Message) -> str | None:
    """Why ``message`` may not enter its conversation's spans, or ``None`` when it may.

    ``state`` is not changed: call ``admit`` once the message is in.
    """
    ts = message.ts
    if window.earliest is not None and ts < window.earliest:
        return (
            f"timestamp {ts.isoformat()} is before the earliest accepted time "
            f"{window.earliest.isoformat()} (setting earliest_timestamp)"
        )
    if window.future is not None:
        limit = _shift(window.clock(), window.future)
        if limit is not None and ts > limit:
            return (
                f"timestamp {ts.isoformat()} is more than {_span(window.future)} after the wall "
                f"clock (limit {limit.isoformat(timespec='seconds')}, setting future_tolerance_s)"
            )
    lateness, mark = window.lateness, state.watermark
    if lateness is not None and mark is not None:
        floor = _shift(mark, -lateness)
        if floor is not None and ts < floor:
            return (
                f"timestamp {ts.isoformat()} is more than {_span(lateness)} before the "
                f"conversation's latest message ({mark.isoformat()}, setting late_tolerance_s)"
            )
    seen = state.digests.get(message.message_id)
    if seen is not None and seen != content_digest(message):
        return (
            f"message_id {message.message_id!r} was already used in conversation "
            f"{message.conversation_id!r} by a message with different content; the first is kept"
        )
    if seen is None and window.edited is not None and window.edited(message):
        return (
            f"message_id {message.message_id!r} of conversation {message.conversation_id!r} is "
            "already stored with different content; the stored one is kept (an edited message "
            "needs a new id)"
        )
    return None


def admit(state: Admitted, message: Message) -> None:
    """Record an admitted message: its digest and the conversation's new watermark."""
    state.digests[message.message_id] = content_digest(message)
    mark = state.watermark
    state.watermark = message.ts if mark is None else max(mark, message.ts)


def refused(
    message: Message, reason: str, now: datetime | None = None, stage: str = STAGE
) -> DeadLetter:
    """The dead letter of a message refused at ``stage`` (``admit``: by ``refusal``).

    Its id names where the message came from (source and position, or the message id when the
    message has no position), so a replay gives the same dead letter.
    """
    where = str(message.position) if message.position is not None else message.message_id
    source = message.source or message.conversation_id
    payload = json.dumps(
        {
            "message_id": message.message_id,
            "conversation_id": message.conversation_id,
            "role": message.role,
            "timestamp": message.ts.isoformat(),
            "content": message.text,
        },
        ensure_ascii=False,
    )
    return DeadLetter(
        id=prefixed_id("dl", source, where),
        source=source,
        position=where,
        stage=stage,
        reason=reason,
        payload=payload[:PAYLOAD_CHARS],
        recorded_at=now or datetime.now(UTC),
    )


def _shift(t: datetime, by: timedelta) -> datetime | None:
    """``t + by``, or ``None`` when that lies beyond year 1 or 9999 (no bound there)."""
    try:
        return t + by
    except OverflowError:
        return None


def _span(d: timedelta) -> str:
    seconds = d.total_seconds()
    if seconds >= 86400 and seconds % 86400 == 0:
        return f"{int(seconds // 86400)} d"
    return f"{seconds:g} s"
