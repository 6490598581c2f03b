"""The controller: picks the Top-K memory skills for a span (MemSkill, section 3.3.1).

State. The span's embedding ``x`` (``d`` wide) followed by a fusion of the embeddings of the owner's
retrieved memories (the top ``R = settings.retrieve_k`` by similarity to the span): their ``mean``,
or a ``weighted`` mean with softmax weights of their cosine similarity to the span (temperature
``WEIGHT_TEMPERATURE``). No retrieved memory gives a zero fused half. The state is ``2d`` wide.

Skills. Each memory skill is represented by the embedding of its *description* (same embedder), so a
bank that grows or changes needs no new output head.

Scorers (pluggable, ``Scorer``):

* ``CosineScorer`` (default, untrained): the cosine similarity of the skill vector to the span half,
  averaged with its cosine similarity to the fused half when memories were retrieved, divided by a
  temperature (``COSINE_TEMPERATURE``) to give logits;
* ``TorchScorer``: the ``MemorySkillScorerNet`` MLPs (state ``2d -> 256 -> 256``, skill
  ``d -> 256 -> 256``, actor on the concatenation ``512 -> 256 -> 1`` logit per skill, critic on the
  state features) with weights loaded from a checkpoint (``settings.memory_skill_scorer``)
  written by ``save_scorer``; a trainer (PPO, outside this package) produces it. A network with a
  cosine *prior* adds the cosine scorer's logits to the actor's output (whose last layer starts at
  zero), so training starts from the cosine controller and learns a correction. The correction
  sees the state and the skill (``state``, the actor MLP) or the skill's description alone
  (``skill``, one linear map of its embedding: a logit per skill shared by every span, which a
  few conversations cannot overfit; see ``CORRECTIONS``).

Action mask. Skills whose action needs a retrieved memory (UPDATE, DELETE) get a logit of ``-inf``
when nothing was retrieved: they could only produce operations that would be rejected.

Selection. ``softmax`` of the logits is the policy over the bank; the ordered Top-K set without
replacement is taken deterministically at inference (ties broken by bank order), or by Gumbel-Top-K
with a seeded generator for exploration. In the flow the generator is seeded from
``settings.memory_skill_seed`` and the span's embedding, so a replay selects the same skills.
``Selection.log_prob`` is the joint log-probability of the ordered selection,
``sum_j [z_{a_j} - logsumexp(z over the skills not selected before step j)]``, which equals the
product form of the paper; ``joint_log_prob_torch`` is the differentiable version for training.
"""

from __future__ import annotations

import functools
import json
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, get_args

import numpy as np

from skillstream.embed import Embed
from skillstream.errors import ConfigError
from skillstream.extract import AllSkills, Controller, MemorySkill
from skillstream.lifecycle.clusters import unit_rows
from skillstream.model import Memory
from skillstream.settings import ExtractionSettings, Fusion
from skillstream.settings import Selection as SelectionMode
from skillstream.vocab import Op

SELECTIONS: tuple[str, ...] = get_args(SelectionMode)
FUSIONS: tuple[str, ...] = get_args(Fusion)
INDEXED_ACTIONS = frozenset({Op.UPDATE, Op.DELETE})
"""Actions that name a retrieved memory: masked out when nothing was retrieved."""
WEIGHT_TEMPERATURE = 0.1
COSINE_TEMPERATURE = 0.05
HIDDEN = 256
CHECKPOINT_FORMAT = "skillstream.memory_skill_scorer/1"
CORRECTIONS = ("state", "skill")
"""What the learned correction of a scorer with a cosine prior sees (``scorer_net``)."""


