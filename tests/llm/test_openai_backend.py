"""OpenAIBackend against a real HTTP server speaking the OpenAI protocol (tests/servers)."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pydantic
import pytest

from skillstream.errors import TerminalError
from skillstream.llm import ChatRequest, LLMFailure, MemoryCache, OpenAIBackend, SqliteCache
from skillstream.llm.openai_backend import schema_instruction
from tests.servers.openai_stub import (
    STUB_MODEL,
    OpenAIStub,
    Reply,
    delay,
    garbage_body,
    http_error,
    rate_limited,
    server_error,
)

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "year": {"type": "integer"}},
    "required": ["city", "year"],
}
ANSWER = '{"city": "Paris", "year": 2021}'
SYSTEM = "You read conversations and answer with facts."
USER = "Alice: I moved to Paris in 2021."


def ask(span_id: str | None = "spn_1", **kw: Any) -> ChatRequest:
    values: dict[str, Any] = {
        "purpose": "extract",
        "messages": (("system", SYSTEM), ("user", USER)),
        "schema": SCHEMA,
        "span_id": span_id,
    }
    values.update(kw)
    return ChatRequest(**values)


class Place(pydantic.BaseModel):
    city: str
    year: int


class Recorder:
    """A ``sleep`` that records the delays and does not wait."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


# --------------------------------------------------------------------------- structured output


def test_json_schema_mode(openai_stub: OpenAIStub, make_llm) -> None:
    openai_stub.push(Reply(ANSWER, prompt_tokens=40, completion_tokens=9))
    res = make_llm(llm_response_format="json_schema").chat(ask(max_tokens=64))
    assert res.data == {"city": "Paris", "year": 2021} and res.text == ANSWER
    body = openai_stub.requests[0]
    assert body["model"] == STUB_MODEL
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "extract", "schema": SCHEMA, "strict": False},
    }
    assert body["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": USER},
    ]
    assert body["temperature"] == 0.0 and body["max_tokens"] == 64
    call = res.call
    assert (call.status, call.cached, call.attempts, call.error) == ("ok", False, 1, None)
    assert (call.prompt_tokens, call.completion_tokens) == (40, 9)
    assert (call.purpose, call.span_id, call.backend, call.model) == (
        "extract",
        "spn_1",
        "openai",
        STUB_MODEL,
    )
    assert res.calls == (call,)


def test_json_object_mode_sends_the_schema_inside(openai_stub: OpenAIStub, make_llm) -> None:
    openai_stub.push(ANSWER)
    res = make_llm(llm_response_format="json_object").chat(ask())
    assert res.data == {"city": "Paris", "year": 2021}
    body = openai_stub.requests[0]
    assert body["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert body["messages"][0] == {
        "role": "system",
        "content": SYSTEM + "\n\n" + schema_instruction(SCHEMA),
    }
    assert body["messages"][1] == {"role": "user", "content": USER}


def test_text_mode_describes_the_schema_in_the_prompt(openai_stub: OpenAIStub, make_llm) -> None:
    openai_stub.push('Sure! ```json\n{"city": "Paris", "year": 2021,}\n```')
    res = make_llm(llm_response_format="text").chat(ask(messages=(("user", USER),)))
    assert res.data == {"city": "Paris", "year": 2021}
    body = openai_stub.requests[0]
    assert "response_format" not in body
    assert body["messages"] == [
        {"role": "system", "content": schema_instruction(SCHEMA)},
        {"role": "user", "content": USER},
    ]


def test_no_schema_is_a_plain_text_answer(openai_stub: OpenAIStub, make_llm) -> None:
    openai_stub.push("Paris, 2021.")
    res = make_llm(llm_response_format="json_object", llm_temperature=0.3).chat(ask(schema=None))
    assert res.data == res.text == "Paris, 2021."
    body = openai_stub.requests[0]
    assert "response_format" not in body and "max_tokens" not in body
    assert body["temperature"] == 0.3
    assert body["messages"][0] == {"role": "system", "content": SYSTEM}


