"""One owner's messages never land under another: every message, span and ledger key names its
owner, through the MCP server, the CLI and a re-run of a log that grew or was edited."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import duckdb
import pytest

from skillstream.flows.memory import default_sample
from skillstream.ids import prefixed_id
from skillstream.server.mcp_tools import build_server
from skillstream.settings import Settings
from tests.cli.conftest import invoke

pytestmark = pytest.mark.slow


def rows(home: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(home / "catalog.duckdb"), read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def memories(home: Path, owner: str) -> list[tuple[str, str, int]]:
    return sorted(
        rows(home, "SELECT id, text, version FROM memory_meta WHERE owner_id = ?", owner)  # type: ignore[arg-type]
    )


def texts(
    items: list[tuple[str, str, int]], among: list[tuple[str, str, int]] | None = None
) -> list[tuple[str, str]]:
    """``(id, text)`` of ``items`` (only those whose ids are in ``among``)."""
    keep = None if among is None else {i for i, _, _ in among}
    return [(i, t) for i, t, _ in items if keep is None or i in keep]


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def record(owner: str, conversation: str, i: int, text: str, **extra: Any) -> dict[str, Any]:
    return {
        "conversation_id": conversation,
        "user_id": owner,
        "session_id": f"{conversation}-s1",
        "message_id": f"m-{i}",
        "role": "user",
        "content": text,
        "timestamp": f"2025-04-0{1 + i // 10}T10:{i % 10:02d}:00Z",
        **extra,
    }


def test_an_agent_cannot_write_into_another_owners_conversation(tmp_path, sample_home):
    """An agent acting as omar adds messages under the conversation and message ids of Maya's
    third session: they stay omar's, and a later run of the sample gives Maya every memory a
    clean run gives her."""
    home = tmp_path / "home"
    maya_s3 = [
        json.loads(line)
        for line in (default_sample() / "trip-maya.jsonl").read_text("utf-8").splitlines()
        if '"trip-maya-s3-' in line
    ]
    assert len(maya_s3) >= 3
    server = build_server(Settings.from_keys(home=str(home)), "omar")
    messages = [
        {
            "role": r["role"],
            "content": r["content"],
            "message_id": r["message_id"],
            "session_id": r["session_id"],
            "timestamp": r["timestamp"],
        }
        for r in maya_s3
    ]

    async def call() -> Any:
        from mcp import Client

        async with Client(server) as client:
            return await client.call_tool(
                "memory_add",
                {"messages": messages, "conversation_id": "trip-maya", "flush": True},
            )

    result = anyio.run(call)
    assert not result.is_error, result.content
    omar_before = memories(home, "omar")
    assert omar_before  # the agent's messages are remembered, as omar's

    invoke(home, "run")
    assert memories(home, "maya") == memories(sample_home, "maya")
    omar = {i for i, _, _ in memories(home, "omar")}
    assert {i for i, _, _ in omar_before} <= omar  # and they stay omar's
    # each owner's span of trip-maya's third session is its own ledger row
    owners = rows(
        home,
        "SELECT DISTINCT owner_id FROM spans WHERE list_contains(message_ids, 'trip-maya-s3-0')",
    )
    assert sorted(o for (o,) in owners) == ["maya", "omar"]


def test_a_shared_conversation_gives_each_speaker_only_their_own_memories(tmp_path):
    home = tmp_path / "home"
    source = write_jsonl(
        tmp_path / "group.jsonl",
        [
            record("u1", "group-1", 0, "I just adopted a beagle named Biscuit."),
            record("u2", "group-1", 1, "I live in Oslo and I work as a nurse."),
            record("u2", "group-1", 2, "My database password is hunter2-Blue-Falcon-77."),
            record("u1", "group-1", 3, "I am allergic to peanuts."),
        ],
    )
    invoke(home, "run", "--source", str(source))
    u1 = " ".join(t for _, t, _ in memories(home, "u1"))
    u2 = " ".join(t for _, t, _ in memories(home, "u2"))
    assert "Biscuit" in u1 and "peanut" in u1
    assert "Oslo" in u2
    assert "Oslo" not in u1 and "nurse" not in u1
    assert "Biscuit" not in u2
    found = json.loads(
        invoke(home, "search", "where does the user live", "--owner", "u1", "--json")
    )
    assert all("Oslo" not in hit["text"] for hit in found)
    # the password is handled by policy: stored for nobody
    for (text,) in rows(home, "SELECT text FROM memory_meta"):
        assert "hunter2-Blue-Falcon-77" not in text


def test_two_tenants_that_reuse_conversation_and_message_ids_both_keep_their_records(tmp_path):
    home = tmp_path / "home"
    a = write_jsonl(
        tmp_path / "a.jsonl",
        [
            record("tenant-a", "conv-1", i, t)
            for i, t in enumerate(["I play the cello.", "I live in Lyon."])
        ],
    )
    b = write_jsonl(
        tmp_path / "b.jsonl",
        [
            record("tenant-b", "conv-1", i, t)
            for i, t in enumerate(["I grow tomatoes.", "I live in Porto."])
        ],
    )
    invoke(home, "run", "--source", str(a))
    invoke(home, "run", "--source", str(b))
    assert rows(home, "SELECT count(*) FROM dead_letters") == [(0,)]
    assert "Lyon" in " ".join(t for _, t, _ in memories(home, "tenant-a"))
    assert "Porto" in " ".join(t for _, t, _ in memories(home, "tenant-b"))
    spans = rows(home, "SELECT owner_id, message_ids FROM spans ORDER BY owner_id")
    assert spans == [("tenant-a", ["m-0", "m-1"]), ("tenant-b", ["m-0", "m-1"])]


FIRST = [
    "I moved to Denver last year.",
    "I work as a data engineer at Acme.",
    "My sister Rosa lives in Austin.",
    "I run every morning before work.",
]
LATER = ["I bought a sailboat called Gull.", "I am learning to speak Japanese."]


def test_a_grown_log_re_run_without_recovery_extracts_only_the_new_messages(tmp_path):
    home = tmp_path / "home"
    first = [record("ivy", "chat", i, t) for i, t in enumerate(FIRST)]
    log = write_jsonl(tmp_path / "chat.jsonl", first)
    invoke(home, "run", "--source", str(log))
    before = memories(home, "ivy")
    events = rows(home, "SELECT count(*) FROM memory_events")
    write_jsonl(log, first + [record("ivy", "chat", 4 + i, t) for i, t in enumerate(LATER)])
    invoke(home, "run", "--source", str(log))
    after = memories(home, "ivy")
    # what the first run stored says the same, and no re-cut span restated it (the new span's
    # context activates old memories, which is not a restatement)
    assert texts(after, before) == texts(before)
    assert any("sailboat" in t for _, t, _ in after)
    assert rows(home, "SELECT count(*) FROM memory_events WHERE event = 'reinforced'") == [(0,)]
    assert rows(home, "SELECT count(*) FROM memory_events")[0][0] > events[0][0]
    # no message is in two spans
    ids = [m for (m,) in rows(home, "SELECT unnest(message_ids) FROM spans WHERE status = 'done'")]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == len(FIRST) + len(LATER)


def test_an_edited_message_with_an_old_id_is_a_dead_letter(tmp_path):
    home = tmp_path / "home"
    first = [record("ivy", "chat", i, t) for i, t in enumerate(FIRST)]
    invoke(home, "run", "--source", str(write_jsonl(tmp_path / "one.jsonl", first)))
    before = memories(home, "ivy")
    edited = [
        record("ivy", "chat", 1, "I work as a pastry chef at a bakery."),  # id m-1, new text
        record("ivy", "chat", 4, "I bought a sailboat called Gull."),
    ]
    invoke(home, "run", "--source", str(write_jsonl(tmp_path / "two.jsonl", edited)))
    letters = rows(home, "SELECT stage, reason, payload FROM dead_letters")
    assert len(letters) == 1
    stage, reason, payload = letters[0]
    assert stage == "admit" and "already stored with different content" in reason
    assert "pastry" in payload
    after = memories(home, "ivy")
    assert not any("pastry" in t for _, t, _ in after)
    assert any("sailboat" in t for _, t, _ in after)
    assert texts(after, before) == texts(before)
    assert rows(home, "SELECT count(*) FROM memory_events WHERE event = 'reinforced'") == [(0,)]


def test_a_home_written_before_owners_were_in_the_keys_is_not_extracted_again(tmp_path):
    """The ledger of done messages is read from the spans' columns, so a home whose span ids do
    not name their owner (and whose ledger has no digests) re-runs its log as a no-op."""
    home = tmp_path / "home"
    log = write_jsonl(
        tmp_path / "chat.jsonl", [record("ivy", "chat", i, t) for i, t in enumerate(FIRST)]
    )
    invoke(home, "run", "--source", str(log))
    con = duckdb.connect(str(home / "catalog.duckdb"))
    try:  # the span ids and ledger of a home written before
        spans = con.execute("SELECT span_id, conversation_id, message_ids FROM spans").fetchall()
        for span_id, conversation, ids in spans:
            con.execute(
                "UPDATE spans SET span_id = ?, message_digests = NULL WHERE span_id = ?",
                [prefixed_id("spn", conversation, ids), span_id],
            )
    finally:
        con.close()
    before = memories(home, "ivy")
    out = json.loads(invoke(home, "run", "--source", str(log), "--json"))
    assert memories(home, "ivy") == before
    assert rows(home, "SELECT count(*) FROM spans") == [(len(spans),)]
    assert rows(home, "SELECT count(*) FROM dead_letters") == [(0,)]
    assert (out["messages"], out["spans_processed"], out["memory_changes"]) == (len(FIRST), 0, 0)
