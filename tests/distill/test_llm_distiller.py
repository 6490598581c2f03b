"""The LLM distiller against a real HTTP server speaking the OpenAI protocol (scripted answers)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from skillstream.distill.distiller import OwnerTaskSkills, TaskSkillDistiller
from skillstream.distill.factory import make_distiller
from skillstream.distill.llm import LLMDistiller
from skillstream.llm import OpenAIBackend
from skillstream.settings import Settings
from tests.distill.conftest import DEPLOY_1, DEPLOY_2, SMALL_TALK, block
from tests.servers.openai_stub import STUB_MODEL, OpenAIStub

NOW = datetime(2025, 6, 1, tzinfo=UTC)


def purpose(req: dict) -> str:
    return req["response_format"]["json_schema"]["name"]


def prompt(req: dict) -> str:
    return req["messages"][-1]["content"]


def extracted(update_of: str = "", **kw) -> str:
    doc = {
        "skip": False,
        "name": "web-app-deployment",
        "title": "Web app deployment",
        "description": "Deploy a web app to staging with tests, image "
        "build, push and restart. Use it for staging deploys.",
        "triggers": ["deploy", "staging"],
        "procedure": ["Run the tests.", "Build and push the image.", "Restart the service."],
        "experience": ["Log in to the registry before pushing."],
        "preferences": ["Run the health check before announcing."],
        "examples": [],
        "tools": ["docker"],
        "verification": ["The health endpoint returns 200."],
        "planned_scripts": {"deploy.sh": "Build, push and restart."},
        "planned_references": {},
        "update": bool(update_of),
        "update_of": update_of,
    }
    doc.update(kw)
    return json.dumps(doc)


def make(stub: OpenAIStub, tmp_path, **kw) -> tuple[TaskSkillDistiller, OpenAIBackend]:
    settings = Settings.from_keys(
        home=str(tmp_path),
        llm="openai",
        llm_base_url=stub.url,
        llm_model=STUB_MODEL,
        llm_timeout_s=5.0,
        llm_max_retries=2,
        llm_cache=False,
    )
    backend = OpenAIBackend(settings.llm, backoff_base_s=0.001, backoff_max_s=0.01)
    distiller = make_distiller(
        settings.distillation,
        settings.llm,
        settings.storage.home,
        embed=None,  # type: ignore[arg-type]  # never called: these drafts need no vectors
        backend=backend,
    )
    assert isinstance(distiller, LLMDistiller)
    from skillstream.embed import get_embedder

    core = TaskSkillDistiller(distiller, get_embedder().encode, clock=lambda: NOW, **kw)
    return core, backend


def test_chunk_extract_and_an_update_of_a_recalled_skill(tmp_path):
    state = {"first": None}

    def script(req):
        p = purpose(req)
        if p == "distill_chunk":
            n = prompt(req).count("\n[")
            return json.dumps({"tasks": [{"name": "Web app deployment", "ranges": [[0, n - 1]]}]})
        assert p == "distill_extract"
        text = prompt(req)
        if state["first"] is None:
            assert "(none)" in text
            state["first"] = True
            return extracted()
        existing_id = text.split('"id": "')[1].split('"')[0]  # the recalled skill's id, as shown
        return extracted(
            update_of=existing_id,
            procedure=["Run the tests.", "Log in, then build and push.", "Restart."],
        )

    with OpenAIStub(script) as stub:
        core, _ = make(stub, tmp_path)
        owner = OwnerTaskSkills("omar")
        r1 = core.distill_block(owner, block(DEPLOY_1, owner_id="omar"))
        r2 = core.distill_block(owner, block(DEPLOY_2, owner_id="omar", session_id="s2"))
        assert [purpose(r) for r in stub.requests] == ["distill_chunk", "distill_extract"] * 2
        assert "[0] user (User): Can you walk me through deploying" in prompt(stub.requests[0])
    assert [r.action for r in r1 + r2] == ["created", "updated"]
    skill = r2[0].skill
    assert (skill.name, skill.version, skill.distiller) == ("web-app-deployment", 2, "openai")
    assert skill.procedure == ["Run the tests.", "Log in, then build and push.", "Restart."]
    assert skill.planned_scripts == {"deploy.sh": "Build, push and restart."}
    assert [c.purpose for c in r1[0].llm_calls] == ["distill_chunk", "distill_extract"]


def test_an_update_naming_an_unrecalled_skill_becomes_a_new_skill(tmp_path):
    def script(req):
        if purpose(req) == "distill_chunk":
            return json.dumps({"tasks": [{"name": "Deploy", "ranges": [[0, 4]]}]})
        return extracted(update_of="tsk_made_up", name="deploy-app")

    with OpenAIStub(script) as stub:
        core, _ = make(stub, tmp_path)
        (r,) = core.distill_block(OwnerTaskSkills("omar"), block(DEPLOY_1, owner_id="omar"))
    assert (r.action, r.skill.name, r.skill.version) == ("created", "deploy-app", 1)


def test_bad_ranges_are_asked_again_and_chit_chat_costs_no_call(tmp_path):
    answers = [
        json.dumps({"tasks": [{"name": "Deploy", "ranges": [[0, 99]]}]}),
        json.dumps({"tasks": [{"name": "Deploy", "ranges": [[0, 3], [5, 6]]}]}),
        extracted(),
    ]
    with OpenAIStub(answers) as stub:
        core, _ = make(stub, tmp_path)
        (r,) = core.distill_block(OwnerTaskSkills("omar"), block(DEPLOY_1, owner_id="omar"))
        assert "outside the messages 0..7" in stub.requests[1]["messages"][-1]["content"]
        assert (
            core.distill_block(
                OwnerTaskSkills("maya"), block(SMALL_TALK[:2] + SMALL_TALK[4:], owner_id="maya")
            )
            == []
        )
        assert stub.count == 3
    assert r.action == "created"
    assert [c.purpose for c in r.llm_calls] == ["distill_chunk", "distill_chunk", "distill_extract"]


def test_skip_and_gate_distil_nothing(tmp_path):
    answers = [
        json.dumps(
            {"tasks": [{"name": "Deploy", "ranges": [[0, 7]]}, {"name": "Chat", "ranges": []}]}
        ),
        json.dumps(
            {
                "skip": True,
                "name": "",
                "description": "",
                "procedure": [],
                "update": False,
                "update_of": "",
            }
        ),
    ]
    with OpenAIStub(answers) as stub:
        core, _ = make(stub, tmp_path)
        results = core.distill_block(OwnerTaskSkills("omar"), block(DEPLOY_1, owner_id="omar"))
    assert [r.action for r in results] == ["gated"] and results[0].skill is None
    assert len(results[0].llm_calls) == 2  # both calls are accounted for


def test_full_mode_asks_for_scripts_tools_and_references_concurrently(tmp_path):
    def script(req):
        p = purpose(req)
        if p == "distill_chunk":
            return json.dumps({"tasks": [{"name": "Deploy", "ranges": [[0, 7]]}]})
        if p == "distill_extract":
            return extracted()
        if p == "distill_scripts":
            assert "deploy.sh: Build, push and restart." in prompt(req)
            return json.dumps({"scripts": {"deploy.sh": '#!/bin/sh\ndocker push "$IMAGE"\n'}})
        if p == "distill_tools":
            return json.dumps({"tools": ["docker: build and push the image"]})
        return json.dumps({"references": {"checklist.md": "# Checklist\n- tests pass\n"}})

    with OpenAIStub(script, latency_s=0.3) as stub:
        core, _ = make(stub, tmp_path, full=True)
        (r,) = core.distill_block(OwnerTaskSkills("omar"), block(DEPLOY_1, owner_id="omar"))
        assert stub.max_in_flight == 3
    assert r.skill.scripts == {"deploy.sh": '#!/bin/sh\ndocker push "$IMAGE"\n'}
    assert r.skill.tools == ["docker: build and push the image"]
    assert r.skill.references == {"checklist.md": "# Checklist\n- tests pass\n"}
    assert r.skill.planned_scripts == {}
    assert sorted(c.purpose for c in r.llm_calls) == [
        "distill_chunk",
        "distill_extract",
        "distill_references",
        "distill_scripts",
        "distill_tools",
    ]


def test_chinese_blocks_get_chinese_prompts_with_the_existing_skills(tmp_path):
    zh = [
        ("user", "请帮我把网站部署到测试服务器。"),
        ("assistant", "首先运行测试。然后构建镜像并推送到仓库。"),
        ("assistant", "最后重启服务并检查健康接口。"),
    ]
    seen = []

    def script(req):
        seen.append(prompt(req))
        if purpose(req) == "distill_chunk":
            return json.dumps({"tasks": [{"name": "网站部署", "ranges": [[0, 2]]}]})
        grounded = {"tools": [], "planned_scripts": {}}  # the conversation names no tool
        if len(seen) == 2:
            return extracted(
                name="site-deployment",
                title="网站部署",
                description="把网站部署到测试服务器。",
                **grounded,
            )
        existing_id = prompt(req).split('"id": "')[1].split('"')[0]
        return extracted(
            **grounded,
            name="site-deployment",
            title="网站部署",
            description="把网站部署到测试服务器。",
            update_of=existing_id,
        )

    with OpenAIStub(script) as stub:
        core, _ = make(stub, tmp_path)
        owner = OwnerTaskSkills("lin")
        r1 = core.distill_block(owner, block(zh, owner_id="lin"))
        r2 = core.distill_block(owner, block(zh, owner_id="lin", session_id="s2"))
    assert seen[0].startswith("你要把用户与助手之间的一段对话拆分")
    assert seen[1].startswith("你要把对话中的一个任务整理成可复用的任务技能") and "(无)" in seen[1]
    assert (
        '"name": "site-deployment"' in seen[3]
    )  # the recalled skill is shown in the Chinese prompt
    assert [r.action for r in r1 + r2] == ["created", "updated"]
    assert r2[0].skill.lang == "zh" and r2[0].skill.version == 2
