"""Open spans on a live stream: a quiet conversation's span closes in processing time, a backfill
still cuts by event time, a replay that cuts differently extracts nothing twice, and ``Home.add``
one message at a time gives what one run gives."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
from bytewax.testing import TestingSource

import skillstream
from skillstream.flows.memory import default_sample
from skillstream.flows.runner import Runner
from skillstream.held import Held, OpenState, held_rows, open_states
from skillstream.ledger import DoneMessages, content_digest
from skillstream.model import Message, SpanResult
from skillstream.quiet import IdleRule, StreamClock
from skillstream.settings import Settings
from skillstream.storage.catalog import Catalog
from tests.factories import make_message

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)


# ------------------------------------------------------------------------------ the rules


def test_quiet_rule_waits_for_the_conversation_and_the_stream():
    rule = IdleRule(timedelta(seconds=10), live=True)
    clock = StreamClock()
    # nothing seen yet: quiet time alone
    assert rule.due(T0, 100.0, clock) == 110.0
    # the stream's event time is the conversation's: wall time moves it
    clock.see(T0, 100.0)
    assert rule.due(T0, 100.0, clock) == 110.0
    assert not rule.closes(T0, 100.0, clock, 109.9)
    assert rule.closes(T0, 100.0, clock, 110.0)
    # a backfill: other messages keep arriving with timestamps just after this one's, so the
    # stream's event time has not passed the gap however long the wall clock says it has been
    for i in range(1, 50):
        clock.see(T0 + timedelta(seconds=i * 0.1), 100.0 + i)
    assert not rule.closes(T0, 100.0, clock, 150.0)
    assert rule.due(T0, 100.0, clock) == pytest.approx(149.0 + 10 - 4.9)
    # data past the gap closes it
    clock.see(T0 + timedelta(seconds=11), 151.0)
    assert rule.closes(T0, 100.0, clock, 151.0)
    # a finite source: never in processing time
    assert IdleRule(timedelta(seconds=10)).due(T0, 0.0, clock) is None


def test_done_messages_are_found_by_owner_conversation_and_id():
    def msg(owner: str, conversation: str, i: int, text: str = "hello") -> Message:
        return replace(make_message(text, i=i, conversation_id=conversation), owner_id=owner)

    said = msg("u1", "c1", 1)
    done = DoneMessages(
        [
            ("u1", "c1", "c1-m1", content_digest(said)),
            ("u1", "c1", "c1-m2", None),  # written before the ledger kept digests
            ("u1", "c2", "c2-m1", content_digest(msg("u1", "c2", 1))),
        ]
    )
    assert len(done) == 3
    assert done.done(msg("u1", "c1", 2)) and done.done(msg("u1", "c2", 1))
    assert not done.done(msg("u1", "c2", 2)) and not done.done(msg("u1", "c3", 1))
    # another owner's conversation of the same id and message ids is not this one
    assert not done.done(msg("u2", "c1", 1))
    assert not DoneMessages().done(said)
    # the same id saying something else is an edit; an unknown digest is never one
    assert not done.edited(said)
    assert done.edited(msg("u1", "c1", 1, "goodbye"))
    assert not done.edited(msg("u1", "c1", 2, "anything"))
    assert not done.edited(msg("u2", "c1", 1, "goodbye"))


def test_held_rows_give_the_state_back():
    msgs = tuple(make_message(f"text {i}", i=i) for i in range(3))
    held = Held("spans", "u1", "c1", OpenState(msgs, seq=4, last_seen=1234.5))
    rows = held_rows(held)
    for row in rows:  # as the catalog gives them back
        row["last_seen"] = row["last_seen"].timestamp()
        row["held_at"] = row["held_at"].timestamp()
    state = open_states(reversed(rows))["spans"][("u1", "c1")]
    assert state == OpenState(msgs, 4, 1234.5)


# ------------------------------------------------------------------------------ flows


class Paced(FixedPartitionedSource[Any, None]):
    """One partition that emits ``(delay_s, message)`` steps: each message ``delay_s`` after the
    last, then stays open ``linger_s`` before its end (a live source that goes quiet). With
    ``stamp``, each message is dated when it is sent, as a live chat's are."""

    def __init__(
        self, steps: list[tuple[float, Message]], linger_s: float, stamp: bool = False
    ) -> None:
        self.steps = steps
        self.linger_s = linger_s
        self.stamp = stamp
        self.end_at: float | None = None
        self.sent: dict[str, float] = {}

    def list_parts(self) -> list[str]:
        return ["only"]

    def build_part(self, step_id: str, for_part: str, resume_state: None) -> Any:
        return _PacedPart(self)