def test_validate_returns_the_typed_value(openai_stub: OpenAIStub, make_llm) -> None:
    openai_stub.push(ANSWER)
    res = make_llm().chat(ask(), validate=Place.model_validate)
    assert res.data == Place(city="Paris", year=2021)


# --------------------------------------------------------------------------- retries


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        (rate_limited(), "HTTP 429: Rate limit reached"),
        (server_error(500), "HTTP 500: The server had an error"),
        (server_error(503), "HTTP 503"),
        (garbage_body(), "the response body is not JSON"),
    ],
)
def test_transient_http_failure_is_retried(
    openai_stub: OpenAIStub, llm_settings, fault, error
) -> None:
    sleep = Recorder()
    backend = OpenAIBackend(llm_settings().llm, backoff_base_s=0.2, sleep=sleep)
    openai_stub.push(fault, ANSWER)
    res = backend.chat(ask())
    assert res.data == {"city": "Paris", "year": 2021}
    assert openai_stub.count == 2
    first, second = res.calls
    assert (first.status, first.attempts, second.status, second.attempts) == ("error", 1, "ok", 2)
    assert error in (first.error or "")
    assert res.call is second
    assert len(sleep.delays) == 1 and 0.1 <= sleep.delays[0] <= 0.2
    assert first.call_id != second.call_id and first.request_hash == second.request_hash


def test_timeout_is_retried(openai_stub: OpenAIStub, make_llm) -> None:
    openai_stub.push(delay(3.0, ANSWER), ANSWER)
    res = make_llm(llm_timeout_s=0.3).chat(ask())
    assert res.data["city"] == "Paris"
    assert openai_stub.count == 2
    first = res.calls[0]
    assert (first.status, first.error) == ("error", "timed out after 0.3 s")
    assert 250 <= first.latency_ms < 3000


def test_connection_refused_is_retried_then_fails(llm_settings, tmp_path: Path) -> None:
    with OpenAIStub() as stub:
        url = stub.url  # a port that nobody listens on once the stub is closed
    sleep = Recorder()
    backend = OpenAIBackend(llm_settings(llm_base_url=url, llm_max_retries=2).llm, sleep=sleep)
    with pytest.raises(LLMFailure) as info:
        backend.chat(ask())
    failure = info.value
    assert failure.attempts == 3 and failure.transient
    assert "cannot connect to http://127.0.0.1:" in failure.last_error
    assert len(sleep.delays) == 2


def test_backoff_grows_and_honours_retry_after(openai_stub: OpenAIStub, llm_settings) -> None:
    sleep = Recorder()
    backend = OpenAIBackend(llm_settings().llm, backoff_base_s=0.1, backoff_max_s=0.3, sleep=sleep)
    openai_stub.push(server_error(), server_error(), rate_limited(retry_after=2.5), ANSWER)
    backend.chat(ask())
    d1, d2, d3 = sleep.delays
    assert 0.05 <= d1 <= 0.1 and 0.1 <= d2 <= 0.2
    assert d3 == 2.5  # Retry-After wins over the (capped) backoff


def test_unparsable_answer_is_asked_again(openai_stub: OpenAIStub, llm_settings) -> None:
    sleep = Recorder()
    backend = OpenAIBackend(llm_settings().llm, sleep=sleep)
    openai_stub.push(Reply("I think Alice lives in Paris.", completion_tokens=6), ANSWER)
    res = backend.chat(ask())
    assert res.data == {"city": "Paris", "year": 2021}
    first = res.calls[0]
    assert first.status == "error" and "no JSON object or array found" in (first.error or "")
    assert first.completion_tokens == 6  # a bad answer is billed too
    assert sleep.delays == []  # the endpoint is fine: no backoff
    second = openai_stub.requests[1]["messages"]
    assert second[:2] == openai_stub.requests[0]["messages"]
    assert second[2] == {"role": "assistant", "content": "I think Alice lives in Paris."}
    assert second[3]["role"] == "user" and "could not be used" in second[3]["content"]


