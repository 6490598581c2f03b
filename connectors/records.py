"""The canonical chat-message record and its validation.

Every source (files, Kafka, dataset adapters) hands its raw records to ``parse_record`` (or raw
JSON lines to ``parse_line``) and gets back either a ``Message`` or a ``DeadLetter``. Nothing raises
on bad input: a record that cannot be used becomes a dead letter with a human reason, and the stream
goes on.

Canonical fields of an input record:

=================  ========  ==================================================================
field              required  rule
=================  ========  ==================================================================
conversation_id    yes       text (an integer is turned into text)
role               yes       ``user``, ``assistant``, ``system`` or ``tool``; aliases such as
                             ``human`` -> user and ``ai``/``bot``/``wizard`` -> assistant
content            yes       non-empty text, at most ``max_chars`` characters; an OpenAI-style
                             list of ``{"type": "text", "text": ...}`` parts is joined by newlines
timestamp          yes       ISO 8601 text, epoch seconds (a number, or text holding only a
                             number), or a ``datetime``; naive times are taken as UTC; the result
                             is a timezone-aware UTC ``datetime``
user_id            no        the owner of the memories; default: ``conversation_id``
agent_id           no        the agent taking part in the conversation
session_id         no        default: ``conversation_id``
message_id         no        default: ``prefixed_id("msg", conversation_id, ts.isoformat(), role,
                             content)``, so the same message always gets the same id
name               no        the speaker; default ``User``/``Assistant``/``System``/``Tool``
metadata           no        a JSON object (or JSON text of one); stored as JSON text
=================  ========  ==================================================================

Text must be valid Unicode: a lone surrogate (JSON ``"\\ud800"``) in any text field makes the
record a dead letter, as does a NUL character in an identifier or the name; NUL characters in the
content are removed (content made only of them is refused). Any other failure while reading one
record also makes it a dead letter (``record could not be read``), never the end of the stream.

Other keys of the input are ignored. Empty text in an optional field (what a CSV cell holds when it
has no value) counts as absent. The content and every string inside ``metadata`` go through the
redactor. So do the identifiers and the speaker (``conversation_id``, ``user_id``, ``agent_id``,
``session_id``, ``message_id``, ``name``): one that holds a secret is replaced whole by a stable
one-way hash of itself (``redact.redact_id``), so the messages of one conversation stay together
and a replay gets the same ids, while the secret is stored nowhere. If a pattern whose action is
``reject`` matches any of these fields, the record becomes a dead letter without its payload.
Dead-letter payloads and reasons are redacted too, and payloads are cut to ``PAYLOAD_CHARS``
characters.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any

from skillstream.ids import prefixed_id
from skillstream.model import ROLES, DeadLetter, Message
from skillstream.redact import DEFAULT_REDACTOR, Redactor, redact_id

PAYLOAD_CHARS = 500
"""Characters of the (redacted) input kept in a dead letter."""
REDACT_MARGIN = 1_000
"""Characters past ``PAYLOAD_CHARS`` that a dead letter's payload is redacted with, then cut off."""
REASON_CHARS = 2_000
"""The longest dead-letter reason kept."""

CANONICAL_FIELDS = (
    "conversation_id",
    "role",
    "content",
    "timestamp",
    "user_id",
    "agent_id",
    "session_id",
    "message_id",
    "name",
    "metadata",
)

ROLE_ALIASES: dict[str, str] = {
    "user": "user",
    "human": "user",
    "customer": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "bot": "assistant",
    "wizard": "assistant",
    "model": "assistant",
    "gpt": "assistant",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
}
"""Accepted spellings of a role (compared lower-cased) and the canonical role they mean."""

DEFAULT_NAMES = {"user": "User", "assistant": "Assistant", "system": "System", "tool": "Tool"}

_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")
_SURROGATE = re.compile("[\ud800-\udfff]")
_JSON_TYPES = {
    dict: "object",
    list: "array",
    str: "text",
    bool: "boolean",
    int: "number",
    float: "number",
    type(None): "null",
}


@dataclass(frozen=True)
class Refused:
    """A part of a file that a format adapter cannot turn into a record (a LoCoMo turn that is not
    an object, a session that is not a list): the file source makes it a dead letter."""

    reason: str
    payload: Any = None
    """The refused value (JSON-encoded into the dead letter, redacted and cut)."""

    def dead_letter(self, *, source: str, position: str | int, redactor: Redactor) -> DeadLetter:
        payload = None if self.payload is None else shown_payload(self.payload)
        return dead_letter(
            self.reason, source=source, position=position, payload=payload, redactor=redactor
        )


