"""The OpenAI backend against the real llama.cpp server (SmolLM2-135M): plumbing, not quality."""

from __future__ import annotations

import pytest

from skillstream.llm import ChatRequest, MemoryCache, OpenAIBackend
from skillstream.settings import Settings
from tests.servers.llama import MODEL_ALIAS

pytestmark = [pytest.mark.llama, pytest.mark.slow]

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "year": {"type": "integer"}},
    "required": ["city", "year"],
}


def test_json_object_with_schema_gives_valid_json(llama_base_url: str, tmp_path) -> None:
    settings = Settings.from_keys(
        home=str(tmp_path),
        llm="openai",
        llm_base_url=llama_base_url,
        llm_model=MODEL_ALIAS,
        llm_response_format="json_object",
        llm_timeout_s=120,
        llm_max_retries=2,
    )
    cache = MemoryCache()
    backend = OpenAIBackend(settings.llm, cache=cache)
    request = ChatRequest(
        purpose="extract",
        messages=(
            ("system", "You extract facts from a conversation."),
            ("user", "Alice: I moved to Paris in 2021. Give the city and the year."),
        ),
        schema=SCHEMA,
        max_tokens=64,
        span_id="spn_llama",
    )
    res = backend.chat(request)
    assert isinstance(res.data, dict) and set(res.data) >= {"city", "year"}
    assert isinstance(res.data["city"], str) and isinstance(res.data["year"], int)
    call = res.call
    assert call.status == "ok" and call.prompt_tokens > 0 and call.completion_tokens > 0
    assert call.latency_ms > 0 and call.model == MODEL_ALIAS
    again = backend.chat(request)
    assert again.cached and again.data == res.data
    backend.close()
