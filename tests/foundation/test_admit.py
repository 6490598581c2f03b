"""Which messages a conversation admits (the timestamp window, duplicate ids), and what a memory's
text may hold."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from skillstream.admit import EPOCH, Admitted, TimeWindow, admit, refusal, refused
from skillstream.apply import apply_ops
from skillstream.memories import OwnerMemories
from skillstream.model import MemoryOp
from skillstream.settings import Settings
from skillstream.text import MEMORY_TEXT_CHARS, memory_text
from skillstream.vocab import Op
from tests.factories import make_message, make_span

NOW = datetime(2025, 6, 1, 12, tzinfo=UTC)
WINDOW = TimeWindow(EPOCH, timedelta(days=1), timedelta(days=30), clock=lambda: NOW)


def at(ts: datetime, i: int = 0, text: str = "hello"):
    return make_message(text, i=i, ts=ts)


def test_the_window_refuses_early_future_and_late_messages_and_admits_the_rest():
    state = Admitted()
    first = at(NOW - timedelta(days=2))
    assert refusal(WINDOW, state, first) is None
    admit(state, first)
    assert state.watermark == first.ts
    year_one = at(datetime(1, 1, 1, tzinfo=UTC), i=1)
    assert "before the earliest accepted time" in (refusal(WINDOW, state, year_one) or "")
    far = at(datetime(9999, 12, 31, 23, 59, tzinfo=UTC), i=2)
    assert "after the wall clock" in (refusal(WINDOW, state, far) or "")
    assert refusal(WINDOW, state, at(NOW + timedelta(hours=23), i=3)) is None
    late = at(first.ts - timedelta(days=31), i=4)
    assert "before the conversation's latest message" in (refusal(WINDOW, state, late) or "")
    assert refusal(WINDOW, state, at(first.ts - timedelta(days=29), i=5)) is None
    # a refusal changes nothing: the watermark is the admitted message's
    assert state.watermark == first.ts and set(state.digests) == {first.message_id}


def test_bounds_turn_off_and_extreme_bounds_do_not_overflow():
    off = TimeWindow(None, None, None)
    state = Admitted()
    for m in (at(datetime(1, 1, 1, tzinfo=UTC)), at(datetime(9999, 12, 31, tzinfo=UTC), i=1)):
        assert refusal(off, state, m) is None
        admit(state, m)
    # a bound that would fall before year 1 or after 9999 is no bound (and no OverflowError)
    ancient = Admitted()
    admit(ancient, at(datetime(1, 1, 1, tzinfo=UTC)))
    late = TimeWindow(None, None, timedelta(days=3650))
    assert refusal(late, ancient, at(datetime(1, 1, 2, tzinfo=UTC), i=2)) is None
    soon = TimeWindow(
        None, timedelta(days=3650), None, clock=lambda: datetime(9995, 1, 1, tzinfo=UTC)
    )
    assert refusal(soon, Admitted(), at(datetime(9999, 12, 31, tzinfo=UTC), i=3)) is None


def test_a_reused_message_id_with_other_content_is_refused_an_exact_repeat_is_not():
    state = Admitted()
    m = at(NOW, text="I like tea")
    admit(state, m)
    assert refusal(WINDOW, state, m) is None
    other = replace(m, text="I like coffee")
    reason = refusal(WINDOW, state, other) or ""
    assert f"message_id {m.message_id!r} was already used" in reason
    letter = refused(other, reason, now=NOW)
    assert letter.stage == "admit" and "coffee" in (letter.payload or "")
    assert letter.id == refused(other, reason, now=NOW).id  # stable across replays


def test_the_settings_build_the_window():
    w = Settings.from_keys(
        earliest_timestamp="2000-01-01", future_tolerance_s=60, late_tolerance_s=0
    ).spans.time_window
    assert w.earliest == datetime(2000, 1, 1, tzinfo=UTC)
    assert w.future == timedelta(seconds=60) and w.lateness is None
    assert Settings.from_keys(earliest_timestamp="").spans.time_window.earliest is None


def test_memory_text_has_no_nul_and_a_cap():
    assert memory_text("  tea\x00 time \ud800 ") == "tea time"
    long = " ".join(["word"] * 10000)  # 49,999 characters
    cut = memory_text(long)
    assert len(cut) <= MEMORY_TEXT_CHARS and cut.endswith("…") and "wor…" not in cut
    span = make_span([("user", "I like tea")])
    state = OwnerMemories(span.owner_id)
    out = apply_ops(state, span, [MemoryOp(Op.INSERT, "likes \x00tea " + long)], NOW)
    (memory,) = out.changed.values()
    assert "\x00" not in memory.text and len(memory.text) <= MEMORY_TEXT_CHARS
