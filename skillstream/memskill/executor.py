"""The LLM executor: applies the selected memory skills to a span in ONE LLM call (MemSkill 3.3.2).

The prompt (``prompts/<lang>/memskill_*.txt``, language from ``span.lang``) holds, in order: a role
line (system message), the span text with its date, the owner's retrieved memories as a 0-based
numbered list (or a line saying there are none), one block per selected memory skill (name,
description, allowed action, instructions) and the rules: third person, who said what, absolute
dates, only the allowed actions, indexes refer to the list. Memory skills whose action is NOOP are
never shown to the model; a selection of only NOOP skills makes no call at all.

The answer is a list of operations::

    {"operations": [
        {"action": "INSERT", "text": ..., "kind": ..., "key": ..., "tags": [...],
         "event_time": ...},
        {"action": "UPDATE", "index": 2, "text": ...},
        {"action": "DELETE", "index": 0},
        {"action": "NOOP"}]}

With a structured-output backend (``json_schema`` or ``json_object``) the JSON schema
``OPERATIONS_SCHEMA`` is sent with the request. With ``text`` output no schema is sent and the
answer may also use the block format of the MemSkill reference (``ACTION: INSERT`` /
``MEMORY_ITEM: ...``, ``ACTION: UPDATE`` / ``MEMORY_INDEX: n`` / ``UPDATED_MEMORY: ...``,
``ACTION: DELETE`` / ``MEMORY_INDEX: n``), parsed as a fallback when no JSON is found.

Two levels of checking:

* an answer without a usable list of operations is rejected as a whole (``ValueError`` inside the
  backend's ``validate``), and the backend asks again within its retry budget; when that is spent,
  ``LLMFailure`` propagates and the pipeline records the span as failed, with its messages in
  ``failed_spans`` for ``skillstream retry-failed``;
* a single invalid operation (unknown action, an action no selected memory skill allows, a missing
  or out-of-range index, a second change of the same memory, empty or oversized text) is left out
  and listed in ``Extraction.rejected`` with the reason; the valid rest is applied.

Provenance: the span's turns are numbered in the prompt and each operation names the ``turns`` it
comes from; those messages (at most ``MAX_TURNS``) become its ``source_message_ids``. An operation
without valid turns cites the whole span, and its reason ends with ``[source: whole span]``.

Memory type: an INSERT may name a ``memory_type``; the allowed values are read from
``vocab.MemoryType`` when the prompt and schema are built (all but ``SkillMemory``). An absent or
unknown value leaves it to the default (by kind).

Applied by ``apply.apply_ops``: updates, then deletes, then inserts, each with the span id and the
cited message ids as provenance.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from skillstream import prompts
from skillstream.extract import Extraction, ExtractionInput, MemorySkill
from skillstream.llm.base import ChatBackend, ChatRequest
from skillstream.llm.parse import ParseError, extract_json
from skillstream.memskill.seeds import PRIMITIVES
from skillstream.memskill.versions import ACTIONS
from skillstream.model import Memory, MemoryOp, Span
from skillstream.spans import render_turn
from skillstream.vocab import KINDS, MemoryKind, MemoryType, Op

PURPOSE = "extract"
MAX_TEXT_CHARS = 2000
MAX_TAGS = 10
_LIST_KEYS = ("operations", "ops", "actions", "memory_operations")
_WEEKDAYS = {
    "en": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
    "zh": ("星期一", "星期二", "星期三", "星期四", "星期五", "星期六", "星期日"),
}

_STR = {"type": "string"}
_TURNS = {"type": "array", "items": {"type": "integer"}}
MAX_TURNS = 4
"""At most this many turns are cited per operation (more are cut, best kept first)."""
WHOLE_SPAN = "[source: whole span]"
"""Marks the reason of an operation whose turns were missing or invalid: it cites the whole span."""


def memory_types() -> list[str]:
    """The memory types the model may choose, read from ``vocab.MemoryType`` now (the vocabulary
    may grow); ``SkillMemory`` is left out: task skills are distilled, not extracted."""
    return [str(t) for t in MemoryType if t != MemoryType.SKILL]


def operations_schema() -> dict[str, Any]:
    """JSON schema of an executor answer, with the memory types of the vocabulary at call time."""
    return {
        "type": "object",
        "properties": {
            "operations": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {
                            "type": "object",
                            "properties": {
                                "action": {"type": "string", "enum": [Op.INSERT]},
                                "text": _STR,
                                "turns": _TURNS,
                                "kind": {"type": "string", "enum": list(KINDS)},
                                "memory_type": {"type": "string", "enum": memory_types()},
                                "key": _STR,
                                "tags": {"type": "array", "items": _STR},
                                "event_time": _STR,
                            },
                            "required": ["action", "text"],
                        },
                        {
                            "type": "object",
                            "properties": {
                                "action": {"type": "string", "enum": [Op.UPDATE]},
                                "index": {"type": "integer"},
                                "text": _STR,
                                "turns": _TURNS,
                            },
                            "required": ["action", "index", "text"],
                        },
                        {
                            "type": "object",
                            "properties": {
                                "action": {"type": "string", "enum": [Op.DELETE]},
                                "index": {"type": "integer"},
                                "turns": _TURNS,
                            },
                            "required": ["action", "index"],
                        },
                        {
                            "type": "object",
                            "properties": {"action": {"type": "string", "enum": [Op.NOOP]}},
                            "required": ["action"],
                        },
                    ]
                },
            }
        },
        "required": ["operations"],
    }


OPERATIONS_SCHEMA = operations_schema()
"""JSON schema of an executor answer as of import (requests build it afresh)."""


# ---------------------------------------------------------------------------- prompt
def acting_skills(skills: Sequence[MemorySkill]) -> list[MemorySkill]:
    """The memory skills shown to the model: all but the NOOP ones (primitives when none given)."""
    chosen = list(skills) if skills else list(PRIMITIVES)
    return [s for s in chosen if s.action.upper() != Op.NOOP]


def memory_line(i: int, m: Memory) -> str:
    """One retrieved memory as listed in the prompt: ``i. text (kind, YYYY-MM-DD)``."""
    when = m.event_ts or m.created_at
    detail = f"{m.kind}, {when.date().isoformat()}" if when else m.kind
    return f"{i}. {' '.join(m.text.split())} ({detail})"


def render_prompt(
    span: Span,
    span_text: str,
    retrieved: Sequence[Memory],
    skills: Sequence[MemorySkill],
    *,
    blocks: bool = False,
) -> tuple[str, str]:
    """The (system, user) messages for one span.

    Args:
        span: The span (its language picks the templates, its start gives the date).
        span_text: The rendered span (``spans.render_span``).
        retrieved: The retrieved memories, in the order their indexes refer to.
        skills: The memory skills to show (NOOP ones already removed).
        blocks: Also describe the block format (for backends without structured output).
    """
    lang = span.lang if span.lang in prompts.LANGUAGES else "en"
    start = span.start_ts.astimezone(UTC)
    if retrieved:
        memories = "\n".join(memory_line(i, m) for i, m in enumerate(retrieved))
    else:
        memories = prompts.render("memskill_no_memories", lang).strip()
    blocks_text = "\n\n".join(
        prompts.render(
            "memskill_skill",
            lang,
            skill_name=s.name,
            description=s.description,
            action=s.action.upper(),
            instruction=s.instruction.strip(),
        ).strip()
        for s in skills
    )
    actions = ", ".join(dict.fromkeys(s.action.upper() for s in skills))
    output = prompts.render(
        "memskill_output_json",
        lang,
        memory_types=" | ".join(memory_types()),
        max_turns=MAX_TURNS,
    ).strip()
    if blocks:
        output += "\n\n" + prompts.render("memskill_output_blocks", lang).strip()
    user = prompts.render(
        "memskill_extract",
        lang,
        date=start.date().isoformat(),
        weekday=_WEEKDAYS.get(lang, _WEEKDAYS["en"])[start.weekday()],
        span=numbered(span, span_text),
        memories=memories,
        skills=blocks_text,
        actions=actions,
        output=output,
    )
    return prompts.render("memskill_system", lang).strip(), user.strip() + "\n"


def numbered(span: Span, span_text: str) -> str:
    """The span with its turns numbered from 0 (``[n] Speaker said, ...``), so operations can cite
    them; the date header line of ``span_text`` is kept."""
    head = span_text.strip().split("\n", 1)[0]
    lines = [f"[{i}] {render_turn(m)}" for i, m in enumerate(span.messages)]
    return "\n".join(([head] if head.startswith("[") else []) + lines)


def cited(value: Any, span: Span) -> tuple[str, ...] | None:
    """The message ids of the turns an operation cites (at most ``MAX_TURNS``, in the order
    given), or ``None`` when it cites none that exist."""
    if isinstance(value, (int, str)):
        value = [value]
    if not isinstance(value, list):
        return None
    ids = span.message_ids
    out: dict[str, None] = {}
    for v in value:
        i = _index(v)
        if i is not None and 0 <= i < len(ids):
            out[ids[i]] = None
    return tuple(list(out)[:MAX_TURNS]) or None


# ---------------------------------------------------------------------------- parsing
_FIELD = re.compile(r"^\s*\**\s*([A-Za-z_]+)\s*\**\s*:\s*\**\s*(.*)$")
_BLOCK_FIELDS = {
    "ACTION": "action",
    "MEMORY_ITEM": "text",
    "UPDATED_MEMORY": "text",
    "TEXT": "text",
    "MEMORY_INDEX": "index",
    "INDEX": "index",
    "KIND": "kind",
    "KEY": "key",
    "TAGS": "tags",
    "EVENT_TIME": "event_time",
}


def parse_blocks(text: str) -> list[dict[str, Any]]:
    """Parse the block format (``ACTION: ...`` then its fields) into operation dicts.

    Lines that do not start a known field continue the previous field's text.

    Raises:
        ValueError: no ``ACTION:`` line in the text.
    """
    ops: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    last: str | None = None
    for line in text.splitlines():
        m = _FIELD.match(line)
        name = _BLOCK_FIELDS.get(m.group(1).upper()) if m else None
        if m and name:
            value = m.group(2).strip()
            if name == "action":
                cur = {"action": value.strip("*` ").upper()}
                ops.append(cur)
            elif cur is not None:
                cur[name] = value
            last = name if cur is not None else None
        elif cur is not None and last in ("text",) and line.strip():
            cur[last] = (cur.get(last, "") + " " + line.strip()).strip()
    if not ops:
        raise ValueError("no JSON and no 'ACTION:' block found in the answer")
    return ops


def parse_answer(data: Any) -> list[Any]:
    """The list of proposed operations in an answer (parsed JSON, or text).

    Accepts ``{"operations": [...]}`` (also ``ops``/``actions``/``memory_operations``), a bare
    list, a single operation object, or text holding JSON or blocks. Items are not checked here
    (see ``check_operations``).

    Raises:
        ValueError: nothing that looks like a list of operations (the backend asks again).
    """
    if isinstance(data, str):
        try:
            data = extract_json(data)
        except ParseError:
            return parse_blocks(data)
    if isinstance(data, list):
        return list(data)
    if isinstance(data, dict):
        for key in _LIST_KEYS:
            if key in data:
                value = data[key]
                if value is None:
                    return []
                if not isinstance(value, list):
                    raise ValueError(
                        f"'{key}' should be a list of operations, got {type(value).__name__}"
                    )
                return list(value)
        if "action" in data:
            return [data]
        raise ValueError(
            f"expected an object with an 'operations' list, got keys {sorted(data)[:8]}"
        )
    raise ValueError(f"expected a JSON object with an 'operations' list, got {type(data).__name__}")


def _shown(item: Any) -> str:
    try:
        text = json.dumps(item, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(item)
    return text if len(text) <= 200 else text[:199] + "…"


def _clean_text(value: Any) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


def _index(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*\[?\s*-?\d+\s*\]?\s*", value):
        return int(value.strip().strip("[]").strip())
    return None


def _tags(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list):
        return ()
    out = [" ".join(str(t).split()).lower() for t in value if isinstance(t, (str, int))]
    return tuple(dict.fromkeys(t for t in out if t))[:MAX_TAGS]


def _memory_type(value: Any) -> str | None:
    """A memory type of the vocabulary (case-insensitive), else ``None`` (the default by kind)."""
    if not isinstance(value, str):
        return None
    by_lower = {t.lower(): t for t in memory_types()}
    return by_lower.get(value.strip().lower())


_DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?")


def parse_event_time(value: Any) -> datetime | None:
    """``YYYY``, ``YYYY-MM``, ``YYYY-MM-DD`` or an ISO datetime as a UTC datetime, else ``None``."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        m = _DATE.match(text)
        if not m:
            return None
        parts = [int(p) for p in m.group(0).split("-")] + [1, 1]
        try:
            dt = datetime(parts[0], parts[1], parts[2])
        except ValueError:
            return None
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def check_operations(
    items: Sequence[Any],
    retrieved: Sequence[Memory],
    skills: Sequence[MemorySkill],
    span: Span,
) -> tuple[list[MemoryOp], list[tuple[str, str]]]:
    """Turn proposed operations into ``MemoryOp``s; reject invalid ones with a reason.

    Args:
        items: Proposed operations (``parse_answer``).
        retrieved: The memories the prompt listed; ``index`` refers to this order.
        skills: The memory skills shown to the model (their actions are the allowed ones).
        span: The span (provenance).

    Returns:
        (operations to apply, [(operation as text, reason)] for the rejected ones). NOOPs are
        neither applied nor rejected.
    """
    by_action: dict[str, list[str]] = {}
    for s in skills:
        by_action.setdefault(s.action.upper(), []).append(s.name)
    allowed = ", ".join(by_action) or "none"
    ops: list[MemoryOp] = []
    rejected: list[tuple[str, str]] = []
    changed: dict[str, tuple[int, str]] = {}
    msg_ids = tuple(span.message_ids)

    for item in items:
        shown = _shown(item)
        if not isinstance(item, dict):
            rejected.append((shown, "an operation must be a JSON object"))
            continue
        action = str(item.get("action") or item.get("type") or "").strip().upper()
        if action not in ACTIONS:
            rejected.append((shown, f"unknown action {action!r}; expected one of {list(ACTIONS)}"))
            continue
        if action == Op.NOOP:
            continue
        if action not in by_action:
            rejected.append(
                (
                    shown,
                    f"action {action} is not allowed by the selected memory skills "
                    f"(allowed: {allowed})",
                )
            )
            continue
        named = item.get("skill")
        providers = by_action[action]
        skill = named if isinstance(named, str) and named in providers else providers[0]
        reason = _clean_text(item.get("reason"))[:200] or f"memory skill {skill}"
        sources = cited(item.get("turns"), span)
        if sources is None:
            sources = msg_ids
            reason = f"{reason} {WHOLE_SPAN}"
        text = _clean_text(item.get("text"))
        if action in (Op.INSERT, Op.UPDATE):
            if not text:
                rejected.append((shown, f"{action} needs a non-empty 'text'"))
                continue
            if len(text) > MAX_TEXT_CHARS:
                too_long = f"'text' has {len(text)} characters, more than {MAX_TEXT_CHARS}"
                rejected.append((shown, too_long))
                continue
        if action == Op.INSERT:
            kind = str(item.get("kind") or MemoryKind.FACT).strip().lower()
            key = _clean_text(item.get("key"))[:200] or None
            ops.append(
                MemoryOp(
                    op=Op.INSERT,
                    text=text,
                    kind=kind if kind in KINDS else MemoryKind.FACT,
                    key=key,
                    tags=_tags(item.get("tags")),
                    event_ts=parse_event_time(item.get("event_time")),
                    source_message_ids=sources,
                    reason=reason,
                    memory_skill=skill,
                    memory_type=_memory_type(item.get("memory_type")),
                )
            )
            continue
        index = _index(item.get("index"))
        if index is None:
            rejected.append(
                (shown, f"{action} needs an integer 'index' into the retrieved memories")
            )
            continue
        if not 0 <= index < len(retrieved):
            listed = f"0-{len(retrieved) - 1}" if retrieved else "none were listed"
            rejected.append(
                (shown, f"index {index} is out of range (retrieved memories: {listed})")
            )
            continue
        target = retrieved[index]
        if target.id in changed:
            first, what = changed[target.id]
            rejected.append(
                (shown, f"memory {index} is already changed by {what} (operation {first})")
            )
            continue
        changed[target.id] = (len(ops), action)
        if action == Op.UPDATE:
            ops.append(
                MemoryOp(
                    op=Op.UPDATE,
                    text=text,
                    kind=target.kind,
                    target_id=target.id,
                    source_message_ids=sources,
                    reason=reason,
                    memory_skill=skill,
                )
            )
        else:
            ops.append(
                MemoryOp(
                    op=Op.DELETE,
                    target_id=target.id,
                    kind=target.kind,
                    source_message_ids=sources,
                    reason=reason,
                    memory_skill=skill,
                )
            )
    return ops, rejected


