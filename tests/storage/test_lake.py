"""The DuckLake catalog (metadata in a real PostgreSQL, data files in a folder or on moto S3).

It must keep the storage contract of the DuckDB file: the same rows after the same writes, replays
that change nothing, version guards; and it must take several writing processes at once while
other processes read.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from skillstream.errors import ConfigError, InputError
from skillstream.settings import Settings
from skillstream.storage.catalog import Catalog, catalog_exists, open_catalog
from skillstream.storage.home import open_stores
from skillstream.storage.writer import write_results

from .conftest import BUCKET, DIM, make_dead_letter, make_memory, make_result

REPO = Path(__file__).resolve().parents[2]
TABLES = ("memory_meta", "memory_events", "spans", "dead_letters", "llm_calls")


def table_rows(cat: Catalog, table: str) -> list[dict]:
    rows = cat.sql(f'SELECT * FROM "{table}"').to_pylist()
    return sorted(rows, key=lambda r: str(sorted(r.items())))


def test_the_setting_is_strict_and_names_what_it_accepts():
    ok = Settings.from_keys(catalog="ducklake:postgres://me@db.example:5432/memories")
    assert ok.storage.shared_catalog and ok.storage.catalog.startswith("ducklake:")
    assert not Settings.from_keys(catalog_path="/tmp/x.duckdb").storage.shared_catalog
    assert Settings.from_keys(catalog_path="/tmp/x.duckdb").storage.catalog == "/tmp/x.duckdb"
    for bad in ("ducklake:mysql://me@h:1/db", "ducklake:postgres://h/db", "s3://b/catalog.duckdb"):
        with pytest.raises(ConfigError, match="setting catalog.*ducklake:postgres://USER@HOST"):
            Settings.from_keys(catalog=bad)


def test_same_rows_as_the_duckdb_file(tmp_path, lake_catalog):
    """The same writes, replayed, with an older version offered last: both catalogs agree."""
    file_home = Settings.from_keys(home=str(tmp_path / "file"))
    lake_home = Settings.from_keys(
        home=str(tmp_path / "lake"), catalog=lake_catalog, catalog_data=str(tmp_path / "data")
    )
    batch = [make_result(n, owner) for owner in ("a", "b'c") for n in range(3)]
    batch += [make_dead_letter(1)]
    newer = make_result(0, "a", memories=[make_memory(0, "a", text="newer text", version=3)])
    older = make_result(0, "a", memories=[make_memory(0, "a", text="older text", version=2)])
    got = {}
    for name, settings in (("file", file_home), ("lake", lake_home)):
        with open_stores(settings, DIM) as stores:
            assert stores.catalog.shared is (name == "lake")
            for items in (batch, batch, [newer], [older]):
                write_results(stores, items)
            stores.refresh()
            got[name] = {t: table_rows(stores.catalog, t) for t in TABLES}
            got[name]["memories_view"] = stores.catalog.count("memories")
    assert got["lake"] == got["file"]
    meta = {r["id"]: r for r in got["lake"]["memory_meta"]}
    assert meta["mem_a_0"]["text"] == "newer text" and meta["mem_a_0"]["version"] == 3
    assert len(got["lake"]["spans"]) == 6 and got["lake"]["memories_view"] == 12


def test_read_only_open_of_a_lake_that_was_never_written(lake_catalog):
    settings = Settings.from_keys(catalog=lake_catalog)
    with pytest.raises(InputError, match="no DuckLake catalog"):
        Catalog(lake_catalog, read_only=True)
    assert not catalog_exists(settings.storage)
    open_catalog(settings.storage).close()  # a writer creates it
    assert catalog_exists(settings.storage)


def test_data_files_on_s3(tmp_path, lake_catalog, s3):
    """With ``catalog_data`` on S3, DuckLake's Parquet files land in the bucket."""
    import s3fs

    endpoint, options = s3
    settings = Settings.from_keys(
        home=str(tmp_path / "home"),
        catalog=lake_catalog,
        catalog_data=f"s3://{BUCKET}/catalog_data",
        storage_options=options,
    )
    with open_stores(settings, DIM) as stores:
        write_results(stores, [make_result(n, "s3owner") for n in range(4)])
        stores.catalog.flush()
    fs = s3fs.S3FileSystem(
        key=options["aws_access_key_id"],
        secret=options["aws_secret_access_key"],
        endpoint_url=endpoint,
    )
    files = fs.find(f"{BUCKET}/catalog_data")
    assert any(f.endswith(".parquet") for f in files), files
    with open_catalog(settings.storage, read_only=True) as cat:
        assert cat.count("spans") == 4 and cat.count("memory_meta") == 8


def test_compact_merges_the_small_files_of_many_commits_and_keeps_every_row(tmp_path, lake_catalog):
    settings = Settings.from_keys(
        home=str(tmp_path / "home"), catalog=lake_catalog, catalog_data=str(tmp_path / "data")
    )
    with open_stores(settings, DIM) as stores:
        for n in range(6):  # six commits, each flushed to its own data files
            write_results(stores, [make_result(n, "compact")])
            stores.catalog.flush()
        rows = {t: table_rows(stores.catalog, t) for t in TABLES}
        got = stores.catalog.compact()
        assert got["data_files_after"] < got["data_files_before"], got
        assert {t: table_rows(stores.catalog, t) for t in TABLES} == rows
        write_results(stores, [make_result(6, "compact")])  # and it still takes writes
        assert stores.catalog.count("spans") == 7
    file_home = Settings.from_keys(home=str(tmp_path / "file"))
    with open_stores(file_home, DIM) as stores:
        assert stores.catalog.compact() == {}


