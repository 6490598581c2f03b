"""LLM backends behind one interface (see docs/architecture.md).

``make_backend(llm, home)`` gives what ``llm.backend`` (the ``llm`` group of the settings) names:

* ``rules``: ``None``. The offline rules executor (``skillstream.rules``) needs no LLM.
* ``openai``: ``OpenAIBackend`` against ``llm.base_url``, with the response cache in
  ``<home>/llm-cache.sqlite`` when ``llm.cache`` is on.

Example:
    >>> from skillstream.settings import Settings
    >>> from skillstream.llm import ChatRequest, make_backend
    >>> s = Settings.load(llm="openai", llm_base_url="http://127.0.0.1:8080/v1")
    >>> backend = make_backend(s.llm, s.storage.home)
    >>> answer = backend.chat(ChatRequest("extract", (("user", "Say hi as JSON"),),
    ...                                   schema={"type": "object"}))  # doctest: +SKIP
"""

from __future__ import annotations

from typing import get_args

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
from skillstream.settings import Backend, LLMSettings

BACKENDS: tuple[str, ...] = get_args(Backend)

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


def make_backend(llm: LLMSettings, home: str) -> ChatBackend | None:
    """The LLM backend ``llm.backend`` names, or ``None`` for the offline ``rules`` backend.

    Args:
        llm: The ``llm`` settings group.
        home: The home whose ``llm-cache.sqlite`` caches the answers (when ``llm.cache`` is on).

    Raises:
        ConfigError: an unknown backend name, or ``openai`` without a base URL or model.
    """
    if llm.backend == "rules":
        return None
    if llm.backend == "openai":
        backend = OpenAIBackend(llm)  # validates the settings before a cache file is created
        backend.cache = open_cache(llm, home)
        return backend
    raise ConfigError(
        f"SKILLSTREAM_LLM must be one of {BACKENDS}, got {llm.backend!r}: 'rules' runs offline, "
        "'openai' talks to any OpenAI-compatible endpoint (SKILLSTREAM_LLM_BASE_URL)"
    )