class _Invalid(ValueError):
    """The record is invalid; ``str(e)`` is the reason shown in the dead letter."""

    def __init__(self, reason: str, *, keep_payload: bool = True) -> None:
        super().__init__(reason)
        self.keep_payload = keep_payload


def parse_record(
    obj: Any,
    *,
    source: str,
    position: str | int,
    mapping: Mapping[str, str] | None = None,
    max_chars: int = 20000,
    redactor: Redactor = DEFAULT_REDACTOR,
    now: datetime | None = None,
) -> Message | DeadLetter:
    """Validate one raw record and turn it into a ``Message`` or a ``DeadLetter``.

    Args:
        obj: The decoded record, normally a ``dict`` (a JSON object, a Parquet or CSV row).
        source: Where the record came from (a file path, a topic); part of the dead-letter id.
        position: Where in ``source`` (a byte offset, a row index, ``"partition:offset"``). An
            integer, or text holding one, is kept in ``Message.position``; other text is only
            used for dead letters.
        mapping: Canonical field name -> the input's key, for inputs that spell fields
            differently, e.g. ``{"content": "text", "conversation_id": "thread"}``. Fields not
            in the mapping are looked up under their canonical name.
        max_chars: Longest accepted content, in characters.
        redactor: Sensitive-data rules applied to the content, the metadata and dead-letter
            payloads.
        now: Time written into ``DeadLetter.recorded_at``; default: the current UTC time.

    Returns:
        A ``Message`` when the record is valid, else a ``DeadLetter`` with stage ``"parse"``.
    """
    try:
        return _to_message(obj, source, position, mapping or {}, max_chars, redactor)
    except _Invalid as e:
        reason, keep = str(e), e.keep_payload
    except Exception as e:  # noqa: BLE001 - one odd record must not end the stream
        reason, keep = f"record could not be read ({type(e).__name__}: {e})", True
    payload = None
    if keep:
        payload = obj if isinstance(obj, str) else shown_payload(obj)
    return dead_letter(
        reason, source=source, position=position, payload=payload, redactor=redactor, now=now
    )


def parse_line(
    raw: bytes,
    *,
    source: str,
    position: str | int,
    mapping: Mapping[str, str] | None = None,
    max_chars: int = 20000,
    redactor: Redactor = DEFAULT_REDACTOR,
    now: datetime | None = None,
) -> Message | DeadLetter | None:
    """Decode one JSONL line and parse the object it holds.

    Args:
        raw: The line's bytes; a trailing newline and a UTF-8 byte-order mark are ignored.
        source: See ``parse_record``.
        position: See ``parse_record``.
        mapping: See ``parse_record``.
        max_chars: See ``parse_record``.
        redactor: See ``parse_record``.
        now: See ``parse_record``.

    Returns:
        ``None`` for a blank line (blank lines are skipped, not errors), a ``DeadLetter`` for
        invalid UTF-8 or broken JSON, else what ``parse_record`` returns.
    """

    def refuse(reason: str, payload: str) -> DeadLetter:
        return dead_letter(
            reason, source=source, position=position, payload=payload, redactor=redactor, now=now
        )

    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    if not raw.strip():
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        shown = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        return refuse(f"invalid UTF-8 at byte {e.start}", shown)
    text = text.rstrip("\r\n")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        return refuse(f"broken JSON: {e}", text)
    except RecursionError:
        return refuse("broken JSON: nested too deeply", text)
    return parse_record(
        obj,
        source=source,
        position=position,
        mapping=mapping,
        max_chars=max_chars,
        redactor=redactor,
        now=now,
    )


def dead_letter(
    reason: str,
    *,
    source: str,
    position: str | int,
    payload: str | None,
    stage: str = "parse",
    redactor: Redactor = DEFAULT_REDACTOR,
    now: datetime | None = None,
) -> DeadLetter:
    """Build a dead letter whose payload is redacted and cut to ``PAYLOAD_CHARS`` characters.

    The id is ``prefixed_id("dl", source, str(position))``, so a replay of the same input yields
    the same dead letter. If the payload holds data that a ``reject`` rule matches, it is dropped.

    Args:
        reason: Why the record was refused, for a human reader.
        source: Where the record came from.
        position: Where in ``source``.
        payload: The raw record as text, or ``None``.
        stage: The pipeline stage that refused the record.
        redactor: Sensitive-data rules applied to the payload.
        now: ``recorded_at``; default: the current UTC time.

    Returns:
        The dead letter.
    """
    shown: str | None = None
    if payload is not None:
        # cut before redacting, so an over-long record costs what is kept; the margin lets a
        # secret that crosses the cut still be seen whole by its rule
        redacted, hits = redactor.apply(payload[: PAYLOAD_CHARS + REDACT_MARGIN])
        shown = None if redactor.rejects(hits) else storable(redacted)[:PAYLOAD_CHARS]
    # a reason may quote the bad value ("timestamp '...' is not ISO 8601"): redact it too
    reason = storable(redactor.apply(reason[:REASON_CHARS])[0])
    # a path or URI may hold a secret too (a folder named like a token, a presigned URL)
    shown_source = storable(redactor.apply(source)[0])
    source = storable(source)
    return DeadLetter(
        id=prefixed_id("dl", source, storable(str(position))),
        source=shown_source,
        position=storable(str(position)),
        stage=stage,
        reason=reason,
        payload=shown,
        recorded_at=now or datetime.now(UTC),
    )


