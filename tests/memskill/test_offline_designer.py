"""The offline designer in the evolve loop: skills by example that the rules alone cannot write.

The synthetic task: every conversation has facts stated plainly (the rules store them) and news
told as a question ("Did you hear that my cousin Rita moved to Oslo for a new job?"), which the
rules drop as a question. Half the questions of the data ask about that news, so without a skill
written for it their evidence is never stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from skillstream.eval.training_harness import TrainOptions, evolve_controller
from skillstream.extract import MemorySkill, OfflineForm
from skillstream.memskill.designer import Change, HardCase
from skillstream.memskill.offline_designer import OfflineDesigner, skill_name, topic_words
from skillstream.memskill.rewards import Query
from skillstream.memskill.seeds import PRIMITIVES
from skillstream.rules import RulesExecutor
from skillstream.settings import Settings
from skillstream.vocab import Op

PEOPLE = [
    ("cousin", "Rita", "Oslo", "a new job"),
    ("uncle", "Tomas", "Rome", "his studies"),
    ("aunt", "Maya", "Lima", "a teaching post"),
    ("friend", "Ollie", "Perth", "a research grant"),
    ("neighbour", "Ines", "Quebec", "her husband's work"),
    ("brother", "Karl", "Nairobi", "a hospital job"),
    ("sister", "Lena", "Tokyo", "a design studio"),
    ("colleague", "Priya", "Dublin", "a startup"),
]
FACTS = [  # long enough not to read as a short answer to the question before them
    ("I started learning the cello at the music school last week.", "What is {a} learning?"),
    ("I adopted a small grey cat named Miso from the shelter.", "What is {a}'s cat called?"),
    ("I work as a product designer at Acme in the city.", "Where does {a} work?"),
    ("I ran a half marathon along the river in October.", "What race did {a} run?"),
]
SPEAKERS = [("Ana", "Ben"), ("Caro", "Dev"), ("Eli", "Fay"), ("Gus", "Hana")]


def sample(k: int) -> dict[str, Any]:
    """Conversation ``conv-k``: two sessions; A states facts, B tells news as questions."""
    a, b = SPEAKERS[k]
    conv: dict[str, Any] = {"speaker_a": a, "speaker_b": b}
    qa: list[dict[str, Any]] = []
    for s in (1, 2):
        conv[f"session_{s}_date_time"] = f"1:00 pm on {3 + s} May, 2023"
        turns = []
        for t in range(1, 5):
            n = (k * 4 + (s - 1) * 2 + t // 2) % len(PEOPLE)
            if t % 2:
                fact, question = FACTS[(k + s + t) % len(FACTS)]
                turns.append({"speaker": a, "dia_id": f"D{s}:{t}", "text": fact})
                qa.append({"question": question.format(a=a), "evidence": [f"D{s}:{t}"]})
            else:
                rel, name, city, why = PEOPLE[n]
                text = f"Did you hear that my {rel} {name} moved to {city} for {why}?"
                turns.append({"speaker": b, "dia_id": f"D{s}:{t}", "text": text})
                qa.append(
                    {
                        "question": f"Where did {b}'s {rel} {name} move to?",
                        "evidence": [f"D{s}:{t}"],
                    }
                )
        conv[f"session_{s}"] = turns
    for q in qa:
        q.update(answer="x", category=4)
    return {"sample_id": f"conv-{k}", "conversation": conv, "qa": qa}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "news.json"
    path.write_text(json.dumps([sample(k) for k in range(4)]))
    return path


def options(data: Path) -> TrainOptions:
    """Train on two conversations, validate on the other two; one PPO update per cycle. K covers
    the whole bank: what is tested is the designer and the loop, not the selection."""
    return TrainOptions(
        data=str(data),
        reward="evidence",
        train=("conv-0", "conv-1"),
        val=("conv-2", "conv-3"),
        updates=1,
        k=8,
        lr=3e-3,
        seed=0,
        memory_cost=0.0,
    )


def test_the_loop_finds_a_skill_only_the_offline_designer_can_write(
    tmp_path, data, embedder, one_thread
) -> None:
    opts = options(data)
    settings = Settings.from_keys(home=str(tmp_path / "home"))
    report, best = evolve_controller(
        opts,
        settings,
        embedder,
        RulesExecutor(),
        list(PRIMITIVES),
        None,
        tmp_path / "e.pt",
        cycles=2,
        patience=2,
    )
    first, second = report["cycles"]
    # cycle 0: the news questions are hard cases whose evidence no memory cites
    assert first["hard_cases"] >= 8 and first["changes"]
    assert all(kind == "add" for kind, _ in first["changes"])
    written = {p["change"][1]: p for p in first["proposals"] if p["change"]}
    assert all("Did you hear that my" in t for p in written.values() for t in p["prototypes"])
    # cycle 1 trained and validated with them: recall on the held-out conversations rose
    assert second["reward"] > first["reward"] + 0.2, report["cycles"]
    assert report["best_cycle"] == 1
    new = [s for s in best if s.offline is not None]
    assert new and {s.name for s in new} <= set(written)
    assert report["skills"] == [s.name for s in best]


class Proposal:
    """A designer that proposes one given change every round (``designer.SkillDesigner``)."""

    def __init__(self, change: Change) -> None:
        self.change = change
        self.rejected: list[tuple[str, str]] = []

    def round(self, groups: Any, skills: list[MemorySkill]) -> list[Change]:
        return [] if self.change.skill.name in {s.name for s in skills} else [self.change]


def test_a_proposal_that_lowers_the_reward_is_rolled_back(
    tmp_path, data, embedder, one_thread
) -> None:
    opts = options(data)
    settings = Settings.from_keys(home=str(tmp_path / "home"))
    facts = tuple(f for f, _ in FACTS)
    harmful = MemorySkill(
        "skip-plain-facts",
        "Drop what speakers say about their lives.",
        "Purpose: drop facts.\nWhen to use: always.\nHow to apply: skip.\nConstraints: none.",
        Op.NOOP,
        offline=OfflineForm(skip=facts, threshold=0.5),
    )
    report, best = evolve_controller(
        opts,
        settings,
        embedder,
        RulesExecutor(),
        list(PRIMITIVES),
        Proposal(Change(harmful, True)),
        tmp_path / "e.pt",
        cycles=2,
        patience=3,
    )
    first, second = report["cycles"]
    assert first["changes"] == [("add", "skip-plain-facts")]
    assert second["reward"] < first["reward"]
    assert second["rolled_back_to"] == 0 and report["best_cycle"] == 0
    assert "skip-plain-facts" not in {s.name for s in best}


def case(text: str, evidence: tuple[str, ...], score: float = 0.0) -> HardCase:
    return HardCase(Query(text, evidence, torch.zeros(4).numpy()), score, 2, 0)


def test_a_round_adds_then_refines_and_leaves_retrieval_misses_alone() -> None:
    texts = {
        "m1": "Haha. Did you hear that my cousin Rita moved to Oslo for a new job?",
        "m2": "Did you hear that my uncle Tomas moved to Rome for his studies?",
        "m3": "I adopted a cat named Miso.",
    }
    captured = {"m3"}
    designer = OfflineDesigner(lambda q: [(texts[e], e in captured) for e in q.evidence])
    groups = [[case("Where did Rita move?", ("m1",)), case("Cat's name?", ("m3",))]]
    (change,) = designer.round(groups, list(PRIMITIVES))
    assert change.new and change.skill.action == Op.INSERT
    assert change.skill.offline is not None
    assert change.skill.offline.prototypes == (
        "Did you hear that my cousin Rita moved to Oslo for a new job?",
    )  # "Haha." has no content words; m3 was stored: a retrieval miss
    assert designer.notes[0]["stored_not_retrieved"] == 1
    assert change.skill.name == skill_name(topic_words(change.skill.offline.prototypes))
    bank = [*PRIMITIVES, change.skill]
    assert change.skill.name == "keep-cousin-rita-moved"
    # more news of the same kind refines the same skill (a new version, prototypes added)
    texts["m4"] = "Did you hear that my cousin Rita moved to Oslo last spring?"
    (again,) = designer.round([[case("Rita?", ("m1", "m4"))]], bank)
    assert not again.new and again.skill.name == change.skill.name
    assert again.skill.version == change.skill.version + 1
    assert again.skill.offline is not None
    assert again.skill.offline.prototypes == (texts["m1"].split(". ", 1)[1], texts["m4"])
    # nothing new to learn: no change
    assert designer.round([[case("Where did Rita move?", ("m1",))]], bank) == []
