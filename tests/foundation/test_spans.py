from datetime import timedelta

from skillstream.spans import SpanBuilder, SpanState, render_span, render_turn
from tests.factories import T0, make_message


def words(s: str) -> int:
    return len(s.split())


def feed(builder, msgs):
    state, out = SpanState(), []
    for m in msgs:
        out += builder.add(state, m)
    out += builder.flush(state)
    return out


def test_budget_cuts_spans_and_keeps_every_message_once():
    msgs = [make_message("one two three four", i=i) for i in range(10)]
    # each rendered turn is 'User said, "one two three four"' = 6 words
    spans = feed(SpanBuilder(words, budget=13), msgs)
    assert [len(s.messages) for s in spans] == [2, 2, 2, 2, 2]
    assert [m.message_id for s in spans for m in s.messages] == [m.message_id for m in msgs]
    assert [s.seq for s in spans] == [0, 1, 2, 3, 4]
    assert all(s.n_tokens == 12 for s in spans)


def test_oversized_single_message_forms_its_own_span():
    msgs = [make_message("a", i=0), make_message("b " * 50, i=1), make_message("c", i=2)]
    spans = feed(SpanBuilder(words, budget=10), msgs)
    assert [[m.text.strip()[:1] for m in s.messages] for s in spans] == [["a"], ["b"], ["c"]]


def test_session_boundary_and_idle_gap_in_event_time():
    msgs = [
        make_message("x", i=0, session_id="s1"),
        make_message("y", i=1, session_id="s1"),
        make_message("z", i=2, session_id="s2"),
        make_message("w", i=3, session_id="s2", ts=T0 + timedelta(hours=5)),
    ]
    spans = feed(SpanBuilder(words, budget=1000, idle_gap=timedelta(minutes=30)), msgs)
    assert [[m.text for m in s.messages] for s in spans] == [["x", "y"], ["z"], ["w"]]


def test_span_ids_are_deterministic_and_depend_on_messages():
    msgs = [make_message(f"t{i}", i=i) for i in range(4)]
    a = feed(SpanBuilder(words, budget=1000), msgs)
    b = feed(SpanBuilder(words, budget=1000), msgs)
    c = feed(SpanBuilder(words, budget=1000), msgs[:3])
    assert a[0].span_id == b[0].span_id
    assert a[0].span_id != c[0].span_id
    assert a[0].span_id.startswith("spn_")


def test_state_copy_is_independent():
    builder = SpanBuilder(words, budget=1000)
    state = SpanState()
    builder.add(state, make_message("a", i=0))
    snap = state.copy()
    builder.add(state, make_message("b", i=1))
    assert len(snap.messages) == 1 and len(state.messages) == 2


def test_render_turn_and_span_include_caption_and_date():
    m = make_message("look at this", metadata='{"image_caption": "a photo of a dog on a beach"}')
    assert render_turn(m) == 'User said, "look at this" and shared a photo of a dog on a beach'
    span = feed(SpanBuilder(words), [m])[0]
    assert render_span(span).startswith("[2024-05-08 13:56 UTC]\n")


def test_language_of_span():
    zh = feed(SpanBuilder(words), [make_message("我喜欢在阳台上种番茄。", i=0)])[0]
    en = feed(SpanBuilder(words), [make_message("I like tomatoes.", i=0)])[0]
    assert (zh.lang, en.lang) == ("zh", "en")
