"""A Kafka run with the ``openai`` backend, SIGKILLed mid-run, then resumed from its recovery dir.

The LLM is the counting ``OpenAIStub`` (a real HTTP server). The run follows the topic (``--tail``)
while the first half of the conversations is produced; once memories are stored and snapshotted,
the second half is produced and the stub sends SIGKILL to the run while it holds a chosen request
of that half, so that request is never answered. With one request in flight at a time
(concurrency 1), every earlier request was answered and cached. The same command with
``--no-tail`` then finishes the topic. Effectively once means: the memories equal those of an
uninterrupted run, and the only request the server sees twice is the one that was never answered.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from bytewax.testing import run_main
from click.testing import CliRunner

from skillstream.cli import cli
from skillstream.connectors.kafka import kafka_source
from skillstream.settings import Settings
from tests.factories import flow_of, write_locomo
from tests.flows.test_sigkill import lance_rows
from tests.memskill.conftest import insert_each_turn
from tests.servers.openai_stub import OpenAIStub
from tests.servers.processes import cli_env, die_with_parent, skillstream_cmd

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("clean_env"),
    # subprocesses fork (then exec) to set PR_SET_PDEATHSIG; nothing of lance runs in the child
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
]

FLOW = {
    "SKILLSTREAM_EPOCH_INTERVAL_S": "0.2",
    "SKILLSTREAM_SPAN_TOKENS": "128",
    "SKILLSTREAM_CONCURRENCY": "1",
    "SKILLSTREAM_LLM_CONCURRENCY": "1",
    "SKILLSTREAM_LLM_RESPONSE_FORMAT": "json_schema",
    "SKILLSTREAM_LLM_TIMEOUT_S": "30",
    "SKILLSTREAM_DISTILL": "false",
}
"""Flow settings of both runs: one LLM request in flight at a time, memory extraction only
(task-skill distillation has LLM requests of its own, with answers this test does not script)."""


def body_key(body: dict) -> str:
    return json.dumps(body, sort_keys=True)


def llm_settings(home, url: str) -> Settings:
    return Settings.load(
        home=str(home),
        llm="openai",
        llm_base_url=url,
        llm_model="stub-model",
        epoch_interval_s=0.2,
        span_tokens=128,
        concurrency=1,
        llm_concurrency=1,
        llm_response_format="json_schema",
        distill=False,
    )


def split_sessions(path: Path, first: int) -> tuple[Path, Path]:
    """Two LoCoMo files: sessions ``1..first`` of every sample, then the later ones."""
    samples = json.loads(path.read_text())
    parts: list[list[dict]] = [[], []]
    for sample in samples:
        halves: list[dict[str, Any]] = [{}, {}]
        for key, value in sample["conversation"].items():
            if key.startswith("session_"):
                n = int(key.split("_")[1])
                halves[0 if n <= first else 1][key] = value
            else:
                halves[0][key] = halves[1][key] = value
        for i in (0, 1):
            parts[i].append({**sample, "conversation": halves[i]})
    out = (path.with_name("part1.json"), path.with_name("part2.json"))
    for p, samples_part in zip(out, parts):
        p.write_text(json.dumps(samples_part))
    return out


def produce(path: Path, uri: str, home: Path) -> None:
    out = CliRunner().invoke(
        cli,
        [
            "--home",
            str(home),
            "produce",
            str(path),
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


def wait_for(check, timeout: float, what: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if proc.poll() is not None:
            pytest.fail(
                f"the run ended (exit {proc.returncode}) while "
                f"waiting for {what}\n{log.read_text()[-3000:]}"
            )
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}\n{log.read_text()[-3000:]}")
        time.sleep(0.05)


def test_sigkill_mid_kafka_run_then_resume_is_effectively_once(tmp_path, kafka_broker, topic_name):
    data = write_locomo(tmp_path / "locomo.json", samples=3, sessions=4, turns=6)
    part1, part2 = split_sessions(data, first=2)
    uri = f"kafka://{kafka_broker}/{topic_name}"
    produce(part1, uri, tmp_path / "p")

    child: dict = {}
    kill_at: dict = {}
    killed = threading.Event()

    def script(body: dict) -> str:
        if len(stub.requests) == kill_at.get("n") and not killed.is_set():
            os.kill(child["pid"], signal.SIGKILL)  # the run dies while this request is open
            killed.set()
        return insert_each_turn(body)

    home = tmp_path / "home"
    log_path = tmp_path / "killed.log"
    with OpenAIStub(script) as stub:
        env = cli_env(home, **FLOW)
        base = [
            "--home",
            str(home),
            "run",
            "--source",
            uri,
            "--recovery-dir",
            str(tmp_path / "recovery"),
            "--llm",
            "openai",
            "--llm-base-url",
            stub.url,
            "--llm-model",
            "stub-model",
        ]
        # Follow the topic; once the first half is partly stored, send the second half and kill
        # the run while it waits for the answer to the second request after that.
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                skillstream_cmd(*base, "--tail"),
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,
            )
            child["pid"] = proc.pid
            try:
                wait_for(
                    lambda: len(lance_rows(Settings.load(home=str(home)))) > 0,
                    600,
                    "the first memories",
                    proc,
                    log_path,
                )
                time.sleep(1.0)  # a few epochs: the progress is in a snapshot
                kill_at["n"] = stub.count + 2
                produce(part2, uri, tmp_path / "p")
                proc.wait(timeout=600)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        assert killed.is_set() and proc.returncode == -signal.SIGKILL, log_path.read_text()[-3000:]
        assert stub.count == kill_at["n"]
        partial = lance_rows(Settings.load(home=str(home)))

        resumed = subprocess.run(
            skillstream_cmd(*base, "--no-tail"),
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            preexec_fn=die_with_parent,
        )
        assert resumed.returncode == 0, resumed.stderr[-4000:]
        bodies = [body_key(b) for b in stub.requests]

    # The uninterrupted run over the whole topic, in this process, against its own stub.
    with OpenAIStub(insert_each_turn) as clean_stub:
        clean = llm_settings(tmp_path / "clean", clean_stub.url)
        run_main(flow_of(clean, kafka_source(uri, clean, tail=False)))
        clean_bodies = [body_key(b) for b in clean_stub.requests]
    expected = sorted((r["id"], r["text"], r["status"], r["version"]) for r in lance_rows(clean))
    assert len(clean_bodies) == len(set(clean_bodies)) >= 8 and len(expected) > 20
    assert 0 < len(partial) < len(expected)

    got = lance_rows(Settings.load(home=str(home)))
    assert len(got) == len({r["id"] for r in got})
    assert sorted(r["id"] for r in got) == sorted(r[0] for r in expected)
    assert sorted((r["id"], r["text"], r["status"], r["version"]) for r in got) == expected

    # Every request of the uninterrupted run was made, and no answered one was made again: the
    # only repeat is the request that was open when the run was killed.
    repeats = {b: n for b, n in Counter(bodies).items() if n > 1}
    assert set(bodies) == set(clean_bodies)
    assert repeats == {bodies[kill_at["n"] - 1]: 2}
    assert len(bodies) == len(clean_bodies) + 1
