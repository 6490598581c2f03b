"""The charts page: LLM cost per day at the configured prices, and cost per 1,000 turns by stage,
of the owners the token may see."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime

import pytest

import skillstream
from skillstream.storage.catalog import open_catalog
from tests.server.conftest import FULL, MAYA, start, stop, tokens_file

pytestmark = pytest.mark.slow

PRICES = {"m-big": {"input": 2.0, "output": 10.0}}
CALLS = [
    # owner, purpose, model, prompt, completion, cached, day
    ("maya", "extract", "m-big", 1_000_000, 100_000, False, 1),
    ("maya", "extract", "m-big", 1_000_000, 100_000, True, 1),  # cached: not billed
    ("omar", "distill", "m-big", 500_000, 0, False, 2),
    ("omar", "extract", "m-free", 10, 10, False, 2),  # no price
]


def july(day: int) -> datetime:
    return datetime(2025, 7, day, tzinfo=UTC)


def test_cost_per_day_and_per_thousand_turns(sample_home, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(sample_home, home)
    with open_catalog(skillstream.open(home).settings.storage) as cat:
        for i, (owner, purpose, model, p, c, cached, day) in enumerate(CALLS):
            cat.con.execute(
                "INSERT INTO llm_calls (call_id, request_hash, purpose, backend, model, "
                "prompt_tokens, completion_tokens, latency_ms, status, cached, attempts, "
                "created_at, owner_id) VALUES (?, ?, ?, 'openai', ?, ?, ?, 1.0, 'ok', ?, 1, ?, ?)",
                [
                    f"c{i}",
                    f"h{i}",
                    purpose,
                    model,
                    p,
                    c,
                    cached,
                    datetime(2025, 7, day, tzinfo=UTC),
                    owner,
                ],
            )
        turns = int(cat.sql("select sum(len(message_ids)) as n from spans").to_pylist()[0]["n"])
        maya_turns = int(
            cat.sql(
                "select sum(len(message_ids)) as n from spans where owner_id = 'maya'"
            ).to_pylist()[0]["n"]
        )
    s = start(home, tokens_file(tmp_path), env={"SKILLSTREAM_LLM_PRICES": json.dumps(PRICES)})
    try:
        status, html = s.call("/charts")
        assert status == 200
        assert "LLM cost per day" in html
        # extract: 2.0 + 1.0 = 3.0 for maya's billed call; distill: 1.0 for omar's
        assert f'<p class="muted">{turns} turns' in html
        extract_row = html.split("<td>extract</td>")[1].split("</tr>")[0]
        assert "no price" in extract_row  # omar's extract call used a model with no price
        assert "m-free" in html  # named as unpriced
        distill_row = html.split("<td>distill</td>")[1].split("</tr>")[0]
        assert "<td>1.0</td>" in distill_row
        per_1000 = round(1.0 * 1000 / turns, 6)
        assert f"<td>{per_1000}</td>" in distill_row
        status, limited = s.call("/charts", token=MAYA)
        assert status == 200
        assert "<td>distill</td>" not in limited  # omar's call
        assert f'<p class="muted">{maya_turns} turns' in limited
        maya_row = limited.split("<td>extract</td>")[1].split("</tr>")[0]
        assert "<td>3.0</td>" in maya_row
    finally:
        stop(s)
    assert FULL
