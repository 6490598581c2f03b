"""A text's vector does not depend on what it is embedded with: alone, in a batch of texts of
its own padded length, or in a mixed batch of short and long texts, it is the same to the last bit.

The pipeline relies on this to embed many spans' texts in one call: a replay that batches the
spans differently must take the same near-duplicate and contradiction decisions.
"""

from __future__ import annotations

import numpy as np

from skillstream.embed import PAD_TO

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


def test_a_vector_is_the_same_alone_and_in_any_batch(embedder):
    alone = _bits(np.stack([embedder.forward([t])[0] for t in TEXTS]))
    # every text with all the others, in two orders, and with many more texts of every length
    mixed = _bits(embedder.forward(list(TEXTS)))
    reverse = _bits(embedder.forward(list(reversed(TEXTS))))[::-1]
    crowd = [f"{t} {k}" for k in range(40) for t in TEXTS[:4]]
    crowded = _bits(embedder.forward([*crowd, *TEXTS])[len(crowd) :])
    assert mixed == alone
    assert reverse == alone
    assert crowded == alone
    # the coalescing entry point hands out the same rows
    assert _bits(embedder.encode(TEXTS)) == alone


def test_texts_of_one_padded_length_share_a_batch(embedder):
    """Equal padded lengths are what makes a batch: texts that differ by a few tokens pad to
    the same multiple of PAD_TO, and a batch of them gives each its lone vector."""
    tokens = embedder._model.tokenizer
    same = [f"Caroline likes {w}." for w in ("tea", "coffee", "hiking", "painting", "jazz")]
    counts = {len(tokens(t)["input_ids"]) for t in same}
    assert len({-(-n // PAD_TO) for n in counts}) == 1  # one padded length
    alone = _bits(np.stack([embedder.forward([t])[0] for t in same]))
    assert _bits(embedder.forward(same)) == alone
    vecs = embedder.forward(same)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    # they are different vectors, not one row copied
    assert len(set(_bits(vecs))) == len(same)