# ---------------------------------------------------------------------------- the executor
class MemSkillExecutor:
    """Skill-conditioned extraction with one LLM call per span (implements ``extract.Executor``).

    Args:
        backend: A ``ChatBackend`` (``OpenAIBackend``, or a scripted fake in tests).
        structured: Send ``OPERATIONS_SCHEMA`` (backends with ``json_schema``/``json_object``
            output). ``False`` sends no schema and accepts JSON or blocks in the text.
        max_tokens: Completion token limit per call.
        temperature: Sampling temperature; ``None`` uses the backend's.
    """

    name = "memskill"
    needs_span_vector = True
    reads_retrieved = True
    predictable = False

    def __init__(
        self,
        backend: ChatBackend,
        *,
        structured: bool = True,
        max_tokens: int | None = 1024,
        temperature: float | None = None,
    ) -> None:
        self.backend = backend
        self.structured = structured
        self.max_tokens = max_tokens
        self.temperature = temperature

    def request(
        self, inp: ExtractionInput, skills: Sequence[MemorySkill] | None = None
    ) -> ChatRequest:
        """The ``ChatRequest`` for a span (``skills``: the acting memory skills)."""
        acting = acting_skills(inp.memory_skills) if skills is None else list(skills)
        system, user = render_prompt(
            inp.span, inp.span_text, inp.retrieved, acting, blocks=not self.structured
        )
        return ChatRequest(
            purpose=PURPOSE,
            messages=(("system", system), ("user", user)),
            schema=operations_schema() if self.structured else None,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            span_id=inp.span.span_id,
        )

    def execute(self, inp: ExtractionInput) -> Extraction:
        """One LLM call for the span; ``LLMFailure`` propagates (the span is then failed)."""
        selected = [s.name for s in (inp.memory_skills or PRIMITIVES)]
        acting = acting_skills(inp.memory_skills)
        if not acting:
            return Extraction(memory_skills=selected)
        response = self.backend.chat(self.request(inp, acting), validate=parse_answer)
        ops, rejected = check_operations(response.data, inp.retrieved, acting, inp.span)
        # The pipeline logs every rejected operation with the span id.
        return Extraction(
            ops=ops,
            llm_calls=list(response.calls),
            rejected=rejected,
            memory_skills=selected,
        )
