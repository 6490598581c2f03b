"""Prefetching a batch's texts (the model is asked for the texts its spans are predicted to store
before they are applied) changes the number of model calls and nothing else: the same memories,
ids, versions, vectors to the last bit and events as a pipeline that embeds span by span, also
when predictions miss."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import numpy as np
import pytest

from skillstream.errors import ConfigError, SkillstreamError
from skillstream.extract import Extraction, ExtractionInput
from skillstream.memories import LIVE, OwnerMemories
from skillstream.pipeline import MemoryPipeline, OwnerState
from skillstream.rules import RulesExecutor
from skillstream.services.pipeline import build_pipeline
from skillstream.settings import Settings
from skillstream.spans import SpanBuilder, SpanState
from tests.factories import T0, make_message
from tests.pipeline.test_owner_index import _spans

BATCH = 12

NAMED = [
    [("Caroline", "I adopted a dog named Max last week."), ("Melanie", "I went camping.")],
    [("Melanie", "Thanks for the pictures of your dog, Caroline! I painted a sunrise for you.")],
    [("Melanie", "I painted a sunrise for you yesterday.")],
    [("Caroline", "Actually the dog is named Rex, not Max.")],
    [("Caroline", "I moved to Boston."), ("Melanie", "I moved to Boston too.")],
    [("Caroline", "I do not live in Boston anymore, I moved to Denver.")],
]
"""Spans whose texts depend on what earlier spans of the batch stored: a speaker alone says
"you" to the one other person known, a correction updates the memory it corrects."""


def _named_span(h: int, turns: list[tuple[str, str]]) -> Any:
    start = T0 - timedelta(days=1) + timedelta(hours=h)
    builder, state = SpanBuilder(lambda s: len(s.split()), budget=10**9), SpanState()
    for i, (speaker, text) in enumerate(turns):
        at = start + timedelta(minutes=i)
        builder.add(state, make_message(text, i=10 * h + i, speaker=speaker, ts=at))
    return builder.flush(state)[0]


def _fixture() -> list[Any]:
    return [_named_span(h, turns) for h, turns in enumerate(NAMED)] + _spans()


class CountingEmbedder:
    """The real model, recording the texts of every call (waited for or submitted)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name, self.dim, self.batch_size = inner.name, inner.dim, inner.batch_size
        self.calls: list[list[str]] = []

    def encode(self, texts: Any) -> np.ndarray:
        self.calls.append(list(texts))
        return np.asarray(self.inner.encode(texts))

    def submit(self, texts: Any) -> Any:
        self.calls.append(list(texts))
        return self.inner.submit(texts)

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]

    def encode_query(self, text: str) -> np.ndarray:
        return self.encode_one(text)

    def forward(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.inner.forward(texts))


class CountingExecutor:
    """The rules executor, counting its calls per span; fails the spans that mention ``fail_on``."""

    name = "rules"
    needs_span_vector = False
    reads_retrieved = False

    def __init__(self, predictable: bool, fail_on: str | None = None) -> None:
        self.inner = RulesExecutor()
        self.predictable = predictable
        self.fail_on = fail_on
        self.calls: dict[tuple, int] = {}

    def execute(self, inp: ExtractionInput) -> Extraction:
        key = (inp.span.span_id, inp.span.end_ts)
        self.calls[key] = self.calls.get(key, 0) + 1
        if self.fail_on and self.fail_on in inp.span_text:
            raise SkillstreamError(f"refusing a span about {self.fail_on}")
        return self.inner.execute(inp)


def _pipeline(embedder: Any, tmp_path: Any, name: str, prefetch: bool, **kw: Any) -> Any:
    settings = Settings.from_keys(home=str(tmp_path / name))
    pipeline = build_pipeline(settings, embedder, maintenance=False, **kw)
    return dataclasses.replace(pipeline, prefetch=prefetch)


def _run(pipeline: MemoryPipeline, spans: list[Any]) -> tuple[OwnerMemories, list[Any]]:
    state = OwnerState(OwnerMemories("c1"), pipeline.run_id)
    results = []
    for start in range(0, len(spans), BATCH):
        results += pipeline.process_owner(state, spans[start : start + BATCH])
    return state.memories, results


def _memories(mem: OwnerMemories) -> dict[str, tuple]:
    return {
        m.id: (
            m.text,
            m.version,
            str(m.status),
            m.confidence,
            m.merged_into,
            m.kind,
            None if m.vector is None else np.asarray(m.vector, dtype=np.float32).tobytes(),
        )
        for m in mem.items.values()
    }


def _results(results: list[Any]) -> list[tuple]:
    return [
        (
            r.span.span_id,
            r.status,
            r.error,
            [(e.memory_id, str(e.event), e.reason) for e in r.events],
            [(m.id, m.version, m.text) for m in r.memories],
            r.rows.contradictions,
        )
        for r in results
    ]


