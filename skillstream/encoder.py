"""A BERT-style sentence encoder in numpy, for the few texts a search embeds.

A search embeds one query. Running the traced model for it means importing ``torch`` (over a
second of a command's start-up), which is most of what a ``search`` costs; the same encoder in
numpy imports nothing new and runs a short query in a few milliseconds. The embedding cache
(``skillstream.traced``) keeps the weights beside the traced model and checks this encoder
against it on a probe of awkward texts before it is ever used; a model it cannot reproduce
gets no numpy entry, and searches with it go through the traced model.

Only queries run here. Stored vectors always come from the traced model, whose vectors do not
depend on how texts are batched (``embed.Embedder``); a query's vector from this encoder differs
from the traced model's in the last bits only.

Supported: the encoder of a BERT or (XLM-)RoBERTa model (absolute positions, GELU or ReLU),
followed by mean or first-token pooling and normalisation, as sentence-transformers models are
built.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

MODEL_TYPES = ("bert", "roberta", "xlm-roberta")
"""Architectures this encoder reproduces (their encoder layers are the same)."""

POOLING = ("mean", "cls")


@dataclass(frozen=True)
class Config:
    """What the forward pass needs to know about a model."""

    layers: int
    heads: int
    eps: float
    activation: str  # "gelu" or "relu"
    pooling: str  # "mean" or "cls"
    position_offset: int  # RoBERTa counts positions from padding_idx + 1; BERT from 0
    roberta_positions: bool

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Config:
        return cls(
            layers=int(d["layers"]),
            heads=int(d["heads"]),
            eps=float(d["eps"]),
            activation=str(d["activation"]),
            pooling=str(d["pooling"]),
            position_offset=int(d["position_offset"]),
            roberta_positions=bool(d["roberta_positions"]),
        )


def config_of(model_config: Mapping[str, Any], pooling: str) -> Config | None:
    """The encoder's configuration from a model's ``config.json`` and its pooling mode, or
    ``None`` when this encoder does not reproduce such a model."""
    kind = str(model_config.get("model_type", ""))
    act = str(model_config.get("hidden_act", ""))
    position = str(model_config.get("position_embedding_type", "absolute"))
    if kind not in MODEL_TYPES or act not in ("gelu", "relu") or position != "absolute":
        return None
    if pooling not in POOLING:
        return None
    roberta = kind != "bert"
    return Config(
        layers=int(model_config["num_hidden_layers"]),
        heads=int(model_config["num_attention_heads"]),
        eps=float(model_config.get("layer_norm_eps", 1e-12)),
        activation=act,
        pooling=pooling,
        position_offset=int(model_config.get("pad_token_id", 1)) + 1 if roberta else 0,
        roberta_positions=roberta,
    )


def weights_of(state: Mapping[str, Any], layers: int) -> dict[str, np.ndarray]:
    """The arrays the encoder reads, from a model's state dict (names as ``transformers`` gives
    them, with or without a ``bert.``/``roberta.`` prefix), as float32, linear weights
    transposed to (in, out)."""
    names = {
        k.split(".", 1)[1] if k.split(".", 1)[0] in ("bert", "roberta") else k: k for k in state
    }

    def get(name: str, transpose: bool = False) -> np.ndarray:
        value = state[names[name]]
        arr = np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else value)
        arr = arr.astype(np.float32)
        return np.ascontiguousarray(arr.T if transpose else arr)

    out = {
        "word": get("embeddings.word_embeddings.weight"),
        "position": get("embeddings.position_embeddings.weight"),
        "type": get("embeddings.token_type_embeddings.weight"),
        "ln_w": get("embeddings.LayerNorm.weight"),
        "ln_b": get("embeddings.LayerNorm.bias"),
    }
    for i in range(layers):
        p = f"encoder.layer.{i}."
        q, k, v = (get(f"{p}attention.self.{n}.weight", True) for n in ("query", "key", "value"))
        out[f"{i}.qkv_w"] = np.ascontiguousarray(np.concatenate([q, k, v], axis=1))
        out[f"{i}.qkv_b"] = np.concatenate(
            [get(f"{p}attention.self.{n}.bias") for n in ("query", "key", "value")]
        )
        out[f"{i}.attn_w"] = get(f"{p}attention.output.dense.weight", True)
        out[f"{i}.attn_b"] = get(f"{p}attention.output.dense.bias")
        out[f"{i}.ln1_w"] = get(f"{p}attention.output.LayerNorm.weight")
        out[f"{i}.ln1_b"] = get(f"{p}attention.output.LayerNorm.bias")
        out[f"{i}.in_w"] = get(f"{p}intermediate.dense.weight", True)
        out[f"{i}.in_b"] = get(f"{p}intermediate.dense.bias")
        out[f"{i}.out_w"] = get(f"{p}output.dense.weight", True)
        out[f"{i}.out_b"] = get(f"{p}output.dense.bias")
        out[f"{i}.ln2_w"] = get(f"{p}output.LayerNorm.weight")
        out[f"{i}.ln2_b"] = get(f"{p}output.LayerNorm.bias")
    return out


class Encoder:
    """The forward pass of a model from its weights (:func:`weights_of`) and :class:`Config`."""

    def __init__(self, weights: Mapping[str, np.ndarray], config: Config) -> None:
        self.w = weights
        self.config = config

    def __call__(
        self, input_ids: np.ndarray, attention_mask: np.ndarray, token_type_ids: np.ndarray | None
    ) -> np.ndarray:
        """Unit sentence vectors of a batch of token rows (``(n, length)`` integer arrays)."""
        w, c = self.w, self.config
        ids = np.asarray(input_ids, dtype=np.int64)
        mask = np.asarray(attention_mask, dtype=np.float32)
        n, length = ids.shape
        if c.roberta_positions:
            positions = (np.cumsum(mask, axis=1) * mask).astype(np.int64) + c.position_offset - 1
        else:
            positions = np.broadcast_to(np.arange(length), (n, length))
        types = np.zeros_like(ids) if token_type_ids is None else np.asarray(token_type_ids)
        x = w["word"][ids] + w["position"][positions] + w["type"][types]
        x = _layer_norm(x, w["ln_w"], w["ln_b"], c.eps)
        hidden = x.shape[-1]
        size = hidden // c.heads
        bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        for i in range(c.layers):
            qkv = x @ w[f"{i}.qkv_w"] + w[f"{i}.qkv_b"]
            q, k, v = (
                qkv[..., j * hidden : (j + 1) * hidden]
                .reshape(n, length, c.heads, size)
                .transpose(0, 2, 1, 3)
                for j in range(3)
            )
            scores = (q @ k.transpose(0, 1, 3, 2)) / np.float32(np.sqrt(size)) + bias
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(n, length, hidden)
            attended = context @ w[f"{i}.attn_w"] + w[f"{i}.attn_b"]
            x = _layer_norm(attended + x, w[f"{i}.ln1_w"], w[f"{i}.ln1_b"], c.eps)
            inner = x @ w[f"{i}.in_w"] + w[f"{i}.in_b"]
            inner = _gelu(inner) if c.activation == "gelu" else np.maximum(inner, 0)
            out = inner @ w[f"{i}.out_w"] + w[f"{i}.out_b"]
            x = _layer_norm(out + x, w[f"{i}.ln2_w"], w[f"{i}.ln2_b"], c.eps)
        if c.pooling == "cls":
            pooled = x[:, 0]
        else:
            weights = mask[..., None]
            pooled = (x * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return (pooled / norms).astype(np.float32)


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(var + np.float32(eps)) * weight + bias


def _gelu(x: np.ndarray) -> np.ndarray:
    """GELU as BERT defines it, ``x * Phi(x)`` with the exact normal CDF."""
    return x * 0.5 * (1.0 + _erf(x / np.float32(np.sqrt(2.0))))


def _erf(x: np.ndarray) -> np.ndarray:
    """The error function to a relative error below 1.2e-7 (the Chebyshev fit of ``erfc`` in
    Press et al., *Numerical Recipes*, section 6.2), elementwise in float64."""
    z = np.abs(x.astype(np.float64))
    t = 1.0 / (1.0 + 0.5 * z)
    poly = (
        -z * z
        - 1.26551223
        + t
        * (
            1.00002368
            + t
            * (
                0.37409196
                + t
                * (
                    0.09678418
                    + t
                    * (
                        -0.18628806
                        + t
                        * (
                            0.27886807
                            + t
                            * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))
                        )
                    )
                )
            )
        )
    )
    erfc = t * np.exp(poly)
    return (np.sign(x) * (1.0 - erfc)).astype(np.float32)