# ---------------------------------------------------------------------------- state
def fuse(span_vector: np.ndarray, memory_vectors: np.ndarray, mode: str = "mean") -> np.ndarray:
    """Fuse retrieved memory embeddings ``(n, d)`` into one ``d`` vector (zeros when ``n == 0``).

    Args:
        span_vector: The span embedding (unit length).
        memory_vectors: The retrieved memories' embeddings, best first.
        mode: ``mean`` or ``weighted`` (softmax of cosine similarity to the span / temperature).
    """
    d = span_vector.shape[0]
    if memory_vectors.size == 0:
        return np.zeros(d, dtype=np.float32)
    if mode == "mean":
        return memory_vectors.mean(axis=0).astype(np.float32)
    if mode == "weighted":
        sims = unit_rows(memory_vectors) @ _unit(span_vector)
        w = _softmax(sims / WEIGHT_TEMPERATURE)
        return (w[:, None] * memory_vectors).sum(axis=0).astype(np.float32)
    raise ConfigError(f"memory skill fusion must be one of {FUSIONS}, got {mode!r}")


def controller_state(
    span_vector: np.ndarray, retrieved: Sequence[Memory], fusion: str = "mean"
) -> np.ndarray:
    """The ``2d`` state: span embedding followed by the fused retrieved-memory embedding."""
    span = np.asarray(span_vector, dtype=np.float32).reshape(-1)
    vecs = [np.asarray(m.vector, dtype=np.float32) for m in retrieved if m.vector is not None]
    mats = np.stack(vecs) if vecs else np.zeros((0, span.shape[0]), dtype=np.float32)
    return np.concatenate([span, fuse(span, mats, fusion)])


# ---------------------------------------------------------------------------- scorers
class Scorer(Protocol):
    """Scores every skill vector against a state; higher logits are better."""

    name: str

    def logits(self, state: np.ndarray, skill_vectors: np.ndarray) -> np.ndarray:
        """``state`` (2d,), ``skill_vectors`` (n, d) -> logits (n,)."""
        ...


class CosineScorer:
    """Untrained scorer: cosine similarity of each skill description to the state's halves."""

    name = "cosine"

    def __init__(self, temperature: float = COSINE_TEMPERATURE) -> None:
        if temperature <= 0:
            raise ConfigError(f"cosine scorer temperature must be > 0, got {temperature}")
        self.temperature = temperature

    def logits(self, state: np.ndarray, skill_vectors: np.ndarray) -> np.ndarray:
        d = skill_vectors.shape[1]
        span, fused = state[:d], state[d:]
        skills = unit_rows(skill_vectors)
        score = skills @ _unit(span)
        if float(np.linalg.norm(fused)) > 0:
            score = 0.5 * (score + skills @ _unit(fused))
        return (score / self.temperature).astype(np.float64)


def _torch() -> Any:
    import torch

    return torch


