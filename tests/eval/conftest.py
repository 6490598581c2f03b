"""A tiny LoCoMo-shaped file for the evaluation tests (two sessions, six turns, seven questions)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

TURNS_1 = [
    ("Ana", "D1:1", "I adopted a golden retriever puppy named Biscuit yesterday!"),
    ("Ben", "D1:2", "Congrats! I just started pottery classes at the community center."),
    ("Ana", "D1:3", "My sister Lena works as a nurse in Berlin."),
]
TURNS_2 = [
    ("Ben", "D2:1", "I finished my first marathon in Chicago last Sunday."),
    ("Ana", "D2:2", "Biscuit loves swimming in the lake."),
    ("Ben", "D2:3", "My favourite book is Dune by Frank Herbert."),
]

QA = [
    # 0: single-hop
    {
        "question": "What breed is Ana's puppy Biscuit?",
        "answer": "golden retriever",
        "evidence": ["D1:1"],
        "category": 4,
    },
    # 1: single-hop
    {
        "question": "Where did Ben run his first marathon?",
        "answer": "Chicago",
        "evidence": ["D2:1"],
        "category": 4,
    },
    # 2: open-domain, gold cut at ';', evidence id with a stray colon (repaired to D1:2)
    {
        "question": "What classes is Ben taking?",
        "answer": "pottery; at the community center",
        "evidence": ["D:1:2"],
        "category": 3,
    },
    # 3: multi-hop, two ids in one string
    {
        "question": "What do Ana's dog Biscuit and her sister Lena do?",
        "answer": "swimming, nurse",
        "evidence": ["D1:3; D2:2"],
        "category": 1,
    },
    # 4: temporal, one evidence id names no turn (dropped)
    {
        "question": "When did Ben finish his first marathon?",
        "answer": "The Sunday before 8 May 2023",
        "evidence": ["D2:1", "D7:7"],
        "category": 2,
    },
    # 5: single-hop without evidence (recall skips it)
    {"question": "What is Ben's favourite book?", "answer": "Dune", "evidence": [], "category": 4},
    # 6: adversarial
    {
        "question": "What did Ana adopt from Lena?",
        "adversarial_answer": "a puppy",
        "evidence": ["D1:1"],
        "category": 5,
    },
]


def locomo_sample(sample_id: str = "conv-t") -> dict:
    def turns(rows):
        return [{"speaker": s, "dia_id": d, "text": t} for s, d, t in rows]

    return {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": turns(TURNS_1),
            # Same day as session 1: the search's recency term (30-day half-life) then treats every
            # turn alike, and the ranking is the relevance ranking.
            "session_2_date_time": "6:00 pm on 8 May, 2023",
            "session_2": turns(TURNS_2),
        },
        "qa": QA,
    }


@pytest.fixture(scope="session")
def locomo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("locomo") / "tiny-locomo.json"
    path.write_text(json.dumps([locomo_sample()]), encoding="utf-8")
    return path
