"""``serve`` over a home whose catalog is DuckLake on PostgreSQL (the shared catalog)."""

from __future__ import annotations

import pytest

from tests.server.conftest import FULL, retry, start, stop
from tests.servers.processes import cli_env, run_cli

pytestmark = pytest.mark.slow


def test_serve_reads_and_records_on_a_shared_catalog(tmp_path, lake_catalog):
    home = tmp_path / "home"
    env = {"SKILLSTREAM_CATALOG": lake_catalog}
    run_cli("run", env=cli_env(home, **env), timeout=600)
    s = start(home, None, "--token", FULL, env=env)
    try:
        owners = s.call("/v1/owners")[1]["owners"]
        assert {o["owner_id"] for o in owners} == {"lin", "maya", "omar"}
        hits = s.call("/v1/search?q=trip%20to%20Lisbon&owner=maya&k=3")[1]["hits"]
        assert hits and all(h["owner_id"] == "maya" for h in hits)
        events = s.call(f"/v1/memories/{hits[0]['id']}/history")[1]["events"]
        assert events and events[0]["event"] == "created"
        for page in ("/", "/owners/maya", f"/memories/{hits[0]['id']}", "/charts", "/skills"):
            assert s.call(page)[0] == 200, page

        def recorded() -> list:
            rows = s.call("/v1/stats")[1]
            assert rows["memories"] > 0
            out = run_cli(
                "sql",
                "select count(*) as n from queries where query = 'trip to Lisbon'",
                "--json",
                env=cli_env(home, **env),
            )
            assert '"n": 1' in out.stdout, out.stdout
            return out

        retry(recorded)
    finally:
        stop(s)