def scorer_net(
    dim: int, hidden: int = HIDDEN, prior: float = 0.0, correction: str = "state"
) -> Any:
    """A fresh ``MemorySkillScorerNet`` (torch module) for embeddings of width ``dim``.

    Args:
        dim: Embedding width.
        hidden: Width of the hidden layers.
        prior: When positive, the actor's logits are the cosine scorer's logits at this temperature
            plus the learned output, whose last layer starts at zero: the fresh network selects
            exactly as the cosine controller does and training learns a correction to it.
        correction: What the learned part of the actor sees (``CORRECTIONS``): ``state``, the
            state and the skill through the actor MLP; ``skill``, the skill's description alone
            (one linear map of its embedding, starting at zero), so the correction is the same
            for every span and cannot single out a conversation's spans.
    """
    torch = _torch()
    nn = torch.nn
    if prior < 0:
        raise ConfigError(f"the scorer's cosine prior temperature must be >= 0, got {prior}")
    if correction not in CORRECTIONS:
        raise ConfigError(
            f"the scorer's correction must be one of {CORRECTIONS}, got {correction!r}"
        )

    class MemorySkillScorerNet(nn.Module):  # type: ignore[name-defined,misc]
        """State and skill encoders, an actor giving one logit per skill, a critic on the state."""

        def __init__(self) -> None:
            super().__init__()
            self.dim = dim
            self.hidden = hidden
            self.state_net = nn.Sequential(
                nn.Linear(2 * dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU()
            )
            self.skill_net = nn.Sequential(
                nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU()
            )
            self.actor = nn.Sequential(
                nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1)
            )
            self.critic = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
            self.prior = float(prior)
            self.correction = correction
            self.skill_bias = nn.Linear(dim, 1) if correction == "skill" else None
            if self.prior > 0:
                nn.init.zeros_(self.actor[-1].weight)
                nn.init.zeros_(self.actor[-1].bias)
            if self.skill_bias is not None:
                nn.init.zeros_(self.skill_bias.weight)
                nn.init.zeros_(self.skill_bias.bias)

        def cosine(self, state: Any, skills: Any) -> Any:
            """The cosine scorer's logits ``(B, N)`` for states ``(B, 2d)`` (``CosineScorer``)."""
            unit = torch.nn.functional.normalize
            sk = unit(skills, dim=-1)
            span = unit(state[:, : self.dim], dim=-1) @ sk.T
            fused_norm = state[:, self.dim :].norm(dim=-1, keepdim=True)
            fused = unit(state[:, self.dim :], dim=-1) @ sk.T
            return torch.where(fused_norm > 0, 0.5 * (span + fused), span) / self.prior

        def forward(self, state: Any, skills: Any) -> Any:
            """``state`` (2d,) or (B, 2d), ``skills`` (N, d) -> logits (N,) or (B, N)."""
            single = state.dim() == 1
            states = state.unsqueeze(0) if single else state
            if self.skill_bias is not None:
                logits = self.skill_bias(skills).squeeze(-1).expand(states.shape[0], -1)
            else:
                s = self.state_net(states)  # (B, h)
                k = self.skill_net(skills)  # (N, h)
                b, n = s.shape[0], k.shape[0]
                pair = torch.cat(
                    [s.unsqueeze(1).expand(b, n, -1), k.unsqueeze(0).expand(b, n, -1)], -1
                )
                logits = self.actor(pair).squeeze(-1)
            if self.prior > 0:
                logits = logits + self.cosine(state.unsqueeze(0) if single else state, skills)
            return logits[0] if single else logits

        def value(self, state: Any) -> Any:
            """The critic's value of ``state`` (2d,) or (B, 2d)."""
            single = state.dim() == 1
            v = self.critic(self.state_net(state.unsqueeze(0) if single else state)).squeeze(-1)
            return v[0] if single else v

    return MemorySkillScorerNet()


class TorchScorer:
    """A ``MemorySkillScorerNet`` used for inference (no gradients, CPU)."""

    name = "torch"

    def __init__(self, net: Any, version: str = "torch") -> None:
        self.net = net.eval()
        self.dim = int(net.dim)
        self.version = version

    def logits(self, state: np.ndarray, skill_vectors: np.ndarray) -> np.ndarray:
        torch = _torch()
        if state.shape[0] != 2 * self.dim or skill_vectors.shape[1] != self.dim:
            raise ConfigError(
                f"the memory skill scorer was trained for {self.dim}-wide embeddings, got a state "
                f"of {state.shape[0]} and skill vectors of {skill_vectors.shape[1]}"
            )
        with torch.no_grad():
            out = self.net(
                torch.from_numpy(np.ascontiguousarray(state, dtype=np.float32)),
                torch.from_numpy(np.ascontiguousarray(skill_vectors, dtype=np.float32)),
            )
        return out.numpy().astype(np.float64)


def save_scorer(net: Any, path: str | Path, **meta: Any) -> Path:
    """Write a scorer checkpoint for ``load_scorer`` (and ``settings.memory_skill_scorer``)."""
    torch = _torch()
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "format": CHECKPOINT_FORMAT,
            "dim": int(net.dim),
            "hidden": int(net.hidden),
            "prior": float(getattr(net, "prior", 0.0)),
            "correction": str(getattr(net, "correction", "state")),
            "state_dict": net.state_dict(),
            "meta": {str(k): str(v) for k, v in meta.items()},
        },
        str(p),
    )
    return p


