"""Tolerant JSON extraction from model text, and a small JSON-schema check.

Models that are not held to a schema by the server wrap their JSON in prose, code fences and
trailing commas. ``extract_json`` finds the answer in that text:

1. the whole text, if it is JSON;
2. the content of each fenced code block (```` ```json ... ``` ````), in order;
3. the first balanced ``{...}`` or ``[...]`` in the text (string-aware), then the next one...

and each candidate is tried as written, then with trailing commas removed. When nothing parses it
raises ``ParseError`` with an excerpt of the text, so a failed span's record shows what came back.

``check_schema`` validates parsed data against the subset of JSON Schema that prompts here use
(``type``, ``properties``, ``required``, ``additionalProperties: false``, ``items``, ``enum``,
``minItems``/``maxItems``, ``minimum``/``maximum``, ``anyOf``/``oneOf``). Keywords outside the
subset are ignored rather than guessed at.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from skillstream.errors import TerminalError

EXCERPT_CHARS = 300

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\r?\n?(.*?)```", re.DOTALL)
_OPEN_TO_CLOSE = {"{": "}", "[": "]"}


class ParseError(TerminalError):
    """The model's answer holds no usable JSON, or JSON that does not fit the schema.

    Attributes:
        text: The full answer text.
        excerpt: Its first ``EXCERPT_CHARS`` characters, as shown in the message.
    """

    def __init__(self, reason: str, text: str) -> None:
        self.reason = reason
        self.text = text
        self.excerpt = excerpt(text)
        super().__init__(f"{reason}; the answer began: {self.excerpt!r}")


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis when cut."""
    text = text or ""
    return text if len(text) <= limit else text[:limit] + "..."


def extract_json(text: str | None, expect: str | None = None) -> Any:
    """Find and parse the JSON answer inside model text.

    Args:
        text: The completion text.
        expect: ``"object"`` or ``"array"`` (a schema's top-level ``type``): the first candidate of
            that kind wins, so a ``[1]`` in the prose before ``{...}`` is skipped. When no candidate
            is of that kind, the first JSON value found is returned (the schema check names the
            mismatch).

    Returns:
        The parsed JSON value (usually a dict or a list).

    Raises:
        ParseError: empty text, no JSON value found, or JSON cut off before its end (in that case
            the message suggests raising ``max_tokens``).

    Example:
        >>> extract_json('Sure! ```json\\n{"a": [1, 2,],}\\n``` Hope it helps.')
        {'a': [1, 2]}
    """
    if text is None or not text.strip():
        raise ParseError("the model returned an empty answer where JSON was expected", text or "")
    stripped = text.strip().lstrip("\ufeff")
    wanted = {"object": dict, "array": list}.get(expect or "")
    first: Any = _FAIL
    for candidate in _candidates(stripped):
        value = _loads_lenient(candidate)
        if value is _FAIL:
            continue
        if wanted is None or isinstance(value, wanted):
            return value
        if first is _FAIL:
            first = value
    if first is not _FAIL:
        return first
    if _first_unbalanced(stripped):
        raise ParseError(
            "the JSON in the answer is cut off before its "
            "end (raise max_tokens, or shorten the prompt)",
            text,
        )
    raise ParseError("no JSON object or array found in the model's answer", text)


_FAIL = object()


def _candidates(text: str) -> Iterator[str]:
    yield text
    for match in _FENCE.finditer(text):
        body = match.group(2).strip()
        if body:
            yield body
    yield from _balanced_values(text)


def _loads_lenient(candidate: str) -> Any:
    try:
        return json.loads(candidate)
    except ValueError:
        pass
    fixed = strip_trailing_commas(candidate)
    if fixed != candidate:
        try:
            return json.loads(fixed)
        except ValueError:
            pass
    return _FAIL


