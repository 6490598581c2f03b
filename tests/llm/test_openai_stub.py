"""The test server itself: routes, shapes, scripting, counters."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import openai
import pytest

from tests.servers.openai_stub import (
    STUB_MODEL,
    Answer,
    OpenAIStub,
    Reply,
    garbage_body,
    rate_limited,
)


def _client(stub: OpenAIStub) -> openai.OpenAI:
    return openai.OpenAI(base_url=stub.url, api_key="not-needed", max_retries=0, timeout=5)


def test_models_and_completion_shapes() -> None:
    with OpenAIStub(["hello there"]) as stub:
        client = _client(stub)
        assert [m.id for m in client.models.list()] == [STUB_MODEL]
        done = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "one two"}]
        )
        assert done.choices[0].message.content == "hello there"
        assert done.choices[0].finish_reason == "stop"
        usage = done.usage
        assert usage is not None
        assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (2, 2, 4)
        assert stub.count == 1 and stub.requests[0]["messages"] == [
            {"role": "user", "content": "one two"}
        ]


def test_function_script_and_faults() -> None:
    def script(body: dict[str, Any]) -> Answer:
        text = body["messages"][-1]["content"]
        if text == "busy":
            return rate_limited(retry_after=1)
        if text == "garbage":
            return garbage_body("oops")
        return Reply(text.upper(), prompt_tokens=7, completion_tokens=1, finish_reason="length")

    with OpenAIStub(script) as stub:
        client = _client(stub)
        done = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "abc"}]
        )
        assert (done.choices[0].message.content, done.choices[0].finish_reason) == ("ABC", "length")
        assert done.usage is not None and done.usage.prompt_tokens == 7
        with pytest.raises(openai.RateLimitError) as info:
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "busy"}]
            )
        assert info.value.response.headers["retry-after"] == "1"
        request = urllib.request.Request(
            stub.url + "/chat/completions",
            data=json.dumps({"messages": [{"role": "user", "content": "garbage"}]}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request) as r:
            assert r.status == 200 and r.read() == b"oops"


def test_empty_queue_is_a_loud_500() -> None:
    with (
        OpenAIStub() as stub,
        pytest.raises(openai.InternalServerError, match="no scripted answer left"),
    ):
        _client(stub).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}]
        )


def test_unknown_route_is_404() -> None:
    with OpenAIStub() as stub, pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(stub.url + "/embeddings")
    assert info.value.code == 404