def test_schema_mismatch_is_asked_again(openai_stub: OpenAIStub, make_llm) -> None:
    openai_stub.push('{"city": "Paris"}', ANSWER)
    res = make_llm().chat(ask())
    assert res.calls[0].status == "error"
    assert "missing the required key 'year'" in (res.calls[0].error or "")
    assert res.call.attempts == 2


def test_validation_rejection_is_asked_again(openai_stub: OpenAIStub, make_llm) -> None:
    openai_stub.push('{"city": "Paris", "year": "last year"}', ANSWER)
    res = make_llm().chat(ask(schema={"type": "object"}), validate=Place.model_validate)
    assert res.data == Place(city="Paris", year=2021)
    assert "rejected by validation: ValidationError" in (res.calls[0].error or "")


def test_length_cut_answer_says_so(openai_stub: OpenAIStub, make_llm) -> None:
    openai_stub.push(Reply('{"city": "Pa', finish_reason="length"), ANSWER)
    res = make_llm().chat(ask())
    assert "cut off" in (res.calls[0].error or "") and "finish_reason=length" in (
        res.calls[0].error or ""
    )


def test_a_bug_in_validate_is_not_swallowed(openai_stub: OpenAIStub, make_llm) -> None:
    openai_stub.push(ANSWER)

    def broken(data: Any) -> Any:
        return 1 / 0

    with pytest.raises(ZeroDivisionError):
        make_llm().chat(ask(), validate=broken)


def test_exhaustion_raises_llm_failure_with_every_call(openai_stub: OpenAIStub, make_llm) -> None:
    openai_stub.push(
        server_error(), "not json at all", Reply("{}", prompt_tokens=3), rate_limited()
    )
    with pytest.raises(LLMFailure) as info:
        make_llm(llm_max_retries=3).chat(ask())
    failure = info.value
    assert isinstance(failure, TerminalError)
    assert (failure.purpose, failure.span_id, failure.attempts) == ("extract", "spn_1", 4)
    assert failure.transient and failure.last_error.startswith("HTTP 429")
    assert [c.attempts for c in failure.calls] == [1, 2, 3, 4]
    assert all(c.status == "error" and not c.cached and c.span_id == "spn_1" for c in failure.calls)
    assert len({c.request_hash for c in failure.calls}) == 1
    assert len({c.call_id for c in failure.calls}) == 4
    assert failure.calls[2].prompt_tokens == 3
    assert openai_stub.count == 4  # the openai client's own retries are off
    assert "failed after 4 attempt(s)" in str(failure) and "span spn_1" in str(failure)


def test_invalid_answers_exhaust_as_non_transient(openai_stub: OpenAIStub, make_llm) -> None:
    openai_stub.default = "no idea"
    with pytest.raises(LLMFailure) as info:
        make_llm(llm_max_retries=1).chat(ask())
    assert info.value.attempts == 2 and not info.value.transient
    assert "no JSON object or array found" in info.value.last_error
    assert "check the model, the prompt" in str(info.value)


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_client_errors_are_not_retried(openai_stub: OpenAIStub, make_llm, status: int) -> None:
    openai_stub.push(http_error(status, "model 'x' not found"), ANSWER)
    with pytest.raises(LLMFailure) as info:
        make_llm().chat(ask())
    assert info.value.attempts == 1 and openai_stub.count == 1 and not info.value.transient
    assert info.value.last_error == f"HTTP {status}: model 'x' not found"


def test_zero_retries_means_one_attempt(openai_stub: OpenAIStub, make_llm) -> None:
    openai_stub.push(server_error(), ANSWER)
    with pytest.raises(LLMFailure):
        make_llm(llm_max_retries=0).chat(ask())
    assert openai_stub.count == 1


