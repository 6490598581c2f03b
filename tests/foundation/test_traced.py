"""The embedding cache: the first process traces the model and keeps it; the next loads it without
importing transformers, tokenises exactly as the model's own preprocessing, and gives the same
vectors to the last bit. Queries embed with the numpy encoder kept beside it, without torch."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from skillstream import traced
from skillstream.embed import Embedder

pytestmark = pytest.mark.slow

CORPUS = [
    "Maya is flying to Lisbon on 3 May 2024.",
    "",
    "  leading and trailing spaces  ",
    "tab\tseparated\tand\nnew lines",
    "我对花生严重过敏。她有什么食物过敏吗？",
    "混合 English 和中文 text in one 句子.",
    "Ünïcödé façade, Straße, ÆØÅ, İstanbul, ﬁ ligature, ０１２ full-width digits",
    "emoji 🎉🚀 and symbols ½ ™ © → ∞",
    "URLs https://example.com/a?b=c&d=e and e-mail a.b@example.org",
    "x" * 3000,
    " ".join(f"token{i}" for i in range(600)),
    "ok",
]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A cache written by a first embedder, and that embedder (the slow path)."""
    cache = tmp_path_factory.mktemp("embed-cache")
    first = Embedder(cache=str(cache))
    vectors = first.encode(CORPUS)
    assert first.traced and not first.from_cache
    return cache, first, vectors


def test_the_next_embedder_loads_the_cache_and_gives_the_same_bits(built):
    cache, first, vectors = built
    files = sorted(p.suffix for p in cache.iterdir())
    assert files == [".json", ".npz", ".pt"]
    second = Embedder(cache=str(cache))
    assert second.dim == first.dim
    got = second.encode(CORPUS)
    assert second.from_cache and second.traced
    assert got.tobytes() == vectors.tobytes()
    # alone as in a batch, as the slow path
    alone = np.stack([second.encode([t])[0] for t in CORPUS])
    assert alone.tobytes() == vectors.tobytes()


def test_the_fast_tokeniser_gives_the_models_own_token_rows(built):
    _, first, _ = built
    model = first.plain_model()
    meta = json.loads(next(built[0].glob("*.json")).read_text())
    fast = traced.fast_tokenizer(first.path, meta["max_len"], meta["pad_id"])
    for texts in [CORPUS, *([t] for t in CORPUS)]:
        want = model.preprocess(texts)
        got = traced.tokenize(fast, meta["keys"], texts)
        for k in meta["keys"]:
            assert torch.equal(want[k].to(torch.long), got[k]), (k, texts[:1])


def test_off_keeps_nothing_and_a_broken_entry_is_written_again(built, tmp_path):
    cache, _, vectors = built
    off = Embedder(cache="off")
    assert off.cache is None and off.encode(CORPUS[:3]).tobytes() == vectors[:3].tobytes()

    broken = tmp_path / "cache"
    broken.mkdir()
    for f in cache.iterdir():
        if f.suffix != ".npz":
            (broken / f.name).write_bytes(b"not a model" if f.suffix == ".pt" else f.read_bytes())
    again = Embedder(cache=str(broken))
    assert again.encode(CORPUS).tobytes() == vectors.tobytes()
    assert not again.from_cache  # the broken entry was not used ...
    assert Embedder(cache=str(broken)).from_cache  # ... and was written again