class _PacedPart(StatefulSourcePartition[Any, None]):
    def __init__(self, source: Paced) -> None:
        self.source = source
        self.i = 0
        self.next = time.time()

    def next_batch(self) -> list[Any]:
        src, now = self.source, time.time()
        if now < self.next:
            return []
        if self.i < len(src.steps):
            _, message = src.steps[self.i]
            if src.stamp:
                message = replace(message, ts=datetime.fromtimestamp(now, UTC))
            self.i += 1
            src.sent[message.message_id] = now
            delay = src.steps[self.i][0] if self.i < len(src.steps) else src.linger_s
            self.next = now + delay
            return [message]
        src.end_at = now
        raise StopIteration

    def next_awake(self) -> datetime | None:
        return datetime.fromtimestamp(self.next, UTC)

    def snapshot(self) -> None:
        return None


def _live_message(conv: str, i: int, text: str, ts: datetime) -> Message:
    return make_message(text, i=i, conversation_id=conv, owner_id=conv, ts=ts)


def _run(home: Path, source: Any, **runner: Any) -> tuple[list[tuple[float, Any]], dict]:
    settings = Settings.load(home=str(home), idle_gap_s=runner.pop("gap", 1.0), distill=False)
    seen: list[tuple[float, Any]] = []
    r = Runner(settings, flow_id="live-test", **runner)
    r.collect = lambda item: seen.append((time.time(), item))
    summary = r.run(source).as_dict()
    return seen, summary


def _spans(seen: list[tuple[float, Any]]) -> list[tuple[float, SpanResult]]:
    return [(t, r) for t, r in seen if isinstance(r, SpanResult)]


@pytest.mark.slow
def test_a_quiet_conversation_closes_while_others_stream(tmp_path):
    """Conversation ``a`` says two things and goes quiet; ``b`` streams on. ``a``'s span closes
    about one idle gap after its last message, long before the source ends."""
    now = datetime.now(UTC)
    steps: list[tuple[float, Message]] = [
        (0.0, _live_message("a", 0, "I moved to Lisbon last week.", now)),
        (0.05, _live_message("a", 1, "My new address is Rua Augusta 10.", now)),
    ]
    for i in range(40):  # b: a message every 0.1 s for 4 s
        steps.append((0.1, _live_message("b", i, f"Message number {i} about the weather.", now)))
    source = Paced(steps, linger_s=1.0, stamp=True)
    seen, summary = _run(tmp_path / "home", source, live=True, gap=1.0)
    closed_a = [(t, r) for t, r in _spans(seen) if r.span.conversation_id == "a"]
    assert [r.span.message_ids for _, r in closed_a] == [["a-m0", "a-m1"]]
    t_closed = closed_a[0][0]
    quiet_for = t_closed - source.sent["a-m1"]
    assert 1.0 <= quiet_for < 3.0
    assert source.end_at is not None and t_closed < source.end_at - 1.0
    assert closed_a[0][1].status == "done" and closed_a[0][1].memories


