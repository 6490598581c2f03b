"""Answering LoCoMo questions from retrieved memories, and judging the answers, with an LLM backend.

Both calls go through the one LLM interface (:mod:`skillstream.llm`), so they get its structured
output, retries, concurrency limit, accounting and response cache:

* **answer** (purpose ``eval_answer``, prompt ``eval_answer``): the question and the retrieved
  memories, one per line with the date it refers to; the model replies ``{"answer": "..."}`` with
  a short phrase, or the abstention sentence when the memories do not hold the answer;
* **judge** (purpose ``eval_judge``, prompt ``eval_judge``): the question, the reference answer and
  the answer; the model replies ``{"verdict": "yes" | "no"}``.

Category-5 (adversarial) questions have no reference answer: their judge score is the abstention
rule of :mod:`.scoring`, and no judge call is made.

A request that fails after every retry does not stop the evaluation: the answer is recorded as
empty with the error (F1 0, judge 0), and the billed calls are still counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from skillstream.eval.scoring import ABSTENTION_ANSWER, gold_for_category, is_abstention
from skillstream.lang import detect_language
from skillstream.llm import ChatBackend, ChatRequest, LLMFailure
from skillstream.model import LLMCall
from skillstream.prompts import render

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}
JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": ["yes", "no"]}},
    "required": ["verdict"],
    "additionalProperties": False,
}
ANSWER_MAX_TOKENS = 64
JUDGE_MAX_TOKENS = 16


@dataclass
class Usage:
    """LLM accounting of one part of the evaluation.

    ``calls`` counts HTTP requests (every attempt, failed ones too); answers served by the response
    cache are counted in ``cached`` only, and bring no tokens.
    """

    calls: int = 0
    cached: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, rows: Sequence[LLMCall]) -> None:
        for r in rows:
            self.row(r.cached, r.status, r.prompt_tokens, r.completion_tokens)

    def row(
        self, cached: bool, status: str, prompt_tokens: int | None, completion: int | None
    ) -> None:
        """Count one ``llm_calls`` row."""
        if cached:
            self.cached += 1
            return
        self.calls += 1
        self.failed += int(status != "ok")
        self.prompt_tokens += int(prompt_tokens or 0)
        self.completion_tokens += int(completion or 0)

    def merge(self, other: Usage) -> None:
        for name in ("calls", "cached", "failed", "prompt_tokens", "completion_tokens"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict[str, int]:
        return {
            "llm_calls": self.calls,
            "cached_calls": self.cached,
            "failed_calls": self.failed,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }


@dataclass
class Graded:
    """One answered and judged question."""

    answer: str
    judge: float
    error: str | None = None
    calls: list[LLMCall] = field(default_factory=list)


def format_memories(hits: Sequence[dict[str, Any]]) -> str:
    """The retrieved memories as prompt lines: ``- [2023-05-08] text``, best first."""
    lines = []
    for h in hits:
        ts = h.get("event_ts") or h.get("valid_from") or h.get("created_at")
        day = ts.strftime("%Y-%m-%d") if isinstance(ts, datetime) else "date unknown"
        text = " ".join(str(h.get("text") or "").split())
        lines.append(f"- [{day}] {text}")
    return "\n".join(lines) if lines else "(no memories)"


def _answer_value(data: Any) -> str:
    if not isinstance(data, dict) or not isinstance(data.get("answer"), str):
        raise ValueError('expected {"answer": "<text>"}')
    return data["answer"].strip()


def _verdict_value(data: Any) -> bool:
    verdict = data.get("verdict") if isinstance(data, dict) else None
    if not isinstance(verdict, str) or verdict.strip().lower() not in ("yes", "no"):
        raise ValueError('expected {"verdict": "yes"} or {"verdict": "no"}')
    return verdict.strip().lower() == "yes"


class QAGrader:
    """Answers a question from memories and judges the answer.

    Args:
        backend: The LLM backend (``make_backend`` with ``llm="openai"``).
        judge: Also ask the judge (otherwise ``judge`` is the abstention rule for category 5
            and 0 elsewhere; callers then report no judge score).
    """

    def __init__(self, backend: ChatBackend, *, judge: bool = True) -> None:
        self.backend = backend
        self.judge = judge

    def answer(self, question: str, hits: Sequence[dict[str, Any]]) -> tuple[str, list[LLMCall]]:
        """The model's short answer to ``question`` from ``hits``, with the billed calls.

        Raises:
            LLMFailure: no valid answer after the backend's retries.
        """
        lang = detect_language(question)
        prompt = render(
            "eval_answer",
            lang,
            memories=format_memories(hits),
            question=question,
            abstain=ABSTENTION_ANSWER,
        )
        req = ChatRequest(
            "eval_answer",
            (("user", prompt),),
            schema=ANSWER_SCHEMA,
            temperature=0.0,
            max_tokens=ANSWER_MAX_TOKENS,
        )
        resp = self.backend.chat(req, _answer_value)
        return resp.data, list(resp.calls or (resp.call,))

    def verdict(self, question: str, gold: str, answer: str) -> tuple[bool, list[LLMCall]]:
        """Whether the judge accepts ``answer`` for ``gold``, with the billed calls.

        Raises:
            LLMFailure: no valid verdict after the backend's retries.
        """
        lang = detect_language(question)
        prompt = render("eval_judge", lang, question=question, gold=gold, answer=answer)
        req = ChatRequest(
            "eval_judge",
            (("user", prompt),),
            schema=JUDGE_SCHEMA,
            temperature=0.0,
            max_tokens=JUDGE_MAX_TOKENS,
        )
        resp = self.backend.chat(req, _verdict_value)
        return resp.data, list(resp.calls or (resp.call,))

    def grade(
        self, question: str, gold: str | None, category: int, hits: Sequence[dict[str, Any]]
    ) -> Graded:
        """Answer, then judge (category 5: the abstention rule). Never raises ``LLMFailure``."""
        calls: list[LLMCall] = []
        try:
            answer, got = self.answer(question, hits)
            calls += got
        except LLMFailure as e:
            return Graded("", 0.0, f"answer: {e}", list(e.calls))
        if category == 5 or gold is None:
            return Graded(answer, 1.0 if is_abstention(answer) else 0.0, None, calls)
        if not self.judge:
            return Graded(answer, 0.0, None, calls)
        try:
            ok, got = self.verdict(question, gold_for_category(gold, category), answer)
            calls += got
        except LLMFailure as e:
            return Graded(answer, 0.0, f"judge: {e}", calls + list(e.calls))
        return Graded(answer, 1.0 if ok else 0.0, None, calls)