def load_scorer(path: str | Path, dim: int) -> TorchScorer:
    """Load a scorer checkpoint for embeddings of width ``dim``.

    Raises:
        ConfigError: a missing or unreadable file, another format, or another embedding width.
    """
    torch = _torch()
    p = Path(path)
    if not p.is_file():
        raise ConfigError(
            f"SKILLSTREAM_MEMORY_SKILL_SCORER points at {str(p)!r}, which is not a file; give a "
            "checkpoint written by skillstream.memskill.controller.save_scorer, or leave it empty "
            "for the cosine scorer"
        )
    try:
        ckpt = torch.load(str(p), map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch raises many kinds here
        raise ConfigError(f"cannot read the memory skill scorer checkpoint {p}: {e}") from e
    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
        raise ConfigError(
            f"{p} is not a memory skill scorer checkpoint (expected format {CHECKPOINT_FORMAT!r})"
        )
    if int(ckpt["dim"]) != dim:
        raise ConfigError(
            f"{p} was trained for {ckpt['dim']}-wide embeddings but the embedder gives {dim}; "
            "train a scorer for this embedder or change SKILLSTREAM_EMBED_MODEL"
        )
    net = scorer_net(
        int(ckpt["dim"]),
        int(ckpt.get("hidden", HIDDEN)),
        float(ckpt.get("prior", 0.0)),
        str(ckpt.get("correction", "state")),
    )
    try:
        net.load_state_dict(ckpt["state_dict"])
    except (RuntimeError, KeyError) as e:
        raise ConfigError(f"{p}: the weights do not fit the scorer network: {e}") from e
    return TorchScorer(net, f"torch:{checkpoint_version(p)}")


def checkpoint_version(path: str | Path) -> str:
    """The version of a checkpoint: the first 12 hex digits of its file's SHA-256."""
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]


def checkpoint_meta(path: str | Path) -> dict[str, str]:
    """The ``meta`` a checkpoint was saved with (k, skills, reward, ...).

    Building a pipeline asks for it several times (the executor, the skills, the carried bank):
    the file is read once while it stays as it was (its size and modification time).
    """
    st = Path(path).stat()
    return dict(_meta(str(Path(path).resolve()), st.st_mtime_ns, st.st_size))


@functools.lru_cache(maxsize=8)
def _meta(path: str, mtime_ns: int, size: int) -> dict[str, str]:
    torch = _torch()
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    return dict(ckpt.get("meta") or {}) if isinstance(ckpt, dict) else {}


def lost_to_default(meta: dict[str, str]) -> str | None:
    """Why a checkpoint lost to the default on its own validation conversations, or ``None``.

    ``meta["validation"]`` (written by ``memory-skills train`` and ``evolve``) holds the trained
    controller's ``recall@10`` and ``memories`` there and the default's (every skill selected). A
    controller is worth adopting when it raises recall, or keeps the default's recall with no more
    memories; otherwise it lost, and the answer gives both figures. A checkpoint without the
    figures (older ones, or trained without validation conversations) has not lost.
    """
    text = meta.get("validation") or ""
    if not text:
        return None
    data = json.loads(text)
    trained, default = data["trained"], data["default"]
    r_t, r_d = float(trained["recall@10"]), float(default["recall@10"])
    m_t, m_d = int(trained["memories"]), int(default["memories"])
    if r_t > r_d or (r_t == r_d and m_t <= m_d):
        return None
    convs = ", ".join(data.get("conversations") or []) or "its validation conversations"
    return (
        f"on {convs} the trained controller recalled {r_t:.4f} at 10 with {m_t} memories, the "
        f"default (every skill) {r_d:.4f} with {m_d}"
    )


# ---------------------------------------------------------------------------- selection math
def top_k(logits: np.ndarray, k: int) -> list[int]:
    """Indices of the ``k`` largest finite logits, best first (ties: lower index first)."""
    order = sorted(range(len(logits)), key=lambda i: (-float(logits[i]), i))
    return [i for i in order if np.isfinite(logits[i])][:k]