@pytest.mark.slow
def test_data_faster_than_real_time_is_cut_by_event_time(tmp_path):
    """A replay through a live source: ``a``'s messages come 1.3 s apart on the wall clock, more
    than the 1 s gap, but 0.1 s apart in event time while ``b`` keeps the stream's event time
    just behind. Event time rules: one span, as a backfill cuts it."""
    steps: list[tuple[float, Message]] = []
    b = 0
    for i in range(3):
        steps.append(
            (
                0.1,
                _live_message(
                    "a", i, f"Fact {i} about my garden.", T0 + timedelta(seconds=0.1 * i)
                ),
            )
        )
        for _ in range(13):
            ts = T0 + timedelta(seconds=0.1 * i + 0.001 * (b + 1))
            steps.append((0.1, _live_message("b", b, f"Chatter {b}.", ts)))
            b += 1
    seen, _ = _run(tmp_path / "home", Paced(steps, linger_s=0.0), live=True, gap=1.0)
    a_spans = [r.span.message_ids for _, r in _spans(seen) if r.span.conversation_id == "a"]
    assert a_spans == [["a-m0", "a-m1", "a-m2"]]


@pytest.mark.slow
def test_a_replay_that_cuts_differently_extracts_nothing_twice(tmp_path):
    """The live run closes ``a``'s first two messages on quiet; a backfill of the same messages
    cuts one span of all four. Only the two messages that are not in a done span are new, and no
    message ends up in two done spans."""
    home = tmp_path / "home"
    msgs = [
        _live_message(
            "a", i, f"Statement {i}: I like tea number {i}.", T0 + timedelta(seconds=0.1 * i)
        )
        for i in range(4)
    ]
    steps = [(0.0, msgs[0]), (0.05, msgs[1]), (1.6, msgs[2])]
    seen, _ = _run(home, Paced(steps, linger_s=0.0), live=True, gap=1.0)
    assert [r.span.message_ids for _, r in _spans(seen)] == [["a-m0", "a-m1"], ["a-m2"]]

    seen, summary = _run(home, TestingSource(msgs), live=False, gap=1.0)
    assert [r.span.message_ids for _, r in _spans(seen)] == [["a-m3"]]
    with Catalog(str(home / "catalog.duckdb"), read_only=True) as cat:
        ids = [
            m
            for (row,) in cat.con.execute(
                "select message_ids from spans where status = 'done'"
            ).fetchall()
            for m in row
        ]
    assert sorted(ids) == ["a-m0", "a-m1", "a-m2", "a-m3"]

    # the exact replay meets the same span ids and skips them whole
    seen, summary = _run(home, TestingSource(msgs), live=False, gap=1.0)
    assert summary["spans_processed"] == 0


# ------------------------------------------------------------------------------ the API


def _sample_rows() -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted(default_sample().glob("*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]


def _stored(home: Path) -> dict[str, list]:
    with Catalog(str(home / "catalog.duckdb"), read_only=True) as cat:
        q = lambda sql: [tuple(r) for r in cat.con.execute(sql).fetchall()]  # noqa: E731
        return {
            "spans": q("select span_id, status, message_ids, seq from spans order by span_id"),
            "memories": q("select id, version, text, status from memory_meta order by id"),
            "task_skills": q("select id, version from task_skills order by 1"),
            "open": q("select count(*) from open_messages"),
        }


@pytest.mark.slow
def test_add_one_message_at_a_time_equals_one_run(tmp_path):
    """The first half of the adds runs in another process that exits between calls: the open
    spans it held come back from the home."""
    rows = _sample_rows()
    skillstream.open(str(tmp_path / "run")).run(str(default_sample()))
    home = tmp_path / "add"
    half = len(rows) // 2
    script = (
        "import json, sys, skillstream\n"
        "home = skillstream.open(sys.argv[1])\n"
        "for line in sys.stdin:\n"
        "    home.add([json.loads(line)])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(home)],
        input="".join(json.dumps(r) + "\n" for r in rows[:half]),
        text=True,
        capture_output=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _stored(home)["open"][0][0] > 0
    api = skillstream.open(str(home))
    held = []
    for row in rows[half:]:
        held.append(api.add([row]).held)
    assert held[-1] > 0 and api.held()
    flushed = api.flush()
    assert flushed.results and not api.held()
    assert _stored(home) == _stored(tmp_path / "run")
