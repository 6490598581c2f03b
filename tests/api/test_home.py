"""The Python API on real homes: run, add, search (task skills as SkillMemory hits), sql, history,
task skills; and what it refuses."""

from __future__ import annotations

import json
import sys

import polars as pl
import pyarrow as pa
import pytest

import skillstream
from skillstream.errors import ConfigError, InputError
from skillstream.flows.memory import default_sample
from skillstream.model import Message

pytestmark = pytest.mark.slow


def deploy_rows() -> list[dict]:
    path = default_sample() / "deploy-omar.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_run_search_sql_history_and_task_skills(tmp_path):
    home = skillstream.open(tmp_path / "home")
    counts = home.run(default_sample())
    assert counts["messages"] > 30 and counts["spans_processed"] > 3
    assert home.run(default_sample())["spans_processed"] == 0  # the ledger: nothing twice

    # a query that matches the distilled task skill finds it among the memories, marked
    hits = home.search("how do I deploy the flask app to staging", owner="omar", k=5)
    skill_hits = [h for h in hits if h["memory_type"] == "SkillMemory"]
    assert skill_hits and skill_hits[0]["kind"] == "task_skill"
    assert "task-skill" in skill_hits[0]["tags"] and "deploy-flask-app" in skill_hits[0]["tags"]
    assert skill_hits[0]["text"].lower().startswith("deploy flask app")
    plain = home.search("how do I deploy the flask app", owner="omar", k=5, task_skills=False)
    assert plain and all(h["memory_type"] != "SkillMemory" for h in plain)
    # another owner's reader never sees omar's task skill
    maya = home.search("deploy the flask app to staging", owner="maya", k=10)
    assert all(h["owner_id"] == "maya" for h in maya)

    frame = home.sql(
        "select owner_id, count(*) as n from memories where memory_type <> 'SkillMemory' "
        "group by owner_id order by owner_id"
    ).pl()
    assert isinstance(frame, pl.DataFrame)
    assert frame["owner_id"].to_list() == ["lin", "maya", "omar"]
    assert isinstance(home.sql("select 1 as x").arrow, pa.Table)

    memory_id = plain[0]["id"]
    events = home.history(memory_id)
    assert events[0]["event"] == "created"
    skill_events = home.history(skill_hits[0]["id"]).to_pylist()
    assert [e["event"] for e in skill_events][0] == "created"

    skills = home.task_skills.list(owner="omar")
    assert skills.pl()["name"].to_list() == ["deploy-flask-app"]
    md = home.task_skills.markdown("deploy-flask-app", owner="omar")
    assert md.startswith("---\nname: deploy-flask-app\n")
    saved = home.task_skills.save(
        "rotate-keys",
        "Rotate the API keys of a service. Use it monthly.",
        "## Procedure\n1. Create a new key.\n2. Update the secret store.\n3. Revoke the old key.",
        owner="omar",
    )
    patched = home.task_skills.patch("rotate-keys", "verification", "- Old key: 401.", "omar")
    assert (saved.version, patched.version) == (1, 2)
    found = home.search("rotate the api keys", owner="omar", k=3)
    assert found[0]["memory_type"] == "SkillMemory" and found[0]["version"] == 2
    home.task_skills.delete("rotate-keys", owner="omar")
    gone = home.search("rotate the api keys", owner="omar", k=10)
    assert all("rotate" not in h["text"].lower() for h in gone if h["kind"] == "task_skill")
    written = home.task_skills.export(tmp_path / "export", owner="omar")
    assert [p.name for p in written] == ["deploy-flask-app"]
    assert (tmp_path / "export" / "deploy-flask-app" / "SKILL.md").is_file()

    # outcomes through the API: three failures retire the skill (hidden from lists and memory
    # search), a pin brings it back
    for note in ("wrong registry", "push refused", "health check failed"):
        got = home.task_skills.feedback("deploy-flask-app", False, note, owner="omar")
    assert (got["state"], got["failures"]) == ("retired", 3)
    assert got["change"].startswith("active -> retired: reliability ")
    assert home.task_skills.list(owner="omar").pl().is_empty()
    retired = home.task_skills.list(owner="omar", states=["retired"]).to_pylist()
    assert [(r["name"], r["state"]) for r in retired] == [("deploy-flask-app", "retired")]
    hidden = home.search("how do I deploy the flask app to staging", owner="omar", k=10)
    assert all(h["memory_type"] != "SkillMemory" for h in hidden)
    assert home.task_skills.pin("deploy-flask-app", owner="omar")["state"] == "active"
    (row,) = home.task_skills.search("deploy the flask app", owner="omar", k=1).to_pylist()
    assert (row["name"], row["state"], row["pinned"]) == ("deploy-flask-app", "active", True)

    with pytest.raises(InputError, match="no memory 'nope'"):
        home.history("nope")
    with pytest.raises(InputError, match="not valid"):
        home.task_skills.save("Bad Name", "x", "## Procedure\n1. a")


