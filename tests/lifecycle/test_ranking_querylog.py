"""Ranking (relevance, confidence, recency, reinforcement), the query log and access times."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest

from skillstream.apply import ApplyOptions, apply_ops
from skillstream.errors import ConfigError
from skillstream.lifecycle.params import LifecycleParams, rank_weights
from skillstream.lifecycle.ranking import diversify, rank
from skillstream.memories import OwnerMemories
from skillstream.model import MaintenanceResult, MemoryOp, Op
from skillstream.services.search import MemorySearch, search_memories
from skillstream.settings import Settings
from skillstream.storage.catalog import Catalog
from skillstream.storage.home import open_stores
from skillstream.storage.writer import write_results
from tests.lifecycle.conftest import DAY, T0, lifecycle_params, span


def test_rank_combines_the_four_signals_exactly():
    hits = [
        {
            "id": "a",
            "score": 0.02,
            "confidence": 0.7,
            "reinforcement": 0,
            "valid_from": T0 - 30 * DAY,
        },
        {"id": "b", "score": 0.01, "confidence": 0.95, "reinforcement": 10, "valid_from": T0},
        {
            "id": "c",
            "score": 0.0,
            "confidence": 0.7,
            "reinforcement": 0,
            "valid_from": T0 - 60 * DAY,
        },
    ]
    month = 30 * 86400  # a recency that halves every 30 days
    out = rank(hits, T0, lifecycle_params(rank_rule="weighted", recency_half_life_s=month), k=3)
    # hits with no similarity or keyword score (rows from elsewhere): relevance is the store's
    # score over the best one
    # a: .6*1 + .2*.7 + .1*.5 + 0 = .79 ; b: .6*.5 + .2*.95 + .1*1 + .1*1 = .69 ; c: .14 + .025
    assert [(h["id"], h["score"], h["relevance"], h["recency"]) for h in out] == [
        ("a", 0.79, 1.0, 0.5),
        ("b", 0.69, 0.5, 1.0),
        ("c", 0.165, 0.0, 0.25),
    ]
    only_conf = lifecycle_params(
        rank_rule="weighted",
        recency_half_life_s=month,
        rank_weights={"relevance": 0.0, "confidence": 1.0, "recency": 0.0, "reinforcement": 0.0},
    )
    assert [h["id"] for h in rank(hits, T0, only_conf, k=2)] == ["b", "a"]


def test_the_default_rank_multiplies_confidence_recency_and_reinforcement():
    hits = [
        {
            "id": "a",
            "score": 0.02,
            "confidence": 0.7,
            "reinforcement": 0,
            "valid_from": T0 - 30 * DAY,
        },
        {"id": "b", "score": 0.01, "confidence": 0.95, "reinforcement": 10, "valid_from": T0},
        {"id": "c", "score": 0.02, "confidence": 0.2, "reinforcement": 0, "valid_from": T0},
    ]
    month = lifecycle_params(recency_half_life_s=30 * 86400)  # recency halves every 30 days
    out = rank(hits, T0, month, k=3)
    # a: 1 * .7 * (1 - .1 * (1 - .5)) * (1 - .1 * 1) = .7 * .95 * .9 = .5985
    # b: .5 * .95 * 1 * 1 = .475 ; c: 1 * .2 * 1 * .9 = .18
    assert [(h["id"], h["score"], h["recency"]) for h in out] == [
        ("a", 0.5985, 0.5),
        ("b", 0.475, 1.0),
        ("c", 0.18, 1.0),
    ]
    # a low confidence scales the whole score down: no relevance makes up for confidence 0
    assert rank([{**hits[0], "confidence": 0.0}], T0, month, k=1)[0]["score"] == 0.0


def test_diversify_takes_hits_by_maximal_marginal_relevance():
    hits = [{"id": "a", "score": 0.9}, {"id": "a2", "score": 0.88}, {"id": "b", "score": 0.8}]
    vectors = [[1.0, 0.0], [2.0, 0.0], [0.6, 0.8]]  # a2 points as a does (cosine 1); b: 0.6
    # second pick: a2 = 0.88 * (1 - 0.5 * 1) = 0.44, b = 0.8 * (1 - 0.5 * 0.6) = 0.56
    assert [h["id"] for h in diversify(hits, vectors, 3, 0.5)] == ["a", "b", "a2"]
    assert [h["id"] for h in diversify(hits, vectors, 2, 0.5)] == ["a", "b"]
    # a weaker spread leaves the ranking as it is: a2 = 0.88 * 0.9 = 0.792 > 0.8 * 0.94 = 0.752
    assert [h["id"] for h in diversify(hits, vectors, 3, 0.1)] == ["a", "a2", "b"]
    assert diversify(hits, vectors, 2, 0.0) == hits[:2]
    # scores are kept; equal values keep the ranking's order
    assert [h["score"] for h in diversify(hits, vectors, 3, 0.5)] == [0.9, 0.8, 0.88]
    same = [{"id": x, "score": 0.5} for x in "xyz"]
    assert [h["id"] for h in diversify(same, [[1.0, 0.0]] * 3, 3, 0.5)] == ["x", "y", "z"]
    # an irrelevant hit is never lifted over a relevant one, however unlike the others it is
    weak = [{"id": "p", "score": 0.3}, {"id": "p2", "score": 0.02}, {"id": "z", "score": 0.0}]
    assert [h["id"] for h in diversify(weak, [[1, 0], [1, 0], [-1, 0]], 3, 0.9)] == [
        "p",
        "p2",
        "z",
    ]


def test_rank_weights_are_configurable_and_checked(tmp_path):
    s = Settings.load(home=str(tmp_path), rank_weights={"recency": 0.5})
    r = LifecycleParams.from_settings(s)
    assert r.weights == {
        "relevance": 0.6,
        "confidence": 0.2,
        "recency": 0.5,
        "reinforcement": 0.1,
        "keyword": 0.5,
    }
    with pytest.raises(ConfigError, match="unknown weight 'freshness'"):
        rank_weights({"freshness": 1})
    with pytest.raises(ConfigError, match="must be >= 0"):
        rank_weights({"recency": -1})


@pytest.fixture
def home(tmp_path, embedder, recorded):
    settings = Settings.load(home=str(tmp_path / "home"))
    state = OwnerMemories("o1")
    results = []
    for at, text in [
        (T0, "Caroline loves hiking in the Alps"),
        (T0 + DAY, "Caroline plays the cello"),
        (T0 + 2 * DAY, "Caroline's password is [REDACTED:password]"),
    ]:
        r = apply_ops(
            state,
            span([text], at=at),
            [MemoryOp(Op.INSERT, text)],
            recorded,
            ApplyOptions(embed=embedder.encode),
        )
        results.append(MaintenanceResult("o1", at, list(r.changed.values()), r.events, r.rows))
    with open_stores(settings, embedder.dim) as stores:
        write_results(stores, results)
        stores.index.optimize()
    return settings


def _catalog_rows(settings, sql, params=None):
    cat = Catalog(settings.storage.catalog, read_only=True)
    try:
        return cat.sql(sql, params).to_pylist()
    finally:
        cat.close()


def test_a_search_is_logged_and_touches_its_hits(home):
    hits = search_memories(
        home,
        "hiking Alps sk-proj-abcdefghijklmnop1234",
        owner="o1",
        k=1,
        strategy="keyword",
        now=T0 + 10 * DAY,
    )
    assert [h["text"] for h in hits] == ["Caroline loves hiking in the Alps"]
    (q,) = _catalog_rows(home, "SELECT * FROM queries")
    assert {
        k: q[k]
        for k in (
            "owner_id",
            "agent_id",
            "session_id",
            "query",
            "strategy",
            "k",
            "result_ids",
            "n_results",
            "executed_at",
        )
    } == {
        "owner_id": "o1",
        "agent_id": None,
        "session_id": None,
        "query": "hiking Alps [REDACTED:openai_key]",
        "strategy": "keyword",
        "k": 1,
        "result_ids": [hits[0]["id"]],
        "n_results": 1,
        "executed_at": T0 + 10 * DAY,
    }
    meta = _catalog_rows(
        home, "SELECT text, last_accessed_at, decay_steps FROM memory_meta ORDER BY text"
    )
    assert [(r["last_accessed_at"], r["decay_steps"]) for r in meta] == [
        (T0 + 10 * DAY, 0),
        (None, 0),
        (None, 0),
    ]
    # LanceDB holds the same access time (the flow reads its memories back from there)
    from skillstream.storage.lance import MemoryIndex

    lance = {
        m.text: m.last_accessed_at
        for m in MemoryIndex(home.storage.lancedb, 384).owner_memories("o1")
    }
    assert lance["Caroline loves hiking in the Alps"] == T0 + 10 * DAY
    # an earlier search never moves the access time back; the default time is the store's clock,
    # which the first search moved on: activating its hit was a lifecycle event at T0 + 10 days
    search_memories(home, "hiking", owner="o1", k=1, strategy="keyword", now=T0 + 5 * DAY)
    search_memories(home, "cello", owner="o1", k=1, strategy="semantic")
    rows = _catalog_rows(home, "SELECT text, last_accessed_at FROM memory_meta ORDER BY text")
    assert [r["last_accessed_at"] for r in rows] == [T0 + 10 * DAY, T0 + 10 * DAY, None]
    assert [
        r["executed_at"]
        for r in _catalog_rows(home, "SELECT executed_at FROM queries ORDER BY recorded_at")
    ] == [T0 + 10 * DAY, T0 + 5 * DAY, T0 + 10 * DAY]


def test_a_search_spreads_hits_that_repeat_each_other(tmp_path, embedder, recorded):
    settings = Settings.load(home=str(tmp_path / "home"))
    state = OwnerMemories("o1")
    texts = [
        "Caroline's new dog is a rescue called Max",
        "Max, Caroline's rescue dog, loves the beach",  # cosine 0.84 to the first
        "Caroline takes cello lessons on Saturdays",
    ]
    r = apply_ops(
        state,
        span(texts, at=T0),
        [MemoryOp(Op.INSERT, t) for t in texts],
        recorded,
        ApplyOptions(embed=embedder.encode),
    )
    with open_stores(settings, embedder.dim) as stores:
        write_results(
            stores, [MaintenanceResult("o1", T0, list(r.changed.values()), r.events, r.rows)]
        )

    def search(diversity):
        got = search_memories(
            settings.with_keys(rank_diversity=diversity),
            "Tell me about Caroline's dog and her music",
            owner="o1",
            k=3,
            strategy="semantic",
            now=T0,
            record=False,
        )
        assert all("vector" not in h for h in got)
        return [h["text"] for h in got], [h["score"] for h in got]

    plain, scores = search(0.0)
    assert plain == texts and scores == sorted(scores, reverse=True)
    # the second dog memory, discounted by its likeness to the first, falls behind the cello
    spread, kept = search(0.5)
    assert spread == [texts[0], texts[2], texts[1]]
    assert sorted(kept) == sorted(scores)


def test_searching_while_a_flow_holds_the_catalog_answers_but_records_nothing(home, caplog):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('ready', flush=True); "
            "sys.stdin.read()",
            home.storage.catalog,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        with MemorySearch(home) as s:
            assert s.recording is False
            hits = s.search("cello", owner="o1", k=1, now=T0 + 3 * DAY)
        assert [h["text"] for h in hits] == ["Caroline plays the cello"]
        assert "not recorded" in caplog.text
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert _catalog_rows(home, "SELECT count(*) AS n FROM queries")[0]["n"] == 0


def test_search_scores_follow_the_formula_and_weights_change_the_order(home):
    import math

    hits = search_memories(
        home.with_keys(rank_rule="weighted"),
        "Caroline hiking cello",
        owner="o1",
        k=3,
        strategy="hybrid",
        now=T0 + 2 * DAY,
        record=False,
    )
    best_keyword = max(h["keyword"] for h in hits)
    assert best_keyword > 0
    for h in hits:
        similarity = max(0.0, h["similarity"])
        assert h["relevance"] == round(
            similarity + 0.5 * (1 - similarity) * h["keyword"] / max(best_keyword, 6.0), 6
        )
        recency = 0.5 ** ((T0 + 2 * DAY - h["valid_from"]) / timedelta(days=365))
        assert h["recency"] == round(recency, 6)
        assert h["score"] == round(
            0.6 * h["relevance"]
            + 0.2 * 0.7
            + 0.1 * h["recency"]
            + 0.1 * math.log1p(0) / math.log(11),
            6,
        )
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    recent_first = home.with_keys(
        rank_rule="weighted", rank_weights={"relevance": 0.0, "confidence": 0.0, "recency": 1.0}
    )
    ordered = search_memories(
        recent_first, "Caroline hiking cello", owner="o1", k=3, now=T0 + 2 * DAY, record=False
    )
    assert [h["valid_from"] for h in ordered] == [T0 + 2 * DAY, T0 + DAY, T0]