WRITER = """
import sys
from skillstream.settings import Settings
from skillstream.storage.home import open_stores
from skillstream.storage.writer import write_results
from tests.storage.conftest import DIM, make_result

owner, batches = sys.argv[1], int(sys.argv[2])
settings = Settings.load()
with open_stores(settings, DIM) as stores:
    for n in range(batches):
        write_results(stores, [make_result(n, owner)])
"""


@pytest.mark.slow
def test_two_writer_processes_and_a_reader_at_once(tmp_path, lake_catalog):
    """Two processes write their own owners at the same time (LanceDB and the catalog) while this
    process queries the catalog: nothing is lost, nothing is duplicated, every query answers."""
    home = tmp_path / "home"
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO),
        SKILLSTREAM_HOME=str(home),
        SKILLSTREAM_CATALOG=lake_catalog,
        SKILLSTREAM_CATALOG_DATA=str(tmp_path / "data"),
    )
    settings = Settings.from_keys(
        home=str(home), catalog=lake_catalog, catalog_data=str(tmp_path / "data")
    )
    open_catalog(settings.storage).close()  # created once, so the writers only write
    batches = 12
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, owner, str(batches)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for owner in ("w1", "w2")
    ]
    seen = []
    try:
        while any(p.poll() is None for p in procs):
            with open_catalog(settings.storage, read_only=True) as cat:
                seen.append(cat.count("spans"))
            time.sleep(0.2)
        outputs = [p.communicate(timeout=300)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert seen and seen == sorted(seen)  # readers see commits grow, never a partial state
    with open_stores(settings, DIM, read_only=True) as stores:
        cat = stores.catalog
        assert cat.count("spans") == 2 * batches
        assert cat.count("memory_meta") == 2 * batches * 2
        ids = [m["id"] for m in stores.index.table.table.to_arrow().to_pylist()]
        assert len(ids) == len(set(ids)) == 2 * batches * 2
        authors = cat.sql(
            "SELECT DISTINCT author FROM ducklake_snapshots('lake') WHERE author IS NOT NULL"
        ).to_pylist()
        assert len(authors) == 2  # both processes committed


def test_any_duckdb_client_that_attaches_the_catalog_sees_memories(tmp_path, lake_catalog):
    """A plain DuckDB connection (not this program): load the wheels' extensions, attach the
    DuckLake catalog, and the stored ``memories`` view joins the catalog with LanceDB."""
    import duckdb

    from skillstream.settings import lake_parts
    from skillstream.storage.catalog import extension_path

    settings = Settings.from_keys(
        home=str(tmp_path / "home"), catalog=lake_catalog, catalog_data=str(tmp_path / "data")
    )
    with open_stores(settings, DIM) as stores:
        write_results(stores, [make_result(n, owner) for owner in ("a", "b") for n in range(3)])
    part = lake_parts(lake_catalog)
    assert part is not None
    con = duckdb.connect()
    for name in ("postgres_scanner", "ducklake", "lance"):
        con.execute(f"LOAD '{extension_path(name)}'")
    con.execute(
        f"ATTACH 'ducklake:postgres:dbname={part['dbname']} host={part['host']} "
        f"port={part['port']} user={part['user']}' AS lake (READ_ONLY)"
    )
    n, width = con.execute("SELECT count(*), min(len(vector)) FROM lake.memories").fetchone()
    assert (n, width) == (12, DIM)
    con.close()


def test_the_query_commands_read_a_shared_catalog(tmp_path, lake_catalog):
    """sql, stats, history and skills list on DuckLake."""
    import json

    from click.testing import CliRunner

    from skillstream.cli import cli

    home = tmp_path / "home"
    settings = Settings.from_keys(
        home=str(home), catalog=lake_catalog, catalog_data=str(tmp_path / "data")
    )
    with open_stores(settings, DIM) as stores:
        write_results(stores, [make_result(n, "a") for n in range(3)])
    env = {"SKILLSTREAM_CATALOG": lake_catalog, "SKILLSTREAM_CATALOG_DATA": str(tmp_path / "data")}
    runner = CliRunner()

    def run(*args: str) -> str:
        out = runner.invoke(cli, ["--home", str(home), *args], env=env)
        assert out.exit_code == 0, out.output
        return out.stdout

    assert json.loads(run("sql", "select count(*) as n from memories", "--json"))[0]["n"] == 6
    stats = json.loads(run("stats", "--json"))
    assert stats["memories"] == 6 and stats["tables"]["spans"] == 3
    assert "ducklake_snapshot" not in stats["tables"]  # DuckLake's own tables are not ours
    assert "mem_a_0" in run("history", "mem_a_0", "--owner", "a", "--json")
    run("skills", "list", "--json")