def test_prefetching_gives_what_embedding_span_by_span_gives(embedder, tmp_path):
    spans = _fixture()
    plain_model = CountingEmbedder(embedder)
    plain = _pipeline(plain_model, tmp_path, "plain", prefetch=False)
    assert not plain.predicts
    plain_mem, plain_results = _run(plain, spans)

    model = CountingEmbedder(embedder)
    pre = _pipeline(model, tmp_path, "prefetch", prefetch=True)
    assert pre.predicts
    mem, results = _run(pre, spans)

    assert _memories(mem) == _memories(plain_mem)
    assert _results(results) == _results(plain_results)
    events = {str(e.event) for r in results for e in r.events}
    # the fixture updates, supersedes and restates memories the same batch created
    assert {"created", "updated", "deleted"} <= events
    assert len(mem.items) > 5

    # fewer, larger calls; predictions that missed went to the model as before
    assert len(model.calls) < len(plain_model.calls)
    embedded = {t for call in plain_model.calls for t in call}
    counts = pre.prefetched
    assert 0 < counts.used < counts.predicted, "some predictions should be wasted"
    assert counts.missed > 0, "some texts should not have been predicted"
    # every text the plain pipeline embedded was embedded here too: served or missed
    assert embedded <= {t for call in model.calls for t in call}


def test_an_unpredictable_executor_is_called_once_per_span(embedder, tmp_path):
    spans = _fixture()
    assert len({(s.span_id, s.end_ts) for s in spans}) == len(spans)
    once = CountingExecutor(predictable=False)
    pipeline = _pipeline(embedder, tmp_path, "once", prefetch=True, executor=once)
    assert not pipeline.predicts
    _run(pipeline, spans)
    assert once.calls == {(s.span_id, s.end_ts): 1 for s in spans}

    # a predictable one runs once more per span, for the prediction
    twice = CountingExecutor(predictable=True)
    pipeline = _pipeline(embedder, tmp_path, "twice", prefetch=True, executor=twice)
    assert pipeline.predicts
    _run(pipeline, spans)
    assert twice.calls == {(s.span_id, s.end_ts): 2 for s in spans}


def test_a_span_failing_in_the_prediction_fails_as_without_it(embedder, tmp_path):
    spans = _fixture()
    runs = []
    for prefetch in (False, True):
        executor = CountingExecutor(predictable=True, fail_on="cello")
        pipeline = _pipeline(
            embedder, tmp_path, f"fail-{prefetch}", prefetch=prefetch, executor=executor
        )
        runs.append(_run(pipeline, spans))
    (plain_mem, plain_results), (mem, results) = runs
    failed = [r for r in results if r.status == "failed"]
    assert failed and all("cello" in (r.error or "") for r in failed)
    assert _results(results) == _results(plain_results)
    assert _memories(mem) == _memories(plain_mem)


def test_the_setting_turns_prefetching_off(embedder, tmp_path, monkeypatch):
    on = build_pipeline(Settings.from_keys(home=str(tmp_path)), embedder, maintenance=False)
    assert on.predicts
    monkeypatch.setenv("SKILLSTREAM_EMBED_PREFETCH", "off")
    settings = Settings.load(home=str(tmp_path))
    assert settings.embedding.prefetch is False
    assert not build_pipeline(settings, embedder, maintenance=False).predicts
    monkeypatch.setenv("SKILLSTREAM_EMBED_PREFETCH", "sometimes")
    with pytest.raises(ConfigError, match="SKILLSTREAM_EMBED_PREFETCH"):
        Settings.load(home=str(tmp_path))


def test_a_batch_with_ticks_gives_what_item_by_item_gives(embedder, tmp_path):
    """Spans and maintenance ticks in one batch (texts asked for up front, summaries and topic
    nodes given their vectors at the end of the batch) end exactly as the same items processed one
    at a time, each vector there when its item is done."""
    from tests.pipeline.test_owner_index import _run_with_ticks

    one_by_one, one_results = _run_with_ticks(embedder, tmp_path, rebuild=False)

    settings = Settings.from_keys(
        home=str(tmp_path / "batched"),
        memory_capacities={"LongTermMemory": 6},
        reorganize_min_members=2,
        decay_rule="idle",
        expire_archived_after_s=60 * 86400.0,
    )
    model = CountingEmbedder(embedder)
    pipeline = build_pipeline(settings, model)
    assert pipeline.predicts and pipeline.maintenance is not None
    state = OwnerState(OwnerMemories("c1"), pipeline.run_id)
    items = _ticked_items()
    results = pipeline.process_owner(state, items)

    kinds = {m.kind for m in state.memories.items.values()}
    assert {"summary", "topic"} <= kinds
    assert _memories(state.memories) == _memories(one_by_one)
    events = [(e.memory_id, str(e.event), e.version, e.reason) for r in results for e in r.events]
    assert events == [
        (e.memory_id, str(e.event), e.version, e.reason) for r in one_results for e in r.events
    ]
    # every memory the state holds with a text has its vector, and the index holds the live ones'
    index = state.memories.index
    for m in state.memories.items.values():
        if m.text and m.status != "expired":
            assert m.vector is not None, m.id
        if m.status in LIVE:
            assert index.vectors[index.rows[m.id]] is m.vector, m.id


def _ticked_items() -> list[Any]:
    from skillstream.lifecycle.maintenance import MaintenanceTick

    items: list[Any] = []
    for i, span in enumerate(_spans()):
        items.append(span)
        if i % 4 == 3:
            at = span.messages[-1].ts + timedelta(days=40 * (i // 4 + 1))
            items.append(MaintenanceTick("c1", at, close_sessions=i % 8 == 7))
    return items
