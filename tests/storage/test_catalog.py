"""The DuckDB catalog on real files: DDL from schemas, upserts, views over LanceDB, locking."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

from skillstream import tables as sch
from skillstream.errors import InputError
from skillstream.storage.catalog import (
    VIEWS,
    Catalog,
    CatalogLockedError,
    duckdb_type,
    register_view,
    table_ddl,
)
from skillstream.storage.lance import MemoryIndex

from .conftest import DIM, make_memory


@pytest.fixture
def catalog(tmp_path):
    cat = Catalog(str(tmp_path / "cat" / "catalog.duckdb"))
    yield cat
    cat.close()


@pytest.fixture
def new_table(monkeypatch):
    """Declare one more catalog table for one test."""

    def declare(name, schema):
        monkeypatch.setitem(sch.CATALOG_TABLES, name, schema)

    return declare


@pytest.mark.parametrize(
    ("arrow", "duck"),
    [
        (pa.string(), "VARCHAR"),
        (pa.list_(pa.string()), "VARCHAR[]"),
        (pa.timestamp("us", tz="UTC"), "TIMESTAMPTZ"),
        (pa.timestamp("us"), "TIMESTAMP"),
        (pa.int32(), "INTEGER"),
        (pa.int64(), "BIGINT"),
        (pa.float64(), "DOUBLE"),
        (pa.bool_(), "BOOLEAN"),
        (pa.list_(pa.float32(), 4), "FLOAT[4]"),
    ],
)
def test_duckdb_type(arrow, duck):
    assert duckdb_type(arrow) == duck


def test_duckdb_type_unknown():
    with pytest.raises(ValueError, match="no DuckDB type"):
        duckdb_type(pa.struct([("a", pa.int8())]))


def test_ddl_quotes_and_keys():
    ddl = table_ddl("spans", sch.SPANS)
    assert ddl.startswith('CREATE TABLE IF NOT EXISTS "spans"')
    assert '"span_id" VARCHAR NOT NULL' in ddl
    assert '"memory_ids" VARCHAR[]' in ddl
    assert 'PRIMARY KEY ("span_id")' in ddl


def test_tables_created_from_schemas(catalog):
    for name, schema in sch.CATALOG_TABLES.items():
        cols = catalog.sql(f'DESCRIBE "{name}"').to_pylist()
        assert [c["column_name"] for c in cols] == schema.names
        for c, f in zip(cols, schema, strict=True):
            expected = duckdb_type(f.type).replace("TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE")
            assert c["column_type"] == expected
            assert (c["null"] == "NO") == (not f.nullable)
        keys = [c["column_name"] for c in cols if c["key"] == "PRI"]
        assert keys == [sch.primary_key(schema)]


GOLDEN = Path(__file__).parents[1] / "golden" / "declarations" / "catalog_ddl.json"
FRESH_CATALOG = """
import json, sys
from skillstream.storage.catalog import Catalog, table_ddl
from skillstream import tables
cat = Catalog(sys.argv[1])
cols = cat.sql(
    "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns "
    "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position"
).to_pylist()
ddl = {t.name: table_ddl(t.name, t.schema) for t in tables.CATALOG}
print(json.dumps({"ddl": ddl, "tables": sorted({c["table_name"] for c in cols}), "columns": cols}))
"""


def test_a_fresh_catalog_has_exactly_the_declared_tables(tmp_path):
    """Whatever else is imported (here: nothing), a new catalog holds every declared table, with
    the DDL the catalog had before the tables were declared in one module."""
    out = subprocess.run(
        [sys.executable, "-c", FRESH_CATALOG, str(tmp_path / "c.duckdb")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(out) == json.loads(GOLDEN.read_text())
    assert {t.name for t in sch.CATALOG} == set(sch.CATALOG_TABLES)


def test_fts_extension_is_loaded_where_user_sql_runs(catalog, tmp_path):
    """The connection a user's SQL runs on (``skillstream sql``, ``Home.sql``) has DuckDB's
    full-text functions; skillstream's own reads and writes do not pay for loading them."""
    query = "SELECT loaded FROM duckdb_extensions() WHERE extension_name = 'fts'"
    assert catalog.sql(query).to_pylist() in ([], [{"loaded": False}])
    catalog.close()
    reader = Catalog(str(tmp_path / "cat" / "catalog.duckdb"), read_only=True)
    try:
        assert reader.sql(query).to_pylist() in ([], [{"loaded": False}])
        assert reader.for_user_sql() is reader
        assert reader.sql(query).to_pylist() == [{"loaded": True}]
        assert reader.sql("SELECT stem('running', 'english') AS s").to_pylist() == [{"s": "run"}]
    finally:
        reader.close()


