"""The MCP server, in process: list the tools and call each one."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import anyio
import pytest

from skillstream.distill.record import TaskSkill
from skillstream.server.mcp_tools import build_server
from skillstream.services.task_skills import TaskSkillAPI
from skillstream.settings import Settings

pytestmark = pytest.mark.slow

TOOLS = [
    "memory_add",
    "memory_search",
    "skill_delete",
    "skill_feedback",
    "skill_list",
    "skill_patch",
    "skill_save",
    "skill_search",
    "skill_view",
]


def payload(result) -> object:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        data = result.structured_content
        return (
            data.get("result", data) if isinstance(data, dict) and set(data) == {"result"} else data
        )
    return json.loads(result.content[0].text)


def seed(settings: Settings, embedder) -> None:
    """One task skill for omar and one memory for omar, through the real write paths."""
    api = TaskSkillAPI(settings, owner="omar", embed=embedder.encode)
    api.save(
        TaskSkill.new(
            "omar",
            "deploy-flask-app",
            title="Deploy flask app",
            description="Deploy the Flask app to staging. Use it for staging deploys.",
            procedure=["Run pytest.", "Build and push the image.", "Restart the service."],
        )
    )
    from skillstream.model import MaintenanceResult, Memory
    from skillstream.storage.home import open_stores
    from skillstream.storage.writer import write_results

    t = datetime(2025, 5, 6, tzinfo=UTC)
    mem = Memory(
        id="mem_1",
        owner_id="omar",
        text="Omar deploys the Flask app to staging every two weeks.",
        kind="fact",
        created_at=t,
        updated_at=t,
        event_ts=t - timedelta(days=1),
        vector=embedder.encode(["Omar deploys the Flask app to staging every two weeks."])[
            0
        ].tolist(),
    )
    # both stores, as every write does: a LanceDB row the catalog never committed is rolled back
    # by the next command that writes
    with open_stores(settings, embedder.dim) as stores:
        write_results(stores, [MaintenanceResult("omar", t, [mem])])


def test_the_server_lists_its_tools_and_each_call_works(tmp_path, embedder):
    from mcp import Client

    settings = Settings.from_keys(home=str(tmp_path / "home"))
    seed(settings, embedder)
    server = build_server(
        settings, "omar", api=TaskSkillAPI(settings, owner="omar", embed=embedder.encode)
    )

    async def session():
        async with Client(server) as client:
            tools = await client.list_tools()
            names = sorted(t.name for t in tools.tools)
            listed = payload(await client.call_tool("skill_list", {}))
            viewed = payload(await client.call_tool("skill_view", {"name": "deploy-flask-app"}))
            worked = payload(
                await client.call_tool(
                    "skill_feedback",
                    {"name": "deploy-flask-app", "success": True, "note": "deployed"},
                )
            )
            saved = payload(
                await client.call_tool(
                    "skill_save",
                    {
                        "name": "rotate-keys",
                        "description": "Rotate the API keys of a service. Use it monthly.",
                        "content": "## Procedure\n1. Create a new key.\n2. Update "
                        "the secret store.\n3. Revoke the old key.\n",
                    },
                )
            )
            patched = payload(
                await client.call_tool(
                    "skill_patch",
                    {
                        "name": "rotate-keys",
                        "section": "verification",
                        "text": "- Old key returns 401.",
                    },
                )
            )
            memories = payload(
                await client.call_tool("memory_search", {"query": "when does Omar deploy", "k": 3})
            )
            deleted = payload(await client.call_tool("skill_delete", {"name": "rotate-keys"}))
            after = payload(await client.call_tool("skill_list", {}))
            missing = await client.call_tool("skill_view", {"name": "rotate-keys"})
            out = names, listed, viewed, saved, patched, memories, deleted, after, missing
            return (*out, worked)

    names, listed, viewed, saved, patched, memories, deleted, after, missing, worked = anyio.run(
        session
    )
    assert names == TOOLS
    assert listed == [
        {
            "name": "deploy-flask-app",
            "description": "Deploy the Flask app to staging. Use it for staging deploys.",
            "state": "active",
            "reliability": 0.5,
        }
    ]
    # one view (0.1 of a success) and one success: (1.1 + 1) / (1.1 + 2)
    assert worked == {
        "name": "deploy-flask-app",
        "version": 2,
        "state": "active",
        "reliability": round(2.1 / 3.1, 4),
        "change": None,
    }
    assert viewed["name"] == "deploy-flask-app" and viewed["times_used"] == 1
    assert (
        viewed["skill_md"].startswith("---\nname: deploy-flask-app\n")
        and "1. Run pytest." in viewed["skill_md"]
    )
    assert (saved["name"], saved["version"]) == ("rotate-keys", 1)
    assert saved["package_url"].endswith("omar/rotate-keys/v1/rotate-keys.zip")
    assert (patched["name"], patched["version"]) == ("rotate-keys", 2)
    # the fact and the task skill both answer; the task skill comes back marked as one
    by_text = {m["text"]: m for m in memories}
    assert by_text["Omar deploys the Flask app to staging every two weeks."]["kind"] == "fact"
    skill = by_text[
        "Deploy flask app: Deploy the Flask app to staging. Use it for staging deploys."
    ]
    assert (skill["kind"], skill["memory_type"]) == ("task_skill", "SkillMemory")
    assert deleted == {"name": "rotate-keys", "version": 3, "status": "deleted"}
    assert [s["name"] for s in after] == ["deploy-flask-app"]
    assert (
        missing.is_error
        and "no task skill named 'rotate-keys' of owner 'omar'" in missing.content[0].text
    )
    api = TaskSkillAPI(settings, embed=embedder.encode)
    assert api.get("rotate-keys", "omar", include_deleted=True).verification == [
        "Old key returns 401."
    ]
