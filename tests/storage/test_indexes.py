"""Indexes that appear when they pay: scalar indexes on the filter columns and an ANN index on the
vectors, created by ``optimize`` at the policy's thresholds; ANN search agrees with exact search,
and a filtered search stays exact."""

from __future__ import annotations

import numpy as np
import pytest

from skillstream.settings import Settings
from skillstream.storage.home import open_index
from skillstream.storage.lance import (
    MEMORY_INDEXES,
    IndexPolicy,
    MemoryIndex,
    owner_filter,
    session,
)

from .conftest import make_memory

WIDTH = 32


def clustered_vectors(n: int, seed: int = 7) -> np.ndarray:
    """Unit vectors around 40 centres, as sentence embeddings of many topics are."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(40, WIDTH))
    vectors = centres[rng.integers(0, 40, n)] + 0.45 * rng.normal(size=(n, WIDTH))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def memories(vectors: np.ndarray, owners: int = 20, start: int = 0) -> list:
    return [
        make_memory(start + i, owner=f"u{(start + i) % owners}", vector=v.tolist())
        for i, v in enumerate(vectors)
    ]


def test_indexes_are_created_when_the_table_crosses_the_thresholds(tmp_path):
    policy = IndexPolicy(scalar_rows=100, vector_rows=600, scalar=MEMORY_INDEXES)
    index = MemoryIndex(str(tmp_path / "db"), WIDTH, indexes=policy)
    vectors = clustered_vectors(600)

    index.upsert(memories(vectors[:99]))
    assert index.optimize() == []
    assert set(index.table.indexed_columns()) == {"text"}  # full-text only

    index.upsert(memories(vectors[99:100], start=99))
    made = index.optimize()
    assert made == [c for c, _ in MEMORY_INDEXES]
    kinds = index.table.indexed_columns()
    assert "BTree" in kinds["owner_id"] and "Bitmap" in kinds["status"]
    assert "vector" not in kinds

    index.upsert(memories(vectors[100:599], start=100))
    assert index.optimize() == []
    index.upsert(memories(vectors[599:], start=599))
    assert index.optimize() == ["vector"]
    assert "vector" in index.table.indexed_columns()
    assert index.optimize() == []  # nothing more to make; new rows are folded in


def test_ann_search_agrees_with_exact_search(tmp_path):
    """Recall@10 of the ANN index (unfiltered search) against exact search on the same rows."""
    vectors = clustered_vectors(3000)
    exact = MemoryIndex(str(tmp_path / "exact"), WIDTH, indexes=IndexPolicy())
    ann = MemoryIndex(
        str(tmp_path / "ann"), WIDTH, indexes=IndexPolicy(vector_rows=1000, scalar_rows=1000)
    )
    for index in (exact, ann):
        index.upsert(memories(vectors))
    assert "vector" in ann.optimize() and "vector" not in exact.table.indexed_columns()

    queries = clustered_vectors(60, seed=99)
    recall = []
    for q in queries:
        want = [h["id"] for h in exact.search(vector=q, k=10, statuses=None)]
        got = [h["id"] for h in ann.search(vector=q, k=10, statuses=None)]
        assert len(got) == 10
        recall.append(len(set(want) & set(got)) / 10)
    assert np.mean(recall) >= 0.95, np.mean(recall)


@pytest.mark.parametrize(
    ("kind", "made"), [("ivf_flat", "IvfFlat"), ("ivf_pq", "IvfPq"), ("ivf_hnsw_sq", "IvfHnswSq")]
)
def test_the_vector_index_type_is_a_setting(tmp_path, kind, made):
    settings = Settings.from_keys(
        home=str(tmp_path), index_scalar_rows=500, index_vector_rows=500, index_vector_type=kind
    )
    index = open_index(settings, WIDTH)
    vectors = clustered_vectors(600)
    index.upsert(memories(vectors))
    assert "vector" in index.optimize()
    assert index.table.indexed_columns()["vector"] == made
    q = vectors[5]
    assert index.search(vector=q, k=3, statuses=None)[0]["id"] == memories(vectors)[5].id


def test_a_filtered_search_stays_exact_with_the_ann_index(tmp_path):
    vectors = clustered_vectors(2000)
    index = MemoryIndex(
        str(tmp_path / "db"), WIDTH, indexes=IndexPolicy(vector_rows=500, scalar_rows=500)
    )
    index.upsert(memories(vectors, owners=200))
    index.optimize()
    owner = "u17"
    rows = [m for m in memories(vectors, owners=200) if m.owner_id == owner]
    for q in clustered_vectors(10, seed=3):
        got = index.search(vector=q, owner=owner, k=5)
        want = sorted(rows, key=lambda m: float(np.sum((np.asarray(m.vector) - q) ** 2)))[:5]
        assert [h["id"] for h in got] == [m.id for m in want]
        hybrid = index.search("memory", q, owner=owner, k=5)
        assert {h["owner_id"] for h in hybrid} == {owner}


@pytest.mark.parametrize("rows", [0, 50])
def test_the_thresholds_are_settings_and_zero_means_never(tmp_path, rows):
    settings = Settings.from_keys(
        home=str(tmp_path), index_scalar_rows=rows, index_vector_rows=rows
    )
    index = open_index(settings, WIDTH)
    index.upsert(memories(clustered_vectors(60)))
    made = index.optimize()
    assert bool(made) == bool(rows)
    assert ("owner_id" in index.table.indexed_columns()) == bool(rows)


def test_owner_hydration_reads_through_the_owner_index(tmp_path):
    """Once the owner index exists, hydrating an owner asks the index for its rows (Lance's plan
    shows a scalar-index query on owner_id) instead of filtering every row of the table."""
    index = MemoryIndex(
        str(tmp_path / "db"), WIDTH, indexes=IndexPolicy(scalar_rows=100, scalar=MEMORY_INDEXES)
    )
    vectors = clustered_vectors(300)
    index.upsert(memories(vectors, owners=30))
    where = owner_filter("u7")
    assert "ScalarIndexQuery" not in index.table.scan_plan(where)  # no index below the threshold
    index.optimize()
    plan = index.table.scan_plan(where)
    assert "ScalarIndexQuery" in plan and "owner_id_idx" in plan, plan
    got = index.owner_memories("u7")
    assert sorted(m.id for m in got) == sorted(
        m.id for m in memories(vectors, owners=30) if m.owner_id == "u7"
    )


WORDS = "hiking dinner sister painting guitar interview garden puppy travel coffee".split()


def test_hybrid_search_ranks_as_lancedb_rrf_hybrid_query(tmp_path):
    """The fused search (vector and full-text queries run one after the other, reciprocal-rank
    fusion here) returns the rows and scores of LanceDB's own hybrid query with RRFReranker."""
    from lancedb.rerankers import RRFReranker

    rng = np.random.default_rng(5)
    vectors = clustered_vectors(800)
    items = [
        make_memory(
            i,
            owner=f"u{i % 8}",
            text=" ".join(rng.choice(WORDS, size=int(rng.integers(2, 6)))),
            vector=v.tolist(),
        )
        for i, v in enumerate(vectors)
    ]
    index = MemoryIndex(str(tmp_path / "db"), WIDTH, indexes=IndexPolicy(scalar=MEMORY_INDEXES))
    index.upsert(items)
    index.optimize()
    tbl = index.table.table
    compared = 0
    for j, q in enumerate(clustered_vectors(40, seed=11)):
        text = f"{WORDS[j % len(WORDS)]} {WORDS[(3 * j) % len(WORDS)]}"
        owner = f"u{j % 8}"
        got = index.search(text, q, owner=owner, k=10, statuses=None)
        want = (
            tbl.search(query_type="hybrid", fts_columns=["text"])
            .vector(q)
            .text(text)
            .rerank(RRFReranker())
            .where(f"owner_id = '{owner}'", prefilter=True)
            .limit(10)
            .to_arrow()
        )
        assert [h["id"] for h in got] == want["id"].to_pylist()
        assert [h["score"] for h in got] == pytest.approx(want["_relevance_score"].to_pylist())
        compared += len(got)
    assert compared == 400


