"""The designer with a scripted LLM: hard cases -> clusters -> proposals -> new bank versions ->
validation -> rollback; invalid output changes nothing."""

from __future__ import annotations

import numpy as np
import torch

from skillstream.memskill.bank import MemorySkillBank
from skillstream.memskill.designer import (
    Designer,
    HardCaseBuffer,
    evolve,
    representatives,
)
from skillstream.memskill.rewards import Query
from skillstream.memskill.seeds import PRIMITIVES
from skillstream.memskill.train import Trainer
from skillstream.memskill.versions import MemorySkillVersion
from skillstream.storage.catalog import Catalog
from tests.memskill.conftest import ScriptedLLM

DIM = 8


def _embed(texts):
    out = []
    for t in texts:
        rng = np.random.default_rng(abs(hash(t)) % 2**32)
        v = rng.normal(size=DIM).astype(np.float32)
        out.append(v / np.linalg.norm(v))
    return np.stack(out)


def _query(text: str, centre: int) -> Query:
    v: np.ndarray = np.zeros(DIM, dtype=np.float32)
    v[centre] = 1.0
    v[(centre + 1) % DIM] = 0.1 * len(text) / 40
    return Query(text, ("D1:1",), v / np.linalg.norm(v))


CASES = [_query(f"When did Ana go to {p}?", 0) for p in ("Kyoto", "Lisbon", "Oslo")] + [
    _query(f"What is the name of {who}'s cat?", 4) for who in ("Ben", "Caro")
]

ANALYSIS = {"patterns": ["dates of trips were not stored"], "missing": ["absolute dates"]}
GOOD_EDIT = {
    "changes": [
        {
            "change": "add",
            "name": "trip-dates",
            "description": "Capture trips with their absolute dates.",
            "instruction": "Purpose: keep when trips happen.\nWhen to use: a trip is mentioned.",
            "action": "INSERT",
        },
        {
            "change": "refine",
            "name": "insert",
            "description": "Record new lasting information, always with absolute dates.",
            "instruction": "Purpose: keep facts.\nHow to apply: one item per fact, dated.",
        },
        {"change": "add", "name": "Bad Name!", "description": "x", "instruction": "y"},
        {
            "change": "add",
            "name": "forget",
            "description": "x",
            "instruction": "y",
            "action": "DELETE",
        },
    ]
}


def test_buffer_windows_counts_and_clusters() -> None:
    buf = HardCaseBuffer(threshold=0.5, window=3, cap=10)
    for step, q in enumerate(CASES):
        buf.add(q, 0.0, step)
    buf.add(CASES[0], 0.9, 5)  # a good score is not a failure
    assert CASES[0].text not in buf.cases or buf.cases[CASES[0].text].fails == 1
    buf.add(CASES[4], 0.2, 5)
    assert buf.cases[CASES[4].text].fails == 2
    assert CASES[0].text not in buf.cases  # outside the window
    buf = HardCaseBuffer()
    for q in CASES:
        buf.add(q, 0.0, 0)
    groups = representatives(buf, clusters=2, per_cluster=2, limit=15)
    texts = [{c.query.text for c in g} for g in groups]
    assert len(groups) == 2
    assert any(all("cat" in t for t in g) for g in texts)
    assert any(all("go to" in t for t in g) for g in texts)
    assert sum(len(g) for g in groups) == 4  # two per cluster


def test_evolve_adds_versions_validates_and_rolls_back() -> None:
    torch.manual_seed(0)
    bad = [{"changes": "nonsense"}] * 3  # unusable three times: that round changes nothing
    llm = ScriptedLLM([ANALYSIS, GOOD_EDIT, ANALYSIS, *bad, ANALYSIS, {"changes": []}])
    designer = Designer(llm, max_changes=3)
    trainer = Trainer(_embed, DIM, list(PRIMITIVES), k=2, seed=0)
    rewards = iter([0.30, 0.50, 0.20, 0.10])
    seen_banks = []

    def train(tr):
        seen_banks.append([s.name for s in tr.skills])
        tr.updates += 1
        return [(q, 0.0) for q in CASES]

    def validate(tr):
        return next(rewards)

    report = evolve(trainer, designer, train, validate, cycles=4, patience=2)
    c0, c1, c2 = report.cycles[:3]
    assert c0["snapshot"] and c0["changes"] == [("add", "trip-dates"), ("refine", "insert")]
    assert len(llm.requests) >= 2 and llm.requests[0].purpose == "design"
    assert "When did Ana go to" in llm.requests[0].messages[1][1]
    assert any("Bad Name!" in r[0] for r in c0["rejected"])
    assert any("DELETE" in r[0] for r in c0["rejected"])
    assert seen_banks[1] == ["insert", "update", "delete", "skip", "trip-dates"]
    assert trainer.controller.bias.get("trip-dates", 0) > 0 or c1.get("snapshot")
    assert c1["snapshot"] and report.best is not None and report.best.cycle == 1
    assert c1["changes"] == [] and c1["rejected"]  # the unusable answer changed nothing
    assert report.cycles[-1].get("stopped")
    # cycle 2: the reward dropped -> back to the snapshot of cycle 1
    assert c2["rolled_back_to"] == 1
    assert [s.name for s in trainer.skills] == [s.name for s in report.best.skills]
    insert = next(s for s in trainer.skills if s.name == "insert")
    assert insert.version == 2

    # accepted changes become new bank versions with source=designer
    cat = Catalog(":memory:", read_only=False)
    try:
        bank = MemorySkillBank(cat)
        for s in report.best.skills:
            bank.put(MemorySkillVersion.from_skill(s, source="designer"), "designer")
        cur = {v.name: v for v in bank.current()}
        assert cur["trip-dates"].source == "designer" and cur["trip-dates"].version == 1
        assert cur["insert"].source == "designer" and cur["insert"].version == 2
        assert cur["update"].source == "seed"
    finally:
        cat.close()


