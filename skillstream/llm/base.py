"""The one LLM interface every caller uses (the executor, the distiller, the evaluation's answerer).

A caller builds a ``ChatRequest`` (what to ask, and the JSON schema of the answer it expects), hands
it to a ``ChatBackend`` with an optional ``validate`` function, and gets back a ``ChatResponse``
holding the raw text, the parsed and validated data, and the ``LLMCall`` accounting rows of every
HTTP attempt that was needed (or one ``cached`` row when the response cache answered).

``request_hash`` is the identity of a request: the response cache is keyed by it and every
``LLMCall`` row carries it. It covers what changes the answer (endpoint, model, messages, schema,
sampling) and never a secret.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable
from urllib.parse import urlsplit

from skillstream.errors import InputError
from skillstream.model import LLMCall

T = TypeVar("T")

CHAT_ROLES = ("system", "user", "assistant", "tool")

Validator = Callable[[Any], Any]
"""Turns parsed data into the caller's typed value, or rejects it.

It rejects an answer by raising ``ValueError`` (pydantic's ``ValidationError`` is one),
``TypeError``, ``LookupError`` or a ``TerminalError``; the backend then asks again, a bounded
number of times. Any other exception is a bug and propagates.
"""


@dataclass(frozen=True)
class ChatRequest:
    """One chat request.

    Attributes:
        purpose: What the call is for (``extract``, ``distill``, ``answer``...); recorded on every
            ``LLMCall`` row and used as the name of the JSON schema.
        messages: ``(role, content)`` pairs, roles among ``system``, ``user``, ``assistant``,
            ``tool``.
        schema: JSON schema of the expected answer, or ``None`` for a free-text answer.
        temperature: Sampling temperature; ``None`` takes the backend's setting.
        max_tokens: Completion token limit; ``None`` leaves it to the server.
        span_id: The span the call is made for, copied onto the ``LLMCall`` rows (not hashed).
    """

    purpose: str
    messages: tuple[tuple[str, str], ...]
    schema: Mapping[str, Any] | None = field(default=None, hash=False)
    temperature: float | None = None
    max_tokens: int | None = None
    span_id: str | None = None

    def __post_init__(self) -> None:
        if not self.purpose or not isinstance(self.purpose, str):
            raise InputError(
                f"ChatRequest.purpose must be a non-empty string, got {self.purpose!r}"
            )
        msgs = tuple(tuple(m) for m in self.messages)
        if not msgs:
            raise InputError(
                "ChatRequest.messages is empty; give at least one (role, content) pair"
            )
        for m in msgs:
            if len(m) != 2 or m[0] not in CHAT_ROLES or not isinstance(m[1], str):
                raise InputError(
                    f"ChatRequest.messages: expected (role, content) with role in {CHAT_ROLES} and "
                    f"content a string, got {m!r:.120}"
                )
        object.__setattr__(self, "messages", msgs)
        if self.schema is not None and not isinstance(self.schema, Mapping):
            raise InputError(
                f"ChatRequest.schema must be a JSON schema object, got {type(self.schema)}"
            )
        if self.max_tokens is not None and self.max_tokens <= 0:
            raise InputError(f"ChatRequest.max_tokens must be positive, got {self.max_tokens}")


@dataclass(frozen=True)
class ChatResponse:
    """The answer to a ``ChatRequest``.

    Attributes:
        text: The completion text as the model wrote it (or as the cache stored it).
        data: The parsed JSON (when the request had a schema) after ``validate``; the text itself
            (after ``validate``) otherwise.
        call: The ``LLMCall`` row of the attempt that produced the answer.
        calls: Every ``LLMCall`` row of this request, failed attempts first; ``call`` is the last.
    """

    text: str
    data: Any
    call: LLMCall
    calls: tuple[LLMCall, ...] = ()

    @property
    def cached(self) -> bool:
        return self.call.cached


@runtime_checkable
class ChatBackend(Protocol):
    """What the executor, the distiller and the answerer talk to."""

    name: str
    """Backend name, written to ``LLMCall.backend`` (``openai``...)."""
    model: str

    def chat(self, request: ChatRequest, validate: Validator | None = None) -> ChatResponse:
        """Answer ``request``; raise ``LLMFailure`` (terminal) when no valid answer came."""
        ...


def base_url_identity(url: str) -> str:
    """The part of an endpoint URL that identifies the server: scheme, host, port and path.

    User info (``user:password@``), query and fragment are dropped, so a token passed in the URL
    never reaches a hash or a table.
    """
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower()
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme.lower()}://{host}{port}{parts.path.rstrip('/')}"


def request_hash(
    request: ChatRequest,
    model: str,
    base_url_identity: str,
    *,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """A stable sha256 hex digest of everything that determines the answer to ``request``.

    Args:
        request: The request; ``purpose``, ``messages``, ``schema``, ``temperature`` and
            ``max_tokens`` are hashed, ``span_id`` is not (it is accounting, not input).
        model: The model name sent to the endpoint.
        base_url_identity: The endpoint, as returned by ``base_url_identity`` (no credentials).
        extra: Other inputs that change the answer (for example the structured-output mode).

    Returns:
        64 hex characters. Equal requests give equal hashes across processes and runs.
    """
    doc = {
        "v": 1,
        "endpoint": base_url_identity,
        "model": model,
        "purpose": request.purpose,
        "messages": [list(m) for m in request.messages],
        "schema": request.schema,
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "extra": dict(extra or {}),
    }
    text = json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
