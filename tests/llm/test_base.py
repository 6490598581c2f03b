"""ChatRequest validation, request hashing, make_backend."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from skillstream.errors import ConfigError, InputError
from skillstream.llm import (
    ChatBackend,
    OpenAIBackend,
    base_url_identity,
    make_backend,
    request_hash,
)
from skillstream.llm.base import ChatRequest
from skillstream.llm.cache import SqliteCache
from skillstream.settings import Settings

REQ = ChatRequest(
    purpose="extract",
    messages=(("system", "You extract memories."), ("user", "I moved to Paris in 2021.")),
    schema={"type": "object", "properties": {"ops": {"type": "array"}}},
    temperature=0.0,
    max_tokens=256,
    span_id="spn_1",
)
ENDPOINT = "http://127.0.0.1:8080/v1"


def test_request_is_frozen_and_normalises_messages() -> None:
    req = ChatRequest("answer", [["user", "hi"]])  # type: ignore[arg-type]
    assert req.messages == (("user", "hi"),)
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.purpose = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"purpose": "", "messages": (("user", "x"),)}, "purpose must be a non-empty string"),
        ({"purpose": "p", "messages": ()}, "messages is empty"),
        ({"purpose": "p", "messages": (("robot", "x"),)}, "role in"),
        ({"purpose": "p", "messages": (("user", 3),)}, "content a string"),
        ({"purpose": "p", "messages": (("user", "x"),), "schema": "object"}, "JSON schema object"),
        (
            {"purpose": "p", "messages": (("user", "x"),), "max_tokens": 0},
            "max_tokens must be positive",
        ),
    ],
)
def test_bad_requests_are_input_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        ChatRequest(**kwargs)


def test_request_hash_is_stable_and_sensitive() -> None:
    h = request_hash(REQ, "gpt-4o-mini", ENDPOINT)
    assert len(h) == 64 and int(h, 16) >= 0
    same = ChatRequest(REQ.purpose, tuple(REQ.messages), dict(REQ.schema or {}), 0.0, 256, "spn_1")
    assert request_hash(same, "gpt-4o-mini", ENDPOINT) == h
    # span_id is accounting, not input
    assert request_hash(dataclasses.replace(REQ, span_id="spn_2"), "gpt-4o-mini", ENDPOINT) == h
    changed = [
        request_hash(REQ, "other-model", ENDPOINT),
        request_hash(REQ, "gpt-4o-mini", "http://127.0.0.1:8081/v1"),
        request_hash(
            dataclasses.replace(REQ, messages=(("user", "I moved to Rome."),)),
            "gpt-4o-mini",
            ENDPOINT,
        ),
        request_hash(dataclasses.replace(REQ, schema={"type": "array"}), "gpt-4o-mini", ENDPOINT),
        request_hash(dataclasses.replace(REQ, temperature=0.7), "gpt-4o-mini", ENDPOINT),
        request_hash(dataclasses.replace(REQ, max_tokens=None), "gpt-4o-mini", ENDPOINT),
        request_hash(REQ, "gpt-4o-mini", ENDPOINT, extra={"response_format": "text"}),
    ]
    assert h not in changed and len(set(changed)) == len(changed)


def test_request_hash_key_order_of_schema_does_not_matter() -> None:
    a = dataclasses.replace(REQ, schema={"type": "object", "required": ["a"]})
    b = dataclasses.replace(REQ, schema={"required": ["a"], "type": "object"})
    assert request_hash(a, "m", ENDPOINT) == request_hash(b, "m", ENDPOINT)


def test_base_url_identity_drops_credentials() -> None:
    assert base_url_identity("HTTPS://user:s3cret@API.Example.com:8443/v1/?key=abc#x") == (
        "https://api.example.com:8443/v1"
    )
    assert base_url_identity("http://127.0.0.1:8080/v1/") == "http://127.0.0.1:8080/v1"


def test_make_backend_rules_is_none(tmp_path) -> None:
    assert make_backend(Settings.from_keys(llm="rules").llm, str(tmp_path)) is None


def test_make_backend_openai(tmp_path) -> None:
    settings = Settings.from_keys(
        home=str(tmp_path), llm="openai", llm_base_url=ENDPOINT, llm_model="m"
    )
    backend = make_backend(settings.llm, settings.storage.home)
    assert isinstance(backend, OpenAIBackend)
    assert isinstance(backend, ChatBackend)
    assert isinstance(backend.cache, SqliteCache)
    assert backend.cache.path == tmp_path / "llm-cache.sqlite"
    backend.close()
    no_cache = make_backend(settings.with_keys(llm_cache=False).llm, str(tmp_path))
    assert isinstance(no_cache, OpenAIBackend) and no_cache.cache is None


def test_make_backend_reads_openai_base_url(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("SKILLSTREAM_LLM_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    settings = Settings.load(home=str(tmp_path), llm="openai", llm_cache=False)
    backend = make_backend(settings.llm, str(tmp_path))
    assert isinstance(backend, OpenAIBackend) and backend.endpoint == "http://127.0.0.1:9/v1"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"llm": "anthropic"}, "setting llm: .*'rules', 'openai'"),
        ({"llm_base_url": ""}, "SKILLSTREAM_LLM_BASE_URL"),
        ({"llm_base_url": "127.0.0.1:8080"}, "setting llm_base_url: .*an http:// or https:// URL"),
        ({"llm_model": ""}, "SKILLSTREAM_LLM_MODEL"),
        ({"llm_response_format": "xml"}, "setting llm_response_format: .*'json_object'"),
        ({"llm_concurrency": 0}, "setting llm_concurrency: .*>= 1"),
        ({"llm_max_retries": -1}, "setting llm_max_retries: .*>= 0"),
        ({"llm_timeout_s": 0.0}, "setting llm_timeout_s: .*> 0"),
    ],
)
def test_make_backend_config_errors(tmp_path, overrides: dict, message: str) -> None:
    values: dict[str, Any] = {
        "home": str(tmp_path),
        "llm": "openai",
        "llm_base_url": ENDPOINT,
        "llm_model": "m",
    }
    values.update(overrides)
    with pytest.raises(ConfigError, match=message):
        settings = Settings.from_keys(**values)
        make_backend(settings.llm, settings.storage.home)
    assert not (tmp_path / "llm-cache.sqlite").exists()
