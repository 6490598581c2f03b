"""Fixtures of the MemSkill tests: a scripted chat backend, memories, stub answers, settings."""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from skillstream.errors import TerminalError
from skillstream.llm import ChatRequest, ChatResponse, LLMFailure
from skillstream.llm.parse import ParseError, check_schema, extract_json
from skillstream.model import LLMCall, Memory
from skillstream.settings import Settings

LLM_ENV = ("SKILLSTREAM_LLM_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL")


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys and endpoints of the developer's shell must not leak into the tests."""
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    for name in (
        "SKILLSTREAM_LLM",
        "SKILLSTREAM_MEMORY_SKILL_SELECTION",
        "SKILLSTREAM_MEMORY_SKILL_K",
    ):
        monkeypatch.delenv(name, raising=False)


class ScriptedLLM:
    """An in-process ``ChatBackend``: a queue of answers and a record of every request.

    It behaves like ``OpenAIBackend`` towards its caller: with a schema the answer text is parsed
    tolerantly and checked against it, then ``validate`` runs; an unusable answer is asked again
    (next queued answer) up to ``max_retries`` times, then ``LLMFailure`` carries every call.
    An answer is a ``str`` (the model's text), a ``dict``/``list`` (sent as JSON) or an exception
    instance (raised as that attempt's error, e.g. a simulated timeout).
    """

    name = "scripted"
    model = "scripted-model"

    def __init__(self, answers: Iterable[Any] = (), max_retries: int = 2) -> None:
        self.answers: deque[Any] = deque(answers)
        self.requests: list[ChatRequest] = []
        self.max_retries = max_retries

    def push(self, *answers: Any) -> ScriptedLLM:
        self.answers.extend(answers)
        return self

    def _call(self, request: ChatRequest, attempt: int, status: str, error: str | None) -> LLMCall:
        return LLMCall(
            call_id=f"llm_{len(self.requests)}",
            request_hash=f"h{len(self.requests)}",
            purpose=request.purpose,
            backend=self.name,
            model=self.model,
            span_id=request.span_id,
            prompt_tokens=sum(len(c.split()) for _, c in request.messages),
            completion_tokens=5,
            latency_ms=1.0,
            status=status,
            cached=False,
            attempts=attempt,
            error=error,
            created_at=datetime.now(UTC),
        )

    def chat(
        self, request: ChatRequest, validate: Callable[[Any], Any] | None = None
    ) -> ChatResponse:
        calls: list[LLMCall] = []
        last = ""
        for attempt in range(1, self.max_retries + 2):
            self.requests.append(request)
            if not self.answers:
                raise AssertionError("the scripted LLM ran out of answers")
            answer = self.answers.popleft()
            try:
                if isinstance(answer, BaseException):
                    raise answer
                text = answer if isinstance(answer, str) else json.dumps(answer)
                data: Any = text
                if request.schema is not None:
                    data = extract_json(text, expect="object")
                    check_schema(data, request.schema, text)
                if validate is not None:
                    data = validate(data)
            except (
                ParseError,
                ValueError,
                TypeError,
                LookupError,
                TerminalError,
                TimeoutError,
            ) as e:
                last = f"{type(e).__name__}: {e}"
                calls.append(self._call(request, attempt, "error", last))
                continue
            call = self._call(request, attempt, "ok", None)
            calls.append(call)
            return ChatResponse(text=text, data=data, call=call, calls=tuple(calls))
        raise LLMFailure(request.purpose, last, len(calls), calls, span_id=request.span_id)


@pytest.fixture
def scripted() -> Callable[..., ScriptedLLM]:
    return ScriptedLLM


def make_memory(
    i: int, text: str, *, owner: str = "c1", vector: Any = None, kind: str = "fact"
) -> Memory:
    t = datetime(2024, 5, 1, tzinfo=UTC) + timedelta(days=i)
    return Memory(
        id=f"mem_{i}",
        owner_id=owner,
        text=text,
        kind=kind,
        created_at=t,
        updated_at=t,
        event_ts=t,
        vector=None if vector is None else list(np.asarray(vector, dtype=np.float32)),
    )


# ---------------------------------------------------------------------- answers for the HTTP stub
_TURN = re.compile(r'^(?:\[\d+\] )?(?P<speaker>[^\n"]+?) said, "(?P<text>.*)"$', re.MULTILINE)
"""A turn line of the prompt: ``[n] Speaker said, "text"`` (the number is the turn's index)."""


def span_turns(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(speaker, text) of every turn in an extraction request (the user message)."""
    user = [m["content"] for m in body.get("messages", []) if m.get("role") == "user"][0]
    return [(m.group("speaker").strip(), m.group("text")) for m in _TURN.finditer(user)]


def insert_each_turn(body: dict[str, Any]) -> str:
    """A stub script: one INSERT per user turn of the span, in the third person."""
    ops = [
        {"action": "INSERT", "text": f"{speaker} said: {text}", "kind": "fact"}
        for speaker, text in span_turns(body)
        if speaker != "Assistant"
    ]
    return json.dumps({"operations": ops})


@pytest.fixture
def stub_settings(tmp_path: Any) -> Callable[..., Settings]:
    """``stub_settings(url, **overrides)``: flow settings with the openai backend on ``url``."""

    def make(url: str, **overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "home": str(tmp_path / "home"),
            "llm": "openai",
            "llm_base_url": url,
            "llm_model": "stub-model",
            "llm_timeout_s": 5.0,
            "llm_max_retries": 3,
            "llm_response_format": "json_schema",
            "epoch_interval_s": 0.0,
            "span_tokens": 128,
            "distill": False,  # task-skill distillation makes LLM calls of its own
        }
        values.update(overrides)
        return Settings.load(**values)

    return make


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Torch on one thread: on a shared 2-core machine more threads only wait for each other."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