# ---------------------------------------------------------------------------------- validation


def _to_message(
    obj: Any,
    source: str,
    position: str | int,
    mapping: Mapping[str, str],
    max_chars: int,
    redactor: Redactor,
) -> Message:
    if not isinstance(obj, Mapping):
        raise _Invalid(f"expected a JSON object, got {_json_type(obj)}")

    def get(name: str) -> Any:
        value = obj.get(mapping.get(name, name))
        if isinstance(value, str) and not value.strip():
            return None
        return value

    def where(name: str) -> str:
        column = mapping.get(name, name)
        return f"'{name}'" if column == name else f"'{name}' (column '{column}')"

    conversation_id = _text_field(get("conversation_id"), where("conversation_id"))
    if conversation_id is None:
        raise _Invalid(f"missing required field {where('conversation_id')}")

    raw_role = get("role")
    if raw_role is None:
        raise _Invalid(f"missing required field {where('role')}")
    role = ROLE_ALIASES.get(str(raw_role).strip().lower()) if isinstance(raw_role, str) else None
    if role is None:
        raise _Invalid(f"role {raw_role!r} is not one of {', '.join(ROLES)}")

    content = _content(get("content"), where("content")).replace("\x00", "")
    if not content.strip():
        raise _Invalid(f"field {where('content')} holds only NUL characters")
    if len(content) > max_chars:
        raise _Invalid(f"message has {len(content)} characters; limit is {max_chars}")

    raw_ts = get("timestamp")
    if raw_ts is None:
        raise _Invalid(f"missing required field {where('timestamp')}")
    ts = parse_timestamp(raw_ts)

    owner_id = _text_field(get("user_id"), where("user_id")) or conversation_id
    agent_id = _text_field(get("agent_id"), where("agent_id"))
    session_id = _text_field(get("session_id"), where("session_id")) or conversation_id
    name = _text_field(get("name"), where("name")) or DEFAULT_NAMES[role]
    metadata = _metadata(get("metadata"), where("metadata"))
    message_id = _text_field(get("message_id"), where("message_id"))

    hits: list[str] = []

    def ident(value: str | None) -> str | None:
        if value is None:
            return None
        out, found = redact_id(value, redactor)
        hits.extend(found)
        return out

    conversation_id = ident(conversation_id) or conversation_id
    owner_id = ident(owner_id) or owner_id
    agent_id = ident(agent_id)
    session_id = ident(session_id) or session_id
    name = ident(name) or name
    message_id = ident(message_id)

    text, found = redactor.apply(content)
    hits.extend(found)
    if metadata is not None:
        metadata = _redact_json(metadata, redactor, hits)
    rejected = redactor.rejects(hits)
    if rejected:
        names = ", ".join(f"'{n}'" for n in sorted(set(rejected)))
        raise _Invalid(
            f"rejected: message matches sensitive-data pattern {names}", keep_payload=False
        )

    message_id = message_id or prefixed_id("msg", conversation_id, ts.isoformat(), role, text)
    return Message(
        message_id=message_id,
        conversation_id=conversation_id,
        owner_id=owner_id,
        session_id=session_id,
        role=role,
        speaker=name,
        text=text,
        ts=ts,
        agent_id=agent_id,
        metadata=None if metadata is None else _dump(metadata),
        source=redactor.apply(source)[0],
        position=_int_position(position),
    )


