"""A live tail run on a real broker, with real processes and stores: a signal stops it cleanly, a
SIGKILL at any moment costs nothing, and a restart neither loses nor repeats a message.

Conversations arrive in waves with no closing message: each wave's spans close because their
conversations go quiet (an idle gap of two seconds on the wall clock).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from skillstream.settings import Settings
from skillstream.storage.catalog import Catalog
from tests.flows.test_sigkill import lance_rows
from tests.memskill.conftest import insert_each_turn
from tests.servers.openai_stub import OpenAIStub
from tests.servers.processes import cli_env, die_with_parent, run_cli, skillstream_cmd

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("clean_env"),
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
]

GAP = {"SKILLSTREAM_IDLE_GAP_S": "2", "SKILLSTREAM_EPOCH_INTERVAL_S": "0.2"}
BASE = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
CONVERSATIONS = ("ana", "ben", "cai", "dev")


SAYINGS = (
    (
        "I planted {} tomatoes on the balcony.",
        "My new dog is called {}.",
        "I started a job at {} Labs this month.",
    ),
    (
        "Our flight to {} leaves on Friday morning.",
        "My sister studies medicine at {} university.",
        "I am allergic to the {} pollen every spring.",
    ),
    (
        "We bought a used car from the {} dealer.",
        "The band {} plays my favourite song.",
        "I run ten kilometres with the {} club on Sundays.",
    ),
)
"""Three waves of three sentences that share no fact (near-duplicates would be merged)."""


def token(c: str, w: int, i: int) -> str:
    """The word that marks one message (and the memory made from it)."""
    return f"Zq{c}{w}{i}"


def wave(w: int) -> list[dict[str, Any]]:
    """Every conversation says three things; the waves are an hour apart in event time."""
    rows = []
    for c in CONVERSATIONS:
        for i, saying in enumerate(SAYINGS[w]):
            rows.append(
                {
                    "conversation_id": c,
                    "user_id": c,
                    "session_id": f"{c}-s1",
                    "message_id": f"{c}-w{w}-{i}",
                    "role": "user",
                    "name": c.title(),
                    "content": saying.format(token(c, w, i)),
                    "timestamp": (BASE + timedelta(hours=w, seconds=i)).isoformat(),
                }
            )
    return rows


def send(bootstrap: str, topic: str, rows: list[dict[str, Any]]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "log.connection.close": False})
    for r in rows:
        producer.produce(topic, key=r["conversation_id"].encode(), value=json.dumps(r).encode())
    assert producer.flush(30) == 0


def make_topic(bootstrap: str, topic: str) -> None:
    from skillstream.connectors.kafka import ensure_topic, parse_kafka_uri

    ensure_topic(parse_kafka_uri(f"kafka://{bootstrap}/{topic}"), 3)


def stored(home: Path, rows: list[dict[str, Any]]) -> bool:
    """Whether LanceDB holds a memory for each of ``rows`` (the catalog cannot be read while a
    run holds it; LanceDB can)."""
    texts = " ".join(r["text"] for r in lance_rows(Settings.load(home=str(home))))
    return all(token_of(r) in texts for r in rows)


def token_of(row: dict[str, Any]) -> str:
    found = re.search(r"Zq\w+", row["content"])
    assert found is not None
    return found[0]


def done_messages(home: Path) -> list[str]:
    """Message ids of the done spans (once the run has stopped)."""
    with Catalog(str(home / "catalog.duckdb"), read_only=True) as cat:
        rows = cat.con.execute("select message_ids from spans where status = 'done'").fetchall()
    return [m for (ids,) in rows for m in ids]


def held(home: Path) -> list[str]:
    with Catalog(str(home / "catalog.duckdb"), read_only=True) as cat:
        rows = cat.con.execute(
            "select message_id from open_messages where stage = 'spans'"
        ).fetchall()
    return sorted(r[0] for r in rows)


def until(check: Callable[[], bool], proc: subprocess.Popen, log: Path, what: str) -> None:
    deadline = time.monotonic() + 300
    while not check():
        if proc.poll() is not None:
            pytest.fail(
                f"the run exited ({proc.returncode}) waiting for {what}\n{log.read_text()[-3000:]}"
            )
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}\n{log.read_text()[-3000:]}")
        time.sleep(0.1)


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            skillstream_cmd(*args),
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )


def stop(proc: subprocess.Popen, log: Path, bound: float = 30.0) -> float:
    """SIGTERM; the run must exit 0 within ``bound`` seconds. Returns the seconds it took."""
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=bound)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"no exit {bound} s after SIGTERM\n{log.read_text()[-3000:]}")
    assert code == 0, log.read_text()[-3000:]
    return time.monotonic() - t0


@pytest.mark.parametrize("recovery", [False, True], ids=["offsets-from-start", "recovery-dir"])
def test_sigterm_stops_within_the_bound_and_a_restart_loses_and_repeats_nothing(
    tmp_path, kafka_broker, topic_name, recovery
):
    make_topic(kafka_broker, topic_name)
    home, log = tmp_path / "home", tmp_path / "run.log"
    args = ["--home", str(home), "run", "--source", f"kafka://{kafka_broker}/{topic_name}"]
    if recovery:
        args += ["--recovery-dir", str(tmp_path / "recovery")]
    env = cli_env(home, **GAP)
    first, second, third = wave(0), wave(1), wave(2)

    proc = start([*args, "--json"], env, log)
    send(kafka_broker, topic_name, first)
    until(lambda: stored(home, first), proc, log, "the first wave's memories")
    # the second wave is stopped while its spans are open: they are held in the home
    send(kafka_broker, topic_name, second)
    time.sleep(0.5)
    assert stop(proc, log) < 30
    assert "stopped" in log.read_text()
    open_now = held(home)
    assert open_now  # a span was open at the stop, and nothing of it was lost
    assert set(open_now) | set(done_messages(home)) == {r["message_id"] for r in first + second}

    send(kafka_broker, topic_name, third)
    proc = start(args, env, log)
    everything = {r["message_id"] for r in first + second + third}
    until(lambda: stored(home, first + second + third), proc, log, "every memory")
    time.sleep(1.0)  # a replay would have come by now
    stop(proc, log)

    ids = done_messages(home)
    assert sorted(ids) == sorted(everything)  # each message in exactly one done span
    assert held(home) == []
    rows = lance_rows(Settings.load(home=str(home)))
    assert len(rows) == len({r["id"] for r in rows}) > 0


def test_sigkill_at_five_moments_of_a_live_run_costs_no_request_twice(
    tmp_path, kafka_broker, topic_name
):
    """The counting LLM stub kills the run while it holds the n-th request, at five moments
    drawn at random; every restart resumes from the recovery folder. The memories equal an
    uninterrupted run's, and the only requests made twice are the five never answered."""
    waves = [wave(w) for w in range(3)]
    total_spans = len(waves) * len(CONVERSATIONS)
    kills = sorted(random.Random(32).sample(range(1, total_spans + 1), 5))
    uri = f"kafka://{kafka_broker}/{topic_name}"
    make_topic(kafka_broker, topic_name)
    home, log = tmp_path / "home", tmp_path / "run.log"
    child: dict[str, int] = {}
    killed: list[int] = []
    lock = threading.Lock()

    def script(body: dict) -> str:
        with lock:
            n = len(stub.requests)
            if kills and n == kills[0]:
                kills.pop(0)
                killed.append(n)
                os.kill(child["pid"], signal.SIGKILL)  # dies while this request is open
        return insert_each_turn(body)

    llm = ["--llm", "openai", "--llm-model", "stub-model"]
    flow = {
        **GAP,
        "SKILLSTREAM_DISTILL": "false",
        "SKILLSTREAM_CONCURRENCY": "1",
        "SKILLSTREAM_LLM_CONCURRENCY": "1",
        "SKILLSTREAM_LLM_RESPONSE_FORMAT": "json_schema",
    }
    env = cli_env(home, **flow)
    with OpenAIStub(script) as stub:
        args = ["--home", str(home), "run", "--source", uri, "--llm-base-url", stub.url, *llm]
        args += ["--recovery-dir", str(tmp_path / "recovery")]
        # A wave is sent once the spans of the one before have closed (their requests came);
        # memories are not the sign: a span's operations may all be refused.
        sent, restarts = 0, 0
        proc = start(args, env, log)
        child["pid"] = proc.pid
        deadline = time.monotonic() + 900
        while True:
            with lock:
                asked = {json.dumps(b, sort_keys=True) for b in stub.requests}
            if sent < len(waves) and len(asked) == sent * len(CONVERSATIONS):
                send(kafka_broker, topic_name, waves[sent])
                sent += 1
            if proc.poll() is not None:
                assert proc.returncode == -signal.SIGKILL, log.read_text()[-3000:]
                restarts += 1
                proc = start(args, env, log)
                child["pid"] = proc.pid
            if len(asked) == total_spans and stub.in_flight == 0:
                break
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        time.sleep(2.0)  # the last answers are written
        stop(proc, log, bound=60)
        bodies = [json.dumps(b, sort_keys=True) for b in stub.requests]
    assert restarts == len(killed) == 5

    # the uninterrupted run: the whole topic, no tail
    with OpenAIStub(insert_each_turn) as clean_stub:
        clean = tmp_path / "clean"
        run_cli(
            "--home", str(clean), "run", "--source", uri, "--no-tail",
            "--llm-base-url", clean_stub.url, *llm,
            env=cli_env(clean, **flow),
        )  # fmt: skip
        clean_bodies = [json.dumps(b, sort_keys=True) for b in clean_stub.requests]
    assert len(clean_bodies) == total_spans

    def memories(h: Path) -> list[tuple]:
        rows = lance_rows(Settings.load(home=str(h)))
        return sorted((r["id"], r["text"], r["status"], r["version"]) for r in rows)

    assert memories(home) == memories(clean)
    assert sorted(done_messages(home)) == sorted(done_messages(clean))
    repeats = {b: n for b, n in Counter(bodies).items() if n > 1}
    assert set(bodies) == set(clean_bodies)
    assert sum(n - 1 for n in repeats.values()) == 5 == len(bodies) - len(clean_bodies)
