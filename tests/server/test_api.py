"""The JSON API of ``skillstream serve``, called over HTTP as an agent calls it."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import skillstream
from tests.server.conftest import FULL, Served, retry, sql, start, stop, tokens_file
from tests.servers.ports import free_port
from tests.servers.processes import cli_env, skillstream_cmd

pytestmark = pytest.mark.slow


def test_health_needs_no_token_and_everything_else_does(served: Served):
    assert served.call("/healthz", token=None) == (200, {"status": "ok"})
    for path in ("/v1/search?q=x", "/v1/owners", "/metrics", "/openapi.json", "/v1/stats"):
        status, body = served.call(path, token=None)
        assert status == 401, path
        assert "token" in body["error"]
    assert served.call("/v1/owners", token="wrong")[0] == 401


def test_search_returns_the_contract_keys_ranked_as_the_library(sample_home, tmp_path):
    from skillstream.services.home_lifecycle import store_clock
    from skillstream.services.search import search_memories
    from skillstream.storage.catalog import open_catalog

    home = tmp_path / "home"
    shutil.copytree(sample_home, home)
    settings = skillstream.open(home).settings
    clock = _clock(settings, open_catalog, store_clock)
    lib = search_memories(settings, "trip to Lisbon", owner="maya", k=3, record=False, now=clock)
    s = start(home, tokens_file(tmp_path))
    try:
        status, body = s.call("/v1/search?q=trip%20to%20Lisbon&owner=maya&k=3")
    finally:
        stop(s)
    assert status == 200
    hits = body["hits"]
    assert 1 <= len(hits) <= 3
    for h in hits:
        assert {"id", "text", "score", "owner_id"} <= set(h)
        assert h["owner_id"] == "maya"
        assert "vector" not in h
    assert [h["id"] for h in hits] == [r["id"] for r in lib]
    assert [h["score"] for h in hits] == [r["score"] for r in lib]
    # the server recorded the search before it stopped
    rows = sql(home, "select result_ids from queries where query = 'trip to Lisbon'")
    assert [r["result_ids"] for r in rows] == [[h["id"] for h in hits]]


def _clock(settings, open_catalog, store_clock):
    with open_catalog(settings.storage, read_only=True) as cat:
        return store_clock(cat)


def test_searches_are_recorded_behind_the_answer(served: Served):
    query = "what did Lin say about the marathon"
    hits = served.call(f"/v1/search?q={query.replace(' ', '%20')}&owner=lin&k=2")[1]["hits"]

    def recorded():
        rows = sql(served.home, "select result_ids from queries where query = ?", [query])
        assert rows, "not recorded yet"
        return rows

    rows = retry(recorded)
    assert rows[0]["result_ids"] == [h["id"] for h in hits]
    statuses = sql(served.home, "select status from memory_meta where id = ?", [hits[0]["id"]])
    assert statuses[0]["status"] in ("activated", "archived", "frozen")


def test_reads_of_owners_memories_history_contradictions_skills_and_stats(served: Served):
    owners = {o["owner_id"]: o for o in served.call("/v1/owners")[1]["owners"]}
    assert set(owners) == {"lin", "maya", "omar"}
    listed = served.call("/v1/owners/maya/memories?limit=200")[1]["memories"]
    assert len(listed) == owners["maya"]["memories"]
    archived = served.call("/v1/owners/maya/memories?status=archived")[1]["memories"]
    assert archived and {m["status"] for m in archived} == {"archived"}
    home = skillstream.open(served.home)
    one = listed[0]
    assert served.call(f"/v1/memories/{one['id']}")[1]["text"] == one["text"]
    events = served.call(f"/v1/memories/{one['id']}/history")[1]["events"]
    stored = retry(lambda: home.history(one["id"]).to_pylist())
    assert [e["event"] for e in events] == [r["event"] for r in stored]
    every = served.call("/v1/contradictions?all=true")[1]["contradictions"]
    assert len(every) == sql(served.home, "select count(*) as n from contradictions")[0]["n"]
    skills = served.call("/v1/task-skills?all=true")[1]["task_skills"]
    assert any(s["name"] == "deploy-flask-app" and s["owner_id"] == "omar" for s in skills)
    stats = served.call("/v1/stats")[1]
    assert stats["memories"] == sum(o["memories"] for o in owners.values())
    assert stats["owners"] == 3


def test_bad_requests_say_what_is_wrong(served: Served):
    assert served.call("/v1/search?q=x&k=0")[0] == 400
    assert served.call("/v1/search?q=")[0] == 400
    assert served.call("/v1/search?q=x&strategy=psychic")[0] == 400
    status, body = served.call("/v1/memories/mem_nothing")
    assert status == 404 and "no memory" in body["error"]
    assert served.call("/v1/owners/maya/memories?since=yesterday")[0] == 400
    status, body = served.call("/v1/messages", body={"messages": "not a list"}, method="POST")
    assert status == 400
    status, _ = served.call("/v1/task-skills/omar/no-such-skill")
    assert status == 404


def test_openapi_describes_exactly_the_api(served: Served):
    from skillstream.server.app import build_app
    from skillstream.server.home import ServedHome

    spec = served.call("/openapi.json")[1]
    assert spec["openapi"].startswith("3.1")
    app = build_app(ServedHome(skillstream.open(served.home).settings), mcp=False)
    paths = {getattr(r, "path", "") for r in app.routes}
    api_paths = {p for p in paths if p.startswith("/v1/") or p == "/healthz"}
    assert set(spec["paths"]) == api_paths


def test_metrics_count_requests_and_read_memories_by_status(served: Served):
    served.call("/v1/owners")
    status, text = served.call("/metrics")
    assert status == 200
    assert 'skillstream_http_requests_total{method="GET",route="/v1/owners",status="200"}' in text
    counts = sql(served.home, "select status, count(*) as n from memory_meta group by 1")
    for row in counts:
        assert f'skillstream_stored_memories{{status="{row["status"]}"}} {float(row["n"])}' in text


def test_add_messages_then_find_them_and_give_feedback(sample_home, tmp_path):
    import socket

    home = tmp_path / "home"
    shutil.copytree(sample_home, home)
    # a metrics_addr in the settings is for runs; the server's own runs open no port (this one
    # is taken, and adding messages still works)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = str(taken.getsockname()[1])
    s = start(home, tokens_file(tmp_path), env={"SKILLSTREAM_METRICS_ADDR": port})
    try:
        messages = [
            {
                "user_id": "zoe",
                "conversation_id": "zoe-1",
                "role": "user",
                "content": "I am severely allergic to peanuts, so I never eat satay.",
                "timestamp": "2025-07-01T09:00:00Z",
            },
            {
                "user_id": "zoe",
                "conversation_id": "zoe-1",
                "role": "assistant",
                "content": "Noted, I will keep peanuts out of any recipe I suggest.",
                "timestamp": "2025-07-01T09:00:30Z",
            },
        ]
        status, added = s.call("/v1/messages?flush=true", body=messages, method="POST")
        assert status == 200, added
        assert added["messages"] == 2 and added["memory_ids"] and added["held"] == 0
        hits = s.call("/v1/search?q=food%20allergy&owner=zoe&k=3")[1]["hits"]
        assert any("peanut" in h["text"].lower() for h in hits)
        before = s.call("/v1/task-skills/omar/deploy-flask-app")[1]
        status, after = s.call(
            "/v1/task-skills/omar/deploy-flask-app/feedback",
            body={"success": True, "note": "deployed fine"},
            method="POST",
        )
        assert status == 200
        assert after["version"] == before["version"] + 1 and after["successes"] == 1
        assert (
            s.call("/v1/task-skills/omar/deploy-flask-app/feedback", body={}, method="POST")[0]
            == 400
        )
    finally:
        stop(s)


def test_any_address_but_loopback_needs_a_token(tmp_path):
    proc = subprocess.run(
        skillstream_cmd("serve", "--addr", f"0.0.0.0:{free_port()}"),
        env=cli_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "needs a token" in proc.stderr
    assert FULL  # the tokens of the other tests are not the point here


def test_a_web_page_cannot_use_the_server_through_a_browser(served: Served):
    import urllib.error
    import urllib.request

    before = served.call("/v1/stats")[1]["memories"]
    # a cross-site form post (text/plain, no preflight) is refused before it is read
    body = b'[{"user_id": "maya", "role": "user", "content": "I moved to Oslo."}]'
    req = urllib.request.Request(served.base + "/v1/messages?flush=true", data=body)
    req.add_header("Authorization", f"Bearer {FULL}")
    req.add_header("Content-Type", "text/plain")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req, timeout=60)
    assert refused.value.code == 415
    assert served.call("/v1/stats")[1]["memories"] == before
    # a DNS name rebound to 127.0.0.1 does not reach a loopback server
    req = urllib.request.Request(served.base + "/v1/owners")
    req.add_header("Authorization", f"Bearer {FULL}")
    req.add_header("Host", "attacker.example:8765")
    with pytest.raises(urllib.error.HTTPError) as rebound:
        urllib.request.urlopen(req, timeout=60)
    assert rebound.value.code == 421
    # and the sign-in page sends a browser only to a path of this server
    for target in ("//evil.example/", "/\\evil.example/", "https://evil.example/"):
        form = urllib.parse.urlencode({"token": FULL, "next": target}).encode()
        req = urllib.request.Request(served.base + "/login", data=form)

        class Stay(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args, **kwargs):
                return None

        with pytest.raises(urllib.error.HTTPError) as sent:
            urllib.request.build_opener(Stay).open(req, timeout=60)
        assert sent.value.code == 303 and sent.value.headers["location"] == "/"
