"""The controller: state, scorers, Top-K and Gumbel-Top-K selection, joint log-probability."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from skillstream.errors import ConfigError
from skillstream.extract import AllSkills, MemorySkill
from skillstream.memskill.controller import (
    CosineScorer,
    TopKController,
    TorchScorer,
    controller_state,
    fuse,
    gumbel_top_k,
    joint_log_prob,
    joint_log_prob_torch,
    load_scorer,
    make_controller,
    save_scorer,
    scorer_net,
    top_k,
)
from skillstream.memskill.seeds import PRIMITIVES
from skillstream.settings import Settings
from tests.memskill.conftest import make_memory

E: np.ndarray = np.eye(4, dtype=np.float32)


def skill(name: str, action: str = "INSERT") -> MemorySkill:
    return MemorySkill(name, f"desc {name}", "Purpose: p", action)


def fake_embed(vectors: dict[str, np.ndarray]):
    calls: list[list[str]] = []

    def embed(texts):
        calls.append(list(texts))
        return np.stack([vectors[t] for t in texts])

    embed.calls = calls  # type: ignore[attr-defined]
    return embed


# ------------------------------------------------------------------------------------ state
def test_mean_and_weighted_fusion():
    span = E[0]
    mems = np.stack([E[0], E[1]])
    assert fuse(span, mems, "mean").tolist() == [0.5, 0.5, 0.0, 0.0]
    w = math.exp(10) / (math.exp(10) + 1)  # softmax of cosine 1 and 0 at temperature 0.1
    assert np.allclose(fuse(span, mems, "weighted"), [w, 1 - w, 0, 0])
    assert fuse(span, np.zeros((0, 4), np.float32)).tolist() == [0.0] * 4
    with pytest.raises(ConfigError, match="fusion must be one of"):
        fuse(span, mems, "max")


def test_state_is_span_then_fused_memories():
    mems = [make_memory(0, "a", vector=E[1]), make_memory(1, "b", vector=E[3])]
    state = controller_state(E[0], mems)
    assert state.tolist() == [1, 0, 0, 0, 0, 0.5, 0, 0.5]
    assert controller_state(E[0], []).tolist() == [1, 0, 0, 0, 0, 0, 0, 0]


def test_cosine_scorer_averages_span_and_memory_similarity():
    skills = np.stack([E[0], E[1]])
    only_span = CosineScorer(temperature=0.5).logits(np.concatenate([E[0], np.zeros(4)]), skills)
    assert only_span.tolist() == [2.0, 0.0]
    both = CosineScorer(temperature=0.5).logits(np.concatenate([E[0], 3 * E[1]]), skills)
    assert both.tolist() == [1.0, 1.0]


# ------------------------------------------------------------------------------------ math
def test_top_k_is_ordered_breaks_ties_by_position_and_skips_masked():
    assert top_k(np.array([1.0, 3.0, 3.0, -np.inf, 2.0]), 3) == [1, 2, 4]
    assert top_k(np.array([1.0, -np.inf]), 3) == [0]


def test_joint_log_prob_matches_the_product_formula():
    z = np.array([2.0, 1.0, 0.5, -1.0])
    p = np.exp(z) / np.exp(z).sum()
    order = [1, 0, 3]
    expected = math.log(p[1] / 1) + math.log(p[0] / (1 - p[1])) + math.log(p[3] / (1 - p[1] - p[0]))
    assert joint_log_prob(z, order) == pytest.approx(expected, abs=1e-12)
    assert joint_log_prob(z, [2]) == pytest.approx(math.log(p[2]), abs=1e-12)
    masked = np.array([2.0, -np.inf, 0.0])
    q = np.exp([2.0, 0.0]) / np.exp([2.0, 0.0]).sum()
    assert joint_log_prob(masked, [2, 0]) == pytest.approx(math.log(q[1]), abs=1e-12)


def test_torch_joint_log_prob_agrees_and_has_gradients():
    import torch

    z = torch.tensor([2.0, 1.0, 0.5, -1.0], dtype=torch.float64, requires_grad=True)
    lp = joint_log_prob_torch(z, [1, 0, 3])
    assert lp.item() == pytest.approx(joint_log_prob(z.detach().numpy(), [1, 0, 3]), abs=1e-12)
    lp.backward()
    assert z.grad is not None and float(z.grad.abs().sum()) > 0
    assert float(z.grad.sum()) == pytest.approx(0.0, abs=1e-12)  # softmax is shift-invariant


def test_gumbel_top_k_is_seeded_and_samples_the_softmax():
    z = np.log(np.array([0.6, 0.3, 0.1]))
    a = [tuple(gumbel_top_k(z, 2, np.random.default_rng(7))) for _ in range(3)]
    assert a[0] == a[1] == a[2]
    rng = np.random.default_rng(0)
    firsts = Counter(gumbel_top_k(z, 1, rng)[0] for _ in range(20000))
    assert abs(firsts[0] / 20000 - 0.6) < 0.02 and abs(firsts[2] / 20000 - 0.1) < 0.01
    pairs = Counter(tuple(gumbel_top_k(z, 2, rng)) for _ in range(20000))
    # P(1 then 0) = 0.3 * 0.6 / 0.7
    assert abs(pairs[(1, 0)] / 20000 - 0.3 * 0.6 / 0.7) < 0.02


# ------------------------------------------------------------------------------------ controller
SKILLS = [skill("a"), skill("b", "UPDATE"), skill("c", "DELETE"), skill("d", "NOOP")]
VECS = {"desc a": E[0], "desc b": E[1], "desc c": E[2], "desc d": E[3]}


def test_top_k_controller_selects_the_closest_descriptions_and_caches_them():
    embed = fake_embed(VECS)
    ctl = TopKController(embed, k=2)
    mems = [make_memory(0, "x", vector=E[2])]
    span = (0.6 * E[1] + 0.8 * E[3]).astype(np.float32)
    sel = ctl.decide(span, mems, SKILLS)
    # span half favours d (0.8) then b (0.6); the memory half adds c: (0+1)/2=0.5 for c,
    # (0.8+0)/2=0.4 for d, 0.3 for b, 0 for a.
    assert [s.name for s in sel.skills] == ["c", "d"] and sel.indices == [2, 3]
    assert sel.log_prob == pytest.approx(joint_log_prob(sel.logits, [2, 3]))
    assert ctl.select(span, mems, SKILLS) == sel.skills
    assert len(embed.calls) == 1  # descriptions are embedded once


def test_update_and_delete_are_masked_without_retrieved_memories():
    ctl = TopKController(fake_embed(VECS), k=3)
    span = (0.6 * E[1] + 0.8 * E[2]).astype(np.float32)
    sel = ctl.decide(span, [], SKILLS)
    assert [s.name for s in sel.skills] == ["a", "d"]
    assert np.isinf(sel.logits[1]) and np.isinf(sel.logits[2])


def test_without_a_span_vector_every_skill_is_kept():
    ctl = TopKController(fake_embed(VECS), k=1)
    assert ctl.select(None, [], SKILLS) == SKILLS


def test_gumbel_exploration_is_reproducible_per_span_and_varies_across_spans():
    ctl = TopKController(
        fake_embed(VECS), CosineScorer(temperature=10.0), k=2, explore=True, seed=3
    )
    mems = [make_memory(0, "x", vector=E[0])]
    spans = [
        np.array([1, i, 0.5, 0.2], np.float32) / np.linalg.norm([1, i, 0.5, 0.2]) for i in range(12)
    ]
    first = [tuple(ctl.decide(s, mems, SKILLS).indices) for s in spans]
    again = [tuple(ctl.decide(s, mems, SKILLS).indices) for s in spans]
    assert first == again and len(set(first)) > 1
    greedy = [tuple(ctl.decide(s, mems, SKILLS, explore=False).indices) for s in spans]
    assert greedy != first


def test_controller_checks_its_settings():
    with pytest.raises(ConfigError, match="at least 1"):
        TopKController(fake_embed(VECS), k=0)
    with pytest.raises(ConfigError, match="FUSION"):
        TopKController(fake_embed(VECS), fusion="max")


# ------------------------------------------------------------------------------------ torch scorer
def test_torch_scorer_round_trips_through_a_checkpoint(tmp_path):
    import torch

    torch.manual_seed(0)
    net = scorer_net(4, hidden=8)
    path = save_scorer(net, tmp_path / "scorer.pt", note="test")
    scorer = load_scorer(path, 4)
    state = np.array([1, 0, 0, 0, 0, 0.5, 0, 0.5], np.float32)
    skills = np.stack([E[0], E[1], E[2]])
    with torch.no_grad():
        want = net(torch.from_numpy(state), torch.from_numpy(skills)).numpy()
        batch = net(torch.from_numpy(np.stack([state, state])), torch.from_numpy(skills))
        value = net.value(torch.from_numpy(state))
    assert np.allclose(scorer.logits(state, skills), want)
    assert tuple(batch.shape) == (2, 3) and value.dim() == 0
    with pytest.raises(ConfigError, match="trained for 4-wide embeddings but the embedder gives 8"):
        load_scorer(path, 8)
    with pytest.raises(ConfigError, match="not a file"):
        load_scorer(tmp_path / "missing.pt", 4)
    torch.save({"weights": 1}, str(tmp_path / "other.pt"))
    with pytest.raises(ConfigError, match="not a memory skill scorer checkpoint"):
        load_scorer(tmp_path / "other.pt", 4)


def test_a_network_with_the_cosine_prior_starts_as_the_cosine_scorer(tmp_path):
    import torch

    torch.manual_seed(1)
    net = scorer_net(4, hidden=8, prior=0.05)
    rng = np.random.default_rng(0)
    skills = rng.normal(size=(5, 4)).astype(np.float32)
    for fused in (np.zeros(4, np.float32), rng.normal(size=4).astype(np.float32)):
        state = np.concatenate([rng.normal(size=4).astype(np.float32), fused])
        want = CosineScorer(0.05).logits(state, skills)
        got = TorchScorer(net).logits(state, skills)
        assert np.allclose(got, want, atol=1e-4)
        assert top_k(got, 3) == top_k(want, 3)
    # the learned part moves it away; a checkpoint keeps the prior
    with torch.no_grad():
        net.actor[-1].bias.fill_(0.5)
    scorer = load_scorer(save_scorer(net, tmp_path / "p.pt"), 4)
    assert np.allclose(scorer.logits(state, skills), want + 0.5, atol=1e-4)
    with pytest.raises(ConfigError, match="prior"):
        scorer_net(4, prior=-1.0)


def test_a_skill_correction_shifts_every_span_alike_and_survives_a_checkpoint(tmp_path):
    import torch

    torch.manual_seed(2)
    net = scorer_net(4, hidden=8, prior=0.05, correction="skill")
    rng = np.random.default_rng(3)
    skills = rng.normal(size=(5, 4)).astype(np.float32)
    states = [
        np.concatenate([rng.normal(size=4), rng.normal(size=4)]).astype(np.float32)
        for _ in range(3)
    ]
    for state in states:  # fresh: exactly the cosine controller
        assert np.allclose(
            TorchScorer(net).logits(state, skills),
            CosineScorer(0.05).logits(state, skills),
            atol=1e-4,
        )
    with torch.no_grad():
        net.skill_bias.weight.copy_(torch.tensor([[1.0, -2.0, 0.5, 0.0]]))
    shift = skills @ np.array([1.0, -2.0, 0.5, 0.0])
    scorer = load_scorer(save_scorer(net, tmp_path / "s.pt"), 4)
    for state in states:  # the learned part depends on the skill only, never on the span
        got = scorer.logits(state, skills) - CosineScorer(0.05).logits(state, skills)
        assert np.allclose(got, shift, atol=1e-4)
    with pytest.raises(ConfigError, match="correction must be one of .*'skill'.*got 'span'"):
        scorer_net(4, prior=0.05, correction="span")


def controller(embedder, **keys):
    """The controller of ``Settings.from_keys(**keys)``."""
    s = Settings.from_keys(**keys)
    return make_controller(s.extraction, s.llm.backend, embedder)


def test_make_controller_follows_the_settings(tmp_path, embedder):
    rules = controller(embedder, llm="rules")
    assert isinstance(rules, AllSkills)
    # an untrained controller never withholds a primitive: every skill until one is trained
    assert isinstance(controller(embedder, llm="openai", memory_skill_k=2), AllSkills)
    llm = controller(embedder, llm="openai", memory_skill_k=2, memory_skill_selection="top_k")
    assert isinstance(llm, TopKController) and llm.k == 2 and not llm.explore
    assert isinstance(llm.scorer, CosineScorer)
    forced = controller(embedder, llm="rules", memory_skill_selection="top_k")
    assert isinstance(forced, TopKController)
    assert isinstance(controller(embedder, llm="openai", memory_skill_selection="all"), AllSkills)
    g = controller(embedder, llm="openai", memory_skill_selection="gumbel", memory_skill_seed=5)
    assert g.explore and g.seed == 5
    path = save_scorer(scorer_net(embedder.dim), tmp_path / "s.pt")
    trained = controller(embedder, llm="openai", memory_skill_scorer=str(path))
    assert isinstance(trained.scorer, TorchScorer)
    with pytest.raises(ConfigError, match="memory_skill_selection: .*'top_k'"):
        controller(embedder, memory_skill_selection="best")


def test_real_embeddings_keep_insert_for_a_span_with_news(embedder):
    ctl = controller(embedder, llm="openai", memory_skill_selection="top_k")
    span = embedder.encode(
        ['Caroline said, "I moved to Lisbon last month and started as a nurse."']
    )[0]
    sel = ctl.decide(span, [], list(PRIMITIVES))
    assert [s.name for s in sel.skills] == ["insert", "skip"]
