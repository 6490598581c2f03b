"""LLM backends behind one interface (see docs/architecture.md).

``make_backend(settings)`` gives what ``settings.llm`` names:

* ``rules``: ``None``. The offline rules executor (``skillstream.rules``) needs no LLM.
* ``openai``: ``OpenAIBackend`` against ``settings.llm_base_url``, with the response cache in
  ``<home>/llm-cache.sqlite`` when ``settings.llm_cache`` is on.

Example:
    >>> from skillstream.config import Settings
    >>> from skillstream.llm import ChatRequest, make_backend
    >>> backend = make_backend(Settings.load(llm="openai", llm_base_url="http://127.0.0.1:8080/v1"))
    >>> answer = backend.chat(ChatRequest("extract", (("user", "Say hi as JSON"),),
    ...                                   schema={"type": "object"}))  # doctest: +SKIP
"""

from __future__ import annotations

from skillstream.config import Settings
from skillstream.errors import ConfigError
from skillstream.llm.base import (
    ChatBackend,
    ChatRequest,
    ChatResponse,
    Validator,
    base_url_identity,
    request_hash,
)
from skillstream.llm.cache import CachedAnswer, MemoryCache, SqliteCache, cache_path, open_cache
from skillstream.llm.openai_backend import LLMFailure, OpenAIBackend
from skillstream.llm.parse import ParseError, check_schema, extract_json

BACKENDS = ("rules", "openai")

__all__ = [
    "BACKENDS",
    "CachedAnswer",
    "ChatBackend",
    "ChatRequest",
    "ChatResponse",
    "LLMFailure",
    "MemoryCache",
    "OpenAIBackend",
    "ParseError",
    "SqliteCache",
    "Validator",
    "base_url_identity",
    "cache_path",
    "check_schema",
    "extract_json",
    "make_backend",
    "open_cache",
    "request_hash",
]


def make_backend(settings: Settings) -> ChatBackend | None:
    """The LLM backend ``settings.llm`` names, or ``None`` for the offline ``rules`` backend.

    Raises:
        ConfigError: an unknown backend name, or ``openai`` without a base URL or model.
    """
    name = (settings.llm or "").strip().lower()
    if name == "rules":
        return None
    if name == "openai":
        backend = OpenAIBackend(settings)  # validates the settings before a cache file is created
        backend.cache = open_cache(settings)
        return backend
    raise ConfigError(
        f"SKILLSTREAM_LLM must be one of {BACKENDS}, got {settings.llm!r}: 'rules' runs offline, "
        "'openai' talks to any OpenAI-compatible endpoint (SKILLSTREAM_LLM_BASE_URL)"
    )
