"""The maintenance operator in the real flow: ticks by event time, and backfill == live."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from bytewax.testing import run_main

from skillstream.connectors.files import FileSource
from skillstream.embed import get_embedder
from skillstream.lifecycle.params import LifecycleParams
from skillstream.services.home_lifecycle import maintain_home
from skillstream.settings import Settings
from skillstream.storage.catalog import Catalog
from skillstream.storage.home import open_stores
from tests.factories import SENTENCES, flow_of, write_jsonl

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
SESSIONS = {"ann": [0, 1, 45, 200], "bob": [0, 3, 120]}
"""Owner -> the days its sessions start on (each session: 6 messages, 2 minutes apart)."""
POLICIES = {"*": {"default_expiry": "150d"}}


def rows(days_from: int = 0, days_to: int = 10**6) -> list[dict]:
    out = []
    for owner, days in SESSIONS.items():
        for j, day in enumerate(days):
            if not days_from <= day < days_to:
                continue
            for i in range(6):
                text = SENTENCES[(i * 3 + j + len(owner)) % len(SENTENCES)]
                out.append(
                    {
                        "conversation_id": owner,
                        "session_id": f"{owner}-s{j}",
                        "message_id": f"{owner}-{j}-{i}",
                        "role": "user",
                        "name": owner.title(),
                        "content": text,
                        "timestamp": (T0 + timedelta(days=day, minutes=2 * i)).isoformat(),
                    }
                )
    return out


def _settings(path) -> Settings:
    return Settings.load(
        home=str(path),
        epoch_interval_s=0.0,
        span_tokens=64,
        policies=POLICIES,
        decay_rule="idle",  # every unused memory decays, so the flow's decay shows here
    )


def _run(settings, src) -> None:
    run_main(flow_of(settings, FileSource(str(src))))


def _sql(settings, q):
    cat = Catalog(settings.storage.catalog, read_only=True)
    try:
        return cat.sql(q).to_pylist()
    finally:
        cat.close()


def _state(settings):
    memories = _sql(settings, "SELECT * FROM memory_meta ORDER BY id")
    events = _sql(
        settings,
        "SELECT event_id, memory_id, event, event_ts, version, new_status, reason "
        "FROM memory_events ORDER BY event_id",
    )
    extras = {
        t: _sql(settings, f"SELECT * EXCLUDE (recorded_at) FROM {t} ORDER BY 1")
        for t in ("contradictions", "session_summaries")
    }
    return memories, events, extras


@pytest.mark.slow
def test_backfill_and_a_live_run_in_pieces_end_in_the_same_state(tmp_path):
    """One run over all the logs vs. three runs as the data arrived (cut between sessions)."""
    full = write_jsonl(tmp_path / "all.jsonl", rows())
    backfill = _settings(tmp_path / "backfill")
    _run(backfill, full)
    live = _settings(tmp_path / "live")
    for i, (a, b) in enumerate([(0, 2), (2, 100), (100, 10**6)]):
        _run(live, write_jsonl(tmp_path / f"part{i}.jsonl", rows(a, b)))
    assert _state(backfill) == _state(live)

    # the flow maintained as it went: a summary per closed session, decayed and expired memories
    summaries = _sql(backfill, "SELECT session_id FROM session_summaries ORDER BY 1")
    assert [r["session_id"] for r in summaries] == [
        "ann-s0",
        "ann-s1",
        "ann-s2",
        "bob-s0",
        "bob-s1",
    ]
    events = {
        r["event"]: r["n"]
        for r in _sql(
            backfill,
            "SELECT event, count(*) AS n FROM memory_events WHERE actor = 'maintenance' GROUP BY 1",
        )
    }
    assert set(events) == {"created", "decayed", "expired"}
    assert (
        _sql(backfill, "SELECT count(*) AS n FROM spans")[0]["n"]
        == _sql(
            backfill,
            "SELECT count(DISTINCT span_id) AS n FROM memory_events WHERE span_id IS NOT NULL",
        )[0]["n"]
    )

    # `maintain` at the same time on both ends in the same state too, and closes the last sessions
    params = LifecycleParams.from_settings(backfill)
    at = T0 + timedelta(days=400)
    embed = get_embedder("minilm").encode
    for s in (backfill, live):
        with open_stores(s, 384) as stores:
            maintain_home(stores, params, now=at, close_sessions=True, embed=embed)
    assert _state(backfill) == _state(live)
    assert _sql(backfill, "SELECT count(*) AS n FROM session_summaries")[0]["n"] == 7
    # by day 400 every fact is past its 150-day expiry; summaries have none and only decayed
    statuses = _sql(
        backfill,
        "SELECT kind = 'summary' AS summary, status, count(*) AS n FROM memory_meta "
        "GROUP BY ALL ORDER BY ALL",
    )
    assert {(r["summary"], r["status"]) for r in statuses} <= {
        (False, "expired"),
        (False, "merged"),
        (False, "archived"),
        (False, "deleted"),
        (True, "generated"),  # the summaries of the sessions closed at day 400
        (True, "activated"),
        (True, "expired"),
    }

    # a rerun over everything adds nothing
    before = _state(backfill)
    _run(backfill, full)
    assert _state(backfill) == before


def test_the_clock_emits_a_tick_before_the_first_span_past_each_boundary():
    from skillstream.flows.maintenance import ClockLogic
    from skillstream.lifecycle.maintenance import MaintenanceTick
    from tests.lifecycle.conftest import span

    day = timedelta(days=1)
    a1 = span(["a"], at=T0, owner="ann")
    a2 = span(["b"], at=T0 + timedelta(hours=2), owner="ann")
    b1 = span(["c"], at=T0 + 3 * day, owner="bob")
    a3 = span(["d"], at=T0 + 5 * day + timedelta(hours=1), owner="ann")
    logic = ClockLogic(day, None)
    out, _ = logic.on_batch([a1, a2, b1])
    midnight = T0.replace(hour=0)
    # each tick names the span it comes before (skipped with it when that span is in the ledger)
    assert out == [
        MaintenanceTick("ann", midnight, span_id=a1.span_id),
        a1,
        a2,
        MaintenanceTick("bob", midnight + 3 * day, span_id=b1.span_id),
        b1,
    ]
    resumed = ClockLogic(day, logic.snapshot())  # after a restart from a snapshot
    out, _ = resumed.on_batch([a3])
    assert out == [MaintenanceTick("ann", midnight + 5 * day, span_id=a3.span_id), a3]
    assert logic.snapshot() != resumed.snapshot()  # snapshots are copies
