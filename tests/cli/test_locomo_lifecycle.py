"""A LoCoMo-shaped backfill through the CLI, then `maintain`: statuses agree with the lifecycle log.

Also exercises `history`, `contradictions` and `maintain --freeze/--forget` on the result.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from skillstream.cli import cli

SAMPLES = [
    {
        "sample_id": "conv-a",
        "conversation": {
            "speaker_a": "Alice",
            "speaker_b": "Ben",
            "session_1_date_time": "1:00 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Alice", "dia_id": "D1:1", "text": "I live in Oslo."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "I love hiking in the mountains."},
                {"speaker": "Alice", "dia_id": "D1:3", "text": "I work as a nurse."},
                {
                    "speaker": "Ben",
                    "dia_id": "D1:4",
                    "text": "I'm planning a trip to Paris next month.",
                },
            ],
            "session_2_date_time": "3:00 pm on 20 June, 2023",
            "session_2": [
                {"speaker": "Alice", "dia_id": "D2:1", "text": "I live in Bergen."},
                {
                    "speaker": "Ben",
                    "dia_id": "D2:2",
                    "text": "I really love hiking in the mountains!",
                },
                {"speaker": "Ben", "dia_id": "D2:3", "text": "I cancelled my trip to Paris."},
            ],
            "session_3_date_time": "10:00 am on 1 December, 2023",
            "session_3": [
                {
                    "speaker": "Alice",
                    "dia_id": "D3:1",
                    "text": "Yesterday I adopted a cat named Miso.",
                },
                {
                    "speaker": "Ben",
                    "dia_id": "D3:2",
                    "text": "I started learning the cello last week.",
                },
            ],
        },
        "qa": [],
    },
    {
        "sample_id": "conv-b",
        "conversation": {
            "speaker_a": "Cara",
            "speaker_b": "Dan",
            "session_1_date_time": "9:00 am on 2 January, 2023",
            "session_1": [
                {"speaker": "Cara", "dia_id": "D1:1", "text": "I prefer green tea over coffee."},
                {"speaker": "Dan", "dia_id": "D1:2", "text": "I am vegetarian."},
                {
                    "speaker": "Cara",
                    "dia_id": "D1:3",
                    "text": "We visited the science museum with the kids.",
                },
            ],
            "session_2_date_time": "9:00 am on 3 March, 2023",
            "session_2": [
                {"speaker": "Dan", "dia_id": "D2:1", "text": "I am vegan now."},
                {"speaker": "Cara", "dia_id": "D2:2", "text": "I prefer green tea over coffee."},
                {
                    "speaker": "Cara",
                    "dia_id": "D2:3",
                    "text": "We visited the science museum with our kids.",
                },
            ],
        },
        "qa": [],
    },
]

AGREEMENT_SQL = """
WITH last AS (
  SELECT memory_id, arg_max(new_status, version) AS status
  FROM memory_events WHERE event <> 'refused' GROUP BY memory_id
)
SELECT (SELECT list(struct_pack(status := status, n := n) ORDER BY status)
          FROM (SELECT status, count(*) AS n FROM memories GROUP BY status)) AS by_memories,
       (SELECT list(struct_pack(status := status, n := n) ORDER BY status)
          FROM (SELECT status, count(*) AS n FROM last GROUP BY status)) AS by_events,
       (SELECT count(*) FROM memories m LEFT JOIN last l ON l.memory_id = m.id
         WHERE l.status IS DISTINCT FROM m.status) AS disagreeing