def test_invalid_designer_output_changes_nothing() -> None:
    llm = ScriptedLLM(
        [
            ANALYSIS,
            {
                "changes": [
                    {"change": "refine", "name": "nope", "description": "d", "instruction": "i"}
                ]
            },
        ]
    )
    designer = Designer(llm)
    buf = HardCaseBuffer()
    for q in CASES:
        buf.add(q, 0.0, 0)
    assert designer.round(representatives(buf), list(PRIMITIVES)) == []
    assert designer.rejected and "unknown skill" in designer.rejected[0][1]


def test_bank_keeps_a_trainers_reward_statistics() -> None:
    cat = Catalog(":memory:", read_only=False)
    try:
        bank = MemorySkillBank(cat)
        assert bank.record_rewards({"insert": [0.5, 1.0], "nope": [1.0]}) == 1
        bank.record_rewards({"insert": [0.0]}, keep=2)
        ins = next(v for v in bank.current() if v.name == "insert")
        assert ins.usage_count == 3
        assert abs((ins.reward_mean or 0) - 0.5) < 1e-9
        assert list(ins.recent_rewards) == [1.0, 0.0]
    finally:
        cat.close()


def _plain(rows):
    import json

    return json.loads(json.dumps(rows))


def _evolve_run(llm, trainer, rewards, **kw):
    def train(tr):
        tr.updates += 1
        with torch.no_grad():  # a deterministic change of the weights per cycle
            next(tr.net.parameters()).add_(0.01 * tr.updates)
        return [(q, 0.0) for q in CASES]

    return evolve(
        trainer, Designer(llm, max_changes=3), train, lambda tr: rewards[tr.updates - 1], **kw
    )


def test_an_interrupted_evolve_resumes_after_its_last_cycle() -> None:
    import json

    answers = [ANALYSIS, GOOD_EDIT] + [ANALYSIS, {"changes": []}] * 3
    rewards = [0.30, 0.50, 0.20, 0.10, 0.05]
    torch.manual_seed(0)
    whole_trainer = Trainer(_embed, DIM, list(PRIMITIVES), k=2, seed=0)
    whole = _evolve_run(ScriptedLLM(answers), whole_trainer, rewards, cycles=5, patience=3)

    class Crash(Exception):
        pass

    saved: list[tuple[dict, dict]] = []

    def keep(state, report):
        saved.append((json.loads(json.dumps(state)), report.best.weights))  # JSON-ready
        if state["next"] == 2:
            raise Crash

    torch.manual_seed(0)
    trainer = Trainer(_embed, DIM, list(PRIMITIVES), k=2, seed=0)
    llm = ScriptedLLM(answers)
    try:
        _evolve_run(llm, trainer, rewards, cycles=5, patience=3, on_cycle=keep)
    except Crash:
        pass
    state, best = saved[-1]
    assert state["next"] == 2 and [s["name"] for s in state["skills"]][-1] == "trip-dates"
    # the process died: the trainer comes back from its saved state, the LLM answers the rest
    left = answers[len(llm.requests) :]
    done: list[dict] = []
    resumed = _evolve_run(
        ScriptedLLM(left),
        trainer,
        rewards,
        cycles=5,
        patience=3,
        resume=(state, best),
        on_cycle=lambda st, r: done.append(_plain(st)),
    )
    assert _plain(resumed.cycles) == _plain(whole.cycles)
    assert resumed.best.cycle == whole.best.cycle == 1
    assert [s.name for s in trainer.skills] == [s.name for s in whole_trainer.skills]
    for a, b in zip(trainer.net.state_dict().values(), whole_trainer.net.state_dict().values()):
        assert torch.equal(a, b)
    # a finished run resumes to nothing more (no training, no designer call)
    assert done[-1]["stopped"] and done[-1]["next"] == 5
    again = _evolve_run(
        ScriptedLLM([]), trainer, rewards, cycles=5, patience=3, resume=(done[-1], best)
    )
    assert _plain(again.cycles) == _plain(whole.cycles)
