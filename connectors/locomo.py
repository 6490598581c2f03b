"""LoCoMo adapter: long two-person conversations, their dated sessions and their QA pairs.

A LoCoMo file is a JSON list of samples (a single sample object is accepted too). Each sample has a
``sample_id``, a ``conversation`` with ``speaker_a``/``speaker_b`` and sessions ``session_N`` (lists
of turns ``{speaker, dia_id, text, [img_url, blip_caption]}``) dated by ``session_N_date_time``
("1:56 pm on 8 May, 2023"), and ``qa`` pairs whose ``evidence`` names turns by ``dia_id``.

How a turn becomes a canonical record (see ``connectors.records``):

- ``conversation_id`` and ``user_id`` are the ``sample_id``: one conversation, one owner;
- ``session_id`` is ``f"{sample_id}/session_{N}"``; sessions are read in the order of ``N``;
- ``timestamp`` is the session's date and time, read as UTC, plus 30 seconds per turn index in the
  session, so turns keep their order in event time; a session without a readable date keeps its
  raw value and its turns become dead letters ("timestamp ... is not ISO 8601 ...");
- ``message_id`` is the ``dia_id`` as written ("D1:3"), which is what QA evidence refers to; it is
  unique within a sample, not across samples;
- ``role`` is ``user`` for both speakers (two people talking, no assistant) and ``name`` is the
  speaker;
- a shared image is kept as ``metadata = {"image_caption": blip_caption, "img_url": [...]}``;
- a turn that is not an object, and a ``session_N`` that is not a list of turns, is a
  ``Refused`` value (the file source makes it a dead letter with the reason); it takes one
  position like a turn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from skillstream.connectors.fileio import InputFile, open_binary
from skillstream.connectors.records import Refused
from skillstream.errors import InputError

TURN_SPACING = timedelta(seconds=30)
"""Event-time distance between consecutive turns of one session."""

_MONTHS = {
    name: i
    for i, name in enumerate(
        (
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ),
        start=1,
    )
}
_DATE_TIME = re.compile(
    r"\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*",
    re.IGNORECASE,
)
_SESSION = re.compile(r"session_(\d+)")


@dataclass(frozen=True)
class LocomoQA:
    """One LoCoMo question with its gold answer and evidence turns."""

    question: str
    answer: str | None
    """Gold answer as text (numbers in the file are turned into text); ``None`` in category 5."""
    evidence: tuple[str, ...]
    """``dia_id`` values of the turns that support the answer ("D8:6; D9:17" is split in two)."""
    category: int
    """1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial."""
    adversarial_answer: str | None = None


def parse_locomo_datetime(text: str) -> datetime:
    """Read a LoCoMo session time such as ``"1:56 pm on 8 May, 2023"`` as a UTC ``datetime``.

    Args:
        text: The ``session_N_date_time`` value.

    Returns:
        The time, timezone-aware UTC.

    Raises:
        ValueError: ``text`` does not have that shape.
    """
    m = _DATE_TIME.fullmatch(text)
    month = _MONTHS.get(m.group(5).lower()) if m else None
    if m is None or month is None:
        raise ValueError(f"LoCoMo date {text!r} is not like '1:56 pm on 8 May, 2023'")
    hour = int(m.group(1)) % 12 + (12 if m.group(3).lower() == "p" else 0)
    return datetime(int(m.group(6)), month, int(m.group(4)), hour, int(m.group(2)), tzinfo=UTC)


def load_locomo(path: str | Path | InputFile) -> list[dict[str, Any]]:
    """Read a LoCoMo file and return its samples.

    Args:
        path: A LoCoMo JSON file (a list of samples, or one sample).

    Returns:
        The samples as decoded JSON objects.

    Raises:
        InputError: The file is missing, is not JSON, or does not hold LoCoMo samples.
    """
    try:
        with open_binary(path) as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise InputError(f"LoCoMo file {str(path)!r} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"LoCoMo file {str(path)!r} is not valid JSON: {e}") from e
    return _samples(data, path)


def _samples(data: Any, path: str | Path | InputFile) -> list[dict[str, Any]]:
    """The samples of a decoded LoCoMo document, checked."""
    samples = [data] if isinstance(data, dict) else data
    if not isinstance(samples, list) or not all(
        isinstance(s, dict) and "sample_id" in s and isinstance(s.get("conversation"), dict)
        for s in samples
    ):
        raise InputError(
            f"{str(path)!r} is not a LoCoMo file: expected a list of objects with 'sample_id' "
            "and 'conversation'; pass another format for other JSON files"
        )
    return samples


def iter_locomo(
    path: str | Path | InputFile, data: list[dict[str, Any]] | None = None
) -> Iterator[tuple[int, dict[str, Any] | Refused]]:
    """Yield every turn of a LoCoMo file as a canonical record, in conversation order.

    Args:
        path: A LoCoMo JSON file.
        data: The decoded document, when the caller has read it already.

    Yields:
        ``(position, record)``: the turn's 0-based index in the file and a dict with the canonical
        fields, ready for ``connectors.records.parse_record`` (or a ``Refused`` value).

    Raises:
        InputError: See ``load_locomo``.
    """
    position = 0
    for sample in _samples(data, path) if data is not None else load_locomo(path):
        for record in sample_records(sample):
            yield position, record
            position += 1


def sample_records(sample: dict[str, Any]) -> Iterator[dict[str, Any] | Refused]:
    """Canonical records of one LoCoMo sample (see the module docstring for the mapping)."""
    sample_id = str(sample["sample_id"])
    conversation = sample["conversation"]
    sessions = sorted(
        (int(m.group(1)), key) for key in conversation if (m := _SESSION.fullmatch(key))
    )
    for number, key in sessions:
        turns = conversation[key]
        if not isinstance(turns, list):
            yield Refused(
                f"LoCoMo sample {sample_id!r}: {key} is {_kind(turns)}, not a list of turns",
                turns,
            )
            continue
        raw_time = conversation.get(f"{key}_date_time")
        try:
            start: datetime | None = parse_locomo_datetime(raw_time) if raw_time else None
        except (ValueError, TypeError):
            start = None
        for i, turn in enumerate(turns):
            if not isinstance(turn, dict):
                yield Refused(
                    f"LoCoMo sample {sample_id!r}: turn {i} of {key} is {_kind(turn)}, "
                    "not an object with 'speaker' and 'text'",
                    turn,
                )
                continue
            metadata = {}
            if turn.get("blip_caption"):
                metadata["image_caption"] = turn["blip_caption"]
            if turn.get("img_url"):
                metadata["img_url"] = turn["img_url"]
            yield {
                "conversation_id": sample_id,
                "user_id": sample_id,
                "session_id": f"{sample_id}/session_{number}",
                "message_id": turn.get("dia_id"),
                "role": "user",
                "name": turn.get("speaker"),
                "content": turn.get("text"),
                "timestamp": start + i * TURN_SPACING if start else raw_time,
                "metadata": metadata or None,
            }


def _kind(value: Any) -> str:
    names = {
        str: "text",
        int: "a number",
        float: "a number",
        bool: "a boolean",
        list: "a list",
        dict: "an object",
    }
    return "null" if value is None else names.get(type(value), type(value).__name__)


def load_locomo_qa(path: str | Path) -> dict[str, list[LocomoQA]]:
    """Read the question/answer pairs of every sample, for the evaluation.

    Args:
        path: A LoCoMo JSON file.

    Returns:
        ``sample_id`` -> its questions, in file order.

    Raises:
        InputError: See ``load_locomo``.
    """
    out: dict[str, list[LocomoQA]] = {}
    for sample in load_locomo(path):
        items = []
        for qa in sample.get("qa") or []:
            evidence = tuple(
                part.strip()
                for ev in qa.get("evidence") or []
                for part in str(ev).split(";")
                if part.strip()
            )
            answer = qa.get("answer")
            adversarial = qa.get("adversarial_answer")
            items.append(
                LocomoQA(
                    question=str(qa.get("question", "")),
                    answer=None if answer is None else str(answer),
                    evidence=evidence,
                    category=int(qa.get("category", 0)),
                    adversarial_answer=None if adversarial is None else str(adversarial),
                )
            )
        out[str(sample["sample_id"])] = items
    return out
