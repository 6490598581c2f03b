"""A two-process Bytewax cluster on loopback, started through the CLI (``-i`` / ``-a``).

Both processes read the same 3-partition topic (Bytewax spreads the partitions over them) and
share one home; the store sink's single partition makes exactly one of them write DuckDB and
LanceDB. The memories must equal those of a one-process run. Both processes are supervised: if
one fails or hangs (a peer that never connects makes the other wait forever), both are killed.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from bytewax.testing import run_main
from click.testing import CliRunner

from skillstream.cli import cli
from skillstream.connectors.kafka import kafka_source
from skillstream.settings import Settings
from tests.factories import flow_of, write_locomo
from tests.flows.test_sigkill import lance_rows
from tests.servers.ports import free_port
from tests.servers.processes import cli_env, die_with_parent, skillstream_cmd

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("clean_env"),
    # subprocesses fork (then exec) to set PR_SET_PDEATHSIG; nothing of lance runs in the child
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
]

CLUSTER_TIMEOUT_S = 600.0


def run_cluster(cmds: list[list[str]], env: dict, logs: list) -> list[dict]:
    """Start every command, wait for all; on a failure or the timeout kill the others."""
    outs_paths = [log.with_suffix(".out") for log in logs]
    files = [(open(o, "wb"), open(log, "wb")) for o, log in zip(outs_paths, logs)]
    procs = [
        subprocess.Popen(c, env=env, stdout=out, stderr=err, preexec_fn=die_with_parent)
        for c, (out, err) in zip(cmds, files)
    ]
    deadline = time.monotonic() + CLUSTER_TIMEOUT_S
    try:
        while any(p.poll() is None for p in procs):
            failed = [p for p in procs if p.poll() not in (None, 0)]
            if failed or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
        for out, err in files:
            out.close()
            err.close()
    outs = [o.read_text() for o in outs_paths]
    codes = [p.returncode for p in procs]
    if codes != [0] * len(procs):
        details = "\n".join(
            f"--- process {i} exit {c}\n{out[-1000:]}\n{log.read_text()[-3000:]}"
            for i, (c, out, log) in enumerate(zip(codes, outs, logs))
        )
        pytest.fail(f"cluster failed or timed out: exit codes {codes}\n{details}")
    return [summary_of(o) for o in outs]


def summary_of(stdout: str) -> dict:
    """The ``--json`` summary; Bytewax prints lines of its own (connection retries) before it."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("{"))
    return json.loads("\n".join(lines[start:]))


def test_two_process_cluster_equals_one_process(tmp_path, kafka_broker, topic_name):
    data = write_locomo(tmp_path / "locomo.json", samples=5, sessions=3, turns=8)
    uri = f"kafka://{kafka_broker}/{topic_name}"
    out = CliRunner().invoke(
        cli,
        [
            "--home",
            str(tmp_path / "p"),
            "produce",
            str(data),
            "--format",
            "locomo",
            "--to",
            uri,
            "--partitions",
            "3",
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output

    home = tmp_path / "cluster"
    addresses = f"127.0.0.1:{free_port()};127.0.0.1:{free_port()}"
    cmds = [
        skillstream_cmd(
            "--home",
            str(home),
            "run",
            "--source",
            uri,
            "--no-tail",
            "-i",
            str(i),
            "-a",
            addresses,
            "--json",
        )
        for i in range(2)
    ]
    summaries = run_cluster(cmds, cli_env(home), [tmp_path / "p0.log", tmp_path / "p1.log"])
    assert sum(s["messages"] for s in summaries) == 120
    assert sum(s["spans_processed"] for s in summaries) > 10

    single = Settings.load(home=str(tmp_path / "single"))
    run_main(flow_of(single, kafka_source(uri, single, tail=False)))
    expected = sorted(r["id"] for r in lance_rows(single))
    got = lance_rows(Settings.load(home=str(home)))
    assert len(expected) > 20
    assert sorted(r["id"] for r in got) == expected

    # the cluster's catalog is one file, written by one process, and holds every span once
    sql = CliRunner().invoke(
        cli,
        [
            "--home",
            str(home),
            "sql",
            "select count(*) as n, count(distinct span_id) as d from spans",
            "--json",
        ],
    )
    assert sql.exit_code == 0, sql.output
    (row,) = json.loads(sql.stdout)
    assert row["n"] == row["d"] == sum(s["spans_processed"] for s in summaries)
