"""The local embedder: offline model, unit vectors, concurrent callers coalesced into batches."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from skillstream.embed import Embedder, get_embedder
from skillstream.errors import ConfigError


def test_vectors_are_unit_length_and_match_sentence_transformers(embedder):
    texts = [
        "Maya is flying to Lisbon on 3 May 2024.",
        "short",
        "Omar deploys the Flask app to staging.",
    ]
    got = embedder.encode(texts)
    want = embedder._model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    assert got.shape == (3, embedder.dim) and got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert embedder.encode([]).shape == (0, embedder.dim)


def test_concurrent_callers_share_model_calls_and_each_gets_its_rows(embedder, monkeypatch):
    texts = [f"note {i}: the heron at the lake was {i} metres away" for i in range(24)]
    alone = [embedder.encode([t])[0] for t in texts]
    calls: list[int] = []
    forward = Embedder.forward
    entered = threading.Event()

    def slow_forward(self, batch):
        calls.append(len(batch))
        entered.set()
        threading.Event().wait(0.05)  # hold the model so the others queue up
        return forward(self, batch)

    monkeypatch.setattr(Embedder, "forward", slow_forward)
    out: list = [None] * len(texts)

    def one(i: int) -> None:
        out[i] = embedder.encode([texts[i], texts[i]])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(calls) == 2 * len(texts) and len(calls) < len(texts)  # batched, nothing lost
    for i, vecs in enumerate(out):
        np.testing.assert_allclose(vecs, np.stack([alone[i], alone[i]]), atol=1e-5)


def test_a_model_error_reaches_every_waiting_caller(embedder, monkeypatch):
    def broken(self, batch):
        threading.Event().wait(0.05)
        raise RuntimeError("model failed")

    monkeypatch.setattr(Embedder, "forward", broken)
    errors: list[BaseException] = []

    def one() -> None:
        try:
            embedder.encode(["x"])
        except RuntimeError as e:
            errors.append(e)

    threads = [threading.Thread(target=one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert len(errors) == 6
    monkeypatch.undo()
    assert embedder.encode(["x"]).shape == (1, embedder.dim)  # the embedder is usable again


def test_models_are_never_downloaded():
    with pytest.raises(ConfigError, match="never downloads"):
        get_embedder("sentence-transformers/some-other-model")
