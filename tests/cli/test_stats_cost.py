"""``skillstream stats --cost``: LLM calls, billed tokens and their cost per purpose, in all and per
1,000 turns, from a catalog's ``llm_calls`` and ``spans`` rows and the configured prices."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from skillstream.settings import Settings
from skillstream.storage.catalog import open_catalog
from tests.cli.conftest import invoke

pytestmark = pytest.mark.usefixtures("clean_env")

NOW = datetime(2024, 3, 1, tzinfo=UTC)

CALLS = [
    # purpose, model, prompt, completion, status, cached
    ("extract", "m-big", 1000, 200, "ok", False),
    ("extract", "m-big", 800, 0, "error", False),  # a failed attempt: billed, counted
    ("extract", "m-big", 1000, 200, "cached", True),  # answered by the cache: not billed
    ("extract", "m-small", 500, 100, "ok", False),
    ("distill", "m-small", 3000, 600, "ok", False),
    ("answer", "m-free", 40, 10, "ok", False),  # no price configured
]
SPANS = [["a", "b", "c"], ["d", "e"], ["f", "g", "h"]]  # eight turns
PRICES = {"m-big": {"input": 2.5, "output": 10.0}, "m-small": {"input": 0.15, "output": 0.6}}


def build_home(tmp_path) -> Settings:
    settings = Settings.from_keys(home=str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    with open_catalog(settings.storage) as cat:
        for i, (purpose, model, p, c, status, cached) in enumerate(CALLS):
            cat.con.execute(
                "INSERT INTO llm_calls (call_id, request_hash, purpose, backend, model, "
                "prompt_tokens, completion_tokens, latency_ms, status, cached, attempts, "
                "created_at) VALUES (?, ?, ?, 'openai', ?, ?, ?, 1.0, ?, ?, 1, ?)",
                [f"c{i}", f"h{i}", purpose, model, p, c, status, cached, NOW],
            )
        for i, ids in enumerate(SPANS):
            cat.con.execute(
                "INSERT INTO spans (span_id, owner_id, conversation_id, seq, message_ids, "
                "n_tokens, status, extractor, processed_at) "
                "VALUES (?, 'o', 'c', ?, ?, 10, 'done', 'memskill', ?)",
                [f"s{i}", i, ids, NOW],
            )
    return settings


def test_cost_per_purpose_and_per_thousand_turns_from_the_rows(tmp_path, monkeypatch):
    settings = build_home(tmp_path)
    monkeypatch.setenv("SKILLSTREAM_LLM_PRICES", json.dumps(PRICES))
    report = json.loads(invoke(settings.storage.home, "stats", "--cost", "--json"))
    assert report["turns"] == 8
    assert report["unpriced_models"] == ["m-free"]
    by = {p["purpose"]: p for p in report["purposes"]}
    extract = by["extract"]
    # billed: m-big 1000+800 prompt, 200 completion; m-small 500 prompt, 100 completion
    assert (extract["calls"], extract["cached"]) == (3, 1)
    assert (extract["prompt_tokens"], extract["completion_tokens"]) == (2300, 300)
    big = (1800 * 2.5 + 200 * 10.0) / 1e6  # 0.0065
    small = (500 * 0.15 + 100 * 0.6) / 1e6  # 0.000135
    assert extract["cost"] == pytest.approx(big + small)
    assert extract["per_1000_turns"] == {
        "calls": 375.0,
        "prompt_tokens": 287500.0,
        "completion_tokens": 37500.0,
        "cost": pytest.approx((big + small) * 125),
    }
    distill = by["distill"]
    assert distill["cost"] == pytest.approx((3000 * 0.15 + 600 * 0.6) / 1e6)
    assert distill["per_1000_turns"]["calls"] == 125.0
    answer = by["answer"]  # a model without a price has no cost, never a guess
    assert (answer["prompt_tokens"], answer["cost"], answer["per_1000_turns"]["cost"]) == (
        40,
        None,
        None,
    )


def test_cost_without_prices_counts_tokens_and_names_the_unpriced_models(tmp_path):
    settings = build_home(tmp_path)
    report = json.loads(invoke(settings.storage.home, "stats", "--cost", "--json"))
    assert report["unpriced_models"] == ["m-big", "m-free", "m-small"]
    assert all(p["cost"] is None for p in report["purposes"])
    text = invoke(settings.storage.home, "stats", "--cost")
    assert text.splitlines()[0] == "turns: 8"
    assert "distill" in text and "3000" in text
