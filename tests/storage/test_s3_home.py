"""A home on S3 (a moto server on loopback): ``run``, ``search`` and ``sql`` through the CLI.

LanceDB tables and artifacts live under ``s3://bucket/prefix``; the DuckDB catalog stays on the
local disk, in a folder of its own per remote home (``./.skillstream/remote/s3/bucket/prefix``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillstream.cli import cli
from skillstream.settings import Settings
from skillstream.storage.artifacts import ArtifactStore
from tests.factories import conversation_rows, write_jsonl
from tests.storage.conftest import BUCKET, s3  # noqa: F401 - fixture

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("clean_env")]


def invoke(*args: str):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_run_search_and_sql_with_the_home_on_s3(tmp_path, s3, monkeypatch):  # noqa: F811
    endpoint, options = s3
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SKILLSTREAM_STORAGE_OPTIONS", json.dumps(options))
    monkeypatch.setenv("SKILLSTREAM_SPAN_TOKENS", "128")
    src = write_jsonl(
        tmp_path / "chats.jsonl", conversation_rows("c1", 40) + conversation_rows("c2", 30)
    )
    home_a, home_b = f"s3://{BUCKET}/homes/a", f"s3://{BUCKET}/homes/b"

    summary = json.loads(invoke("--home", home_a, "run", "--source", str(src), "--json"))
    assert (summary["messages"], summary["spans_failed"]) == (70, 0)
    assert summary["memory_changes"] > 0

    import s3fs

    fs = s3fs.S3FileSystem(
        key="testing", secret="testing", endpoint_url=endpoint, skip_instance_cache=True
    )
    assert fs.exists(f"{BUCKET}/homes/a/lancedb/memories.lance")
    assert not Path("lancedb").exists() and not Path(".skillstream/lancedb").exists()
    settings = Settings.load(home=home_a)
    assert (
        settings.storage.catalog == ".skillstream/remote/s3/skillstream-test/homes/a/catalog.duckdb"
    )
    assert (tmp_path / settings.storage.catalog).exists()

    rows = json.loads(
        invoke(
            "--home",
            home_a,
            "sql",
            "select count(*) as n, count(distinct id) as d from memories",
            "--json",
        )
    )
    n = rows[0]["n"]
    assert n == rows[0]["d"] > 5
    (spans,) = json.loads(
        invoke(
            "--home",
            home_a,
            "sql",
            "select count(*) as n from spans where status = 'done'",
            "--json",
        )
    )
    assert spans["n"] == summary["spans_processed"]

    hits = json.loads(
        invoke("--home", home_a, "search", "adopted a cat", "--owner", "c1", "--json")
    )
    assert hits and all(h["owner_id"] == "c1" for h in hits)
    assert any("Miso" in h["text"] for h in hits[:3])

    # artifacts (task-skill packages) go to the same home on S3
    store = ArtifactStore(settings.storage.artifacts, settings.storage.storage_options)
    url = store.put("skills/demo.zip", b"PK\x05\x06" + b"\0" * 18)
    assert url == f"s3://{BUCKET}/homes/a/artifacts/skills/demo.zip"
    assert fs.cat(f"{BUCKET}/homes/a/artifacts/skills/demo.zip").startswith(b"PK")

    # a second home in the same bucket has its own catalog: its ledger starts empty
    other = json.loads(invoke("--home", home_b, "run", "--source", str(src), "--json"))
    assert (other["spans_processed"], other["spans_already_processed"]) == (
        summary["spans_processed"],
        0,
    )
    rows_b = json.loads(
        invoke("--home", home_b, "sql", "select count(*) as n from memories", "--json")
    )
    assert rows_b[0]["n"] == n
