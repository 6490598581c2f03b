"""The LoCoMo evaluation: build memory per conversation, retrieve per question, score, compare.

For every conversation (LoCoMo sample) of the file, and for each system:

* **ours**: the real memory flow (``skillstream.flows.runner.Runner`` over a
  ``FileSource(format="locomo")`` of that one sample, run in-process with Bytewax's ``run_main``)
  with the executor the settings name (the offline ``rules`` executor by default);
* **baseline** ``raw-turns``: the same flow, store and retriever with
  :class:`~skillstream.eval.baseline.RawTurnsExecutor`, which stores every turn verbatim;

the conversation is written into a fresh, isolated home (``<work_dir>/<sample>/<system>``, removed
and rebuilt on every run); its owner is the ``sample_id``. Then, for each question of the selected
categories, the memories are retrieved with the retriever of ``skillstream search``
(:class:`skillstream.services.search.MemorySearch`: LanceDB hybrid search, vector + full-text fused
by reciprocal rank, over the owner's searchable memories, re-ranked with confidence, recency and
reinforcement), at the conversation's last event time, without recording the query. The question
vectors are encoded in one batch per conversation and handed to the searcher instead of being
encoded one by one (same model, same vectors). One search per question returns a ranked list as
deep as the largest k (or ``qa_k``); recall@k reads its first k items, the usual cut-off
definition. (``skillstream search --k 5`` draws on fewer candidates, so its five can differ
slightly from the first five of a deeper search.)

Session summaries are off in both homes unless ``session_summaries`` is set: a summary memory
cites every turn of its session as a source while showing at most eight facts, so one retrieved
summary would count the whole session as recalled. Everything else (consolidation of
near-duplicates, decay, capacity, the reorganizer) runs as configured, for both systems alike.

Measures (see :mod:`.scoring`):

* **evidence recall@k**: the share of a question's evidence turns found among the
  ``source_message_ids`` of the k retrieved items, averaged over the questions that have usable
  evidence; malformed evidence ids are repaired or dropped (:func:`.scoring.clean_evidence`) and
  listed in the result;
* **evidence recall@k with node expansion** (``recall@k_nodes``, "ours" with the reorganizer on):
  the same questions searched with ``expand=True``, so a retrieved topic node counts by its member
  memories (in its place, most central first), never by the node's own union of sources;
* **F1** and **judge** (only with an LLM backend): the question is answered from the top
  ``qa_k`` memories and scored with the category rules, then judged (:mod:`.qa`);
* **cost**: stored items (live memories), LLM calls and tokens for building and for answering,
  and wall time.

With the ``rules`` backend the run is offline: recall and cost only, ``f1`` and ``judge`` are
``None``. With ``openai`` the same backend answers and judges, and builds "ours" unless
``build_llm`` says otherwise.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillstream.connectors.locomo import LocomoQA, load_locomo, load_locomo_qa, sample_records
from skillstream.errors import InputError
from skillstream.eval.baseline import BASELINES, RawTurnsExecutor
from skillstream.eval.qa import QAGrader, Usage
from skillstream.eval.scoring import clean_evidence, evidence_recall, mean, score_answer
from skillstream.memories import LIVE
from skillstream.settings import Settings

log = logging.getLogger(__name__)

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
"""LoCoMo question categories (the numbering of the paper and of the data README)."""

SYSTEMS = ("ours", "baseline")


@dataclass(frozen=True)
class EvalOptions:
    """What to evaluate and how.

    Attributes:
        ks: The k of each recall@k (one search per k).
        categories: Question categories to score (5, adversarial, only when asked for).
        baseline: ``raw-turns`` or ``none``.
        qa_k: Memories given to the answerer; defaults to the largest k.
        build_llm: Backend that builds "ours" (``rules`` or ``openai``); defaults to
            ``settings.llm``.
        samples: Only these ``sample_id`` values (all when empty).
        work_dir: Where the per-conversation homes (and the answer cache) go; a temporary folder,
            removed at the end, when ``None``.
        judge: Ask the LLM judge (when an LLM is configured).
        session_summaries: Let the flow write session summaries (off: see the module docstring).
        search_threads: Searches run at once.
    """

    ks: tuple[int, ...] = (5, 10, 20)
    categories: tuple[int, ...] = (1, 2, 3, 4)
    baseline: str = "raw-turns"
    qa_k: int | None = None
    build_llm: str | None = None
    samples: tuple[str, ...] = ()
    work_dir: str | None = None
    judge: bool = True
    session_summaries: bool = False
    search_threads: int = 2

    def checked(self) -> EvalOptions:
        """These options, validated; ``ks`` and ``categories`` sorted and de-duplicated."""
        ks = tuple(sorted(set(self.ks)))
        if not ks or any(not isinstance(k, int) or k < 1 for k in ks):
            raise InputError(f"--k takes positive integers such as 5,10,20, got {self.ks!r}")
        cats = tuple(sorted(set(self.categories)))
        if not cats or any(c not in CATEGORIES for c in cats):
            raise InputError(
                f"--categories takes LoCoMo categories 1-5 ({CATEGORIES}), got {self.categories!r}"
            )
        if self.baseline not in BASELINES:
            raise InputError(f"--baseline must be one of {BASELINES}, got {self.baseline!r}")
        if self.qa_k is not None and self.qa_k < 1:
            raise InputError(f"--qa-k must be a positive integer, got {self.qa_k!r}")
        return dataclasses.replace(self, ks=ks, categories=cats)


@dataclass
class Question:
    """One scored question of one conversation."""

    sample_id: str
    index: int
    qa: LocomoQA
    evidence: list[str]
    dropped: list[str]
    repaired: list[str]


@dataclass
class Build:
    """What building one system's home for one conversation did."""

    items: int = 0
    items_total: int = 0
    messages: int = 0
    dead_letters: int = 0
    spans: int = 0
    spans_failed: int = 0
    seconds: float = 0.0
    usage: Usage = field(default_factory=Usage)


