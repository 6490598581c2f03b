"""The offline distiller: steps, segmentation, gating, merging into one task skill, full mode."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from skillstream.distill import steps as st
from skillstream.distill.distiller import OwnerTaskSkills, TaskSkillDistiller
from skillstream.distill.draft import Draft
from skillstream.distill.heuristics import HeuristicDistiller, draft_of, title_of
from skillstream.distill.segment import exchanges, segment_block
from tests.distill.conftest import DEPLOY_1, DEPLOY_2, SMALL_TALK, block

NOW = datetime(2025, 6, 1, tzinfo=UTC)


def core(embedder, **kw) -> TaskSkillDistiller:
    kw.setdefault("clock", lambda: NOW)
    return TaskSkillDistiller(HeuristicDistiller(embedder.encode), embedder.encode, **kw)


@pytest.mark.parametrize(
    "role,sentence,step",
    [
        (
            "assistant",
            "Sure. First, run the test suite with pytest.",
            None,
        ),  # two sentences: see below
        ("assistant", "First, run the test suite with pytest.", "Run the test suite with pytest."),
        ("assistant", "Then build the image.", "Build the image."),
        ("assistant", "You need to log in to the registry first.", "Log in to the registry first."),
        ("assistant", "2. Restart the service", "Restart the service"),
        ("assistant", "Could I get your name, please?", "Ask: Could I get your name, please?"),
        ("assistant", "Please provide your rank.", "Ask for your rank."),
        ("assistant", "Is there anything else that I can do for you?", None),
        ("assistant", "You might consider flying TAP from Boston.", None),
        ("user", "Build me a website.", "Build me a website."),
        ("assistant", "Thanks, that's all for now.", None),
    ],
)
def test_step_sentences(role, sentence, step):
    got = [st.step_of(s, role) for s in st.sentences(sentence)]
    if sentence.startswith("Sure."):
        assert got == [None, "Run the test suite with pytest."]
    else:
        assert got == [step]


def test_preferences_are_the_users_own_in_the_third_person():
    assert st.preference_of(
        "I always want the health check to run before we announce a deploy."
    ) == ("Always wants the health check to run before we announce a deploy.")
    assert st.preference_of("I prefer window seats and I hate red-eye flights.") == (
        "Prefers window seats and the user hate red-eye flights."
    )
    assert st.preference_of("Do you prefer window seats?") is None
    assert st.preference_of("我更喜欢靠窗的座位。") == "我更喜欢靠窗的座位。"


def test_names_and_proper_nouns_are_not_triggers():
    turns = [
        ("assistant", "Could I get your name, please?"),
        ("user", "Angela"),
        ("user", "My name is Brian and I need to book a table at Cactus."),
    ]
    assert st.names_given(turns) == {"angela", "brian"}
    terms = [
        t for t, _ in st.salient_terms([(t, 1.0) for _, t in turns], exclude=st.names_given(turns))
    ]
    assert "angela" not in terms and "brian" not in terms and "cactus" not in terms
    assert "table" in terms and "book" in terms


def test_chit_chat_is_dropped_and_one_task_stays_one_segment(embedder):
    b = block(SMALL_TALK[:2] + DEPLOY_1)
    assert exchanges(b)[0][0] == 2  # the greeting exchange is gone
    segs = segment_block(b, embedder.encode)
    assert len(segs) == 1 and segs[0].positions == tuple(range(2, len(b.messages)))
    assert segment_block(block(SMALL_TALK[:2] + SMALL_TALK[4:]), embedder.encode) == []


def test_two_interleaved_tasks_become_two_segments(embedder):
    trip = [
        ("user", "Can you help me plan a trip itinerary for three days in Rome?"),
        ("assistant", "First, list the sights you want to see. Then group them by neighbourhood."),
        ("assistant", "Book the Vatican tickets online in advance."),
    ]
    back = [
        ("user", "Back to the Rome trip itinerary: how should I plan the evenings in Rome?"),
        (
            "assistant",
            "Reserve dinner near your last sight of the day and check the opening hours.",
        ),
    ]
    b = block(trip + DEPLOY_1[:5] + back)
    segs = segment_block(b, embedder.encode)
    assert [s.positions for s in segs] == [(0, 1, 2, 8, 9), (3, 4, 5, 6, 7)]
    assert len({s.segment_id for s in segs}) == 2


def test_draft_of_the_deploy_conversation():
    seg = segment_block(block(DEPLOY_1), lambda t: None)[0]
    d = draft_of(seg)
    assert d.title == "Deploy flask app"
    assert d.procedure == [
        "Run the test suite with pytest and make sure it passes.",
        "Build the Docker image with docker build -t app:staging .",
        "Push the image to the registry with docker push registry.local/app:staging.",
        "Restart the service on staging with systemctl restart app and check the health endpoint.",
    ]
    assert d.experience == [
        "If it failed at the push step with an authentication error: log in to the registry first "
        "with docker login registry.local, then push again."
    ]
    assert d.preferences == ["Always wants the health check to run before we announce a deploy."]
    assert d.verification == ["Check the health endpoint."]
    assert d.tools == ["pytest", "docker", "systemctl"]
    assert {"deploy", "staging", "docker"} <= set(d.triggers) and "flask" not in d.triggers
    assert d.planned_scripts == {"run.sh": "Run the commands of the procedure in order."}
    assert title_of(seg, []) == "Deploy flask app"


def test_two_distillations_of_one_theme_give_one_skill_at_version_2(embedder):
    c = core(embedder)
    state = OwnerTaskSkills("omar")
    first = c.distill_block(state, block(DEPLOY_1, owner_id="omar", session_id="s1"))
    second = c.distill_block(state, block(DEPLOY_2, owner_id="omar", session_id="s2"))
    assert [r.action for r in first + second] == ["created", "updated"]
    (skill,) = state.skills.values()
    assert (skill.name, skill.version, skill.status) == ("deploy-flask-app", 2, "active")
    assert len(skill.source_segment_ids) == 2
    assert (
        "Prefers that we post the result in the #deploys channel afterwards." in skill.preferences
    )
    assert skill.vector is not None and len(skill.vector) == embedder.dim
    # the same block again is recognised and skipped
    again = c.distill_block(state, block(DEPLOY_2, owner_id="omar", session_id="s2"))
    assert [r.action for r in again] == ["skipped"] and skill.version == 2


def test_the_gate_drops_segments_without_procedure(embedder):
    state = OwnerTaskSkills("maya")
    trip_talk = [
        ("user", "I'm planning a trip to Lisbon next month with my sister Ana."),
        ("user", "I prefer window seats and I hate red-eye flights."),
        (
            "assistant",
            "You might consider flying TAP from Boston, they have good morning departures.",
        ),
    ]
    results = core(embedder).distill_block(state, block(trip_talk, owner_id="maya"))
    assert [r.action for r in results] == ["gated"] and not state.skills
    # with the gate off the single step is not enough for a draft either way: no skill
    results = core(embedder, min_steps=0).distill_block(
        OwnerTaskSkills("maya"), block(DEPLOY_1[:3], owner_id="maya")
    )
    assert [r.action for r in results] == ["created"]


class _Naming:
    """A distiller whose draft claims to update a skill that was never recalled."""

    name = "test"

    def __init__(self, inner):
        self.inner = inner

    def chunk(self, b):
        return self.inner.chunk(b)

    def propose(self, segment, recall):
        recall("anything")
        return Draft(
            title="Other task", procedure=["Do a.", "Do b."], update_of="tsk_not_recalled"
        ), []

    def details(self, skill):
        return skill, []


def test_an_update_may_only_name_a_recalled_skill(embedder):
    c = TaskSkillDistiller(
        _Naming(HeuristicDistiller(embedder.encode)), embedder.encode, clock=lambda: NOW
    )
    state = OwnerTaskSkills("u1")
    (r,) = c.distill_block(state, block(DEPLOY_1))
    assert r.action == "created" and r.skill.name == "other-task" and r.skill.version == 1


def test_full_mode_offline_writes_a_script_and_notes(embedder):
    state = OwnerTaskSkills("omar")
    (r,) = core(embedder, full=True).distill_block(state, block(DEPLOY_1, owner_id="omar"))
    script = r.skill.scripts["run.sh"]
    assert script.splitlines()[-4:] == [
        "pytest",
        "docker build -t app:staging",
        "docker push registry.local/app:staging",
        "systemctl restart app",
    ]
    assert r.skill.planned_scripts == {}
    assert "## Pitfalls" in r.skill.references["notes.md"]


def test_a_chinese_task_gets_steps_lessons_preferences_and_a_valid_name(embedder):
    zh = [
        ("user", "请帮我把网站部署到测试服务器。"),
        ("assistant", "首先运行测试。然后构建镜像并推送到仓库。"),
        ("assistant", "最后重启服务并检查健康接口。"),
        ("user", "推送的时候报错了，提示认证失败。"),
        ("assistant", "请先登录镜像仓库，再重新推送。"),
        ("user", "我希望每次部署后都在群里通知大家。"),
    ]
    (r,) = core(embedder).distill_block(OwnerTaskSkills("lin"), block(zh, owner_id="lin"))
    s = r.skill
    assert s.lang == "zh" and s.title == "推送部署流程"
    assert s.name.startswith("task-") and len(s.name) == 13
    assert s.procedure == ["运行测试。", "构建镜像并推送到仓库。", "重启服务并检查健康接口。"]
    assert s.experience == ["如果推送的时候报错了，提示认证失败：先登录镜像仓库，再重新推送。"]
    assert s.preferences == ["我希望每次部署后都在群里通知大家。"]
    assert s.description.startswith("推送部署流程。步骤：运行测试; 构建镜像并推送到仓库")