def gumbel_top_k(logits: np.ndarray, k: int, rng: np.random.Generator) -> list[int]:
    """An ordered sample of ``k`` indices without replacement from ``softmax(logits)``."""
    u = rng.random(len(logits))
    g = -np.log(-np.log(np.clip(u, 1e-12, 1.0 - 1e-12)))
    return top_k(np.asarray(logits, dtype=np.float64) + g, k)


def joint_log_prob(logits: np.ndarray, order: Sequence[int]) -> float:
    """Log-probability of drawing ``order`` (ordered, no replacement) from ``softmax(logits)``."""
    z = np.asarray(logits, dtype=np.float64)
    remaining = np.isfinite(z)
    total = 0.0
    for i in order:
        zr = z[remaining]
        m = float(zr.max())
        total += float(z[i]) - (m + float(np.log(np.exp(zr - m).sum())))
        remaining[i] = False
    return total


def joint_log_prob_torch(logits: Any, order: Sequence[int]) -> Any:
    """Differentiable ``joint_log_prob`` for a 1-d tensor of logits (``-inf`` means masked)."""
    torch = _torch()
    mask = torch.isfinite(logits)
    total = logits.new_zeros(())
    for i in order:
        total = total + logits[i] - torch.logsumexp(logits.masked_fill(~mask, float("-inf")), 0)
        mask = mask.clone()
        mask[i] = False
    return total


