"""Grounding (every command, path, URL, file and tool of a skill comes from its sources) and step
coverage (how much of a followed procedure a skill covers, in order)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from skillstream.distill.coverage import step_recall
from skillstream.distill.distiller import OwnerTaskSkills, TaskSkillDistiller
from skillstream.distill.draft import Draft
from skillstream.distill.grounding import grounded, invented, tokens_in
from skillstream.distill.recall import RecallHit
from skillstream.distill.record import ConversationBlock, TaskSegment, TaskSkill
from skillstream.distill.trust import TrustRules
from tests.distill.conftest import DEPLOY_1, DEPLOY_2, block


def test_concrete_tokens_of_a_text():
    text = (
        "Run `kubectl apply -f deploy.yaml`, edit config/app.yaml and /etc/nginx/nginx.conf, "
        "then open https://status.example.org/app. Ask for the name and/or date."
    )
    assert tokens_in(text) == [
        "kubectl apply -f deploy.yaml",
        "https://status.example.org/app",
        "config/app.yaml",
        "/etc/nginx/nginx.conf",
        "deploy.yaml",
        "kubectl",
    ]


def test_the_generalisation_rule():
    source = "then run kubectl rollout status deploy/api and wait"
    assert grounded("kubectl rollout status deploy/<service>", source)
    assert grounded("kubectl rollout status deploy/${SERVICE}", source)
    assert not grounded("kubectl rollout undo deploy/<service>", source)
    assert not grounded("helm upgrade app", source)


def test_invented_tokens_of_a_skill():
    skill = TaskSkill.new(
        "u1",
        "deploy",
        procedure=["Run pytest.", "Push with docker push registry.local/app:staging."],
        tools=["docker", "ansible"],
        scripts={"run.sh": "#!/usr/bin/env sh\n# notes\ndocker push registry.local/app:staging\n"},
    )
    source = "Push the image with docker push registry.local/app:staging after pytest."
    assert invented(skill, [source]) == ["ansible"]


class Scripted:
    """A distiller that proposes a fixed draft (an LLM's, say) for every segment."""

    name = "scripted"

    def __init__(self, draft: Callable[[], Draft]) -> None:
        self.draft = draft

    def chunk(self, block: ConversationBlock):
        return [TaskSegment.of(block, list(range(len(block.messages))))], []

    def propose(self, segment: TaskSegment, recall: Callable[[str], list[RecallHit]]):
        hits = recall("deploy the flask app")
        draft = self.draft()
        draft.update_of = hits[0].skill.id if hits else None
        return draft, []

    def details(self, skill: TaskSkill):
        return skill, []


def embed(texts):
    return np.ones((len(texts), 4), dtype=np.float32) / 2.0


def test_a_draft_with_an_invented_command_is_held_back_and_cannot_update():
    def draft() -> Draft:
        return Draft(
            name="deploy-flask-app",
            title="Deploy the Flask app",
            description="Deploy the Flask app to staging.",
            procedure=["Run pytest.", "Run helm upgrade app ./chart."],
            merge="replace",
        )

    core = TaskSkillDistiller(Scripted(draft), embed, trust=TrustRules(min_support=1))
    state = OwnerTaskSkills("u1")
    (first,) = core.distill_block(state, block(DEPLOY_1))
    assert (first.action, first.skill.status) == ("created", "candidate")
    assert first.invented == ["helm upgrade app ./chart", "./chart", "helm"]
    assert (
        first.reason
        == "new: candidate; not in its sources: helm upgrade app ./chart, ./chart, helm"
    )
    assert first.skill.package_url is None
    (second,) = core.distill_block(state, block(DEPLOY_2, session_id="s2"))
    assert (second.action, second.skill) == ("ungrounded", None)
    assert second.reason.startswith("update of deploy-flask-app refused, not in its sources: ")


def test_step_recall_counts_steps_covered_in_order():
    done = ["Ask for the guest name.", "Ask for the arrival date.", "Confirm the booking."]
    assert step_recall(done, done) == 1.0
    assert step_recall(done, ["Confirm the booking.", "Ask for the guest name."]) == 1 / 3
    assert step_recall(done, ["Ask the guest name please.", "Confirm booking."]) == 2 / 3
    assert step_recall(done, []) == 0.0
    assert step_recall([], done) == 0.0
