"""Search scores mean the same in every search: relevance is absolute (cosine similarity lifted
by the full-text match), so an unrelated query scores low, a task skill does not outrank the
memory a question is about, unrelated hits do not share one score, and task-skill search and
memory search score on one scale. A correction replaces the plan it corrects."""

from __future__ import annotations

import json

import pytest

import skillstream
from skillstream.flows.memory import default_sample

pytestmark = pytest.mark.slow

CI = {
    "conversation_id": "ci-omar",
    "user_id": "omar",
    "session_id": "ci-omar-s1",
    "message_id": "ci-omar-s1-0",
    "role": "user",
    "name": "Omar",
    "content": "We use GitHub Actions for our CI, and it runs the tests on every push.",
    "timestamp": "2025-05-07T10:00:00Z",
}


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scores")
    extra = folder / "ci-omar.jsonl"
    extra.write_text(json.dumps(CI) + "\n", encoding="utf-8")
    h = skillstream.open(folder / "home")
    h.run([*sorted(default_sample().glob("*.jsonl")), extra])
    return h


def hits(home, query, owner=None, k=10):
    return home.search(query, owner=owner, k=k, record=False).to_pylist()


def test_a_task_skill_does_not_outrank_the_memory_a_question_is_about(home):
    got = hits(home, "which CI do we use", owner="omar", k=5)
    assert "GitHub Actions" in got[0]["text"], [h["text"] for h in got]
    skill = [h for h in got if h["kind"] == "task_skill"]
    assert all(h["score"] < got[0]["score"] for h in skill)


def test_an_unrelated_question_scores_low_and_a_related_one_high(home):
    related = hits(home, "which CI do we use", owner="omar", k=1)[0]
    unrelated = hits(home, "what is the weather like in Tokyo", owner="omar", k=5)
    assert max(h["relevance"] for h in unrelated) < related["relevance"] - 0.15
    assert max(h["score"] for h in unrelated) < 0.5


def test_unrelated_hits_do_not_share_one_score(home):
    got = hits(home, "what is the weather like in Tokyo", k=10)
    scores = [h["score"] for h in got]
    assert len(set(scores)) == len(scores), scores
    assert all(0.0 <= h["relevance"] <= 1.0 for h in got)


def test_task_skill_search_and_memory_search_score_on_one_scale(home):
    query = "how do I deploy the flask app"
    skill = home.task_skills.search(query, owner="omar", k=1).to_pylist()[0]
    item = next(h for h in hits(home, query, owner="omar") if h["kind"] == "task_skill")
    assert 0.5 < skill["score"] <= 1.0 and 0.5 < item["relevance"] <= 1.0
    assert abs(skill["score"] - item["relevance"]) < 0.25
    off = home.task_skills.search(
        "what is the weather like in Tokyo", owner="omar", k=1
    ).to_pylist()
    assert off[0]["score"] < 0.5


def test_a_correction_replaces_the_plan_it_corrects(home):
    rows = home.sql(
        "SELECT status, text FROM memories WHERE owner_id = 'maya' AND kind <> 'summary' "
        "AND (text LIKE '%Lisbon trip%' OR text LIKE '%trip to Lisbon%') ORDER BY status"
    ).to_pylist()
    live = [r["text"] for r in rows if r["status"] in ("generated", "activated")]
    assert len(live) == 1 and "Joana" in live[0], rows
    assert any(r["status"] == "archived" and "Joana" not in r["text"] for r in rows)


def test_the_quickstart_query_lists_only_current_memories(home):
    # the README's first query reads active_memories: the corrected plan is not listed as current
    rows = home.sql(
        "SELECT owner_id, kind, text, status FROM active_memories ORDER BY owner_id, event_ts"
    ).to_pylist()
    assert rows and {r["status"] for r in rows} <= {"generated", "activated"}
    assert not any(
        r["text"] == "Maya is planning a trip to Lisbon in April 2025 with Maya's sister Ana."
        for r in rows
    )
    everything = home.sql("SELECT count(*) AS n FROM memories").to_pylist()[0]["n"]
    assert everything > len(rows)
