"""The memory flow against the real llama.cpp server (SmolLM2-135M) via the real ``openai`` client.

Plumbing, not quality: a 135M model writes poor memories, but the whole path runs for real: the
controller, the prompt, structured output (``json_object`` with the schema, which llama.cpp turns
into a grammar), parsing, validation, application, both stores, the ledger and ``llm_calls``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from bytewax.testing import run_main

from skillstream.connectors.files import FileSource
from skillstream.settings import Settings
from skillstream.storage.catalog import Catalog
from tests.factories import flow_of
from tests.memskill.conftest import _no_llm_env  # noqa: F401 - fixture
from tests.servers.llama import MODEL_ALIAS

pytestmark = [pytest.mark.llama, pytest.mark.slow]

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
TURNS = [
    ("user", "Sam", "I moved to Lisbon last month and I work as a nurse now."),
    ("assistant", "Assistant", "Congratulations! How do you like Lisbon?"),
    ("user", "Sam", "I love it. My sister Ana visits me next week."),
]


def test_flow_extracts_and_stores_memories_through_llama_cpp(tmp_path, llama_base_url):
    src = tmp_path / "c.jsonl"
    src.write_text(
        "".join(
            json.dumps(
                {
                    "conversation_id": "c1",
                    "user_id": "sam",
                    "session_id": "s1",
                    "message_id": f"m{i}",
                    "role": role,
                    "name": name,
                    "content": text,
                    "timestamp": (T0 + timedelta(minutes=i)).isoformat(),
                }
            )
            + "\n"
            for i, (role, name, text) in enumerate(TURNS)
        )
    )
    settings = Settings.load(
        home=str(tmp_path / "home"),
        llm="openai",
        llm_base_url=llama_base_url,
        llm_model=MODEL_ALIAS,
        llm_response_format="json_object",
        llm_timeout_s=300,
        llm_max_retries=2,
        extract_max_tokens=200,
        epoch_interval_s=0.0,
        distill=False,
    )
    run_main(flow_of(settings, FileSource(str(src))))

    cat = Catalog(settings.storage.catalog, read_only=True)
    try:
        cat.attach_lance(settings.storage.lancedb, settings.storage.storage_options)
        (span,) = cat.sql(
            "select span_id, status, extractor, memory_skills, n_ops from spans"
        ).to_pylist()
        calls = cat.sql(
            "select status, model, prompt_tokens, completion_tokens, purpose from llm_calls"
        ).to_pylist()
        memories = cat.sql(
            "select text, span_id, source_message_ids, owner_id from memories"
        ).to_pylist()
    finally:
        cat.close()
    assert (span["status"], span["extractor"]) == ("done", "memskill")
    assert span["memory_skills"] == ["insert", "update", "delete", "skip"]  # none withheld
    assert calls[-1]["status"] == "ok" and calls[-1]["model"] == MODEL_ALIAS
    assert calls[-1]["purpose"] == "extract"
    assert calls[-1]["prompt_tokens"] > 300 and calls[-1]["completion_tokens"] > 0
    assert len(memories) >= 1 and span["n_ops"] >= len(memories)
    for m in memories:
        assert m["span_id"] == span["span_id"] and m["owner_id"] == "sam"
        assert m["source_message_ids"] == ["m0", "m1", "m2"] and m["text"].strip()
