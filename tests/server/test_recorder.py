"""Searches recorded behind their answers: in order, in one write, each memory activated once."""

from __future__ import annotations

import shutil

import skillstream
from skillstream.server.auth import Access
from skillstream.server.home import ServedHome
from tests.server.conftest import sql


def test_a_batch_records_every_search_and_activates_a_memory_once(sample_home, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(sample_home, home)
    served = ServedHome(skillstream.open(home).settings)
    generated = {
        r["id"]
        for r in sql(
            home, "select id from memory_meta where status = 'generated' and owner_id = 'lin'"
        )
    }
    assert generated
    first = served.search(Access(), "running", owner="lin", k=5)
    second = served.search(Access(), "running a marathon", owner="lin", k=5)
    both = {h["id"] for h in first} & {h["id"] for h in second} & generated
    assert served.recorder.flush() == 2
    assert served.recorder.pending == type(served.recorder.pending)()
    queries = sql(home, "select query, result_ids from queries order by recorded_at")
    assert [q["query"] for q in queries][-2:] == ["running", "running a marathon"]
    found = {h["id"] for h in first} | {h["id"] for h in second}
    events = sql(
        home,
        "select memory_id, count(*) as n from memory_events where event = 'activated' group by 1",
    )
    per_memory = {e["memory_id"]: e["n"] for e in events}
    for memory_id in found & generated:
        assert per_memory[memory_id] == 1, memory_id
    assert both <= set(per_memory)
    statuses = sql(home, "select id, status from memory_meta where owner_id = 'lin'")
    assert all(r["status"] != "generated" for r in statuses if r["id"] in found)


def test_nothing_pending_writes_nothing(sample_home, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(sample_home, home)
    served = ServedHome(skillstream.open(home).settings)
    assert served.recorder.flush() == 0
