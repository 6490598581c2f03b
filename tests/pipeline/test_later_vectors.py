"""Vectors given at the end of a batch (``LaterVectors``): a memory wanted again and again before
its text is sent (a topic node refreshed by several ticks of one batch) costs the model one text,
and every memory ends with the model's vector of its latest text, to the last bit."""

from __future__ import annotations

from typing import Any

import numpy as np

from skillstream.model import Memory
from skillstream.vectors import LaterVectors
from skillstream.vocab import MemoryKind
from tests.pipeline.test_prefetch import CountingEmbedder


def _memory(i: int, text: str) -> Memory:
    return Memory(id=f"mem_{i}", owner_id="o1", text=text, kind=MemoryKind.TOPIC)


def _bits(v: Any) -> bytes:
    return np.asarray(v, dtype=np.float32).tobytes()


def _sent(model: CountingEmbedder) -> list[str]:
    return [t for call in model.calls for t in call]


def test_a_memory_wanted_again_before_it_is_sent_goes_to_the_model_once(embedder):
    model = CountingEmbedder(embedder)
    later = LaterVectors(model.submit)
    node, other = _memory(1, "The first draft of a topic."), _memory(2, "Another topic.")
    later.want([node, other])
    for text in ("The topic after a second tick.", "The topic after a third tick."):
        node.text = text
        later.want([node])
    assert later.settle() == [node, other]
    assert sorted(_sent(model)) == sorted([node.text, other.text])
    assert _bits(node.vector) == _bits(embedder.encode([node.text])[0])
    assert _bits(other.vector) == _bits(embedder.encode([other.text])[0])


def test_memories_of_one_text_share_its_row(embedder):
    model = CountingEmbedder(embedder)
    later = LaterVectors(model.submit)
    a, b = _memory(1, "Joanna writes screenplays."), _memory(2, "Joanna writes screenplays.")
    later.want([a, b])
    assert later.settle() == [a, b]
    assert _sent(model) == [a.text]
    assert _bits(a.vector) == _bits(b.vector) == _bits(embedder.encode([a.text])[0])


def test_a_text_changed_after_it_was_sent_is_asked_for_again(embedder):
    model = CountingEmbedder(embedder)
    later = LaterVectors(model.submit, at_once=1)
    node = _memory(1, "Nate trains his turtles.")
    later.want([node])  # sent at once
    node.text = "Nate trains his turtles and plays games."
    later.want([node])
    assert later.settle() == [node]
    assert _sent(model) == ["Nate trains his turtles.", node.text]
    assert _bits(node.vector) == _bits(embedder.encode([node.text])[0])


def test_at_once_counts_memories_not_wants(embedder):
    model = CountingEmbedder(embedder)
    later = LaterVectors(model.submit, at_once=2)
    node = _memory(1, "A topic.")
    for i in range(3):
        node.text = f"A topic, refreshed {i} times."
        later.want([node])
    assert model.calls == []  # one memory so far, however often it was wanted
    later.want([_memory(2, "A second topic.")])
    assert _sent(model) == ["A topic, refreshed 2 times.", "A second topic."]
    later.settle()
    assert len(model.calls) == 1


def test_a_memory_changed_after_it_was_sent_keeps_waiting_for_a_later_want(embedder):
    model = CountingEmbedder(embedder)
    later = LaterVectors(model.submit, at_once=1)
    node = _memory(1, "Known text.")
    later.want([node])  # sent at once
    node.text = "Changed before the batch ended."  # a later want would cover the new text
    assert later.settle() == []
    assert node.vector is None
    assert _sent(model) == ["Known text."]