def test_add_gives_the_ids_and_ledger_of_a_run(tmp_path):
    rows = deploy_rows()
    ran = skillstream.open(tmp_path / "ran")
    ran.run(default_sample() / "deploy-omar.jsonl")
    added_home = skillstream.open(tmp_path / "added")
    added = added_home.add(rows + [{"conversation_id": "x", "role": "narrator", "content": "?"}])
    assert added.messages == 13 and added.dead_letters == 1 and added.failed == []
    assert "narrator" in added.refused[0]
    assert added.held > 0  # the conversation's last span waits for more, or for flush
    flushed = added_home.flush()
    assert flushed.held == 0 and flushed.results and added_home.held() == []

    def ids(home, sql):
        return home.sql(sql).pl().to_dicts()

    extracted = (
        "select id, text, version from memory_meta where memory_type <> 'SkillMemory' order by id"
    )
    assert ids(added_home, extracted) == ids(ran, extracted)
    ledger = "select span_id, status, memory_ids from spans order by span_id"
    assert ids(added_home, ledger) == ids(ran, ledger)
    assert sorted({*added.memory_ids, *flushed.memory_ids}) == sorted(
        {m for r in ids(added_home, ledger) for m in r["memory_ids"]}
    )
    assert "narrator" in ids(added_home, "select reason from dead_letters")[0]["reason"]

    # Message values go in as they are; a second add of the same messages stores nothing new
    again = added_home.add([Message(**_message_fields(r)) for r in rows])
    assert again.memory_ids == [] and all(r.status == "skipped" for r in again.results)
    assert again.held == 0 and added_home.held() == []

    with pytest.raises(InputError, match="takes Message values or dicts"):
        added_home.add(["just text"])  # type: ignore[list-item]


def _message_fields(row: dict) -> dict:
    from skillstream.connectors.records import parse_record

    m = parse_record(row, source="api", position=0)
    assert isinstance(m, Message)
    return {f: getattr(m, f) for f in m.__dataclass_fields__}


READS = {
    "search": lambda h: h.search("x"),
    "sql": lambda h: h.sql("select 1"),
    "history": lambda h: h.history("m1"),
    "held": lambda h: h.held(),
    "task_skills.list": lambda h: h.task_skills.list(),
    "task_skills.show": lambda h: h.task_skills.show("x"),
    "task_skills.search": lambda h: h.task_skills.search("x"),
}


@pytest.mark.parametrize("read", READS.values(), ids=list(READS))
def test_reading_a_missing_home_is_a_clear_error_and_creates_nothing(tmp_path, read):
    home = skillstream.open(tmp_path / "typo")
    with pytest.raises(InputError, match="no skillstream home at .*typo.*nothing was created"):
        read(home)
    assert list(tmp_path.iterdir()) == []


def test_a_home_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "h").write_text("")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        skillstream.open(tmp_path / "h")


def test_import_skillstream_is_cheap():
    import subprocess

    code = (
        "import sys, skillstream; "
        "heavy = [m for m in ('pyarrow', 'bytewax', 'lancedb', 'duckdb', 'torch', 'polars') "
        "if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_forget_erases_one_owner_and_a_later_add_of_its_messages_stays_forgotten(tmp_path):
    home = skillstream.open(tmp_path / "home")
    rows = [
        {
            "conversation_id": f"c-{who}",
            "user_id": who,
            "role": "user",
            "message_id": f"m-{i}",
            "content": text,
            "timestamp": f"2025-05-01T10:0{i}:00Z",
        }
        for who in ("ana", "bea")
        for i, text in enumerate(["I moved to Lisbon last spring.", "I work as a nurse."])
    ]
    home.add(rows)
    home.flush()
    owners = "select owner_id, count(*) n from memory_meta group by all order by 1"
    before = home.sql(owners).to_pylist()
    assert [r["owner_id"] for r in before] == ["ana", "bea"]

    assert home.forget("ana", dry_run=True)["counts"]["lancedb"]["memories"] == before[0]["n"]
    done = home.forget("ana")
    assert done["counts"]["lancedb"]["memories"] == before[0]["n"]
    assert done["counts"]["tombstones"] == {"messages": 2}
    assert home.sql(owners).to_pylist() == before[1:]
    assert home.search("where does she live", owner="ana", k=3).to_pylist() == []

    again = home.add([r for r in rows if r["user_id"] == "ana"])  # the same ids: forgotten
    assert again.results == [] and home.held() == [] and home.flush().memory_ids == []
    home.add([dict(rows[0], message_id="m-9", content="I adopted a dog.")])
    assert home.flush().memory_ids and home.sql(owners).to_pylist()[0]["owner_id"] == "ana"


def test_forget_takes_the_open_spans_held_in_the_home_and_their_messages_stay_forgotten(tmp_path):
    home = skillstream.open(tmp_path / "home")
    row = {
        "conversation_id": "c-ana",
        "user_id": "ana",
        "role": "user",
        "message_id": "m-1",
        "content": "I moved to Lisbon last spring.",
        "timestamp": "2025-05-01T10:00:00Z",
    }
    home.add([row])
    assert [h["owner_id"] for h in home.held()] == ["ana"]
    done = home.forget("ana")
    assert done["counts"]["catalog"]["open_messages"] == 2  # an open span and an open segment
    assert done["counts"]["tombstones"] == {"messages": 1}
    assert home.held() == []
    home.add([row])
    assert home.held() == [] and home.flush().memory_ids == []
