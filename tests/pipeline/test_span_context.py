"""What an extraction sees of a span and of the owner's memories.

A span's vector covers all of its text: a span longer than the model reads is cut between turns
into pieces the model reads whole, and their vectors are pooled. An executor shown the owner's
memories gets the ones most similar to the span, not the most recent, and showing a memory is
what activates it; the offline executor is shown none and activates none."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import numpy as np
import pytest

from skillstream.extract import Extraction, ExtractionInput
from skillstream.memories import OwnerMemories
from skillstream.model import Memory
from skillstream.pipeline import OwnerState
from skillstream.services.pipeline import build_pipeline
from skillstream.settings import Settings
from skillstream.spans import render_span, span_header, span_pieces
from skillstream.tokens import get_counter
from tests.factories import T0, make_span

COUNT = get_counter("minilm").count

FILLER = [
    "The weather was grey all morning and the bus was late again.",
    "We talked about the new bakery that opened near the station.",
    "My neighbour is repainting the fence in a lighter shade of green.",
    "The quarterly report is due on Friday and the charts still need work.",
    "I finally fixed the squeaky door hinge with a bit of oil.",
    "The library extended its opening hours for the exam season.",
]
TAIL = "I booked a flight to Lisbon for the conference and I will stay three nights in Alfama."
TRIP = [
    TAIL,
    "The conference in Lisbon starts on Monday and my talk is on the second day.",
    "I still need to pack my laptop charger and the adapter for the flight.",
    "After the conference I might take the train from Lisbon to Porto.",
]


def _long_span(turns: int = 20) -> Any:
    """A span of ordinary turns, then a few about a trip: more than the model reads at once
    (spans are cut at 512 tokens, the default model reads 254)."""
    body = [("user", FILLER[i % len(FILLER)]) for i in range(turns)]
    return make_span([*body, *(("user", t) for t in TRIP)])


# ------------------------------------------------------------------------------ cutting (pure)


def test_a_span_within_the_limit_is_one_piece_its_whole_text():
    span = make_span([("user", "I moved to Denver."), ("assistant", "Noted.")])
    text = render_span(span)
    assert span_pieces(span, COUNT, 254) == [(text, COUNT(text))]
    assert span_pieces(span, COUNT, 0) == [(text, COUNT(text))]


def test_a_long_span_is_cut_between_turns_into_pieces_the_model_reads_whole():
    span = _long_span()
    pieces = span_pieces(span, COUNT, 64)
    assert len(pieces) > 4
    header = span_header(span)
    turns = []
    for text, n in pieces:
        assert text.startswith(header + "\n")
        assert COUNT(text) <= 64
        assert n == COUNT(text[len(header) + 1 :])
        turns += text.split("\n")[1:]
    # every turn once, in order
    assert turns == render_span(span).split("\n")[1:]


def test_a_turn_longer_than_a_piece_is_cut_between_words_and_chinese_between_characters():
    long_turn = " ".join(f"word{i}" for i in range(300))
    chinese = "我对花生严重过敏所以请不要推荐含花生的菜" * 20
    span = make_span([("user", long_turn), ("user", chinese)])
    pieces = span_pieces(span, COUNT, 50)
    assert all(COUNT(text) <= 50 for text, _ in pieces)
    body = "".join("".join("".join(text.split("\n")[1:]).split()) for text, _ in pieces)
    assert "word0" in body and "word299" in body and body.count("花生") == 40


# ------------------------------------------------------------------------------ the span's vector


def _pipeline(embedder: Any, tmp_path: Any, **kw: Any) -> Any:
    settings = Settings.from_keys(home=str(tmp_path / "home"))
    return build_pipeline(settings, embedder, maintenance=False, **kw)


def test_a_long_spans_vector_covers_its_last_turns(embedder, tmp_path):
    pipeline = _pipeline(embedder, tmp_path)
    span = _long_span()
    text = render_span(span)
    assert embedder.max_tokens < COUNT(text) <= 2 * 254
    whole = pipeline._span_vector(span, text)
    first_part = embedder.encode([text])[0]  # what the model reads of it: the first 254 tokens
    query = embedder.encode(["Where is the user flying for the conference?"])[0]
    assert float(whole @ query) > float(first_part @ query) + 0.05
    assert abs(float(np.linalg.norm(whole)) - 1.0) < 1e-5
    # a span the model reads whole keeps the vector of its text, to the bit
    short = make_span([("user", TAIL)])
    got = pipeline._span_vector(short, render_span(short))
    assert got.tobytes() == embedder.encode([render_span(short)])[0].tobytes()


def test_the_model_reads_the_minilm_limit_less_its_two_special_tokens(embedder):
    assert embedder.max_tokens == 254


# ------------------------------------------------------------------------------ what is shown


class ShownExecutor:
    """Records the memories it is shown; stores nothing."""

    name = "shown"
    needs_span_vector = False
    reads_retrieved = True
    predictable = False

    def __init__(self) -> None:
        self.shown: list[list[str]] = []

    def execute(self, inp: ExtractionInput) -> Extraction:
        self.shown.append([m.text for m in inp.retrieved])
        return Extraction()


def _owner(embedder: Any, n_recent: int = 30) -> OwnerMemories:
    """An owner with one old memory about Lisbon and many newer ones about other things."""
    texts = ["The user is flying to Lisbon in May for a conference."] + [
        f"{FILLER[i % len(FILLER)]} (note {i})" for i in range(n_recent)
    ]
    vectors = embedder.encode(texts)
    state = OwnerMemories("c1")
    for i, (text, vector) in enumerate(zip(texts, vectors)):
        at = T0 - timedelta(days=60) + timedelta(hours=i)
        state.put(
            Memory(
                id=f"mem-{i:03d}",
                owner_id="c1",
                text=text,
                kind="fact",
                created_at=at,
                updated_at=at,
                event_ts=at,
                vector=vector,
            )
        )
    return state


def test_an_executor_shown_memories_gets_the_most_similar_and_only_those_are_activated(
    embedder, tmp_path
):
    executor = ShownExecutor()
    pipeline = dataclasses.replace(_pipeline(embedder, tmp_path, executor=executor), retrieve_k=5)
    assert pipeline.needs_span_vector  # retrieval is by the span's vector
    state = OwnerState(_owner(embedder), pipeline.run_id)
    span = make_span([("user", "Do you remember which city my conference trip goes to?")])
    (result,) = pipeline.process_owner(state, [span])
    (shown,) = executor.shown
    assert len(shown) == 5
    assert shown[0] == "The user is flying to Lisbon in May for a conference."
    activated = {e.memory_id for e in result.events if e.event == "activated"}
    texts = {state.memories.get(i).text for i in activated}
    assert texts == set(shown)


def test_the_offline_executor_is_shown_nothing_and_activates_nothing(embedder, tmp_path):
    pipeline = _pipeline(embedder, tmp_path)
    assert not pipeline.shows_retrieved and not pipeline.retrieves
    assert not pipeline.needs_span_vector  # no span is embedded for it
    state = OwnerState(_owner(embedder), pipeline.run_id)
    spans = [
        make_span([("user", "I adopted a cat named Miso.")], ts=T0),
        make_span([("user", "I started learning the cello.")], ts=T0 + timedelta(days=1)),
    ]
    results = pipeline.process_owner(state, spans)
    assert [r.status for r in results] == ["done", "done"]
    assert sum(len(r.memories) for r in results) >= 2  # the spans stored their statements
    assert not [e for r in results for e in r.events if e.event == "activated"]


@pytest.mark.parametrize("limit", [0, 1, 7])
def test_tiny_limits_still_cover_every_word(limit):
    span = make_span([("user", "alpha beta gamma delta"), ("user", "epsilon zeta")])
    pieces = span_pieces(span, COUNT, limit)
    letters = "".join("".join("".join(t.split("\n")[1:]).split()) for t, _ in pieces)
    assert letters == 'Usersaid,"alphabetagammadelta"Usersaid,"epsilonzeta"'