# --------------------------------------------------------------------------- cache


def test_cache_hit_makes_no_request(openai_stub: OpenAIStub, make_llm) -> None:
    cache = MemoryCache()
    backend = make_llm(cache=cache)
    openai_stub.push(Reply(ANSWER, prompt_tokens=40, completion_tokens=9))
    first = backend.chat(ask())
    hit = backend.chat(ask(span_id="spn_2"), validate=Place.model_validate)
    assert openai_stub.count == 1
    assert hit.text == ANSWER and hit.data == Place(city="Paris", year=2021) and hit.cached
    c = hit.call
    assert (c.status, c.cached, c.latency_ms, c.attempts, c.span_id) == (
        "cached",
        True,
        0.0,
        0,
        "spn_2",
    )
    assert (c.prompt_tokens, c.completion_tokens) == (40, 9)
    assert c.request_hash == first.call.request_hash and c.call_id != first.call.call_id
    assert hit.calls == (c,)


def test_cache_is_shared_through_the_sqlite_file(
    openai_stub: OpenAIStub, make_llm, tmp_path: Path
) -> None:
    path = tmp_path / "llm-cache.sqlite"
    openai_stub.push(ANSWER)
    one = make_llm(cache=SqliteCache(path))
    one.chat(ask())
    one.close()
    two = make_llm(cache=SqliteCache(path))
    res = two.chat(ask())
    assert res.cached and res.data == {"city": "Paris", "year": 2021}
    assert openai_stub.count == 1
    two.close()


def test_cache_key_depends_on_the_request(openai_stub: OpenAIStub, make_llm) -> None:
    cache = MemoryCache()
    openai_stub.default = ANSWER
    make_llm(cache=cache).chat(ask())
    make_llm(cache=cache).chat(ask(messages=(("user", "Bob moved to Rome."),)))
    make_llm(cache=cache, llm_response_format="json_object").chat(ask())
    make_llm(cache=cache, llm_model="other").chat(ask())
    assert openai_stub.count == 4 and len(cache) == 4


def test_failures_are_not_cached(openai_stub: OpenAIStub, make_llm) -> None:
    cache = MemoryCache()
    openai_stub.push("bad", "bad")
    with pytest.raises(LLMFailure):
        make_llm(cache=cache, llm_max_retries=1).chat(ask())
    assert len(cache) == 0
    openai_stub.push(ANSWER)
    assert not make_llm(cache=cache).chat(ask()).cached
    assert openai_stub.count == 3


def test_cached_answer_that_no_longer_validates_is_asked_again(
    openai_stub: OpenAIStub, make_llm
) -> None:
    cache = MemoryCache()
    openai_stub.push('{"city": "Paris", "year": "2021?"}', ANSWER)
    backend = make_llm(cache=cache)
    backend.chat(ask(schema={"type": "object"}))
    res = backend.chat(ask(schema={"type": "object"}), validate=Place.model_validate)
    assert not res.cached and res.data == Place(city="Paris", year=2021)
    assert openai_stub.count == 2


# --------------------------------------------------------------------------- concurrency


def _burst(backend: OpenAIBackend, n: int) -> list[Any]:
    barrier = threading.Barrier(n)

    def one(i: int) -> Any:
        barrier.wait()
        return backend.chat(ask(schema=None, messages=(("user", f"question {i}"),)))

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


@pytest.mark.parametrize("limit", [1, 3, 8])
def test_concurrency_limit(openai_stub: OpenAIStub, make_llm, limit: int) -> None:
    openai_stub.default = "ok"
    backend = make_llm(llm_concurrency=limit)
    backend.chat(ask(schema=None, messages=(("user", "warm up"),)))
    openai_stub.reset()
    openai_stub.latency_s = 0.2
    openai_stub.gather = limit  # the limit is reached however late a request starts; never passed
    results = _burst(backend, 8)
    assert [r.data for r in results] == ["ok"] * 8
    assert openai_stub.count == 8
    assert openai_stub.max_in_flight == limit