def test_a_writable_open_reads_the_columns_of_every_table_in_one_query(tmp_path, monkeypatch):
    path = str(tmp_path / "cat" / "catalog.duckdb")
    Catalog(path).close()
    asked: list[str] = []
    monkeypatch.setattr(Catalog, "columns", lambda self, table: asked.append(table) or [])
    cat = Catalog(path)
    try:
        assert asked == []  # every declared table was found in the one read of the columns
        assert set(sch.CATALOG_TABLES) <= {
            r["table_name"]
            for r in cat.sql("SELECT table_name FROM information_schema.tables").to_pylist()
        }
    finally:
        cat.close()


def _dead(i, reason="bad"):
    return {"id": f"d{i}", "source": "f", "position": str(i), "stage": "parse", "reason": reason}


def test_upsert_replaces_and_dedupes(catalog):
    catalog.upsert("dead_letters", [_dead(1), _dead(2)])
    catalog.upsert("dead_letters", [_dead(1, "first"), _dead(1, "it's the last")])
    rows = catalog.sql("SELECT id, reason FROM dead_letters ORDER BY id").to_pylist()
    assert rows == [{"id": "d1", "reason": "it's the last"}, {"id": "d2", "reason": "bad"}]


def test_upsert_arrow_table_and_insert_ignore(catalog):
    table = pa.table(
        {
            "id": ["d1", "d2"],
            "source": ["s", "s"],
            "position": ["1", "2"],
            "stage": ["x", "x"],
            "reason": ["r1", "r2"],
            "ignored": [1, 2],
        }
    )
    assert catalog.upsert("dead_letters", table) == 2
    assert catalog.insert_ignore("dead_letters", [_dead(1, "new"), _dead(3, "new")]) == 2
    rows = catalog.sql("SELECT id, reason, payload FROM dead_letters ORDER BY id").to_pylist()
    assert rows == [
        {"id": "d1", "reason": "r1", "payload": None},
        {"id": "d2", "reason": "r2", "payload": None},
        {"id": "d3", "reason": "new", "payload": None},
    ]


def test_upsert_errors(catalog):
    with pytest.raises(InputError, match="not a catalog table"):
        catalog.upsert("nope", [{"a": 1}])
    with pytest.raises(InputError, match="'reason'.*required"):
        catalog.upsert("dead_letters", [{"id": "x", "source": "s", "position": "1", "stage": "p"}])


def test_transaction_rolls_back(catalog):
    with pytest.raises(RuntimeError):
        with catalog.transaction():
            catalog.upsert("dead_letters", [_dead(1)])
            raise RuntimeError("boom")
    assert catalog.count("dead_letters") == 0


def test_sql_binds_parameters(catalog):
    catalog.upsert("dead_letters", [_dead(1, "x'); DROP TABLE spans; --")])
    out = catalog.sql("SELECT id FROM dead_letters WHERE reason = ?", ["x'); DROP TABLE spans; --"])
    assert out.column("id").to_pylist() == ["d1"]
    assert catalog.count("spans") == 0


def test_processed_span_ids(catalog):
    base = {"owner_id": "o", "conversation_id": "c"}
    catalog.upsert(
        "spans", [dict(base, span_id="a", status="done"), dict(base, span_id="b", status="failed")]
    )
    assert catalog.processed_span_ids() == {"a"}


def test_a_table_declared_after_opening_is_created(catalog, new_table):
    schema = pa.schema(
        [
            pa.field("version_id", pa.string(), nullable=False),
            pa.field("n", pa.int64()),
            pa.field("tags", pa.list_(pa.string())),
        ],
        metadata={b"primary_key": b"version_id"},
    )
    new_table("skill_versions_test", schema)
    catalog.ensure_tables()
    assert catalog.count("skill_versions_test") == 0
    catalog.upsert("skill_versions_test", [{"version_id": "v", "n": 1, "tags": ["a"]}])
    catalog.upsert("skill_versions_test", [{"version_id": "v", "n": 2, "tags": ["b"]}])
    assert catalog.sql("SELECT n, tags FROM skill_versions_test").to_pylist() == [
        {"n": 2, "tags": ["b"]}
    ]


