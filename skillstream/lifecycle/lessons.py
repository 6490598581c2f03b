"""Lessons from outcome records in the stream.

An *outcome record* is an ordinary message whose ``metadata`` object holds an ``outcome`` object
(the message text can be anything, e.g. the tool's report)::

    {"conversation_id": "c1", "role": "tool", "timestamp": "2024-05-01T10:00:00Z",
     "content": "booking finished",
     "metadata": {"outcome": {
         "type": "task_result",          # required: task_result | score | feedback
         "task": "book a train ticket",  # what was attempted
         "success": true,                # task_result: did it work
         "score": 0.8, "max": 1.0,       # score: a number out of max (default 1); >= half is good
         "feedback": "too slow",         # feedback (and optional extra for the other types)
         "lesson": "Book early",         # optional: the lesson in so many words
         "domain": "travel",             # optional topic of the lesson (default "general")
         "ref": "run-42"}}}              # optional id of the run, task or evaluation

Each record yields one lesson memory (kind ``lesson``, confidence ``lesson_confidence``, 0.6) keyed
``lesson|<domain>|...``: the explicit lesson text, else a sentence built from the task, the result
and the feedback. A later record with the same key (the same lesson, or the same task with the same
good/bad result) *confirms* it: the lesson is reinforced instead of stored twice. A malformed
outcome is skipped and reported in the span's rejected operations, never fatal.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from skillstream.memories import normalise
from skillstream.model import MemoryOp, Message, Span
from skillstream.vocab import MemoryKind, Op

OUTCOME_TYPES = ("task_result", "score", "feedback")
LESSON_KIND = MemoryKind.LESSON

_TEXT = {
    "en": {
        "ok": "Task '{task}' succeeded.",
        "fail": "Task '{task}' failed.",
        "good": "Task '{task}' scored {score} out of {max}, a good result.",
        "poor": "Task '{task}' scored {score} out of {max}, a poor result.",
        "feedback": "Feedback on '{task}': {feedback}",
        "more": " Feedback: {feedback}",
        "any": "the task",
    },
    "zh": {
        "ok": "任务“{task}”成功了。",
        "fail": "任务“{task}”失败了。",
        "good": "任务“{task}”得分 {score}/{max}，结果良好。",
        "poor": "任务“{task}”得分 {score}/{max}，结果较差。",
        "feedback": "关于“{task}”的反馈：{feedback}",
        "more": " 反馈：{feedback}",
        "any": "该任务",
    },
}


def outcome_of(message: Message) -> Any:
    """The ``outcome`` value in a message's metadata, or ``None``."""
    if not message.metadata or '"outcome"' not in message.metadata:
        return None
    try:
        meta = json.loads(message.metadata)
    except ValueError:
        return None
    return meta.get("outcome") if isinstance(meta, Mapping) else None


def _norm(text: str) -> str:
    return normalise(text)[:80]


def lesson_op(outcome: Any, message: Message, lang: str, confidence: float) -> MemoryOp:
    """The lesson INSERT for one outcome.

    Raises:
        ValueError: when the outcome is malformed (the message says what was expected).
    """
    if not isinstance(outcome, Mapping):
        raise ValueError(f"'outcome' must be an object, got {type(outcome).__name__}")
    kind = outcome.get("type")
    if kind not in OUTCOME_TYPES:
        raise ValueError(f"outcome type {kind!r} is not one of {', '.join(OUTCOME_TYPES)}")
    words = _TEXT["zh" if lang == "zh" else "en"]
    task = str(outcome.get("task") or "").strip()
    domain = str(outcome.get("domain") or "general").strip().lower() or "general"
    feedback = str(outcome.get("feedback") or "").strip()
    explicit = str(outcome.get("lesson") or "").strip()
    shown = task or words["any"]
    if kind == "task_result":
        if not isinstance(outcome.get("success"), bool):
            raise ValueError("a task_result outcome needs 'success': true or false")
        good = outcome["success"]
        text = words["ok" if good else "fail"].format(task=shown)
        if feedback:
            text += words["more"].format(feedback=feedback)
    elif kind == "score":
        score, top = outcome.get("score"), outcome.get("max", 1.0)
        if not _number(score) or not _number(top) or top <= 0:
            raise ValueError(
                "a score outcome needs a number 'score' (and a positive 'max', default 1)"
            )
        good = score / top >= 0.5
        text = words["good" if good else "poor"].format(
            task=shown, score=f"{score:g}", max=f"{top:g}"
        )
        if feedback:
            text += words["more"].format(feedback=feedback)
    else:
        if not feedback and not explicit:
            raise ValueError("a feedback outcome needs 'feedback' text (or a 'lesson')")
        good = None
        text = words["feedback"].format(task=shown, feedback=feedback)
    if explicit:
        text, key = explicit, f"lesson|{domain}|{_norm(explicit)}"
    elif good is None:
        key = f"lesson|{domain}|{_norm(task)}|feedback|{_norm(feedback)}"
    else:
        key = f"lesson|{domain}|{_norm(task)}|{'good' if good else 'poor'}"
    return MemoryOp(
        op=Op.INSERT,
        text=text,
        kind=LESSON_KIND,
        key=key,
        subject=domain,
        tags=tuple(dict.fromkeys(t for t in (domain, kind, str(outcome.get("ref") or "")) if t)),
        event_ts=message.ts,
        source_message_ids=(message.message_id,),
        confidence=confidence,
        reason=f"outcome record ({kind})",
    )


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def lesson_ops(span: Span, confidence: float) -> tuple[list[MemoryOp], list[tuple[str, str]]]:
    """Lesson INSERTs for the outcome records of a span, and ``(what, why)`` for malformed ones."""
    ops: list[MemoryOp] = []
    problems: list[tuple[str, str]] = []
    for m in span.messages:
        outcome = outcome_of(m)
        if outcome is None:
            continue
        try:
            ops.append(lesson_op(outcome, m, span.lang, confidence))
        except ValueError as e:
            problems.append((f"outcome in message {m.message_id}", str(e)))
    return ops, problems
