"""Task skills' SkillMemory items stay out of the LoCoMo evaluation: not counted as extracted
memories, not retrieved for questions, while plain memory search does return them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillstream.connectors.locomo import load_locomo, load_locomo_qa
from skillstream.distill.record import TaskSkill
from skillstream.eval.locomo import (
    EvalOptions,
    LocomoEval,
    build_home,
    count_items,
    home_settings,
    load_questions,
)
from skillstream.services.search import MemorySearch
from skillstream.services.task_skills import TaskSkillAPI
from skillstream.settings import Settings
from skillstream.storage.lance import MemoryIndex
from tests.factories import locomo_sample

pytestmark = pytest.mark.slow

QUESTION = "How do I deploy the Flask app to staging?"


def test_skill_items_are_neither_counted_nor_retrieved_by_the_evaluation(tmp_path: Path):
    sample = locomo_sample(0, sessions=2, turns=6)
    sample["qa"] = [{"question": QUESTION, "answer": "x", "evidence": ["D1:1"], "category": 4}]
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([sample]))
    sid = sample["sample_id"]
    settings = home_settings(Settings.from_keys(), tmp_path / "ours", "rules")
    built = build_home(settings, path, "ours")
    index = MemoryIndex(settings.storage.lancedb, 384)
    before = count_items(index)
    assert before == (built.items, built.items_total) and built.items > 0

    TaskSkillAPI(settings, owner=sid).save(
        TaskSkill.new(
            sid,
            "deploy-flask-app",
            title="Deploy flask app",
            description="Deploy the Flask app to staging. Use it for staging deploys.",
            procedure=["Run pytest.", "Build and push the image.", "Restart the service."],
        )
    )
    assert index.count() == before[1] + 1  # the item is there ...
    assert count_items(index) == before  # ... and is not an extracted memory

    with MemorySearch(settings, record=False) as searcher:
        anyone = searcher.search(QUESTION, owner=sid, k=5)
        assert anyone[0]["memory_type"] == "SkillMemory"  # plain search finds the task skill
        loaded = load_locomo(path)[0]
        questions = load_questions(loaded, load_locomo_qa(path)[sid], [4])
        run = LocomoEval(path, settings, EvalOptions(ks=(5,)))
        (hits,) = run._retrieve(searcher, sid, questions, None)
    assert hits and all(h["memory_type"] != "SkillMemory" for h in hits)