def test_new_column_is_added(tmp_path, new_table, monkeypatch):
    path = str(tmp_path / "c.duckdb")
    v1 = pa.schema([pa.field("k", pa.string(), nullable=False)], metadata={b"primary_key": b"k"})
    new_table("evolving_test", v1)
    with Catalog(path) as cat:
        cat.upsert("evolving_test", [{"k": "a"}])
    v2 = pa.schema(list(v1) + [pa.field("extra", pa.float64())], metadata=v1.metadata)
    monkeypatch.setitem(sch.CATALOG_TABLES, "evolving_test", v2)
    with Catalog(path) as cat:
        cat.upsert("evolving_test", [{"k": "b", "extra": 1.5}])
        rows = cat.sql("SELECT k, extra FROM evolving_test ORDER BY k").to_pylist()
    assert rows == [{"k": "a", "extra": None}, {"k": "b", "extra": 1.5}]


def _meta_rows(memories):
    rows = []
    for m in memories:
        row = m.row()
        row.pop("vector")
        rows.append(row)
    return rows


def test_memories_view_joins_lance(tmp_path, catalog):
    uri = str(tmp_path / "lancedb")
    assert catalog.attach_lance(uri) == []  # no LanceDB table yet: skipped quietly
    assert "memories" not in catalog.create_views()
    index = MemoryIndex(uri, DIM)
    mems = [make_memory(i) for i in range(4)]
    index.upsert(mems)
    catalog.upsert("memory_meta", _meta_rows(mems))
    assert catalog.attach_lance(uri) == ["memories"]
    count = catalog.sql("SELECT count(*) AS n FROM memories").to_pylist()[0]["n"]
    assert count == index.count() == 4
    cols = catalog.sql("SELECT * FROM memories LIMIT 1").column_names
    assert cols == sch.MEMORY_META.names + ["vector"]
    assert catalog.count("lance_memories") == 4
    vector = catalog.sql("SELECT vector FROM memories WHERE id = ?", [mems[0].id]).to_pylist()[0]
    assert vector["vector"] == pytest.approx(mems[0].vector)

    # the attached version is pinned until refreshed (memory_meta rows without a LanceDB row, such
    # as expired memories, stay in the view without a vector)
    more = [make_memory(i) for i in range(4, 6)]
    index.upsert(more)
    catalog.upsert("memory_meta", _meta_rows(more))

    def with_vectors() -> int:
        return catalog.sql("SELECT count(vector) AS n FROM memories").to_pylist()[0]["n"]

    assert (catalog.count("memories"), with_vectors()) == (6, 4)
    catalog.refresh_lance()
    assert with_vectors() == index.count() == 6


def test_registered_views(catalog):
    assert {"active_memories", "llm_usage"} <= set(catalog.create_views())
    try:
        assert catalog.register_view(
            "dead_letter_stages_test",
            "SELECT stage, count(*) AS n FROM dead_letters GROUP BY stage",
            needs=("dead_letters",),
        )
        catalog.upsert("dead_letters", [_dead(1), _dead(2)])
        assert catalog.sql("SELECT * FROM dead_letter_stages_test").to_pylist() == [
            {"stage": "parse", "n": 2}
        ]
        register_view("needs_missing_test", "SELECT * FROM lance_nothing", needs=("lance_nothing",))
        assert "needs_missing_test" not in catalog.create_views()
    finally:
        VIEWS.pop("dead_letter_stages_test", None)
        VIEWS.pop("needs_missing_test", None)


def test_read_only(tmp_path):
    path = str(tmp_path / "c.duckdb")
    with pytest.raises(InputError, match="does not exist"):
        Catalog.open_read_only(path)
    with Catalog(path) as cat:
        cat.upsert("dead_letters", [_dead(1)])
    with Catalog.open_read_only(path) as ro:
        assert ro.count("dead_letters") == 1
        assert "active_memories" in ro.create_views()
        with pytest.raises(Exception, match="read-only"):
            ro.upsert("dead_letters", [_dead(2)])


def test_read_only_while_another_process_writes(tmp_path):
    path = str(tmp_path / "c.duckdb")
    Catalog(path).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, duckdb
            con = duckdb.connect({path!r})
            print("ready", flush=True)
            sys.stdin.read()
        """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(CatalogLockedError, match="open for writing in another process"):
            Catalog.open_read_only(path)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    with Catalog.open_read_only(path) as ro:
        assert ro.count("spans") == 0