def strip_trailing_commas(text: str) -> str:
    """Remove commas that directly precede ``}`` or ``]`` (outside strings)."""
    out: list[str] = []
    in_str = False
    escaped = False
    pending_comma: int | None = None  # index in ``out`` of a comma that may be trailing
    for ch in text:
        if in_str:
            out.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
            continue
        if ch in "}]" and pending_comma is not None:
            del out[pending_comma]
            pending_comma = None
        elif ch == ",":
            pending_comma = len(out)
        elif not ch.isspace():
            pending_comma = None
        if ch == '"':
            in_str = True
        out.append(ch)
    return "".join(out)


def _scan_balanced(text: str, start: int) -> tuple[str, int]:
    """Scan the value that opens at ``text[start]``.

    Returns ``("closed", end)`` with ``end`` just past it, ``("mismatch", i)`` when a wrong closing
    bracket comes at ``i``, or ``("open", len(text))`` when the text ends first.
    """
    stack = [_OPEN_TO_CLOSE[text[start]]]
    in_str = False
    escaped = False
    for i in range(start + 1, len(text)):
        ch = text[i]
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in _OPEN_TO_CLOSE:
            stack.append(_OPEN_TO_CLOSE[ch])
        elif ch in "}]":
            if ch != stack[-1]:
                return "mismatch", i
            stack.pop()
            if not stack:
                return "closed", i + 1
    return "open", len(text)


_MAX_CANDIDATES = 64


def _balanced_values(text: str) -> Iterator[str]:
    tried = 0
    for i, ch in enumerate(text):
        if ch in _OPEN_TO_CLOSE:
            status, end = _scan_balanced(text, i)
            if status == "closed":
                yield text[i:end]
                tried += 1
                if tried >= _MAX_CANDIDATES:
                    return


def _first_unbalanced(text: str) -> bool:
    """True when the first ``{``/``[`` of the text opens a value that runs to the end unclosed."""
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    return bool(starts) and _scan_balanced(text, min(starts))[0] == "open"


# ---------------------------------------------------------------------------------------- schema

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def check_schema(data: Any, schema: Mapping[str, Any], text: str = "") -> None:
    """Raise ``ParseError`` when ``data`` does not fit ``schema`` (the subset in the module doc).

    Args:
        data: Parsed JSON.
        schema: The JSON schema of the request.
        text: The answer text, for the error's excerpt.
    """
    problems = list(_violations(data, schema, "$"))
    if problems:
        shown = "; ".join(problems[:5]) + (
            f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
        )
        raise ParseError(f"the answer does not match the expected JSON schema: {shown}", text)


def _type_ok(value: Any, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(name, (object,)))


def _violations(value: Any, schema: Mapping[str, Any], path: str) -> Iterator[str]:
    if not isinstance(schema, Mapping):
        return
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if options and not any(not list(_violations(value, s, path)) for s in options):
            yield f"{path} matches none of the {key} alternatives"
            return
    expected = schema.get("type")
    if expected is not None:
        names = [expected] if isinstance(expected, str) else list(expected)
        if not any(_type_ok(value, n) for n in names):
            yield f"{path} should be {' or '.join(names)}, got {type(value).__name__}"
            return
    if "enum" in schema and value not in schema["enum"]:
        yield f"{path} should be one of {schema['enum']!r:.100}, got {value!r:.60}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            yield f"{path} should be >= {schema['minimum']}, got {value}"
        if "maximum" in schema and value > schema["maximum"]:
            yield f"{path} should be <= {schema['maximum']}, got {value}"
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for name in schema.get("required") or ():
            if name not in value:
                yield f"{path} is missing the required key {name!r}"
        for name, sub in props.items():
            if name in value:
                yield from _violations(value[name], sub, f"{path}.{name}")
        if schema.get("additionalProperties") is False:
            extra = sorted(set(value) - set(props))
            if extra:
                yield f"{path} has keys the schema does not allow: {extra[:5]}"
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            yield f"{path} should have at least {schema['minItems']} items, got {len(value)}"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            yield f"{path} should have at most {schema['maxItems']} items, got {len(value)}"
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                yield from _violations(item, items, f"{path}[{i}]")
