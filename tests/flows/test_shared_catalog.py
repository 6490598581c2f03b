"""A two-process cluster on a shared catalog: DuckLake on a real PostgreSQL, its data files and the
LanceDB tables on moto S3, the counting LLM server, both processes writing.

The cluster is SIGKILLed once both processes have committed spans, then restarted with the same
recovery folder; a third process queries ``memories`` with ``skillstream sql`` while it runs. The
end state must equal a one-process run on the DuckDB file, and no answered LLM request may be asked
again.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from bytewax.testing import run_main

from skillstream.connectors.files import FileSource
from skillstream.settings import Settings
from skillstream.storage.catalog import catalog_exists, open_catalog
from tests.factories import flow_of, write_locomo
from tests.flows.test_sigkill import lance_rows
from tests.memskill.conftest import insert_each_turn
from tests.servers.openai_stub import OpenAIStub
from tests.servers.ports import free_port
from tests.servers.processes import cli_env, die_with_parent, skillstream_cmd
from tests.servers.s3 import fresh_bucket

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
]

BUCKET = "shared-catalog"
TIMEOUT_S = 900.0
FLOW = {
    "epoch_interval_s": "0.2",
    "span_tokens": "128",
    "concurrency": "1",
    "llm_concurrency": "1",
    "llm_response_format": "json_schema",
    "distill": "false",
}


def body_key(body: dict) -> str:
    return json.dumps(body, sort_keys=True)


def snapshot_authors(settings: Settings) -> set[str]:
    """``host:pid`` of every process that committed spans to the shared catalog."""
    if not catalog_exists(settings.storage):
        return set()
    with open_catalog(settings.storage, read_only=True) as cat:
        rows = cat.sql(
            "SELECT DISTINCT author FROM ducklake_snapshots('lake') "
            "WHERE commit_message LIKE 'store:%' AND commit_message NOT LIKE 'store: 0 spans%'"
        ).to_pylist()
    return {r["author"] for r in rows}


def lake_memories(settings: Settings) -> list[dict]:
    """Every memory row in LanceDB on S3 (id, text, status, version)."""
    from skillstream.storage.lance import connect

    db = connect(settings.storage.lancedb, dict(settings.storage.storage_options))
    columns = ["id", "text", "status", "version"]
    return db.open_table("memories").to_arrow().select(columns).to_pylist()


def ledger_spans(settings: Settings) -> int:
    with open_catalog(settings.storage, read_only=True) as cat:
        return int(cat.sql("SELECT count(*) AS n FROM spans").to_pylist()[0]["n"])


def cli_json(env: dict, home: Path, *args: str) -> object:
    """``skillstream ARGS --json`` from a third process; it must answer while the cluster runs."""
    out = subprocess.run(
        skillstream_cmd("--home", str(home), *args, "--json"),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=die_with_parent,
    )
    assert out.returncode == 0, (args, out.stderr[-3000:])
    return json.loads(out.stdout)


def query_memories(env: dict, home: Path) -> int:
    """``select count(*) from memories`` through ``skillstream sql``."""
    rows = cli_json(env, home, "sql", "select count(*) as n from memories")
    assert isinstance(rows, list)
    return int(rows[0]["n"])


def read_while_running(env: dict, home: Path) -> None:
    """``stats``, ``search``, ``history`` and ``skills list`` answer from a third process while
    the cluster writes (the search records nothing, so the end state stays comparable)."""
    stats = cli_json(env, home, "stats")
    assert isinstance(stats, dict) and stats, stats
    rows = cli_json(env, home, "sql", "select id, owner_id, text from memories limit 1")
    assert isinstance(rows, list) and rows
    memory = rows[0]
    hits = cli_json(
        env, home, "search", memory["text"], "--owner", memory["owner_id"], "--no-record"
    )
    assert isinstance(hits, list) and memory["id"] in {h["id"] for h in hits}, hits
    history = cli_json(env, home, "history", memory["id"])
    assert memory["id"] in json.dumps(history)
    assert isinstance(cli_json(env, home, "skills", "list", "--owner", memory["owner_id"]), list)


def start_cluster(home: Path, source: Path, recovery: Path, url: str, env: dict, logs: Path):
    addresses = f"127.0.0.1:{free_port()};127.0.0.1:{free_port()}"
    procs = []
    for i in range(2):
        cmd = skillstream_cmd(
            "--home", str(home), "run", "--source", str(source), "--recovery-dir", str(recovery),
            "-i", str(i), "-a", addresses, "--llm", "openai", "--llm-base-url", url,
            "--llm-model", "stub-model",
        )  # fmt: skip
        log = open(logs / f"p{i}.log", "ab")
        procs.append(
            subprocess.Popen(
                cmd, env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent
            )
        )
        log.close()
    return procs


def logs_text(logs: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(logs.glob("*.log")))


def stop(procs) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        p.wait(timeout=60)


def test_two_writers_killed_and_resumed_equal_one_process_on_the_duckdb_file(
    tmp_path, lake_catalog, s3_endpoint
):
    options = fresh_bucket(s3_endpoint, BUCKET)
    # 8 conversations: owners conv-0..3 fall in shard 0 and conv-4..7 in shard 1 of two.
    data = write_locomo(tmp_path / "locomo.json", samples=8, sessions=3, turns=8)
    home, recovery, logs = tmp_path / "home", tmp_path / "recovery", tmp_path / "logs"
    logs.mkdir()
    keys = {
        **FLOW,
        "catalog": lake_catalog,
        "catalog_data": f"s3://{BUCKET}/catalog_data",
        "lancedb_uri": f"s3://{BUCKET}/lancedb",
        "storage_options": json.dumps(options),
    }
    env = cli_env(home, **{f"SKILLSTREAM_{k.upper()}": v for k, v in keys.items()})
    settings = Settings.load(home=str(home), **{**keys, "storage_options": options})

    with OpenAIStub(insert_each_turn, latency_s=0.2) as stub:
        # The LLM answers one request per look at the catalog until both processes have
        # committed, then none: the cluster waits on it while the third process reads, however
        # fast the machine runs the flow.
        stub.hold(2)
        procs = start_cluster(home, data, recovery, stub.url, env, logs)
        pids = {f"{socket.gethostname()}:{p.pid}" for p in procs}
        answers = []
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while not pids <= snapshot_authors(settings):  # both processes have committed
                if any(p.poll() is not None for p in procs):
                    pytest.fail(f"a process ended before the kill\n{logs_text(logs)}")
                if time.monotonic() > deadline:
                    pytest.fail(f"no commits from both processes\n{logs_text(logs)}")
                stub.release()
                time.sleep(0.2)
            stub.hold()
            answers += [query_memories(env, home) for _ in range(2)]
            read_while_running(env, home)
            for p in procs:
                if p.poll() is not None:
                    pytest.fail(f"the run ended before the kill\n{logs_text(logs)}")
            os.kill(procs[1].pid, signal.SIGKILL)  # one process dies; then the group stops
            os.kill(procs[0].pid, signal.SIGKILL)
        finally:
            stop(procs)
        asked_before = len(stub.requests)
        stub.unhold()
        spans_at_kill = ledger_spans(settings)

        procs = start_cluster(home, data, recovery, stub.url, env, logs)
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while any(p.poll() is None for p in procs):
                if any(p.poll() not in (None, 0) for p in procs) or time.monotonic() > deadline:
                    pytest.fail(f"the resumed cluster failed\n{logs_text(logs)}")
                answers.append(query_memories(env, home))
                time.sleep(0.5)
        finally:
            stop(procs)
        assert [p.returncode for p in procs] == [0, 0], logs_text(logs)
        bodies = [body_key(b) for b in stub.requests]

    with OpenAIStub(insert_each_turn) as clean_stub:
        clean = Settings.load(
            home=str(tmp_path / "single"),
            llm="openai",
            llm_base_url=clean_stub.url,
            llm_model="stub-model",
            **FLOW,
        )
        assert not clean.storage.shared_catalog
        run_main(flow_of(clean, FileSource(str(data))))
        clean_bodies = [body_key(b) for b in clean_stub.requests]
    expected = sorted((r["id"], r["text"], r["status"], r["version"]) for r in lance_rows(clean))
    with open_catalog(clean.storage, read_only=True) as cat:
        total_spans = cat.count("spans")

    assert len(expected) > 20 and 0 < spans_at_kill < total_spans, (spans_at_kill, total_spans)
    # every request may have been answered before the kill (answers come faster than commits):
    # the resumed run then re-extracts committed-nothing spans from the response cache alone
    assert 0 < asked_before <= len(clean_bodies)
    got = lake_memories(settings)
    assert len(got) == len({r["id"] for r in got})  # no duplicate LanceDB rows
    assert sorted((r["id"], r["text"], r["status"], r["version"]) for r in got) == expected
    with open_catalog(settings.storage, read_only=True) as cat:
        assert cat.count("spans") == total_spans
        assert cat.sql("SELECT count(DISTINCT span_id) AS n FROM spans").to_pylist()[0]["n"] == (
            total_spans
        )
    # a search that records its query writes to the shared catalog from a third process too
    first = got[0]
    cli_json(env, home, "search", first["text"])
    with open_catalog(settings.storage, read_only=True) as cat:
        assert cat.count("queries") == 1
    # the third process always answered, and saw the memories grow to the final count
    assert answers and answers == sorted(answers) and answers[-1] <= len(expected)
    # no answered request was asked again: a repeat can only be a request that was open when its
    # process was killed (one at a time per process)
    repeats = {b: n for b, n in Counter(bodies).items() if n > 1}
    assert set(bodies) == set(clean_bodies)
    assert len(repeats) <= 2 and all(n == 2 for n in repeats.values()), repeats