def home_settings(settings: Settings, home: Path, llm: str, *, summaries: bool = False) -> Settings:
    """``settings`` pointed at a fresh local home: every store under it, no storage options."""
    return settings.with_keys(
        home=str(home),
        lancedb_uri="",
        catalog_path="",
        artifacts_uri="",
        storage_options={},
        llm=llm,
        session_summaries=summaries,
    )


class _QueryVectors:
    """An embedder for the searcher that hands out vectors encoded beforehand in one batch."""

    def __init__(self, embedder: Any, texts: Sequence[str], vectors: Any) -> None:
        self.embedder = embedder
        self.dim = embedder.dim
        self.vectors = {t: v for t, v in zip(texts, vectors)}

    def encode_one(self, text: str) -> Any:
        v = self.vectors.get(text)
        return v if v is not None else self.embedder.encode_one(text)

    def encode_query(self, text: str) -> Any:
        v = self.vectors.get(text)
        return v if v is not None else self.embedder.encode_query(text)

    def encode(self, texts: Sequence[str]) -> Any:
        return self.embedder.encode(texts)


def _executor(settings: Settings, system: str) -> Any:
    if system == "baseline":
        return RawTurnsExecutor()
    from skillstream.services.pipeline import make_executor

    return make_executor(settings)


def build_home(settings: Settings, input_path: Path, system: str) -> Build:
    """Run the memory flow over one LoCoMo file into the (fresh) home of ``settings``.

    Args:
        settings: Settings of the home (see :func:`home_settings`).
        input_path: A LoCoMo file holding one sample.
        system: ``ours`` (the configured executor) or ``baseline`` (raw turns).

    Returns:
        Counts, build time and the build's LLM usage (read back from the home's ``llm_calls``).
    """
    from skillstream.flows.runner import Runner
    from skillstream.storage.catalog import open_catalog
    from skillstream.storage.home import open_index

    home = Path(settings.storage.home)
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    runner = Runner(settings, executor=_executor(settings, system), flow_id=f"eval-{system}")
    source = runner.source(str(input_path), format="locomo")
    t0 = time.perf_counter()
    summary = runner.run(source)
    out = Build(seconds=time.perf_counter() - t0)
    counts = summary.counts
    out.messages = counts.get("messages", 0)
    out.dead_letters = counts.get("dead_letters", 0)
    out.spans = counts.get("spans_done", 0)
    out.spans_failed = counts.get("spans_failed", 0)
    out.items, out.items_total = count_items(open_index(settings, runner.embedder.dim))
    cat = open_catalog(settings.storage, read_only=True)
    try:
        rows = cat.sql("SELECT prompt_tokens, completion_tokens, status, cached FROM llm_calls")
    finally:
        cat.close()
    for r in rows.to_pylist():
        out.usage.row(bool(r["cached"]), r["status"], r["prompt_tokens"], r["completion_tokens"])
    return out


def count_items(index: Any) -> tuple[int, int]:
    """Extracted memories of a home: ``(live, all)``, live being generated or activated. Task
    skills' ``SkillMemory`` items are not extracted memories and count in neither figure."""
    from skillstream.storage import filters

    extracted = filters.not_skill_item()
    live = filters.where_all(filters.is_in("status", list(LIVE)), extracted)
    return index.count(live), index.count(extracted)


