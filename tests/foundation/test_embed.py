"""The local embedder: offline model, unit vectors, model threads of its own that share batches
between callers, and vectors that do not depend on what a text is embedded with."""

from __future__ import annotations

import multiprocessing
import threading

import numpy as np
import pytest

from skillstream.embed import PAD_TO, Embedder, get_embedder
from skillstream.errors import ConfigError

TEXTS = [
    "Caroline went to the LGBTQ support group on Sunday.",
    "Melanie paints landscapes.",
    "ok",
    "Caroline is researching adoption agencies because she wants to build a family of her own "
    "and has been reading about the process, the paperwork and the waiting times for months.",
    "The user prefers tea over coffee in the morning.",
    "Jon lost his job as a banker and decided to open a dance studio downtown.",
    "",
    "Gina's clothing store opened online after she lost her job at Door Dash.",
]


def _bits(vectors: np.ndarray) -> list[bytes]:
    return [np.ascontiguousarray(v, dtype=np.float32).tobytes() for v in vectors]


def test_vectors_are_unit_length_and_match_sentence_transformers(embedder):
    texts = [
        "Maya is flying to Lisbon on 3 May 2024.",
        "short",
        "Omar deploys the Flask app to staging.",
    ]
    got = embedder.encode(texts)
    want = embedder.plain_model().encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    assert got.shape == (3, embedder.dim) and got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert embedder.encode([]).shape == (0, embedder.dim)
    assert embedder.submit([]).result().shape == (0, embedder.dim)


def test_the_bundled_model_runs_traced(embedder):
    """The traced model is checked against the plain one when it is built; for MiniLM it agrees
    and is used (a batch then runs without the GIL)."""
    assert embedder.traced


def test_a_vector_is_the_same_alone_and_in_any_batch(embedder):
    alone = _bits(np.stack([embedder.encode([t])[0] for t in TEXTS]))
    # every text with all the others, in two orders, and with many more texts of every length
    mixed = _bits(embedder.encode(list(TEXTS)))
    reverse = _bits(embedder.encode(list(reversed(TEXTS))))[::-1]
    crowd = [f"{t} {k}" for k in range(40) for t in TEXTS[:4]]
    crowded = _bits(embedder.encode([*crowd, *TEXTS])[len(crowd) :])
    assert mixed == alone
    assert reverse == alone
    assert crowded == alone
    # submitted at once by many callers, each still gets the same rows
    pendings = [embedder.submit([t, *crowd[:5]]) for t in TEXTS]
    assert [_bits(p.result())[0] for p in pendings] == alone


def test_texts_of_one_padded_length_share_a_batch(embedder):
    """Equal padded lengths are what makes a batch: texts that differ by a few tokens pad to the
    same multiple of PAD_TO, and a batch of them gives each its lone vector."""
    tokens = embedder.plain_model().tokenizer
    same = [f"Caroline likes {w}." for w in ("tea", "coffee", "hiking", "painting", "jazz")]
    counts = {len(tokens(t)["input_ids"]) for t in same}
    assert len({-(-n // PAD_TO) for n in counts}) == 1  # one padded length
    alone = _bits(np.stack([embedder.encode([t])[0] for t in same]))
    before = embedder.batches_run
    vecs = embedder.encode(same)
    assert embedder.batches_run == before + 1  # one model batch for the five
    assert _bits(vecs) == alone
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert len(set(_bits(vecs))) == len(same)  # different vectors, not one row copied


def test_waiting_callers_share_model_batches_and_each_gets_its_rows(embedder, monkeypatch):
    texts = [f"note {i}: the heron at the lake was {i} metres away" for i in range(24)]
    alone = [embedder.encode([t])[0] for t in texts]
    hold = threading.Event()
    compute = Embedder._compute

    def held(self, batch):
        hold.wait(10)  # hold the model threads so every caller's texts queue up
        return compute(self, batch)

    monkeypatch.setattr(Embedder, "_compute", held)
    before = embedder.batches_run
    out: list = [None] * len(texts)

    def one(i: int) -> None:
        out[i] = embedder.encode([texts[i], texts[i]])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    threading.Event().wait(0.3)
    hold.set()
    for t in threads:
        t.join(timeout=30)
    assert embedder.batches_run - before < len(texts)  # shared batches, not one per caller
    for i, vecs in enumerate(out):
        assert _bits(vecs) == _bits(np.stack([alone[i], alone[i]]))


def test_submit_returns_before_the_model_has_run(embedder, monkeypatch):
    hold = threading.Event()
    compute = Embedder._compute

    def held(self, batch):
        hold.wait(10)
        return compute(self, batch)

    monkeypatch.setattr(Embedder, "_compute", held)
    pending = embedder.submit(["the model has not run yet"])
    assert not pending.done()
    hold.set()
    assert pending.result().shape == (1, embedder.dim)
    assert pending.done()


def test_a_model_error_reaches_every_waiting_caller(embedder, monkeypatch):
    def broken(inputs):
        raise RuntimeError("model failed")

    monkeypatch.setattr(embedder, "_run", broken)
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            embedder.encode([f"text {i}"])
        except RuntimeError as e:
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert len(errors) == 6
    monkeypatch.undo()
    assert embedder.encode(["x"]).shape == (1, embedder.dim)  # the embedder is usable again


def _embed_in_child(queue) -> None:  # runs in a forked process
    queue.put(get_embedder("minilm").encode(["a forked process embeds too"]).shape)


@pytest.mark.filterwarnings("ignore:lance is not fork-safe")
def test_a_forked_process_starts_model_threads_of_its_own(embedder):
    embedder.encode(["the parent's model threads are running"])
    queue = multiprocessing.get_context("fork").Queue()
    child = multiprocessing.get_context("fork").Process(target=_embed_in_child, args=(queue,))
    child.start()
    child.join(timeout=120)
    assert child.exitcode == 0
    assert queue.get(timeout=5) == (1, embedder.dim)


def test_models_are_never_downloaded():
    with pytest.raises(ConfigError, match="never downloads"):
        get_embedder("sentence-transformers/some-other-model")


_BLAS_PROBE = """
import numpy, json
from threadpoolctl import threadpool_info
from skillstream.embed import Embedder

def blas():
    return sorted({p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"})

seen = {"before": blas()}
Embedder("minilm", threads=1, blas_threads=0).encode(["left as it is"])
seen["left"] = blas()
Embedder("minilm", threads=1, blas_threads=1).encode(["limited"])
seen["limited"] = blas()
print(json.dumps(seen))
"""


def test_model_threads_limit_numpys_blas_pool():
    """Once the model threads run, numpy's BLAS keeps to ``blas_threads`` (0: as it was)."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}
    out = subprocess.run(
        [sys.executable, "-c", _BLAS_PROBE], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["before"] == [2]
    assert seen["left"] == [2]
    assert seen["limited"] == [1]