def test_hybrid_search_of_an_owner_without_memories_is_empty(tmp_path):
    index = MemoryIndex(str(tmp_path / "db"), WIDTH)
    index.upsert(memories(clustered_vectors(30)))
    q = clustered_vectors(1, seed=2)[0]
    assert index.search("memory", q, owner="nobody", k=5) == []
    assert index.search("zzzunknownword", q, owner="u1", k=5) != []  # vector hits alone
    assert index.search("zzzunknownword", owner="u1", k=5) == []


def test_a_small_write_to_a_large_table_is_searchable_before_its_index_refresh(tmp_path):
    """A few new rows do not make ``optimize`` rewrite the indexes of a large table; searches find
    them anyway (vector, full-text, owner filter), and enough of them trigger the refresh."""
    policy = IndexPolicy(scalar_rows=100, refresh_rows=50, refresh_share=0.1, scalar=MEMORY_INDEXES)
    index = MemoryIndex(str(tmp_path / "db"), WIDTH, indexes=policy)
    vectors = clustered_vectors(1200)
    index.upsert(memories(vectors[:1000]))
    index.optimize()
    assert not index.table.needs_refresh()

    fresh = [
        make_memory(5000 + i, owner="newcomer", text=f"zeppelin voyage {i}", vector=v.tolist())
        for i, v in enumerate(vectors[1000:1010])
    ]
    index.upsert(fresh)
    assert not index.table.needs_refresh()  # 10 rows behind: below 50
    index.optimize()
    tbl = index.table.table
    assert tbl.index_stats("owner_id_idx").num_unindexed_rows == 10  # not folded in

    assert {m.id for m in index.owner_memories("newcomer")} == {m.id for m in fresh}
    hits = index.search("zeppelin", owner="newcomer", k=20)
    assert {h["id"] for h in hits} == {m.id for m in fresh}
    near = index.search(vector=fresh[3].vector, owner="newcomer", k=1)
    assert near[0]["id"] == fresh[3].id

    index.upsert(memories(vectors[1010:1200], start=1010))
    assert index.table.needs_refresh()
    index.optimize()
    assert tbl.index_stats("owner_id_idx").num_unindexed_rows == 0
    assert not index.table.needs_refresh()


def test_reads_share_the_process_cache_and_it_stays_bounded(tmp_path):
    """Searches and owner reads go through one cached Lance session (a fresh dataset would load
    the indexes again on every read), and the session holds no more than its ``cache_mb``."""
    policy = IndexPolicy(scalar_rows=100, vector_rows=0, scalar=MEMORY_INDEXES)
    index = MemoryIndex(str(tmp_path / "db"), WIDTH, indexes=policy, cache_mb=1)
    vectors = clustered_vectors(2000)
    index.upsert(memories(vectors))
    assert "owner_id" in index.optimize()

    shared = session(1)
    assert index.to_lance().session().is_same_as(shared)
    assert not index.to_lance().session().is_same_as(session(2))
    for i in range(40):
        hits = index.search(f"memory {i}", vectors[i], owner=f"u{i % 20}", k=5)
        assert hits and all(h["owner_id"] == f"u{i % 20}" for h in hits)
        assert len(index.owner_memories(f"u{i % 20}")) == 100
    assert 0 < shared.size_bytes() <= 1024 * 1024