def parse_timestamp(value: Any) -> datetime:
    """Read a timestamp as a timezone-aware UTC ``datetime``.

    Accepts ISO 8601 text (anything ``datetime.fromisoformat`` reads, including a trailing ``Z``
    and a bare date), epoch seconds as a number or as text holding only a number, and ``datetime``
    or ``date`` objects (a Parquet timestamp column). A time without a zone is taken as UTC.

    Args:
        value: The raw timestamp.

    Returns:
        The time in UTC.

    Raises:
        ValueError: The value is none of the accepted forms; the message is the dead-letter reason.
    """
    if isinstance(value, datetime):
        ts = value
    elif isinstance(value, date):
        ts = datetime.combine(value, time())
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        return _from_epoch(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            ts = datetime.fromisoformat(text)
        except ValueError:
            if _NUMBER.fullmatch(text):
                return _from_epoch(float(text))
            raise _Invalid(f"timestamp {value!r} is not ISO 8601 or epoch seconds") from None
    else:
        raise _Invalid(f"timestamp {value!r} is not ISO 8601 or epoch seconds")
    if ts.tzinfo is None:
        return ts.replace(tzinfo=UTC)
    return ts.astimezone(UTC)


def _from_epoch(seconds: float) -> datetime:
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        raise _Invalid(f"timestamp {seconds!r} is out of range for epoch seconds") from None


def storable(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD, so that it can be encoded as UTF-8
    (and stored, hashed, tokenised); other text comes back unchanged."""
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub("\ufffd", text)


def _unicode(value: str, where: str, *, nul: bool = False) -> str:
    """Refuse text that cannot be stored, hashed or tokenised: a lone surrogate (what JSON
    ``"\\ud800"`` decodes to) and, unless ``nul``, a NUL character."""
    found = _SURROGATE.search(value)
    if found is not None:
        raise _Invalid(
            f"field {where} holds a lone surrogate (U+{ord(found.group()):04X}) at character "
            f"{found.start()}; text must be valid Unicode"
        )
    if not nul and "\x00" in value:
        raise _Invalid(f"field {where} holds a NUL character")
    return value


def _content(value: Any, where: str) -> str:
    if value is None:
        raise _Invalid(f"missing required field {where}")
    if isinstance(value, list):
        parts = []
        for part in value:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        value = "\n".join(p for p in parts if p.strip())
        if not value:
            raise _Invalid(f"field {where} has no text parts")
    if not isinstance(value, str):
        raise _Invalid(f"field {where} must be text, got {_json_type(value)}")
    if not value.strip():
        raise _Invalid(f"missing required field {where}")
    return _unicode(value, where, nul=True)


def _text_field(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        if len(value) > FIELD_CHARS:
            raise _Invalid(f"field {where} has {len(value)} characters; the limit is {FIELD_CHARS}")
        return _unicode(value.strip(), where)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise _Invalid(f"field {where} must be text, got {_json_type(value)}")


def _metadata(value: Any, where: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            raise _Invalid(f"field {where} is not JSON text of an object") from None
    if not isinstance(value, Mapping):
        raise _Invalid(f"field {where} must be a JSON object, got {_json_type(value)}")
    if _depth(value) > METADATA_DEPTH:
        raise _Invalid(f"field {where} is nested more than {METADATA_DEPTH} levels deep")
    size = len(_dump(value, sort_keys=False))
    if size > METADATA_CHARS:
        raise _Invalid(
            f"field {where} has {size} characters as JSON; the limit is {METADATA_CHARS}"
        )
    return dict(value)


METADATA_DEPTH = 64
"""How deeply objects and arrays may nest in ``metadata`` (the walks over it are recursive)."""
METADATA_CHARS = 65_536
"""The longest ``metadata``, as JSON text: with the content limit, this bounds a record's work."""
FIELD_CHARS = 1_024
"""The longest identifier or speaker name."""


def _depth(value: Any) -> int:
    """How deeply ``value``'s objects and arrays nest, counted without recursion (stops past
    ``METADATA_DEPTH``)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (Mapping, list, tuple)):
            deepest = max(deepest, level)
            if level > METADATA_DEPTH:
                break
            children = item.values() if isinstance(item, Mapping) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


def _redact_json(value: Any, redactor: Redactor, hits: list[str]) -> Any:
    if isinstance(value, str):
        text, found = redactor.apply(storable(value))
        hits.extend(found)
        return text
    if isinstance(value, Mapping):
        return {
            _redact_json(str(k), redactor, hits): _redact_json(v, redactor, hits)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_redact_json(v, redactor, hits) for v in value]
    return value


def _int_position(position: str | int) -> int | None:
    if isinstance(position, int) and not isinstance(position, bool):
        return position
    if isinstance(position, str) and position.isdigit():
        return int(position)
    return None


def _json_type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def shown_payload(value: Any) -> str:
    """A refused value as dead-letter text: JSON when it can be, else a note of what it is.

    Never raises: a value too deep or too odd to encode must not turn one bad record into the end
    of the run.
    """
    try:
        return _dump(value, sort_keys=False)
    except (RecursionError, ValueError, TypeError, OverflowError) as e:
        return f"<a {type(value).__name__} that cannot be written as JSON: {type(e).__name__}>"


def _dump(value: Any, *, sort_keys: bool = True) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=sort_keys, default=str)
