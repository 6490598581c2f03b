"""ChatGPT and Claude data exports, ``.json`` told by content, and files that cannot be read."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime

from skillstream.connectors.files import FileSource
from skillstream.model import DeadLetter, Message
from tests.factories import (
    FACTS,
    chat_rows,
    chatgpt_export,
    claude_export,
    locomo_sample,
    read_source,
    write_jsonl,
    write_parquet,
)


def messages(items):
    return [i for i in items if isinstance(i, Message)]


def dead(items):
    return [i for i in items if isinstance(i, DeadLetter)]


def test_chatgpt_export_reads_the_active_branch(tmp_path):
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(chatgpt_export(conversations=2, turns=6)))
    for fmt in ("chatgpt", "auto"):
        items = read_source(FileSource(path, format=fmt))
        assert not dead(items)
        got = messages(items)
        assert [m.message_id for m in got] == [f"gpt-{c}-{t}" for c in range(2) for t in range(6)]
        first = got[0]
        assert first.conversation_id == "gpt-conv-0" == first.owner_id == first.session_id
        assert (first.role, first.text) == ("user", FACTS[0])
        assert first.ts == datetime(2024, 5, 8, 13, 57, tzinfo=UTC)
        assert json.loads(first.metadata) == {"title": "Chat 0"}
        # the image part is left out, the text part kept
        assert got[2].text == FACTS[2]
        assert [m.role for m in got[:2]] == ["user", "assistant"]
        # neither the hidden empty system prompt nor the abandoned draft
        assert all(m.text != "Draft I threw away." for m in got)


def test_chatgpt_without_current_node_follows_the_last_children(tmp_path):
    export = chatgpt_export(conversations=1, turns=4)
    del export[0]["current_node"]
    path = tmp_path / "c.json"
    path.write_text(json.dumps(export))
    got = messages(read_source(FileSource(path, format="chatgpt")))
    assert [m.message_id for m in got] == [f"gpt-0-{t}" for t in range(4)]


def test_claude_export(tmp_path):
    export = claude_export(conversations=2, turns=6)
    export[1]["chat_messages"].insert(1, "not a message")
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(export))
    items = read_source(FileSource(path))
    got = messages(items)
    assert len(got) == 12
    assert {m.owner_id for m in got} == {"acct-1"}
    assert [m.role for m in got[:2]] == ["user", "assistant"]
    assert got[2].text == FACTS[(0 * 3 + 2 + 4) % len(FACTS)]  # read from the content parts
    assert got[0].ts == datetime(2024, 6, 1, 9, 0, tzinfo=UTC)
    assert got[0].conversation_id == "claude-conv-0"
    [refused] = dead(items)
    assert "message 1 is not an object" in refused.reason and refused.payload == '"not a message"'


def test_locomo_turns_and_sessions_of_the_wrong_shape_are_dead_letters(tmp_path):
    sample = locomo_sample(0, sessions=3, turns=4)
    sample["conversation"]["session_1"][1] = "just text"
    sample["conversation"]["session_2"] = {"not": "a list"}
    path = tmp_path / "lo.json"
    path.write_text(json.dumps([sample]))
    items = read_source(FileSource(path))
    assert len(messages(items)) == 3 + 4
    reasons = sorted(d.reason for d in dead(items))
    assert len(reasons) == 2
    assert "session_2 is an object, not a list of turns" in reasons[0]
    assert "turn 1 of session_1 is text" in reasons[1]
    assert all(d.source == str(path) for d in dead(items))


def test_bad_files_are_one_dead_letter_each_and_the_good_files_are_read(tmp_path):
    good = tmp_path / "data"
    good.mkdir()
    write_jsonl(good / "a.jsonl", chat_rows(5))
    write_parquet(good / "b.parquet", chat_rows(4))
    (good / "c.json").write_text(json.dumps([locomo_sample(1, sessions=2, turns=4)]))
    expected = read_source(FileSource(good))
    assert len(messages(expected)) == 5 + 4 + 8 and not dead(expected)

    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for f in good.iterdir():
        (mixed / f.name).write_bytes(f.read_bytes())
    (mixed / "package.json").write_text(json.dumps({"name": "not a chat", "version": "1.0"}))
    (mixed / "broken.parquet").write_bytes(b"PAR1 this is not parquet")
    full = json.dumps([locomo_sample(2, sessions=2, turns=4)])
    (mixed / "cut.json").write_text(full[: len(full) // 2])
    data = b"".join(json.dumps(r).encode() + b"\n" for r in chat_rows(30))
    (mixed / "cut.jsonl.gz").write_bytes(gzip.compress(data)[:-40])

    items = read_source(FileSource(mixed))
    by_source = {d.source.rsplit("/", 1)[-1]: d for d in dead(items)}
    assert set(by_source) == {"package.json", "broken.parquet", "cut.json", "cut.jsonl.gz"}
    assert all(d.position == "file" and d.stage == "read" for d in by_source.values())
    assert "is not a chat log" in by_source["package.json"].reason
    assert "not a readable Parquet file" in by_source["broken.parquet"].reason
    assert "not valid JSON" in by_source["cut.json"].reason
    assert "stopped after position" in by_source["cut.jsonl.gz"].reason  # lines before it read
    good_ids = {m.message_id for m in messages(expected)}
    got_ids = {m.message_id for m in messages(items)}
    assert good_ids <= got_ids
    cut_lines = [m for m in messages(items) if m.source.endswith("cut.jsonl.gz")]
    assert 0 < len(cut_lines) < 30