def test_limit_is_shared_by_backends_of_one_endpoint(openai_stub: OpenAIStub, make_llm) -> None:
    openai_stub.default = "ok"
    openai_stub.latency_s = 0.2
    a, b = make_llm(llm_concurrency=2), make_llm(llm_concurrency=2)
    barrier = threading.Barrier(6)

    def one(i: int) -> Any:
        barrier.wait()
        return (a if i % 2 else b).chat(ask(schema=None, messages=(("user", f"q{i}"),)))

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(one, range(6)))
    assert openai_stub.max_in_flight == 2


# --------------------------------------------------------------------------- secrets

SECRET = "sk-test-TOPSECRET-0123456789abcdef"


@pytest.mark.parametrize("env", ["SKILLSTREAM_LLM_API_KEY", "OPENAI_API_KEY"])
def test_api_key_never_stored(
    openai_stub: OpenAIStub, make_llm, tmp_path: Path, monkeypatch, env: str
) -> None:
    monkeypatch.setenv(env, SECRET)
    path = tmp_path / "llm-cache.sqlite"
    backend = make_llm(cache=SqliteCache(path), llm_max_retries=1)
    openai_stub.push(http_error(500, "boom", echo_auth=True), ANSWER)
    ok = backend.chat(ask())
    openai_stub.push(http_error(401, "", echo_auth=True))
    with pytest.raises(LLMFailure) as info:
        backend.chat(ask(messages=(("user", "another question"),)))
    assert openai_stub.headers[0]["authorization"] == f"Bearer {SECRET}"  # the key was used...
    rows = [*ok.calls, *info.value.calls]
    assert "Incorrect API key provided: Bearer ***" in (rows[0].error or "")
    texts = [repr(r) for r in rows] + [str(info.value), info.value.last_error, repr(backend)]
    assert not [t for t in texts if "TOPSECRET" in t]  # ...and appears nowhere we keep
    backend.close()
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("llm-cache"))
    assert b"TOPSECRET" not in stored
    assert ANSWER.encode() in stored  # the answer is there; the prompt is not
    assert USER.encode() not in stored


def test_no_key_sends_a_dummy(openai_stub: OpenAIStub, make_llm) -> None:
    openai_stub.push("ok")
    make_llm().chat(ask(schema=None))
    assert openai_stub.headers[0]["authorization"] == "Bearer not-needed"


def test_credentials_in_the_base_url_are_redacted(openai_stub: OpenAIStub, make_llm) -> None:
    url = openai_stub.url.replace("http://", "http://user:hunter2pass@")
    openai_stub.push(http_error(403, "forbidden for http://user:hunter2pass@host"))
    backend = make_llm(llm_base_url=url)
    with pytest.raises(LLMFailure) as info:
        backend.chat(ask())
    assert "hunter2pass" not in str(info.value) and "hunter2pass" not in repr(info.value.calls)
    assert "hunter2pass" not in backend.request_key(ask()) and "hunter2pass" not in repr(backend)


def test_request_hash_on_rows_matches_request_key(openai_stub: OpenAIStub, make_llm) -> None:
    openai_stub.push(ANSWER)
    backend = make_llm()
    assert backend.chat(ask()).call.request_hash == backend.request_key(ask())
    assert json.dumps(openai_stub.requests[0]).count(SECRET) == 0


def test_an_empty_completion_is_asked_again(openai_stub: OpenAIStub, make_llm) -> None:
    openai_stub.push(Reply(None, prompt_tokens=5, completion_tokens=0), ANSWER)
    res = make_llm().chat(ask())
    first = res.calls[0]
    assert first.status == "error" and "empty answer" in (first.error or "")
    assert first.prompt_tokens == 5 and res.call.status == "ok"
