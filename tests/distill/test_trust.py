"""Trust in a task skill (``distill.trust``): probation, outcomes, usage age and pins, each change
of state at an exact time with its reason."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from skillstream.distill.record import TaskSkill
from skillstream.distill.trust import (
    TrustRules,
    age_change,
    born,
    counters,
    outcome_of,
    pin,
    promote,
    record_outcome,
    reliability,
    serve_order,
)

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
RULES = TrustRules(min_support=2, retire_below=0.4, min_outcomes=3, view_weight=0.1)


def skill(name: str = "book-a-table", status: str = "active", **fields) -> TaskSkill:
    s = TaskSkill.new("u1", name, description="d", status=status, created_at=T0, updated_at=T0)
    for k, v in fields.items():
        setattr(s, k, v)
    return s


def test_a_new_skill_waits_for_a_second_segment():
    one = skill(status="candidate", source_segment_ids=["s1"])
    assert born(one, RULES) == "candidate"
    assert promote(one, RULES) is None
    two = skill(status="candidate", source_segment_ids=["s1", "s2"])
    assert born(two, RULES) == "active"
    assert promote(two, RULES) == ("active", "supported by 2 segments")
    # one segment recorded twice is one occurrence
    same = skill(status="candidate", source_segment_ids=["s1", "s1"])
    assert promote(same, RULES) is None
    assert born(one, TrustRules()) == "active"


def test_failures_retire_a_skill_at_the_third_outcome():
    s = skill(version=4)
    at = [T0 + timedelta(hours=h) for h in (1, 2, 3)]
    s, change = record_outcome(s, False, RULES, at[0], "wrong form")
    assert (s.version, s.status, change) == (5, "active", None)
    s, change = record_outcome(s, False, RULES, at[1])
    assert (s.version, s.status, change) == (6, "active", None)
    s, change = record_outcome(s, False, RULES, at[2], "timed out")
    assert s.status == "retired" and s.version == 7 and s.updated_at == at[2]
    assert change is not None
    assert (change.old, change.new, change.at) == ("active", "retired", at[2])
    assert change.reason == "reliability 0.20 below 0.4 after failure: timed out"
    assert round(reliability(s, RULES), 4) == 0.2


def test_successes_and_views_keep_a_skill_served():
    s = skill()
    for h in range(3):
        s, _ = record_outcome(s, h != 1, RULES, T0 + timedelta(hours=h))
    assert s.status == "active" and reliability(s, RULES) == 3 / 5
    viewed = skill(times_used=10)
    assert reliability(viewed, RULES) == (1 + 1) / (1 + 2)


def test_a_pinned_skill_is_never_retired_nor_aged():
    s, change = pin(skill(status="retired"), True, T0)
    assert (change.old, change.new, change.reason, change.at) == (
        "retired",
        "active",
        "pinned by a person",
        T0,
    )
    for h in range(5):
        s, moved = record_outcome(s, False, RULES, T0 + timedelta(hours=h))
        assert moved is None
    assert s.status == "active"
    assert age_change(s, RULES, T0 + timedelta(days=1000)) is None
    s, change = pin(s, False, T0 + timedelta(days=1))
    assert (change.old, change.new, change.reason) == ("active", "active", "unpinned by a person")


def test_unused_skills_go_stale_then_archived():
    rules = TrustRules(stale_days=30, archive_days=90)
    used = T0 + timedelta(days=2)
    s = skill(last_used_at=used)
    assert age_change(s, rules, used + timedelta(days=29, hours=23)) is None
    stale_at = used + timedelta(days=30)
    s, change = age_change(s, rules, stale_at)
    assert (s.status, change.old, change.new, change.at) == ("stale", "active", "stale", stale_at)
    assert change.reason == "unused for 30 days (limit 30)"
    assert age_change(s, rules, stale_at + timedelta(days=1)) is None
    archived_at = used + timedelta(days=90)
    s, change = age_change(s, rules, archived_at)
    assert (s.status, change.old, change.new, change.at) == (
        "archived",
        "stale",
        "archived",
        archived_at,
    )
    assert age_change(s, rules, archived_at + timedelta(days=400)) is None
    # a stale skill that is distilled again is active
    assert promote(skill(status="stale"), RULES) == ("active", "distilled again from a new segment")


def test_outcome_metadata_and_serving_order():
    assert outcome_of('{"outcome": "success"}') is True
    assert outcome_of('{"outcome": "FAILED"}') is False
    assert outcome_of('{"outcome": false}') is False
    assert outcome_of('{"other": 1}') is None
    assert outcome_of("not json") is None
    assert outcome_of(None) is None
    good = skill("good")
    good.stats = {"trust": {"successes": 3}}
    meh = skill("meh")
    cand = skill("cand", status="candidate")
    gone = skill("gone", status="retired")
    order = serve_order([gone, cand, meh, good], RULES)
    assert [s.name for s in order] == ["good", "meh", "cand", "gone"]


def test_outcomes_in_message_metadata_count_for_the_skill_a_segment_distils():
    import dataclasses

    from skillstream.distill.distiller import OwnerTaskSkills, TaskSkillDistiller
    from skillstream.distill.draft import Draft
    from skillstream.distill.record import ConversationBlock
    from tests.distill.conftest import DEPLOY_1, block
    from tests.distill.test_grounding import Scripted, embed

    def draft() -> Draft:
        return Draft(name="deploy-flask-app", title="Deploy", procedure=["Run pytest."])

    core = TaskSkillDistiller(Scripted(draft), embed, trust=RULES, clock=lambda: T0)
    state = OwnerTaskSkills("u1")
    for n in range(3):
        plain = block(DEPLOY_1, conversation_id=f"c{n}")
        last = dataclasses.replace(plain.messages[-1], metadata='{"outcome": "failure"}')
        (r,) = core.distill_block(state, ConversationBlock.of([*plain.messages[:-1], last]))
    assert r.skill.status == "retired"
    assert r.reason == (
        "active -> retired: reliability 0.20 below 0.4 after failure: message c2-s1-7"
    )
    assert counters(r.skill) == {"successes": 0.0, "failures": 3.0, "pinned": False}
