"""The MCP server as an agent meets it: ``skillstream mcp`` run as a subprocess, driven over stdio
with the MCP SDK's own client, every tool called."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest

from skillstream.flows.memory import default_sample

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
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


def error_text(result) -> str:
    assert result.is_error, result.content
    return result.content[0].text


def deploy_messages() -> list[dict]:
    """The bundled deploy conversation, as an agent would send it (role, content, time)."""
    rows = [
        json.loads(line)
        for line in (default_sample() / "deploy-omar.jsonl").read_text().splitlines()
    ]
    return [
        {
            "role": r["role"],
            "content": r["content"],
            "timestamp": r["timestamp"],
            "session_id": r["session_id"],
            "message_id": r["message_id"],
        }
        for r in rows
    ]


def test_every_tool_over_stdio_against_the_real_server(tmp_path):
    from mcp import Client, StdioServerParameters

    home = tmp_path / "home"
    server = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from skillstream.cli import main; main()", "--home", str(home)]
        + ["mcp", "--owner", "omar"],
        env={"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
        cwd=str(tmp_path),
    )

    async def session():
        out: dict = {}
        async with Client(server) as client:
            out["names"] = sorted(t.name for t in (await client.list_tools()).tools)
            out["empty"] = await client.call_tool("memory_search", {"query": "deploy", "k": 3})
            out["bad_add"] = await client.call_tool(
                "memory_add", {"messages": [{"role": "narrator", "content": "x"}]}
            )
            out["added"] = payload(
                await client.call_tool(
                    "memory_add",
                    {
                        "messages": deploy_messages(),
                        "conversation_id": "deploy-omar",
                        "flush": True,
                    },
                )
            )
            out["found"] = payload(
                await client.call_tool(
                    "memory_search", {"query": "deploy the Flask app to staging", "k": 10}
                )
            )
            out["listed"] = payload(await client.call_tool("skill_list", {}))
            out["searched"] = payload(
                await client.call_tool("skill_search", {"query": "staging deploy", "k": 3})
            )
            name = out["listed"][0]["name"]
            out["viewed"] = payload(await client.call_tool("skill_view", {"name": name}))
            for n in range(3):
                out["feedback"] = payload(
                    await client.call_tool(
                        "skill_feedback", {"name": name, "success": False, "note": f"try {n}"}
                    )
                )
            out["served"] = payload(await client.call_tool("skill_list", {}))
            out["all"] = payload(await client.call_tool("skill_list", {"include_all": True}))
            out["saved"] = payload(
                await client.call_tool(
                    "skill_save",
                    {
                        "name": "rotate-keys",
                        "description": "Rotate the API keys of a service. Use it monthly.",
                        "content": "## Procedure\n1. Create a new key.\n2. Update the secret "
                        "store.\n3. Revoke the old key.\n",
                    },
                )
            )
            out["patched"] = payload(
                await client.call_tool(
                    "skill_patch",
                    {"name": "rotate-keys", "section": "verification", "text": "- Old key: 401."},
                )
            )
            out["keys"] = payload(
                await client.call_tool("memory_search", {"query": "rotate API keys", "k": 5})
            )
            out["deleted"] = payload(
                await client.call_tool("skill_delete", {"name": "rotate-keys"})
            )
            out["keys_after"] = payload(
                await client.call_tool("memory_search", {"query": "rotate API keys", "k": 5})
            )
            out["missing"] = await client.call_tool("skill_view", {"name": "rotate-keys"})
        return out

    out = anyio.run(session)
    assert out["names"] == TOOLS
    # errors reach the client as errors with a message, not as empty results
    assert "nothing is stored" in error_text(out["empty"])
    assert "no message could be stored" in error_text(out["bad_add"])
    assert "narrator" in error_text(out["bad_add"])
    assert "no task skill named 'rotate-keys' of owner 'omar'" in error_text(out["missing"])

    added = out["added"]
    assert added["messages"] == 13 and added["refused"] == []
    assert added["memory_ids"] and added["task_skills"] >= 1 and added["held"] == 0
    kinds = {(h["kind"], h["memory_type"]) for h in out["found"]}
    assert ("task_skill", "SkillMemory") in kinds, out["found"]
    assert any(h["id"] in added["memory_ids"] for h in out["found"])
    assert out["listed"][0]["name"] == "deploy-flask-app"
    assert out["searched"][0]["name"] == "deploy-flask-app"
    assert out["viewed"]["skill_md"].startswith("---\nname: deploy-flask-app\n")
    # three failures retire it: no longer served, still there for whoever asks
    assert out["feedback"]["state"] == "retired"
    assert out["feedback"]["change"] == (
        "active -> retired: reliability 0.22 below 0.4 after failure: try 2"
    )
    assert out["served"] == []
    assert [(s["name"], s["state"]) for s in out["all"]] == [("deploy-flask-app", "retired")]
    assert (out["saved"]["version"], out["patched"]["version"]) == (1, 2)
    top = out["keys"][0]
    assert (top["kind"], top["memory_type"]) == ("task_skill", "SkillMemory")
    assert top["text"].startswith("rotate keys") or "Rotate the API keys" in top["text"]
    assert out["deleted"]["status"] == "deleted"
    assert all("Rotate the API keys" not in (h["text"] or "") for h in out["keys_after"])
