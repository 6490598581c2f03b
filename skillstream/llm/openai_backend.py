"""The ``openai`` backend: any OpenAI-compatible chat-completions endpoint.

OpenAI, vLLM, Ollama, the llama.cpp server, Together... anything that speaks
``POST {base_url}/chat/completions``. What it adds to the ``openai`` client:

* **Structured output** by ``llm.response_format``:

  - ``json_schema``: ``response_format={"type": "json_schema", "json_schema": {"name", "schema",
    "strict": false}}`` (OpenAI, vLLM, Ollama);
  - ``json_object``: ``response_format={"type": "json_object", "schema": ...}`` (the llama.cpp
    server constrains its grammar to the schema; OpenAI ignores the extra key), and the schema is
    also described in the system message;
  - ``text``: no ``response_format``; the schema is described in the system message only.

  The answer is parsed tolerantly (``parse.extract_json``), checked against the schema
  (``parse.check_schema``) and passed to the caller's ``validate``.
* **Retries**, ``llm.max_retries`` of them after the first attempt, shared by

  - transient failures: timeouts (``llm.timeout_s``), connection errors, HTTP 408/409/429/5xx
    and response bodies that are not JSON, with exponential backoff and jitter (a ``Retry-After``
    header is honoured);
  - invalid answers (not JSON, not matching the schema, rejected by ``validate``): asked again at
    once, with the bad answer and the reason appended to the conversation (a "reask").

  Other HTTP errors (400, 401, 403, 404, 422) are not retried. When no valid answer came,
  ``LLMFailure`` (a ``TerminalError``) carries the purpose, the last error, the attempts and every
  ``LLMCall`` row. The ``openai`` client's own retries are off, so every HTTP attempt is counted.
* **A concurrency limit**: at most ``llm.concurrency`` requests in flight per process and
  endpoint (a semaphore shared by every backend of this process that talks to the same endpoint with
  the same limit); backoff sleeps do not hold a slot.
* **Accounting**: one ``LLMCall`` row per HTTP attempt (tokens from ``usage``, latency, ``ok`` or
  ``error`` with a secret-free message), or one ``cached`` row; each row also moves the process's
  LLM metrics (``skillstream.metrics``: requests, tokens, and the cost at ``llm.prices``) when the
  process records them, and a request is one ``chat MODEL`` trace span when tracing is on.
* **The response cache** (``cache.SqliteCache``): looked up before the first attempt, filled after a
  validated answer only.
* **Redaction of answers**: a model may repeat a secret that reached its prompt, so every answer
  (fresh or cached) passes the default sensitive-data rules (``skillstream.redact``) before it is
  parsed; what is parsed, stored, cached and logged is the redacted text. Error texts of ``LLMCall``
  rows are redacted too.

The API key comes from ``SKILLSTREAM_LLM_API_KEY`` or ``OPENAI_API_KEY``
(``skillstream.settings.llm_api_key``; ``not-needed`` when neither is set, for local servers). It
is given to the client and nothing else: it is not hashed, cached, logged, put in an error message
or shown by ``repr``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import re
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Self, get_args
from urllib.parse import urlsplit

from skillstream import telemetry
from skillstream.errors import ConfigError, TerminalError
from skillstream.ids import prefixed_id
from skillstream.llm.base import (
    ChatRequest,
    ChatResponse,
    Validator,
    base_url_identity,
    request_hash,
)
from skillstream.llm.cache import CachedAnswer, ResponseCache
from skillstream.llm.cost import token_cost
from skillstream.llm.parse import ParseError, check_schema, excerpt, extract_json
from skillstream.model import LLMCall
from skillstream.redact import DEFAULT_REDACTOR, redact_answer
from skillstream.settings import LLMSettings, ResponseFormat, llm_api_key

log = logging.getLogger(__name__)

RESPONSE_FORMATS: tuple[str, ...] = get_args(ResponseFormat)
NO_KEY = "not-needed"
REJECTIONS: tuple[type[BaseException], ...] = (ValueError, TypeError, LookupError, TerminalError)
"""Exceptions by which a ``validate`` function rejects an answer (see ``base.Validator``)."""

_RETRY_STATUS = frozenset({408, 409, 429})
_ERROR_CHARS = 500
_REASK_ANSWER_CHARS = 4000


class LLMFailure(TerminalError):
    """No valid answer after every allowed attempt, or an error that retrying cannot fix.

    Attributes:
        purpose: The request's purpose.
        span_id: The request's span, if any.
        last_error: What went wrong on the last attempt (no secrets).
        attempts: HTTP attempts made.
        calls: The ``LLMCall`` row of every attempt, in order; record them, they were billed.
        transient: True when the last error was of the retryable kind (the endpoint may recover).
    """

    def __init__(
        self,
        purpose: str,
        last_error: str,
        attempts: int,
        calls: list[LLMCall],
        *,
        span_id: str | None = None,
        transient: bool = False,
    ) -> None:
        self.purpose = purpose
        self.span_id = span_id
        self.last_error = last_error
        self.attempts = attempts
        self.calls = list(calls)
        self.transient = transient
        hint = (
            "check that the endpoint is up and fast enough (SKILLSTREAM_LLM_TIMEOUT_S), or raise "
            "SKILLSTREAM_LLM_MAX_RETRIES"
            if transient
            else "check the model, the prompt and SKILLSTREAM_LLM_RESPONSE_FORMAT"
        )
        where = f" (span {span_id})" if span_id else ""
        super().__init__(
            f"LLM request {purpose!r}{where} failed after {attempts} attempt(s): "
            f"{last_error}; {hint}"
        )


class _AttemptError(Exception):
    """Internal: one failed attempt, already described without secrets."""

    def __init__(
        self,
        message: str,
        *,
        retry: bool,
        invalid_answer: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.retry = retry
        self.invalid_answer = invalid_answer
        self.retry_after = retry_after


_SEMAPHORES: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_SEMAPHORES_LOCK = threading.Lock()


def _semaphore(endpoint: str, limit: int) -> threading.BoundedSemaphore:
    with _SEMAPHORES_LOCK:
        sem = _SEMAPHORES.get((endpoint, limit))
        if sem is None:
            sem = _SEMAPHORES[(endpoint, limit)] = threading.BoundedSemaphore(limit)
        return sem


_SECRET_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)[^\s\"',]+"),
    re.compile(r"\bsk-[A-Za-z0-9_\-*]{6,}"),
)


def schema_instruction(schema: Any) -> str:
    """The system-message text that describes the expected answer (``json_object`` and ``text``)."""
    return (
        "Answer with one JSON value that matches this JSON schema, and nothing else "
        "(no prose, no code fences):\n" + json.dumps(schema, ensure_ascii=False, sort_keys=True)
    )


def _schema_name(purpose: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", purpose)[:64] or "answer"


class OpenAIBackend:
    """Chat against an OpenAI-compatible endpoint; see the module docstring.

    Args:
        llm: The ``llm`` settings group: ``base_url``, ``model``, ``temperature``, ``timeout_s``,
            ``max_retries``, ``concurrency``, ``response_format``, ``prices``.
        cache: Response cache, or ``None`` for none (``make_backend`` opens the one the settings ask
            for).
        backoff_base_s: First backoff delay; doubled per retry, with jitter.
        backoff_max_s: Longest backoff delay.
        sleep: The sleep function (tests may record delays instead of waiting).

    Raises:
        ConfigError: no base URL, or no model.
    """

    name = "openai"

    def __init__(
        self,
        llm: LLMSettings,
        cache: ResponseCache | None = None,
        *,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 20.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        base_url = llm.base_url.strip()
        if not base_url:
            raise ConfigError(
                "the openai LLM backend needs an endpoint: set SKILLSTREAM_LLM_BASE_URL (or "
                "OPENAI_BASE_URL), e.g. http://127.0.0.1:8080/v1 or https://api.openai.com/v1"
            )
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"SKILLSTREAM_LLM_BASE_URL must be an http(s) URL, got {base_url!r:.80}"
            )
        if not llm.model:
            raise ConfigError(
                "the openai LLM backend needs a model name: set SKILLSTREAM_LLM_MODEL"
            )
        # The response format and the limits were checked when the settings were read.

        import openai  # a core dependency; imported here so `rules`-only runs never load it

        key = llm_api_key() or NO_KEY
        self._secrets = _secrets_of(key, base_url)
        self.model = llm.model
        self.endpoint = base_url_identity(base_url)
        self.response_format = llm.response_format
        self.temperature = llm.temperature
        self.timeout_s = llm.timeout_s
        self.max_retries = llm.max_retries
        self.concurrency = llm.concurrency
        self.cache = cache
        self.prices = dict(llm.prices)
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self._sleep = sleep
        self._semaphore = _semaphore(self.endpoint, self.concurrency)
        self._openai = openai
        self._client = openai.OpenAI(
            api_key=key, base_url=base_url, timeout=self.timeout_s, max_retries=0
        )

    def __repr__(self) -> str:
        return (
            f"OpenAIBackend(endpoint={self.endpoint!r}, model={self.model!r}, "
            f"response_format={self.response_format!r})"
        )

    def close(self) -> None:
        """Close the HTTP client and the cache."""
        self._client.close()
        close = getattr(self.cache, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the call
    def request_key(self, request: ChatRequest) -> str:
        """The hash this backend uses for ``request`` (cache key, ``LLMCall.request_hash``)."""
        return request_hash(
            self._effective(request),
            self.model,
            self.endpoint,
            extra={"response_format": self.response_format if request.schema is not None else None},
        )

    def chat(self, request: ChatRequest, validate: Validator | None = None) -> ChatResponse:
        """Ask, parse, validate; retry within the budget; see the module docstring.

        Args:
            request: The request.
            validate: Turns the parsed JSON (or, without a schema, the text) into the caller's
                value, raising ``ValueError``/``TypeError``/``LookupError``/``TerminalError`` to
                reject it.

        Returns:
            The answer with its ``LLMCall`` rows.

        Raises:
            LLMFailure: no valid answer within ``1 + llm_max_retries`` attempts, or a non-retryable
                HTTP error.
        """
        request = self._effective(request)
        with telemetry.span(
            f"chat {self.model}", self._span_attributes(request), client=True
        ) as traced:
            response = self._chat(request, validate)
            if traced is not None:
                g = telemetry.GEN_AI
                traced.set_attribute(g["input_tokens"], response.call.prompt_tokens)
                traced.set_attribute(g["output_tokens"], response.call.completion_tokens)
                traced.set_attribute("skillstream.llm.attempts", len(response.calls))
                traced.set_attribute("skillstream.llm.cached", response.cached)
        return response

    def _span_attributes(self, request: ChatRequest) -> dict[str, Any]:
        """The GenAI semantic-convention attributes of a chat request's trace span."""
        g = telemetry.GEN_AI
        where = urlsplit(self.endpoint)
        out: dict[str, Any] = {
            g["operation"]: "chat",
            g["provider"]: "openai",
            g["system"]: "openai",
            g["model"]: self.model,
            "skillstream.llm.purpose": request.purpose,
            "server.address": where.hostname or "",
        }
        if where.port:
            out["server.port"] = where.port
        if request.temperature is not None:
            out[g["temperature"]] = request.temperature
        if request.max_tokens is not None:
            out[g["max_tokens"]] = request.max_tokens
        return out

    def _chat(self, request: ChatRequest, validate: Validator | None) -> ChatResponse:
        key = self.request_key(request)

        hit = self._cached(key, request, validate)
        if hit is not None:
            return hit

        messages = self._messages(request)
        calls: list[LLMCall] = []
        budget = 1 + self.max_retries
        last: _AttemptError | None = None
        for attempt in range(1, budget + 1):
            latency_ms = 0.0
            prompt_tokens = completion_tokens = 0
            text: str | None = None
            try:
                with self._semaphore:
                    t0 = time.perf_counter()
                    try:
                        completion = self._post(request, messages)
                    finally:
                        latency_ms = (time.perf_counter() - t0) * 1000.0
                prompt_tokens, completion_tokens = _usage(completion)
                text, finish = _read_choice(completion)
                # what the model wrote may echo a secret of the prompt: redact before any use
                text = redact_answer(text)
                data = self._interpret(text, request, validate, finish)
            except _AttemptError as e:
                last = e
                calls.append(
                    self._row(
                        key,
                        request,
                        attempt,
                        "error",
                        prompt_tokens,
                        completion_tokens,
                        latency_ms,
                        error=self._clean(str(e)),
                    )
                )
                if not e.retry or attempt == budget:
                    break
                log.warning(
                    "LLM %s attempt %d/%d failed: %s",
                    request.purpose,
                    attempt,
                    budget,
                    calls[-1].error,
                )
                if e.invalid_answer:
                    if text:
                        messages = self._reask(self._messages(request), text, str(e))
                else:
                    self._sleep(self._backoff(attempt, e.retry_after))
                continue
            call = self._row(
                key, request, attempt, "ok", prompt_tokens, completion_tokens, latency_ms
            )
            calls.append(call)
            self._store(key, request, text or "", prompt_tokens, completion_tokens)
            return ChatResponse(text=text or "", data=data, call=call, calls=tuple(calls))

        assert last is not None
        raise LLMFailure(
            request.purpose,
            self._clean(str(last)),
            len(calls),
            calls,
            span_id=request.span_id,
            transient=last.retry and not last.invalid_answer,
        )

    # ------------------------------------------------------------------ pieces
    def _effective(self, request: ChatRequest) -> ChatRequest:
        if request.temperature is None:
            return dataclasses.replace(request, temperature=self.temperature)
        return request

    def _messages(self, request: ChatRequest) -> list[dict[str, str]]:
        msgs = [{"role": r, "content": c} for r, c in request.messages]
        if request.schema is not None and self.response_format in ("json_object", "text"):
            instruction = schema_instruction(request.schema)
            if msgs[0]["role"] == "system":
                msgs[0] = {
                    "role": "system",
                    "content": msgs[0]["content"].rstrip() + "\n\n" + instruction,
                }
            else:
                msgs.insert(0, {"role": "system", "content": instruction})
        return msgs

    @staticmethod
    def _reask(messages: list[dict[str, str]], bad_text: str, reason: str) -> list[dict[str, str]]:
        return messages + [
            {"role": "assistant", "content": bad_text[:_REASK_ANSWER_CHARS]},
            {
                "role": "user",
                "content": f"That answer could not be used: {reason}. Reply again with only the "
                "corrected answer.",
            },
        ]

    def _response_format(self, request: ChatRequest) -> dict[str, Any] | None:
        if request.schema is None or self.response_format == "text":
            return None
        schema = dict(request.schema)
        if self.response_format == "json_schema":
            return {
                "type": "json_schema",
                "json_schema": {
                    "name": _schema_name(request.purpose),
                    "schema": schema,
                    "strict": False,
                },
            }
        return {"type": "json_object", "schema": schema}

    def _post(self, request: ChatRequest, messages: list[dict[str, str]]) -> Any:
        """One HTTP attempt; every failure comes out as ``_AttemptError``."""
        openai = self._openai
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages}
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.max_tokens is not None:
            kwargs["max_tokens"] = request.max_tokens
        response_format = self._response_format(request)
        if response_format is not None:
            kwargs["response_format"] = response_format
        try:
            return self._client.chat.completions.create(**kwargs)
        except openai.APITimeoutError as e:
            raise _AttemptError(f"timed out after {self.timeout_s:g} s", retry=True) from e
        except openai.APIConnectionError as e:
            cause = e.__cause__ or e.__context__
            raise _AttemptError(
                f"cannot connect to {self.endpoint}: {cause or e}", retry=True
            ) from e
        except openai.APIStatusError as e:
            status = e.status_code
            retry = status in _RETRY_STATUS or status >= 500
            raise _AttemptError(
                f"HTTP {status}: {_error_message(e)}",
                retry=retry,
                retry_after=_retry_after(e),
            ) from e
        except openai.APIResponseValidationError as e:
            raise _AttemptError(
                f"the response does not have the chat-completion shape: {e}", retry=True
            ) from e
        except ValueError as e:  # a 200 whose body is not JSON
            raise _AttemptError(f"the response body is not JSON ({e})", retry=True) from e

    def _interpret(
        self, text: str | None, request: ChatRequest, validate: Validator | None, finish: str | None
    ) -> Any:
        """Parse and validate an answer; ``_AttemptError(invalid_answer=True)`` when unusable."""
        cut = " (the answer hit max_tokens: finish_reason=length)" if finish == "length" else ""
        try:
            if request.schema is not None:
                top = request.schema.get("type")
                data = extract_json(text, expect=top if isinstance(top, str) else None)
                check_schema(data, request.schema, text or "")
            else:
                if text is None:
                    raise ParseError("the model returned no text", "")
                data = text
            return validate(data) if validate is not None else data
        except ParseError as e:
            raise _AttemptError(str(e) + cut, retry=True, invalid_answer=True) from e
        except REJECTIONS as e:
            raise _AttemptError(
                f"the answer was rejected by validation: {type(e).__name__}: "
                f"{excerpt(str(e))}{cut}",
                retry=True,
                invalid_answer=True,
            ) from e

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        base = min(self.backoff_max_s, self.backoff_base_s * (2 ** (attempt - 1)))
        delay = base / 2 + random.uniform(0, base / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, max(self.backoff_max_s, 60.0)))
        return delay

    def _clean(self, text: str) -> str:
        """An error text without secrets, cut to a readable length."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        for pattern in _SECRET_PATTERNS:
            text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + "***", text)
        return excerpt(DEFAULT_REDACTOR.apply(text)[0], _ERROR_CHARS)

    def _row(
        self,
        key: str,
        request: ChatRequest,
        attempt: int,
        status: str,
        prompt_tokens: int,
        completion_tokens: int,
        latency_ms: float,
        *,
        error: str | None = None,
    ) -> LLMCall:
        """The ``LLMCall`` row of one attempt (or of a cached answer), counted in the process's
        LLM metrics when it records them."""
        cached = status == "cached"
        call = LLMCall(
            call_id=prefixed_id("llm", key, request.span_id, attempt, cached),
            request_hash=key,
            purpose=request.purpose,
            backend=self.name,
            model=self.model,
            span_id=request.span_id,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_ms=round(latency_ms, 3),
            status=status,
            cached=cached,
            attempts=attempt,
            error=error,
            created_at=datetime.now(UTC),
        )
        m = telemetry.metrics()
        if m is not None:
            cost = token_cost(self.prices, self.model, prompt_tokens, completion_tokens)
            m.llm_call(call, cost)
        return call

    # ------------------------------------------------------------------ cache
    def _cached(
        self, key: str, request: ChatRequest, validate: Validator | None
    ) -> ChatResponse | None:
        if self.cache is None:
            return None
        try:
            hit = self.cache.get(key)
        except Exception as e:  # noqa: BLE001 - a broken cache must not stop extraction
            log.warning("LLM response cache read failed, asking the endpoint: %s", e)
            return None
        if hit is None:
            return None
        text = redact_answer(hit.text) or ""
        try:
            data = self._interpret(text, request, validate, None)
        except _AttemptError as e:
            log.info(
                "cached answer for %s no longer validates (%s); asking again", request.purpose, e
            )
            return None
        call = self._row(key, request, 0, "cached", hit.prompt_tokens, hit.completion_tokens, 0.0)
        return ChatResponse(text=text, data=data, call=call, calls=(call,))

    def _store(
        self, key: str, request: ChatRequest, text: str, prompt_tokens: int, completion_tokens: int
    ) -> None:
        if self.cache is None:
            return
        try:
            self.cache.put(
                key,
                CachedAnswer(
                    text=text,
                    prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens,
                    model=self.model,
                    purpose=request.purpose,
                ),
            )
        except Exception as e:  # noqa: BLE001 - the answer is good; only the cache write failed
            log.warning("LLM response cache write failed: %s", e)


def _secrets_of(key: str, base_url: str) -> tuple[str, ...]:
    """Strings that must never leave the client: the key, and credentials inside the URL."""
    found = [key] if key and key != NO_KEY else []
    parts = urlsplit(base_url)
    found += [s for s in (parts.password, parts.username) if s and len(s) >= 4]
    if parts.query:
        found.append(parts.query)
    return tuple(found)


def _usage(completion: Any) -> tuple[int, int]:
    """(prompt_tokens, completion_tokens) of a chat completion; 0 when the server sent no usage."""
    usage = getattr(completion, "usage", None)
    return (
        int(getattr(usage, "prompt_tokens", 0) or 0),
        int(getattr(usage, "completion_tokens", 0) or 0),
    )


def _read_choice(completion: Any) -> tuple[str | None, str | None]:
    """(text, finish_reason) of the first choice; ``_AttemptError`` when there is none."""
    choices = getattr(completion, "choices", None)
    if not choices:
        raise _AttemptError("the response has no choices", retry=True)
    choice = choices[0]
    message = getattr(choice, "message", None)
    text = getattr(message, "content", None)
    refusal = getattr(message, "refusal", None)
    if text is None and refusal:
        raise _AttemptError(
            f"the model refused: {excerpt(str(refusal))}", retry=True, invalid_answer=True
        )
    return text, getattr(choice, "finish_reason", None)


def _error_message(e: Any) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return str(getattr(e, "message", None) or e)


def _retry_after(e: Any) -> float | None:
    response = getattr(e, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value:
            try:
                return max(0.0, float(value) / divisor)
            except ValueError:
                continue
    return None
