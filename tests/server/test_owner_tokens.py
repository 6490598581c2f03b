"""A token limited to one owner never reads or writes another owner's data: every API path of
the OpenAPI description, every MCP tool and every page, called with another owner's ids."""

from __future__ import annotations

import json

import anyio
import pytest

from tests.server.conftest import MAYA, Served, sql

pytestmark = pytest.mark.slow


def omar_facts(home) -> dict:
    rows = sql(home, "select id, text from memory_meta where owner_id = 'omar'")
    return {"ids": [r["id"] for r in rows], "texts": [r["text"] for r in rows]}


def leaks(body, omar: dict) -> list[str]:
    """Omar's memory ids or texts, or his skill, in an answer (an error that names the id it was
    asked for tells nothing: it says the same of an id that does not exist)."""
    if isinstance(body, dict) and set(body) == {"error"}:
        return [t for t in omar["texts"] if t[:40] in body["error"]]
    text = body if isinstance(body, str) else json.dumps(body)
    found = [i for i in omar["ids"] if i in text]
    found += [t for t in omar["texts"] if t[:40] in text]
    if '"omar"' in text or "deploy-flask-app" in text:
        found.append("omar")
    return found


def test_every_api_path_with_another_owners_ids_reads_nothing(served: Served):
    omar = omar_facts(served.home)
    before = served.call("/v1/stats")[1]
    spec = served.call("/openapi.json")[1]
    memory_id = omar["ids"][0]
    values = {"owner": "omar", "id": memory_id, "name": "deploy-flask-app"}
    tried = 0
    for path, ops in spec["paths"].items():
        concrete = path.format(**values)
        for method in ops:
            query = "?owner=omar&q=deploy%20flask&all=true"
            body = None
            if method == "post":
                body = (
                    [{"user_id": "omar", "role": "user", "content": "I moved to Oslo."}]
                    if "messages" in path
                    else {"success": False, "note": "from another owner"}
                )
            status, got = served.call(
                concrete + query, token=MAYA, body=body, method=method.upper()
            )
            tried += 1
            assert status in (200, 400, 404), (path, status, got)
            assert not leaks(got, omar), (path, got)
    assert tried == sum(len(ops) for ops in spec["paths"].values()) >= 12
    # and nothing was written for omar: same memories, same skill version
    after = served.call("/v1/stats")[1]
    assert after["memories"] == before["memories"]
    assert not any(
        r["change"] == "feedback"
        for r in sql(served.home, "select change from task_skill_versions where owner_id = 'omar'")
    )


def test_a_limited_token_sees_its_owner_only(served: Served):
    owners = served.call("/v1/owners", token=MAYA)[1]["owners"]
    assert [o["owner_id"] for o in owners] == ["maya"]
    hits = served.call("/v1/search?q=Lisbon&k=10", token=MAYA)[1]["hits"]
    assert hits and {h["owner_id"] for h in hits} == {"maya"}
    stats = served.call("/v1/stats", token=MAYA)[1]
    assert stats["memories"] == owners[0]["memories"] and stats["owners"] == 1
    assert served.call("/metrics", token=MAYA)[0] == 403
    skills = served.call("/v1/task-skills?all=true", token=MAYA)[1]["task_skills"]
    assert all(s["owner_id"] == "maya" for s in skills)


def test_every_page_with_another_owners_ids_shows_nothing_of_it(served: Served):
    omar = omar_facts(served.home)
    pages = [
        "/",
        "/owners/omar",
        "/owners/omar?q=deploy",
        f"/memories/{omar['ids'][0]}",
        "/contradictions?all=true",
        "/charts",
        "/skills?all=true",
        "/skills/omar/deploy-flask-app",
        "/memory-skills",
    ]
    for page in pages:
        status, html = served.call(page, token=MAYA)
        assert status in (200, 404), (page, status)
        if status == 404:  # the page names what it was asked for, and shows nothing else
            html = {"error": html.split('role="alert">')[1].split("</p>")[0]}
        assert not leaks(html, omar), page
    assert served.call("/owners/omar", token=MAYA)[0] == 404


def test_every_mcp_tool_with_another_owner_reads_and_writes_nothing(served: Served):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    omar = omar_facts(served.home)
    calls = {
        "skill_list": {"include_all": True},
        "skill_view": {"name": "deploy-flask-app"},
        "skill_search": {"query": "deploy flask", "include_all": True},
        "skill_feedback": {"name": "deploy-flask-app", "success": False},
        "skill_patch": {"name": "deploy-flask-app", "section": "pitfalls", "text": "x"},
        "skill_delete": {"name": "deploy-flask-app"},
        "skill_save": {
            "name": "x-skill",
            "description": "A test.",
            "content": "## Procedure\n1. x",
        },
        "memory_search": {"query": "deploy the flask app", "k": 10},
        "memory_add": {"messages": [{"role": "user", "content": "I moved to Oslo."}]},
    }

    async def session(url: str) -> dict:
        out = {}
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {MAYA}"}, timeout=120)
        async with Client(streamable_http_client(url, http_client=http)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == set(calls)
            for name, args in calls.items():
                out[name] = await client.call_tool(name, args)
        return out

    before = served.call("/v1/stats")[1]["memories"]
    as_omar = anyio.run(session, served.base + "/mcp?owner=omar")
    for name, result in as_omar.items():
        assert result.is_error, name
        assert "no owner 'omar'" in result.content[0].text
    # as maya (the token's only owner): omar's skill is not there, and no hit is omar's
    as_maya = anyio.run(session, served.base + "/mcp")
    for name in ("skill_view", "skill_feedback", "skill_patch", "skill_delete"):
        assert as_maya[name].is_error, name
    for name in ("skill_list", "skill_search", "memory_search"):
        assert not leaks([c.text for c in as_maya[name].content], omar), name
    assert served.call("/v1/stats")[1]["memories"] >= before
    kept = sql(served.home, "select count(*) as n from memory_meta where owner_id = 'omar'")[0]["n"]
    assert kept == len(omar["ids"])
