"""``forget`` on a shared catalog: DuckLake on a real PostgreSQL with its Parquet files on moto S3,
LanceDB and the artifact store (task-skill packages) on S3 too. No marker of the forgotten owner is
left in any S3 object (Parquet read back row by row), any LanceDB version, any table of the lake or
of its PostgreSQL metadata (inlined rows included), the answer cache or the recovery folder; the
other owner is unchanged."""

from __future__ import annotations

import io
import json
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from skillstream.services.forget import forget_owner
from skillstream.settings import Settings
from skillstream.storage.catalog import open_catalog
from skillstream.storage.leases import run_lease
from skillstream.storage.lock import HomeBusyError
from tests.servers.processes import cli_env, run_cli
from tests.servers.s3 import fresh_bucket
from tests.services import forget_home as fh

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
]

BUCKET = "forget-shared"


def s3_objects(endpoint: str) -> dict[str, bytes]:
    """Every object of the bucket, zip members unpacked, Parquet files read row by row."""
    import pyarrow.parquet as pq
    import s3fs

    fs = s3fs.S3FileSystem(
        key="testing", secret="testing", endpoint_url=endpoint, skip_instance_cache=True
    )
    out: dict[str, bytes] = {}
    for key in fs.find(BUCKET):
        data = fs.cat_file(key)
        out[f"s3:{key}"] = data
        if data[:2] == b"PK":
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                for name in z.namelist():
                    out[f"s3:{key}!{name}"] = z.read(name)
        if key.endswith(".parquet"):
            rows = pq.read_table(io.BytesIO(data)).to_pylist()
            out[f"parquet:{key}"] = json.dumps(rows, default=str).encode()
    return out


def lake_rows(settings: Settings, postgres: Any) -> dict[str, bytes]:
    """Every table of the lake, read through DuckLake, and a dump of the whole PostgreSQL
    database that holds its metadata (inlined rows included)."""
    with open_catalog(settings.storage, read_only=True) as cat:
        names = cat.con.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_catalog = 'lake' AND table_schema = 'main' AND table_type = 'BASE TABLE'"
        ).fetchall()
        out = fh.duckdb_rows(cat.con, [(f'lake.main."{t}"', f"lake:{t}") for (t,) in names])
    database = settings.storage.catalog.rsplit("/", 1)[1]
    dump = subprocess.run(
        [
            str(postgres.bin / "pg_dump"),
            "-h",
            "127.0.0.1",
            "-p",
            str(postgres.port),
            "-U",
            "postgres",
            database,
        ],
        capture_output=True,
        check=True,
        timeout=120,
    )
    out["pg_dump"] = dump.stdout
    return out


def stored(
    home: Path, endpoint: str, settings: Settings, options: dict[str, Any], postgres: Any
) -> dict:
    out = fh.files(home)
    out.update(fh.sqlite_rows(home))
    out.update(s3_objects(endpoint))
    out.update(fh.lance_versions(settings.storage.lancedb, options))
    out.update(lake_rows(settings, postgres))
    return out


def test_a_shared_catalog_on_s3_keeps_no_marker(tmp_path, postgres, lake_catalog, s3_endpoint):
    options = fresh_bucket(s3_endpoint, BUCKET)
    keys = {
        "catalog": lake_catalog,
        "catalog_data": f"s3://{BUCKET}/catalog_data",
        "lancedb_uri": f"s3://{BUCKET}/lancedb",
        "artifacts_uri": f"s3://{BUCKET}/artifacts",
    }
    home = tmp_path / "home"
    env = {f"SKILLSTREAM_{k.upper()}": v for k, v in keys.items()}
    env["SKILLSTREAM_STORAGE_OPTIONS"] = json.dumps(options)
    fh.build(home, fh.write(tmp_path / "chat.jsonl", fh.rows()), home / "recovery", **env)
    settings = Settings.load(home=str(home), **keys, storage_options=options)

    before = stored(home, s3_endpoint, settings, options, postgres)
    where = fh.marked(before)
    assert set(where) == set(fh.MARKERS), where
    hits = {w for ws in where.values() for w in ws}
    assert "pg_dump" in hits
    for store in (
        "parquet:",
        "lance:memories",
        "lance:task_skills",
        "lake:memory_meta",
        "s3:forget-shared/artifacts/task-skills/",
        "sqlite:llm-cache",
        "sqlite:part-",
    ):
        assert any(h.startswith(store) for h in hits), store
    other = fh.owner_content(settings, fh.OTHER)
    assert other["lance:memories"] and other["packages"]

    # a run writing the shared catalog holds a lease: forget is refused and writes nothing
    with run_lease(settings.storage):
        with pytest.raises(HomeBusyError, match="being written by 1 run"):
            forget_owner(settings, fh.TARGET)
    with open_catalog(settings.storage, read_only=True) as cat:
        assert cat.sql("SELECT count(*) FROM erasures").column(0).to_pylist() == [0]

    out = run_cli(
        "forget",
        "--owner",
        fh.TARGET,
        "--yes",
        "--json",
        "--recovery-dir",
        str(home / "recovery"),
        env=cli_env(home, **env),
    )
    counts = json.loads(out.stdout)["counts"]
    assert counts["catalog"]["memory_meta"] > 0 and counts["catalog"]["files_deleted"] > 0
    assert counts["artifacts"]["packages"] >= 1

    assert fh.marked(stored(home, s3_endpoint, settings, options, postgres)) == {}
    assert fh.owner_content(settings, fh.OTHER) == other
    with open_catalog(settings.storage, read_only=True) as cat:
        assert cat.sql("SELECT status FROM erasures").column(0).to_pylist() == ["done"]