def load_questions(
    sample: dict[str, Any], qas: Sequence[LocomoQA], categories: Sequence[int]
) -> list[Question]:
    """The sample's questions of the chosen categories, with evidence checked against its turns."""
    sample_id = str(sample["sample_id"])
    known = {
        str(r["message_id"])
        for r in sample_records(sample)
        if isinstance(r, dict) and r.get("message_id")
    }
    out = []
    for i, qa in enumerate(qas):
        if qa.category not in categories:
            continue
        kept, dropped = clean_evidence(qa.evidence, known)
        repaired = [e for e in qa.evidence if e not in known and e not in dropped]
        out.append(Question(sample_id, i, qa, kept, dropped, repaired))
    return out


def _last_event(sample: dict[str, Any]) -> Any:
    """The time of the sample's last turn: the store's clock once the conversation is built."""
    times = [
        r["timestamp"]
        for r in sample_records(sample)
        if isinstance(r, dict) and not isinstance(r["timestamp"], str)
    ]
    return max(times) if times else None


def _safe_name(sample_id: str) -> str:
    return re.sub(r"[^\w.-]+", "_", sample_id) or "sample"


class LocomoEval:
    """One evaluation run; :meth:`run` returns the result dict (see :func:`evaluate_locomo`)."""

    def __init__(
        self,
        path: str | Path,
        settings: Settings,
        options: EvalOptions = EvalOptions(),
        *,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.settings = settings
        self.options = options.checked()
        self.say = say or (lambda msg: log.info("%s", msg))
        self.build_llm = (self.options.build_llm or settings.llm.backend or "rules").strip().lower()
        self.qa_k = self.options.qa_k or max(self.options.ks)
        self.systems = ("ours", "baseline") if self.options.baseline != "none" else ("ours",)
        self.records: list[dict[str, Any]] = []
        self.builds: dict[str, list[Build]] = {s: [] for s in self.systems}
        self.answer_usage: dict[str, Usage] = {s: Usage() for s in self.systems}
        self.answer_seconds: dict[str, float] = {s: 0.0 for s in self.systems}
        self.search_seconds: dict[str, float] = {s: 0.0 for s in self.systems}

    # ------------------------------------------------------------------ the run
    def run(self) -> dict[str, Any]:
        from skillstream.embed import get_embedder
        from skillstream.llm import make_backend

        t0 = time.perf_counter()
        samples = load_locomo(self.path)
        qa_by_sample = load_locomo_qa(self.path)
        if self.options.samples:
            wanted = set(self.options.samples)
            missing = wanted - {str(s["sample_id"]) for s in samples}
            if missing:
                raise InputError(f"--samples: {sorted(missing)} not in {str(self.path)!r}")
            samples = [s for s in samples if str(s["sample_id"]) in wanted]
        tmp = None
        if self.options.work_dir:
            root = Path(self.options.work_dir)
            root.mkdir(parents=True, exist_ok=True)
        else:
            tmp = tempfile.TemporaryDirectory(prefix="skillstream-eval-")
            root = Path(tmp.name)
        backend = None
        try:
            if (self.settings.llm.backend or "rules").strip().lower() != "rules":
                backend = make_backend(self.settings.llm, str(root))
            grader = QAGrader(backend, judge=self.options.judge) if backend is not None else None
            embedder = get_embedder(self.settings.embedding)
            for sample in samples:
                sid = str(sample["sample_id"])
                questions = load_questions(
                    sample, qa_by_sample.get(sid, []), self.options.categories
                )
                self._conversation(root, sample, questions, embedder, grader)
        finally:
            close = getattr(backend, "close", None)
            if close is not None:
                close()
            if tmp is not None:
                tmp.cleanup()
        return self._result(samples, time.perf_counter() - t0, backend is not None)

    def _conversation(
        self,
        root: Path,
        sample: dict[str, Any],
        questions: list[Question],
        embedder: Any,
        grader: QAGrader | None,
    ) -> None:
        from skillstream.services.search import MemorySearch
        from skillstream.storage.home import open_index

        sid = str(sample["sample_id"])
        folder = root / _safe_name(sid)
        folder.mkdir(parents=True, exist_ok=True)
        input_path = folder / "input.json"
        input_path.write_text(json.dumps([sample], ensure_ascii=False), encoding="utf-8")
        texts = [q.qa.question for q in questions]
        vectors = _QueryVectors(embedder, texts, embedder.encode(texts))
        now = _last_event(sample)
        records = [self._record(q) for q in questions]
        for system in self.systems:
            llm = self.build_llm if system == "ours" else "rules"
            summaries = self.options.session_summaries and system == "ours"
            settings = home_settings(self.settings, folder / system, llm, summaries=summaries)
            built = build_home(settings, input_path, system)
            self.builds[system].append(built)
            index = open_index(settings, embedder.dim)
            t0 = time.perf_counter()
            expanded = None
            with MemorySearch(settings, record=False, index=index) as searcher:
                searcher.embedder = vectors  # type: ignore[assignment]
                hits = self._retrieve(searcher, sid, questions, now)
                if system == "ours" and settings.lifecycle.reorganize:
                    expanded = self._retrieve(searcher, sid, questions, now, expand=True)
            self.search_seconds[system] += time.perf_counter() - t0
            for i, (rec, q, got) in enumerate(zip(records, questions, hits)):
                rec[system] = self._recall(q, got)
                if expanded is not None:
                    for k in self.options.ks:
                        rec[system][f"recall@{k}_nodes"] = evidence_recall(
                            q.evidence, [h.get("source_message_ids") or [] for h in expanded[i][:k]]
                        )
            if grader is not None:
                self._answer(grader, system, records, questions, hits)
            self.say(
                f"{sid}: {system} {built.items} items from {built.messages} turns "
                f"({built.seconds:.1f} s to build), {len(questions)} questions"
            )
        self.records.extend(records)

    @staticmethod
    def _record(q: Question) -> dict[str, Any]:
        return {
            "sample_id": q.sample_id,
            "index": q.index,
            "category": q.qa.category,
            "question": q.qa.question,
            "gold": q.qa.answer,
            "evidence": q.evidence,
            "evidence_dropped": q.dropped,
            "evidence_repaired": q.repaired,
        }

    def _retrieve(
        self,
        searcher: Any,
        owner: str,
        questions: list[Question],
        now: Any,
        *,
        expand: bool = False,
    ) -> list[list[dict[str, Any]]]:
        depth = max(max(self.options.ks), self.qa_k)

        def one(q: Question) -> list[dict[str, Any]]:
            return searcher.search(
                q.qa.question, owner=owner, k=depth, now=now, task_skills=False, expand=expand
            )

        threads = max(1, self.options.search_threads)
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="eval-search") as pool:
            return list(pool.map(one, questions))

    def _recall(self, q: Question, hits: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k in self.options.ks:
            out[f"recall@{k}"] = evidence_recall(
                q.evidence, [h.get("source_message_ids") or [] for h in hits[:k]]
            )
        out["retrieved"] = [
            {
                "text": h.get("text"),
                "source_message_ids": list(h.get("source_message_ids") or []),
                "score": h.get("score"),
            }
            for h in hits[: max(self.options.ks)]
        ]
        return out

    def _answer(
        self,
        grader: QAGrader,
        system: str,
        records: list[dict[str, Any]],
        questions: list[Question],
        hits: list[list[dict[str, Any]]],
    ) -> None:
        t0 = time.perf_counter()

        def one(i: int):
            q = questions[i].qa
            return grader.grade(q.question, q.answer, q.category, hits[i][: self.qa_k])

        threads = max(1, self.settings.llm.concurrency)
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="eval-qa") as pool:
            graded = list(pool.map(one, range(len(questions))))
        for rec, q, g in zip(records, questions, graded):
            self.answer_usage[system].add(g.calls)
            rec[system].update(
                answer=g.answer,
                f1=score_answer(g.answer, q.qa.answer, q.qa.category),
                judge=g.judge if self.options.judge else None,
                error=g.error,
            )
        self.answer_seconds[system] += time.perf_counter() - t0

    # ------------------------------------------------------------------ the result
    def _summary(self, system: str, records: list[dict[str, Any]], qa: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k in self.options.ks:
            out[f"recall@{k}"] = _round(mean(r[system][f"recall@{k}"] for r in records))
        for k in self.options.ks:
            with_nodes = [
                r[system][f"recall@{k}_nodes"] for r in records if f"recall@{k}_nodes" in r[system]
            ]
            if with_nodes:
                out[f"recall@{k}_nodes"] = _round(mean(with_nodes))
        for name in ("f1", "judge"):
            out[name] = _round(mean(r[system].get(name) for r in records)) if qa else None
        return out

    def _per_category(self, system: str, qa: bool) -> dict[str, Any]:
        out = {}
        for c in self.options.categories:
            recs = [r for r in self.records if r["category"] == c]
            row = self._summary(system, recs, qa)
            row["questions"] = len(recs)
            row["with_evidence"] = sum(1 for r in recs if r["evidence"])
            out[str(c)] = row
        return out

    def _cost(self, system: str) -> dict[str, Any]:
        builds = self.builds[system]
        usage = Usage()
        for b in builds:
            usage.merge(b.usage)
        return {
            "build": {
                "items": sum(b.items for b in builds),
                "rows_any_status": sum(b.items_total for b in builds),
                "messages": sum(b.messages for b in builds),
                "dead_letters": sum(b.dead_letters for b in builds),
                "spans": sum(b.spans for b in builds),
                "spans_failed": sum(b.spans_failed for b in builds),
                "seconds": round(sum(b.seconds for b in builds), 2),
                **usage.as_dict(),
            },
            "search": {"seconds": round(self.search_seconds[system], 2)},
            "answer": {
                "seconds": round(self.answer_seconds[system], 2),
                **self.answer_usage[system].as_dict(),
            },
        }

    def _result(self, samples: list[dict[str, Any]], seconds: float, qa: bool) -> dict[str, Any]:
        has_base = "baseline" in self.systems
        cost = {s: self._cost(s) for s in self.systems}
        calls = sum(c["build"]["llm_calls"] + c["answer"]["llm_calls"] for c in cost.values())
        by_cat = {
            str(c): sum(1 for r in self.records if r["category"] == c)
            for c in self.options.categories
        }
        return {
            "overall": self._summary("ours", self.records, qa),
            "per_category": self._per_category("ours", qa),
            "baseline": self._summary("baseline", self.records, qa) if has_base else None,
            "items": cost["ours"]["build"]["items"],
            "baseline_items": cost["baseline"]["build"]["items"] if has_base else None,
            "llm_calls": calls,
            "seconds": round(seconds, 2),
            "baseline_per_category": self._per_category("baseline", qa) if has_base else None,
            "cost": cost,
            "dataset": {
                "path": str(self.path),
                "conversations": [str(s["sample_id"]) for s in samples],
                "questions": len(self.records),
                "questions_by_category": by_cat,
                "questions_without_evidence": sum(1 for r in self.records if not r["evidence"]),
                "evidence_repaired": [
                    {
                        "sample_id": r["sample_id"],
                        "question": r["index"],
                        "ids": r["evidence_repaired"],
                    }
                    for r in self.records
                    if r["evidence_repaired"]
                ],
                "evidence_dropped": [
                    {
                        "sample_id": r["sample_id"],
                        "question": r["index"],
                        "ids": r["evidence_dropped"],
                    }
                    for r in self.records
                    if r["evidence_dropped"]
                ],
            },
            "config": {
                "k": list(self.options.ks),
                "categories": list(self.options.categories),
                "baseline": self.options.baseline,
                "qa_k": self.qa_k if qa else None,
                "llm": self.settings.llm.backend,
                "build_llm": self.build_llm,
                "llm_model": self.settings.llm.model if qa or self.build_llm != "rules" else None,
                "judge": bool(qa and self.options.judge),
                "embed_model": self.settings.embedding.model,
                "span_tokens": self.settings.spans.span_tokens,
                "retriever": "skillstream search (MemorySearch, "
                "hybrid vector + full-text with RRF, "
                "re-ranked; owner-filtered), recall@k on the first k of one ranked "
                "list per question",
                "session_summaries": self.options.session_summaries,
            },
        }


def _round(v: float | None, digits: int = 4) -> float | None:
    return None if v is None else round(v, digits)


def evaluate_locomo(
    path: str | Path,
    settings: Settings,
    options: EvalOptions = EvalOptions(),
    *,
    say: Callable[[str], None] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Evaluate on a LoCoMo file; see the module docstring.

    Args:
        path: A LoCoMo JSON file.
        settings: Settings of the run (embedding model, span size, LLM backend...). Store
            locations are ignored: every conversation gets its own home under the work folder.
        options: What to evaluate.
        say: Receives one progress line per conversation and system.

    Returns:
        ``(result, questions)``: the result dict (``overall``, ``per_category``, ``baseline``,
        ``items``, ``baseline_items``, ``llm_calls``, ``seconds``, then ``baseline_per_category``,
        ``cost``, ``dataset``, ``config``) and one record per scored question with each system's
        recall, retrieved items, answer and scores.

    Raises:
        InputError: a missing or malformed file, or bad options.
        ConfigError: an LLM backend without its settings.
    """
    ev = LocomoEval(path, settings, options, say=say)
    result = ev.run()
    return result, ev.records
