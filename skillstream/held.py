"""Open spans and task segments kept in the home between runs (pure records, no I/O).

A run whose input ends without closing its conversations' open spans *holds* them: ``Home.add``
(an agent adds one turn at a time; the next call goes on where this one stopped) and a live run
stopped by SIGTERM or SIGINT. Each held message is one row of the catalog's ``open_messages``
table, per stage (``spans`` for memory extraction, ``blocks`` for task-skill segments):

* written by the store sink from a :class:`Held` record at the run's end;
* read by the next run (``Runner.read_home``), which gives each conversation its open state back
  the first time it sees the conversation (a :class:`Wake` per held conversation makes sure it
  does, even when the conversation sends nothing new);
* deleted in the transaction that commits the span the message ended up in (a ``done`` span's
  ledger row), or, for task segments, by a :class:`Released` record after the segment was
  distilled. A span that failed keeps its messages held, so the next run tries them again.

Rows are keyed by stage, owner, conversation and message id, so writing a state twice is
harmless, and a message that is already in a done span is dropped when a state is given back
(``storage.ledger.DoneMessages``): a held row that outlived its span (a crash between the two
writes) costs nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from skillstream.ids import prefixed_id
from skillstream.model import Message

__all__ = [
    "BLOCKS",
    "SPANS",
    "Held",
    "OpenState",
    "Released",
    "Wake",
    "held_rows",
    "message_from_json",
    "message_to_json",
    "open_states",
]

SPANS = "spans"
"""The stage of memory extraction's open spans."""
BLOCKS = "blocks"
"""The stage of task-skill distillation's open segments."""


@dataclass(frozen=True)
class Wake:
    """Tells a conversation's span and block steps to take back their held state now."""

    owner_id: str
    conversation_id: str


@dataclass(frozen=True)
class OpenState:
    """One conversation's held state at one stage."""

    messages: tuple[Message, ...]
    seq: int = 0
    """The conversation's next span sequence number."""
    last_seen: float = 0.0
    """Wall-clock time (seconds since the epoch) the conversation was last heard from."""


@dataclass(frozen=True)
class Held:
    """A conversation's open state at a run's end, for the store sink to keep."""

    stage: str
    owner_id: str
    conversation_id: str
    state: OpenState

    @property
    def message_ids(self) -> list[str]:
        return [m.message_id for m in self.state.messages]


@dataclass(frozen=True)
class Released:
    """Held messages of a stage that are no longer open (a task segment was distilled)."""

    stage: str
    owner_id: str
    conversation_id: str
    message_ids: tuple[str, ...] = field(default_factory=tuple)


def open_id(stage: str, owner_id: str, conversation_id: str, message_id: str) -> str:
    """The ``open_messages`` key of one held message of one owner's conversation."""
    return prefixed_id("opn", stage, [owner_id, conversation_id, message_id])


def unowned_open_id(stage: str, conversation_id: str, message_id: str) -> str:
    """The key a held message had when keys did not name their owner: rows of a home written
    then are deleted under it (a held message is kept only until its span is done)."""
    return prefixed_id("opn", stage, [conversation_id, message_id])


def message_to_json(message: Message) -> str:
    """A message as JSON text (its timestamp in ISO 8601)."""
    d = asdict(message)
    d["ts"] = message.ts.isoformat()
    return json.dumps(d, ensure_ascii=False, sort_keys=True)


def message_from_json(text: str) -> Message:
    """The message :func:`message_to_json` wrote."""
    d = json.loads(text)
    d["ts"] = datetime.fromisoformat(d["ts"])
    return Message(**d)


def held_rows(held: Held, at: datetime | None = None) -> list[dict[str, Any]]:
    """The ``open_messages`` rows of a held state, one per message in order."""
    at = at or datetime.now(UTC)
    seen = datetime.fromtimestamp(held.state.last_seen, UTC)
    return [
        {
            "open_id": open_id(held.stage, held.owner_id, held.conversation_id, m.message_id),
            "stage": held.stage,
            "owner_id": held.owner_id,
            "conversation_id": held.conversation_id,
            "message_id": m.message_id,
            "position": i,
            "seq": held.state.seq,
            "last_seen": seen,
            "message": message_to_json(m),
            "held_at": at,
        }
        for i, m in enumerate(held.state.messages)
    ]


def open_states(
    rows: Iterable[Mapping[str, Any]],
) -> dict[str, dict[tuple[str, str], OpenState]]:
    """Held states from ``open_messages`` rows: stage -> (owner id, conversation id) -> state.

    A run rewrites the rows of every state it holds, so a conversation's rows are its latest
    state, plus messages of an earlier state whose span failed (they come first, as they came
    first); the latest ``seq`` and ``last_seen`` win.
    """
    grouped: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        key = (row["stage"], row["owner_id"], row["conversation_id"])
        grouped.setdefault(key, []).append(row)
    out: dict[str, dict[tuple[str, str], OpenState]] = {}
    for (stage, owner, conversation), group in grouped.items():
        messages: dict[str, Message] = {}
        for row in sorted(group, key=lambda r: (r["held_at"], r["position"])):
            messages[row["message_id"]] = message_from_json(row["message"])
        ordered = list(messages.values())
        seq = max(int(r["seq"] or 0) for r in group)
        seen = max(_seconds(r["last_seen"]) for r in group)
        out.setdefault(stage, {})[(owner, conversation)] = OpenState(tuple(ordered), seq, seen)
    return out


def _seconds(value: Any) -> float:
    if isinstance(value, datetime):
        ts = value if value.tzinfo else value.replace(tzinfo=UTC)
        return ts.timestamp()
    return float(value or 0.0)
