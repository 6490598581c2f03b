"""The ``qa`` reward: an LLM answers each question from the memories, token F1 is the score."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from skillstream.errors import ConfigError
from skillstream.eval.qa import QAGrader
from skillstream.eval.training_harness import TrainOptions, train_controller
from skillstream.llm import make_backend
from skillstream.memskill.rewards import Query, answer_score
from skillstream.memskill.seeds import PRIMITIVES
from skillstream.rules import RulesExecutor
from skillstream.rules.skills import RULE_SKILLS
from tests.factories import locomo_sample
from tests.memskill.conftest import make_memory
from tests.servers.openai_stub import OpenAIStub


def test_answer_score_splits_each_f1_over_the_memories_shown() -> None:
    e: np.ndarray = np.eye(3, dtype=np.float32)
    mems = [make_memory(1, "a", vector=e[0]), make_memory(2, "b", vector=e[1])]
    qs = [
        Query("q1", ("D1:1",), e[0], answer="x"),
        Query("q2", ("D1:2",), e[1], answer="y"),
        Query("q3", ("D1:3",), e[2], answer=None),  # no gold answer: left out
    ]
    shown: dict[str, list[str]] = {}

    def f1(q: Query, memories: list) -> float:
        shown[q.text] = [m.id for m in memories]
        return {"q1": 1.0, "q2": 0.5}[q.text]

    got = answer_score(mems, qs, f1, k=1)
    assert shown == {"q1": ["mem_1"], "q2": ["mem_2"]}
    assert got.queries == 2 and got.recall == pytest.approx(0.75)
    assert got.credit == pytest.approx({"mem_1": 0.5, "mem_2": 0.25})
    got = answer_score(mems, qs, f1, k=2)
    assert got.credit == pytest.approx({"mem_1": 0.375, "mem_2": 0.375})  # split equally over both


def _with_questions(k: int) -> dict:
    sample = locomo_sample(k, sessions=2, turns=6)
    qa = []
    for s in (1, 2):
        for turn in sample["conversation"][f"session_{s}"][::2]:
            words = re.findall(r"[A-Za-z]{4,}", turn["text"])
            qa.append(
                {
                    "question": f"What did {turn['speaker']} say about {words[0]}?",
                    "answer": " ".join(words[-2:]),
                    "evidence": [turn["dia_id"]],
                    "category": 4,
                }
            )
    sample["qa"] = qa
    return sample


def test_qa_reward_trains_through_an_openai_server(tmp_path, embedder, stub_settings) -> None:
    data = tmp_path / "qa.json"
    data.write_text(json.dumps([_with_questions(k) for k in range(3)]))

    def first_memory(body: dict) -> str:
        # a "model" that answers with the first memory it was shown
        prompt = body["messages"][-1]["content"]
        line = next((x for x in prompt.splitlines() if x.startswith("- [")), "")
        return json.dumps({"answer": line.split("] ", 1)[-1]})

    opts = TrainOptions(
        data=str(data), reward="qa", k=2, updates=2, seed=1, budget="none", select_every=0
    )
    skills = list(PRIMITIVES) + list(RULE_SKILLS)
    with OpenAIStub(first_memory) as stub:
        settings = stub_settings(stub.url)
        backend = make_backend(settings.llm, settings.storage.home)
        assert backend is not None  # the stub's settings name an LLM
        grader = QAGrader(backend, judge=False)
        with pytest.raises(ConfigError, match="needs an LLM"):
            train_controller(opts, settings, embedder, RulesExecutor(True), skills, tmp_path / "x")
        report = train_controller(
            opts,
            settings,
            embedder,
            RulesExecutor(categories=True),
            skills,
            tmp_path / "q.pt",
            grader=grader,
        )
        assert stub.count > 0
        assert all(r["messages"][-1]["content"] for r in stub.requests)
    curve = report["curve"]
    f1 = [p["f1"] for p in curve]
    assert len(f1) == 2 and all(0.0 <= v <= 1.0 for v in f1) and max(f1) > 0, curve
    # an update whose rollouts stored nothing had nothing to answer from (which update that is
    # depends on the sampled skills, and so on the last bits of the machine's vectors)
    assert all(p["f1"] == 0.0 for p in curve if p["memories"] == 0), curve
    assert set(report["val"]["trained"]) >= {"recall@10", "memories"}