def _softmax(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()


def _unit(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


# ---------------------------------------------------------------------------- the controller
@dataclass(frozen=True)
class Selection:
    """One decision of the controller, with what a trainer needs."""

    skills: list[MemorySkill]
    indices: list[int]
    """Positions of the selected skills in the bank list, in selection order."""
    logits: np.ndarray
    """Masked logits over the bank (``-inf`` for masked skills)."""
    log_prob: float
    """Joint log-probability of the ordered selection."""
    state: np.ndarray


class TopKController:
    """Top-K memory skill selection (see the module docstring).

    ``needs_span_vector`` tells the pipeline to embed every span even for an executor that does not
    read the vector (the offline ``rules`` one), since the selection depends on it.

    Args:
        embed: Text embedder (unit vectors), used for the skill descriptions.
        scorer: A ``Scorer``; default ``CosineScorer``.
        k: Skills per span.
        fusion: ``mean`` or ``weighted``.
        explore: Gumbel-Top-K sampling instead of deterministic Top-K in ``select``.
        seed: Seed of the exploration noise.
    """

    def __init__(
        self,
        embed: Embed,
        scorer: Scorer | None = None,
        *,
        k: int = 3,
        fusion: str = "mean",
        explore: bool = False,
        seed: int = 0,
    ) -> None:
        if k < 1:
            raise ConfigError(f"SKILLSTREAM_MEMORY_SKILL_K must be at least 1, got {k}")
        if fusion not in FUSIONS:
            raise ConfigError(
                f"SKILLSTREAM_MEMORY_SKILL_FUSION must be one of {FUSIONS}, got {fusion!r}"
            )
        self.embed = embed
        self.scorer = scorer or CosineScorer()
        self.k = k
        self.fusion = fusion
        self.explore = explore
        self.seed = seed
        self._vectors: dict[tuple[str, int, str], np.ndarray] = {}
        self._lock = threading.Lock()
        self.needs_span_vector = True
        self.version = str(getattr(self.scorer, "version", self.scorer.name))
        """Written to the span ledger's ``controller`` column."""

    def skill_vectors(self, skills: Sequence[MemorySkill]) -> np.ndarray:
        """Description embeddings ``(n, d)``, cached per (name, version, description)."""
        keys = [(s.name, s.version, s.description) for s in skills]
        with self._lock:
            missing = [k for k in dict.fromkeys(keys) if k not in self._vectors]
        if missing:
            vecs = np.asarray(self.embed([k[2] for k in missing]), dtype=np.float32)
            with self._lock:
                for key, v in zip(missing, vecs):
                    self._vectors[key] = v
        with self._lock:
            return np.stack([self._vectors[k] for k in keys])

    def logits(
        self, state: np.ndarray, skills: Sequence[MemorySkill], has_memories: bool
    ) -> np.ndarray:
        """Masked logits of ``skills`` for ``state``."""
        z = np.asarray(self.scorer.logits(state, self.skill_vectors(skills)), dtype=np.float64)
        if not has_memories:
            for i, s in enumerate(skills):
                if s.action.upper() in INDEXED_ACTIONS:
                    z[i] = -np.inf
        return z

    def decide(
        self,
        span_vector: np.ndarray,
        retrieved: Sequence[Memory],
        skills: Sequence[MemorySkill],
        *,
        explore: bool | None = None,
        rng: np.random.Generator | None = None,
    ) -> Selection:
        """Score the bank for a span and select up to K memory skills.

        Args:
            span_vector: The span embedding.
            retrieved: The owner's retrieved memories with vectors (best first).
            skills: The bank's active memory skills.
            explore: Gumbel-Top-K (``True``) or Top-K (``False``); default the controller's mode.
            rng: Noise generator for exploration; default seeded from ``seed`` and the span.
        """
        skills = list(skills)
        state = controller_state(span_vector, retrieved, self.fusion)
        with_vec = any(m.vector is not None for m in retrieved)
        z = self.logits(state, skills, with_vec)
        explore = self.explore if explore is None else explore
        if explore:
            if rng is None:
                span_key = zlib.crc32(np.asarray(span_vector, dtype=np.float32).tobytes())
                rng = np.random.default_rng([self.seed, span_key])
            idx = gumbel_top_k(z, self.k, rng)
        else:
            idx = top_k(z, self.k)
        return Selection(
            skills=[skills[i] for i in idx],
            indices=idx,
            logits=z,
            log_prob=joint_log_prob(z, idx),
            state=state,
        )

    def select(
        self,
        span_vector: np.ndarray | None,
        retrieved: Sequence[Memory],
        skills: Sequence[MemorySkill],
    ) -> list[MemorySkill]:
        """The ``Controller`` protocol: the selected skills (all of them without a span vector)."""
        if span_vector is None or not skills:
            return list(skills)
        return self.decide(span_vector, retrieved, skills).skills


def make_controller(extraction: ExtractionSettings, llm_backend: str, embedder: Any) -> Controller:
    """The controller the ``extraction`` settings ask for (``memory_skill_selection``).

    ``auto`` keeps every memory skill until a controller is trained (``memory_skill_scorer``
    names its checkpoint): an untrained Top-K scores skills by the cosine of their descriptions
    to the span, which withholds one of the four primitives on every span, insert among them.
    With a trained scorer and an LLM backend it is Top-K; the offline ``rules`` backend keeps
    every skill (its rules implement the primitives and need all of them).

    Args:
        extraction: The ``extraction`` settings group.
        llm_backend: The LLM backend's name (``llm.backend``), which ``auto`` depends on.
        embedder: Encodes spans and skill descriptions; its ``dim`` sizes a trained scorer.

    Raises:
        ConfigError: an unknown selection or fusion, ``k < 1``, or a bad scorer checkpoint.
    """
    mode = (extraction.memory_skill_selection or "auto").strip().lower()
    if mode not in SELECTIONS:
        raise ConfigError(
            f"SKILLSTREAM_MEMORY_SKILL_SELECTION must be one of {SELECTIONS}, got "
            f"{extraction.memory_skill_selection!r}"
        )
    if mode == "auto":
        rules = (llm_backend or "rules").strip().lower() == "rules"
        mode = "all" if rules or not extraction.memory_skill_scorer else "top_k"
    if mode == "all":
        return AllSkills()
    scorer: Scorer
    if extraction.memory_skill_scorer:
        scorer = load_scorer(extraction.memory_skill_scorer, int(embedder.dim))
    else:
        scorer = CosineScorer()
    return TopKController(
        embedder.encode,
        scorer,
        k=extraction.memory_skill_k,
        fusion=extraction.memory_skill_fusion,
        explore=mode == "gumbel",
        seed=extraction.memory_skill_seed,
    )
