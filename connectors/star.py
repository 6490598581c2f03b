"""STAR adapter: task-oriented dialogues between a user and a wizard (the assistant).

A STAR file is JSONL, plain or gzip, one dialogue per line, with ``DialogueID``, ``Scenario``
(``WizardCapabilities[].Task`` names the dialogue's tasks) and ``Events``. Only events whose
``Agent`` is ``User`` or ``Wizard`` and whose ``Action`` is ``utter`` or ``pick_suggestion`` are
conversation; guide instructions, knowledge-base queries and their results are left out.

How a turn becomes a canonical record (see ``connectors.records``):

- ``conversation_id`` and ``session_id`` are ``f"star-{DialogueID}"``;
- ``user_id`` (the owner) is configurable, ``"star"`` by default, so that dialogues of one task
  can meet in one owner's task skills;
- ``role`` is ``user`` for the User and ``assistant`` for the Wizard, with the default names;
- ``message_id`` is ``f"star-{DialogueID}:{n}"`` with ``n`` the 1-based turn number;
- ``timestamp`` is the event's ``UnixTime`` (epoch seconds, UTC). An event without one gets a
  deterministic synthetic time: one second after the previous timed event of the dialogue, or, when
  no event before it has a time, ``SYNTHETIC_EPOCH`` + ``DialogueID`` hours + 30 s per turn;
- ``metadata`` is ``{"tasks": [...]}`` on every turn, plus ``"action_label"`` for a wizard turn
  picked from the suggestions (the flowchart step it followed).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from skillstream.connectors.fileio import InputFile, open_binary
from skillstream.errors import InputError

CONVERSATION_AGENTS = {"User": "user", "Wizard": "assistant"}
CONVERSATION_ACTIONS = ("utter", "pick_suggestion")
DEFAULT_OWNER = "star"
SYNTHETIC_EPOCH = datetime(2020, 1, 1, tzinfo=UTC)
"""Base of the synthetic times given to events that carry no ``UnixTime``."""


def iter_star_raw(path: str | Path | InputFile) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield the decoded dialogues of a STAR file with their 0-based line numbers.

    Args:
        path: A STAR JSONL file, plain or gzip (detected by its first bytes).

    Yields:
        ``(line_number, dialogue)``; blank lines are skipped.

    Raises:
        InputError: The file is missing, or a line is not a JSON object with ``DialogueID`` and
            ``Events``.
    """
    try:
        fh = open_binary(path)
    except FileNotFoundError:
        raise InputError(f"STAR file {str(path)!r} does not exist") from None
    with fh:
        for line_no, raw in enumerate(fh):
            if not raw.strip():
                continue
            try:
                dialogue = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise InputError(f"{str(path)!r} line {line_no + 1}: not valid JSON: {e}") from e
            if (
                not isinstance(dialogue, dict)
                or "DialogueID" not in dialogue
                or not isinstance(dialogue.get("Events"), list)
            ):
                raise InputError(
                    f"{str(path)!r} line {line_no + 1}: expected a STAR dialogue object with "
                    "'DialogueID' and 'Events'"
                )
            yield line_no, dialogue


def dialogue_tasks(dialogue: dict[str, Any]) -> list[str]:
    """The tasks of a dialogue, from ``Scenario.WizardCapabilities[].Task``, without repeats."""
    caps = (dialogue.get("Scenario") or {}).get("WizardCapabilities") or []
    tasks: list[str] = []
    for cap in caps:
        task = cap.get("Task") if isinstance(cap, dict) else None
        if task and task not in tasks:
            tasks.append(str(task))
    return tasks


def dialogue_turns(dialogue: dict[str, Any]) -> list[dict[str, Any]]:
    """The conversation turns of one dialogue, with their times resolved.

    Returns:
        One dict per turn: ``role`` (user|assistant), ``agent`` (User|Wizard), ``action``,
        ``text``, ``ts`` (UTC ``datetime``) and ``action_label`` (``None`` unless picked from the
        wizard's suggestions).
    """
    dialogue_id = dialogue["DialogueID"]
    base = SYNTHETIC_EPOCH + timedelta(hours=_as_int(dialogue_id))
    last_time: datetime | None = None
    turns: list[dict[str, Any]] = []
    for event in dialogue["Events"]:
        if not isinstance(event, dict):
            continue
        own = _event_time(event)
        if own is not None:
            last_time = own
        if event.get("Agent") not in CONVERSATION_AGENTS:
            continue
        if event.get("Action") not in CONVERSATION_ACTIONS:
            continue
        if own is not None:
            ts = own
        elif last_time is not None:
            ts = last_time = last_time + timedelta(seconds=1)
        else:
            ts = base + len(turns) * timedelta(seconds=30)
        turns.append(
            {
                "role": CONVERSATION_AGENTS[event["Agent"]],
                "agent": event["Agent"],
                "action": event["Action"],
                "text": event.get("Text"),
                "ts": ts,
                "action_label": event.get("ActionLabel")
                if event["Action"] == "pick_suggestion"
                else None,
            }
        )
    return turns


def iter_star(
    path: str | Path | InputFile, *, owner_id: str = DEFAULT_OWNER
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield every conversation turn of a STAR file as a canonical record.

    Args:
        path: A STAR JSONL file, plain or gzip.
        owner_id: The ``user_id`` of every record.

    Yields:
        ``(position, record)``: the turn's 0-based index among all turns of the file and a dict
        with the canonical fields, ready for ``connectors.records.parse_record``.

    Raises:
        InputError: See ``iter_star_raw``.
    """
    position = 0
    for _, dialogue in iter_star_raw(path):
        conversation_id = f"star-{dialogue['DialogueID']}"
        tasks = dialogue_tasks(dialogue)
        for n, turn in enumerate(dialogue_turns(dialogue), start=1):
            metadata: dict[str, Any] = {"tasks": tasks}
            if turn["action_label"]:
                metadata["action_label"] = turn["action_label"]
            yield (
                position,
                {
                    "conversation_id": conversation_id,
                    "session_id": conversation_id,
                    "user_id": owner_id,
                    "message_id": f"{conversation_id}:{n}",
                    "role": turn["role"],
                    "content": turn["text"],
                    "timestamp": turn["ts"],
                    "metadata": metadata,
                },
            )
            position += 1


def load_star_dialogues(path: str | Path) -> list[dict[str, Any]]:
    """Read whole STAR dialogues for the task-skill evaluation.

    Args:
        path: A STAR JSONL file, plain or gzip.

    Returns:
        One dict per dialogue: ``id`` (``"star-<DialogueID>"``, the conversation id of its
        messages), ``dialogue_id``, ``tasks``, ``domains``, ``happy``, ``multi_task`` and
        ``turns`` (as returned by ``dialogue_turns``).

    Raises:
        InputError: See ``iter_star_raw``.
    """
    out = []
    for _, dialogue in iter_star_raw(path):
        scenario = dialogue.get("Scenario") or {}
        out.append(
            {
                "id": f"star-{dialogue['DialogueID']}",
                "dialogue_id": dialogue["DialogueID"],
                "tasks": dialogue_tasks(dialogue),
                "domains": list(scenario.get("Domains") or []),
                "happy": scenario.get("Happy"),
                "multi_task": scenario.get("MultiTask"),
                "turns": dialogue_turns(dialogue),
            }
        )
    return out


def _event_time(event: dict[str, Any]) -> datetime | None:
    value = event.get("UnixTime")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    return None


def _as_int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
