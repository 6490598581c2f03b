"""Fixtures of the LLM tests: the scripted OpenAI-protocol stub, backend factories, llama.cpp."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from skillstream.llm import OpenAIBackend
from skillstream.settings import Settings
from tests.servers.openai_stub import STUB_MODEL, OpenAIStub

LLM_ENV = ("SKILLSTREAM_LLM_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL")


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys and endpoints of the developer's shell must not leak into the tests."""
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def openai_stub() -> Iterator[OpenAIStub]:
    """A started ``OpenAIStub`` with an empty script; ``push`` answers onto it."""
    with OpenAIStub() as stub:
        yield stub


@pytest.fixture
def llm_settings(openai_stub: OpenAIStub, tmp_path: Any) -> Callable[..., Settings]:
    """``llm_settings(**overrides)``: settings pointing at the stub, home in ``tmp_path``."""

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "home": str(tmp_path),
            "llm": "openai",
            "llm_base_url": openai_stub.url,
            "llm_model": STUB_MODEL,
            "llm_timeout_s": 5.0,
            "llm_max_retries": 3,
            "llm_response_format": "json_schema",
        }
        values.update(overrides)
        return Settings.from_keys(**values)

    return make


@pytest.fixture
def make_llm(llm_settings: Callable[..., Settings]) -> Iterator[Callable[..., OpenAIBackend]]:
    """``make_llm(cache=None, **settings_overrides)``: an ``OpenAIBackend`` on the stub with
    millisecond backoff; closed after the test."""
    made: list[OpenAIBackend] = []

    def make(cache: Any = None, **overrides: Any) -> OpenAIBackend:
        backend = OpenAIBackend(
            llm_settings(**overrides).llm, cache=cache, backoff_base_s=0.005, backoff_max_s=0.05
        )
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()
