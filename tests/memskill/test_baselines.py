"""The baselines a trained controller is compared with, and the average of several runs' weights
(``skillstream.memskill.train``)."""

from __future__ import annotations

from skillstream.memskill.seeds import PRIMITIVES
from skillstream.memskill.train import EverySkill, RandomK, average_weights

SKILLS = list(PRIMITIVES)


def test_random_k_draws_k_distinct_skills_in_bank_order_and_repeats_with_its_seed():
    skills = SKILLS
    first = [RandomK(2, seed=7).select(None, [], skills) for _ in range(3)]
    again = [RandomK(2, seed=7).select(None, [], skills) for _ in range(3)]
    assert first == again
    for chosen in first:
        assert len(chosen) == len(set(s.name for s in chosen)) == min(2, len(skills))
        assert [skills.index(s) for s in chosen] == sorted(skills.index(s) for s in chosen)


def test_every_skill_selects_the_whole_bank():
    skills = SKILLS
    assert EverySkill().select(None, [], skills) == skills


def test_average_weights_is_the_element_wise_mean():
    assert average_weights([{"w": 1.0, "b": 4.0}, {"w": 3.0, "b": 0.0}]) == {"w": 2.0, "b": 2.0}