"""


def invoke(home, *args) -> str:
    res = CliRunner().invoke(cli, ["--home", str(home), *args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


def sql(home, query: str) -> list[dict]:
    return json.loads(invoke(home, "sql", query, "--json"))


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("locomo") / "home"
    home.mkdir()
    # faster decay than the default, so memories untouched since spring expire by December
    # (the `idle` rule: every unused memory decays, not only the ones below 0.3)
    (home / "skillstream.toml").write_text(
        'decay_step = 0.25\ndecay_rule = "idle"\n', encoding="utf-8"
    )
    src = home.parent / "locomo.json"
    src.write_text(json.dumps(SAMPLES), encoding="utf-8")
    invoke(home, "run", "--source", str(src), "--format", "locomo")
    return home


@pytest.mark.slow
def test_status_counts_agree_with_the_lifecycle_log(home):
    (before,) = sql(home, AGREEMENT_SQL)
    assert before["disagreeing"] == 0 and before["by_memories"] == before["by_events"]
    out = json.loads(invoke(home, "maintain", "--close-sessions", "--json"))
    assert out["now"] == "2023-12-01T10:00:30+00:00"  # the latest event time, not the wall clock
    (after,) = sql(home, AGREEMENT_SQL)
    assert after["disagreeing"] == 0 and after["by_memories"] == after["by_events"]
    counts = {r["status"]: r["n"] for r in after["by_memories"]}
    assert counts == out["memories_by_status"]
    # generated (never used since): the two December facts and their session's summary;
    # archived: the two losers of contradictions (archived memories do not decay); deleted: the
    # cancelled trip; merged: the museum visit said twice, both consolidated into a new version;
    # expired: everything else, untouched since spring (0.25 per decay step here), the new version
    # among them
    assert counts == {"generated": 3, "archived": 2, "deleted": 1, "expired": 11, "merged": 2}
    assert out["events"] == {"created": 2, "expired": 5}
    # every memory was created exactly once (a consolidated version by its `consolidated` event)
    assert sql(
        home,
        "SELECT count(*) AS n FROM memory_events WHERE event IN ('created', 'consolidated')",
    ) == sql(home, "SELECT count(*) AS n FROM memories")
    # a second maintain at the same time changes nothing
    again = json.loads(invoke(home, "maintain", "--close-sessions", "--json"))
    assert again["events"] == {}


@pytest.mark.slow
def test_history_and_contradictions_commands(home):
    oslo = sql(home, "SELECT id FROM memories WHERE text = 'Alice lives in Oslo.'")[0]["id"]
    # Bergen won, then expired unused: only its minimal log row is left, found by its id
    bergen = sql(
        home,
        "SELECT m.id, m.valid_from, m.text, m.status FROM memories m "
        f"JOIN contradictions c ON c.memory_b = m.id WHERE c.memory_a = '{oslo}'",
    )[0]
    assert (bergen["text"], bergen["status"]) == ("", "expired")
    hist = json.loads(invoke(home, "history", oslo, "--json"))
    assert [(e["event"], e["old_status"], e["new_status"]) for e in hist["events"]][:2] == [
        ("created", None, "generated"),
        ("invalidated", "generated", "archived"),
    ]
    assert hist["memory"]["valid_to"] == bergen["valid_from"]
    assert [(c["memory_b"], c["resolution"], c["rule"]) for c in hist["contradictions"]] == [
        (bergen["id"], "keep-b", "updated")
    ]
    text = invoke(home, "history", oslo)
    assert "invalidated" in text and "generated -> archived" in text
    # as another owner, the memory is not there
    res = CliRunner().invoke(cli, ["--home", str(home), "history", oslo, "--owner", "conv-b"])
    assert res.exit_code != 0 and "may not see it" in str(res.exception or res.output)

    rows = json.loads(invoke(home, "contradictions", "--all", "--json"))
    assert sorted((r["owner_id"], r["resolution"], r["text_a"]) for r in rows) == [
        ("conv-a", "keep-b", "Alice lives in Oslo."),
        ("conv-b", "keep-b", "Dan is vegetarian."),
    ]
    # an expired winner shows no text (the minimal log), a live one its statement
    status = {r["id"]: r["status"] for r in sql(home, "SELECT id, status FROM memories")}
    for r in rows:
        if status[r["memory_b"]] == "expired":
            assert r["text_b"] == ""
        else:
            assert r["text_b"] == "Dan is vegan now."
    assert json.loads(invoke(home, "contradictions", "--json")) == []  # nothing left unresolved


@pytest.mark.slow
def test_freeze_and_forget_by_hand(home):
    cat = sql(home, "SELECT id FROM memories WHERE text LIKE '%Alice adopted a cat%'")[0]["id"]
    out = json.loads(invoke(home, "maintain", "--freeze", cat, "--json"))
    assert out["status_changes"] == {"frozen": 1}
    assert sql(home, f"SELECT status FROM memories WHERE id = '{cat}'") == [{"status": "frozen"}]
    res = CliRunner().invoke(cli, ["--home", str(home), "maintain", "--forget", cat])
    assert res.exit_code != 0 and "cannot become 'deleted'" in str(res.exception or res.output)
    invoke(home, "maintain", "--unfreeze", cat)
    invoke(home, "maintain", "--forget", cat)
    events = [e["event"] for e in json.loads(invoke(home, "history", cat, "--json"))["events"]]
    assert events[-3:] == ["frozen", "unfrozen", "deleted"]
    (agree,) = sql(home, AGREEMENT_SQL)
    assert agree["disagreeing"] == 0


@pytest.mark.slow
def test_every_sql_example_in_the_lifecycle_docs_runs(home):
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "lifecycle.md").read_text(
        encoding="utf-8"
    )
    blocks = re.findall(r"```sql\n(.*?)```", doc, re.DOTALL)
    assert len(blocks) == 8
    invoke(home, "search", "hiking", "--owner", "conv-a")  # so that `queries` has a row
    results = [sql(home, q) for q in blocks]
    growth, rate, reinforced, agreement, true_then, believed_then, per_day, searches = results
    assert (
        sum(r["created"] for r in growth) == sql(home, "SELECT count(*) AS n FROM memories")[0]["n"]
    )
    assert {(r["owner_id"], r["contradictions"]) for r in rate} == {("conv-a", 1), ("conv-b", 1)}
    # Cara's tea preference and the consolidated museum visit were reinforced, then expired: their
    # rows stay (the minimal log), their statements do not
    assert sorted((r["kind"], r["status"], r["text"]) for r in reinforced) == [
        ("event", "expired", ""),
        ("preference", "expired", ""),
    ]
    assert all(r["memories"] == r["agreeing"] for r in agreement)
    assert [r["owner_id"] for r in true_then] == ["conv-a", "conv-b"]
    assert {r["status"] for r in believed_then} >= {"generated", "archived"}
    assert per_day and searches == [
        {"strategy": "hybrid", "queries": 1, "empty": 0, "avg_results": searches[0]["avg_results"]}
    ]