def test_a_process_with_a_warm_cache_never_imports_transformers(built):
    cache, _, vectors = built
    code = (
        "import sys, numpy as np\n"
        "from skillstream.embed import Embedder\n"
        f"e = Embedder(cache={str(cache)!r})\n"
        "v = e.encode(['Maya is flying to Lisbon on 3 May 2024.'])\n"
        "print(e.from_cache, 'transformers' in sys.modules, "
        "'sentence_transformers' in sys.modules)\n"
        "sys.stdout.buffer.write(v.tobytes())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stdout
    head, _, bits = out.partition(b"\n")
    assert head.decode().split() == ["True", "False", "False"]
    assert bits == vectors[:1].tobytes()


def test_the_numpy_encoder_gives_the_traced_models_vectors(built):
    cache, first, vectors = built
    encoder = traced.load_encoder(cache, first._entry, first.path)
    assert encoder is not None
    for texts in [CORPUS, *([t] for t in CORPUS)]:
        got = encoder.encode(texts)
        want = first.encode(texts)
        assert np.abs(got - want).max() <= traced.ENCODER_TOLERANCE, texts[:1]
    # a query goes through it, and lands within the tolerance of the stored vector
    query = Embedder(cache=str(cache)).encode_query(CORPUS[0])
    assert query.dtype == np.float32 and np.abs(query - vectors[0]).max() <= 1e-5


def test_without_numpy_weights_a_query_is_embedded_as_a_stored_text(built, tmp_path):
    cache, _, vectors = built
    bare = tmp_path / "bare"
    bare.mkdir()
    for f in cache.iterdir():
        if f.suffix != ".npz":
            (bare / f.name).write_bytes(f.read_bytes())
    e = Embedder(cache=str(bare))
    assert e.encode_query(CORPUS[0]).tobytes() == vectors[0].tobytes()
    assert Embedder(cache="off").encode_query(CORPUS[0]).tobytes() == vectors[0].tobytes()


def test_a_query_with_a_warm_cache_never_imports_torch(built):
    cache, _, vectors = built
    code = (
        "import sys, numpy as np\n"
        "from skillstream.embed import Embedder\n"
        f"e = Embedder(cache={str(cache)!r})\n"
        "v = e.encode_query('Maya is flying to Lisbon on 3 May 2024.')\n"
        "print('torch' in sys.modules, 'transformers' in sys.modules)\n"
        "sys.stdout.buffer.write(v.tobytes())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stdout
    head, _, bits = out.partition(b"\n")
    assert head.decode().split() == ["False", "False"]
    got = np.frombuffer(bits, dtype=np.float32)
    assert np.abs(got - vectors[0]).max() <= 1e-5


def test_writing_an_entry_keeps_only_the_last_used_entries_of_its_model(tmp_path):
    """Each reinstall makes a new entry; the cache keeps the ones used last, not all of them."""
    import os
    import time

    now = time.time()
    for age, entry in enumerate(["embed-model-ddd", "embed-model-ccc", "embed-model-bbb"], 1):
        for suffix in traced.SUFFIXES:
            path = tmp_path / f"{entry}{suffix}"
            path.write_text("{}")
            os.utime(path, (now - age * 3600, now - age * 3600))
    old = now - 30 * 86400
    for entry in ["embed-model-aaa", "embed-model-x-eee"]:  # another model's entry stays
        for suffix in traced.SUFFIXES:
            (tmp_path / f"{entry}{suffix}").write_text("{}")
            os.utime(tmp_path / f"{entry}{suffix}", (old, old))
    traced.touch(tmp_path, "embed-model-aaa")  # the oldest, but loaded just now
    traced.save(tmp_path, "embed-model-fff", torch.jit.script(torch.nn.Identity()), {})
    kept = {p.stem for p in tmp_path.iterdir()}
    assert kept == {"embed-model-fff", "embed-model-aaa", "embed-model-ddd", "embed-model-x-eee"}
    assert len(list(tmp_path.iterdir())) == 3 + 3 + 3 + 2  # the new entry has no numpy weights


def test_a_loaded_entry_counts_as_used(built, tmp_path):
    import os
    import shutil

    cache, first, _ = built
    for path in cache.iterdir():
        shutil.copy2(path, tmp_path / path.name)
    (meta,) = tmp_path.glob("*.json")
    os.utime(meta, (0, 0))
    assert Embedder(cache=str(tmp_path)).encode(["ok"]).shape == (1, first.dim)
    assert meta.stat().st_mtime > 0
