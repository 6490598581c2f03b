"""MemoryIndex and LanceTable on real LanceDB folders (and on S3 served by moto)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from skillstream.errors import InputError
from skillstream.storage.lance import LanceTable, MemoryIndex, connect

from .conftest import BUCKET, DIM, T0, make_memory, vec


@pytest.fixture
def index(tmp_path):
    return MemoryIndex(str(tmp_path / "lancedb"), DIM)


def test_upsert_is_idempotent(index):
    mems = [make_memory(i) for i in range(5)]
    index.upsert(mems)
    first = index.table.scan().sort_by("id")
    index.upsert(mems)
    assert index.count() == 5
    assert index.table.scan().sort_by("id").equals(first)
    assert index.table.to_arrow().sort_by("id").equals(first)


def test_newer_version_wins_across_upserts(index):
    index.upsert([make_memory(1, text="v2 text", version=2)])
    index.upsert([make_memory(1, text="stale v1 text", version=1)])
    (m,) = index.owner_memories("u1")
    assert (m.text, m.version) == ("v2 text", 2)
    index.upsert([make_memory(1, text="v3 text", version=3)])
    assert index.owner_memories("u1")[0].text == "v3 text"
    index.upsert([make_memory(1, text="v3 again", version=3)])  # equal version replaces
    assert index.owner_memories("u1")[0].text == "v3 again"
    assert index.count() == 1


def test_batch_with_duplicate_ids(index):
    batch = [
        make_memory(1, text="v3", version=3),
        make_memory(1, text="v2", version=2),
        make_memory(2, text="first", version=1),
        make_memory(2, text="last", version=1),
    ]
    assert index.upsert(batch) == 2
    got = {m.id: m.text for m in index.owner_memories("u1")}
    assert got == {"mem_u1_1": "v3", "mem_u1_2": "last"}


def test_owner_memories_round_trip(index):
    m = make_memory(7, owner="o'neil", event_ts=T0, source_message_ids=["a", "b"], reinforcement=2)
    index.upsert([m, make_memory(8, owner="other")])
    (back,) = index.owner_memories("o'neil")
    assert back.vector == pytest.approx(m.vector)
    back.vector = m.vector
    assert back == m
    assert index.owner_memories("o'neil", statuses=["archived"]) == []


def test_owner_memories_read_vectors_as_arrays_equal_to_the_rows(index):
    from skillstream.storage.lance import memories_from_arrow, memory_from_row, owner_filter

    written = [make_memory(i, owner="u1", source_message_ids=[f"m{i}"]) for i in range(5)]
    index.upsert(written)
    got = index.owner_memories("u1")
    table = index.table.scan(owner_filter("u1"))
    rows = [memory_from_row(r) for r in table.to_pylist()]
    assert [m.id for m in got] == [m.id for m in rows]
    got[0].vector[0] += 1.0  # type: ignore[index]  # writable, and only its own row changes
    assert got[1].vector.tolist() == rows[1].vector  # type: ignore[union-attr]
    for m, r in zip(got[1:], rows[1:], strict=True):
        assert isinstance(m.vector, np.ndarray) and m.vector.dtype == np.float32
        assert m.vector.tolist() == r.vector  # the stored float32 values, bit for bit
        m.vector = r.vector
        assert m == r
    # a null vector (never written by the index, but a table may hold one) reads as None
    vectors = table.column("vector").to_pylist()
    holed = table.set_column(
        table.schema.get_field_index("vector"),
        table.schema.field("vector"),
        pa.array([None, *vectors[1:]], table.schema.field("vector").type),
    )
    back = memories_from_arrow(holed)
    assert back[0].vector is None
    assert [m.vector.tolist() for m in back[1:]] == vectors[1:]  # type: ignore[union-attr]


def test_records_read_timestamps_as_the_instants_stored():
    """``to_records`` builds UTC timestamps from their integers; every value equals what
    ``to_pylist`` gives, nulls stay ``None``, other types and time zones take ``to_pylist``."""
    from datetime import UTC, datetime, timedelta

    from skillstream.storage.lance import to_records

    at = [datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC), None]
    at.append(datetime(2024, 2, 29, 12, 30, 1, 123_456, tzinfo=UTC))
    table = pa.table(
        {
            "id": ["a", "b", "c"],
            "at": pa.array(at, pa.timestamp("us", tz="UTC")),
            "full": pa.array([at[0], at[2], at[2]], pa.timestamp("us", tz="UTC")),
            "local": pa.array(at, pa.timestamp("us", tz="Europe/Paris")),
            "naive": pa.array([a and a.replace(tzinfo=None) for a in at], pa.timestamp("us")),
            "tags": [["x"], None, []],
        }
    )
    got = to_records(table)
    assert got == table.to_pylist()
    assert [r["at"] for r in got] == at and got[1]["at"] is None
    assert all(r["full"].utcoffset() == timedelta(0) for r in got)
    assert got[2]["at"].isoformat() == "2024-02-29T12:30:01.123456+00:00"


def test_upsert_refuses_missing_or_wrong_vectors(index):
    with pytest.raises(InputError, match="no vector"):
        index.upsert([make_memory(1, vector=None)])
    with pytest.raises(InputError, match="3 dimensions"):
        index.upsert([make_memory(1, vector=[0.1, 0.2, 0.3])])
    assert index.count() == 0


@pytest.fixture
def populated(index):
    owners = ["alice", "o'brien", "o''x"]
    topics = ["hiking in the alps", "sourdough baking", "chess openings", "jazz piano"]
    mems = []
    for oi, owner in enumerate(owners):
        for ti, topic in enumerate(topics):
            mems.append(make_memory(oi * 10 + ti, owner=owner, text=f"{owner} likes {topic}"))
    mems.append(
        make_memory(99, owner="o'brien", text="o'brien likes hiking, archived", status="archived")
    )
    index.upsert(mems)
    return index, {m.id: m for m in mems}


def test_hybrid_search_with_quoted_owner(populated):
    index, mems = populated
    target = mems["mem_o'brien_10"]  # o'brien, hiking
    hits = index.search("hiking alps", np.array(target.vector), owner="o'brien", k=3)
    assert hits[0]["id"] == target.id
    assert {h["owner_id"] for h in hits} == {"o'brien"}
    assert "vector" not in hits[0] and "score" in hits[0]
    assert all(h["status"] == "generated" for h in hits)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


def test_vector_search(populated):
    index, mems = populated
    target = mems["mem_o''x_22"]
    hits = index.search(None, np.array(target.vector), owner="o''x", k=2)
    assert hits[0]["id"] == target.id
    assert hits[0]["score"] == pytest.approx(1.0)  # distance 0
    assert {h["owner_id"] for h in hits} == {"o''x"}
    assert len(index.search(None, np.array(target.vector), k=50)) == 12  # archived excluded
    assert len(index.search(None, np.array(target.vector), k=50, statuses=None)) == 13


def test_fts_search(populated):
    index, _ = populated
    hits = index.search("sourdough", None, owner="alice", k=5)
    assert [h["id"] for h in hits] == ["mem_alice_1"]
    assert hits[0]["score"] > 0
    hits = index.search("hiking", None, owner="o'brien", k=5, statuses=("generated", "archived"))
    assert {h["id"] for h in hits} == {"mem_o'brien_10", "mem_o'brien_99"}
    # query text is never SQL: quotes and keywords are just words
    assert index.search("o'brien' OR 1=1 --", None, owner="alice", k=5) == []
    assert index.search(None, None, owner="alice") == []


def test_search_extra_where_and_bad_vector(populated):
    index, _ = populated
    hits = index.search(
        "likes", None, k=20, where="memory_type = 'LongTermMemory' AND owner_id = 'alice'"
    )
    assert len(hits) == 4
    with pytest.raises(InputError, match="dimensions"):
        index.search(None, np.zeros(3), owner="alice")


def test_fts_index_created_once_and_optimize(tmp_path):
    uri = str(tmp_path / "lancedb")
    index = MemoryIndex(uri, DIM)
    index.upsert([make_memory(1, text="alpine lakes")])
    again = MemoryIndex(uri, DIM)
    indices = again.table.table.list_indices()
    assert [(i.index_type, i.columns) for i in indices] == [("FTS", ["text"])]
    again.upsert([make_memory(2, text="alpine meadows")])
    # rows written after the index are searchable before optimize ...
    assert len(again.search("alpine", None, k=5)) == 2
    again.optimize()
    stats = again.table.table.index_stats(indices[0].name)
    assert stats.num_unindexed_rows == 0
    assert len(again.search("alpine", None, k=5)) == 2


def test_missing_table_without_create(tmp_path):
    index = MemoryIndex(str(tmp_path / "lancedb"), DIM, create=False)
    assert index.count() == 0
    assert index.owner_memories("u1") == []
    assert index.search("x", np.zeros(DIM)) == []
    assert index.to_lance() is None
    with pytest.raises(InputError, match="does not exist"):
        index.upsert([make_memory(1)])


def test_lance_table_for_another_schema(tmp_path):
    """The generic table serves other tables with their own key and text column."""
    schema = pa.schema(
        [
            pa.field("skill_id", pa.string(), nullable=False),
            pa.field("owner_id", pa.string()),
            pa.field("name", pa.string()),
            pa.field("version", pa.int32()),
            pa.field("vector", pa.list_(pa.float32(), DIM)),
        ],
        metadata={b"primary_key": b"skill_id"},
    )
    table = LanceTable(
        connect(str(tmp_path / "db")),
        "task_skills",
        schema,
        fts_columns=("name",),
        version_column="version",
    )
    rows = [
        {
            "skill_id": "s1",
            "owner_id": "u",
            "name": "travel itinerary planning",
            "version": 1,
            "vector": vec(1),
        },
        {"skill_id": "s2", "owner_id": "u", "name": "bread baking", "version": 1, "vector": vec(2)},
        {
            "skill_id": "s1",
            "owner_id": "u",
            "name": "trip itinerary planning",
            "version": 2,
            "vector": vec(1),
        },
    ]
    assert table.upsert(rows) == 2
    table.upsert(pa.Table.from_pylist(rows[:2], schema=schema))  # stale v1 of s1 is ignored
    assert table.count() == 2
    hits = table.search("itinerary", vec(1), k=2)
    assert hits.column("skill_id").to_pylist()[0] == "s1"
    assert hits.column("name").to_pylist()[0] == "trip itinerary planning"
    assert "vector" not in hits.column_names and "score" in hits.column_names
    with pytest.raises(InputError, match="required"):
        table.upsert([{"owner_id": "u"}])


def test_memory_index_on_s3(s3):
    endpoint, options = s3
    uri = f"s3://{BUCKET}/lancedb"
    index = MemoryIndex(uri, DIM, storage_options=options)
    index.upsert([make_memory(i, text=f"s3 memory {i}") for i in range(3)])
    index.upsert([make_memory(0, text="s3 memory 0 updated", version=2)])
    again = MemoryIndex(uri, DIM, storage_options=options)
    assert again.count() == 3
    hits = again.search("updated", np.array(vec(0)), owner="u1", k=1)
    assert hits[0]["text"] == "s3 memory 0 updated"
    import s3fs

    fs = s3fs.S3FileSystem(key="testing", secret="testing", endpoint_url=endpoint)
    assert fs.exists(f"{BUCKET}/lancedb/memories.lance")


def test_concurrent_openers_create_one_table_and_index(tmp_path):
    """The flow opens the index in its extraction threads while the sink opens it too."""
    from concurrent.futures import ThreadPoolExecutor

    uri = str(tmp_path / "lancedb")
    with ThreadPoolExecutor(4) as pool:
        indexes = list(pool.map(lambda _: MemoryIndex(uri, DIM), range(4)))
    indices = indexes[0].table.table.list_indices()
    assert [(i.index_type, i.columns) for i in indices] == [("FTS", ["text"])]
    indexes[1].upsert([make_memory(1)])
    assert indexes[2].count() == 1
