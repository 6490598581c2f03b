"""One rule says whether a location is remote: a scheme ``xxx://`` other than ``file://``."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillstream.llm.cache import cache_path
from skillstream.settings import DEFAULT_HOME, Settings, is_remote, local_path


@pytest.mark.parametrize(
    "uri",
    ["s3://bucket/p", "gs://bucket", "GS://bucket/x", "oss://b/p", "memory://", "az://c/p",
     "local://tmp/x", "hf://datasets/x", "s3+custom://b"],
)  # fmt: skip
def test_any_scheme_but_file_is_remote(uri):
    assert is_remote(uri)
    with pytest.raises(ValueError, match="remote"):
        local_path(uri)


@pytest.mark.parametrize(
    "uri, path",
    [("./h", "h"), ("/tmp/h", "/tmp/h"), ("file:///tmp/h", "/tmp/h"), ("FILE:///tmp/h", "/tmp/h"),
     ("h/a://b", "h/a://b"), ("C:\\data\\h", "C:\\data\\h"), ("ducklake.db", "ducklake.db")],
)  # fmt: skip
def test_a_plain_path_or_file_uri_is_local(uri, path):
    assert not is_remote(uri)
    assert local_path(uri) == Path(path)


def test_a_remote_home_keeps_its_stores_remote_and_its_local_files_in_a_mirror():
    s = Settings.from_keys(home="gs://bucket/team")
    assert s.storage.remote
    assert (s.storage.lancedb, s.storage.artifacts) == (
        "gs://bucket/team/lancedb",
        "gs://bucket/team/artifacts",
    )
    assert s.storage.catalog == str(
        Path(DEFAULT_HOME, "remote", "gs", "bucket", "team", "catalog.duckdb")
    )
    assert cache_path("gs://bucket/team") == Path(DEFAULT_HOME) / "llm-cache.sqlite"
    local = Settings.from_keys(home="file:///tmp/h")
    assert not local.storage.remote and local.storage.catalog == "/tmp/h/catalog.duckdb"
    assert cache_path("file:///tmp/h") == Path("/tmp/h/llm-cache.sqlite")


def test_a_gs_home_creates_no_local_folder(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from skillstream.cli import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SKILLSTREAM_HOME", "gs://bucket/team")
    Settings.load()
    (tmp_path / "in.parquet").write_bytes(b"")
    CliRunner().invoke(cli, ["import", "memories", str(tmp_path / "in.parquet")])
    CliRunner().invoke(cli, ["--home", "gs://bucket/team", "config"])
    _write_task_skills(Settings.load(), monkeypatch)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]


def test_a_catalog_file_uri_is_read_as_its_path():
    assert Settings.from_keys(catalog="file:///tmp/c.duckdb").storage.catalog == "/tmp/c.duckdb"
    with pytest.raises(Exception, match="local"):
        Settings.from_keys(catalog="gs://bucket/c.duckdb")


def _write_task_skills(settings: Settings, monkeypatch) -> None:
    """The task-skill API's write path, with the stores left out (no bucket to write to)."""
    from contextlib import nullcontext

    import skillstream.storage.home as home
    import skillstream.storage.writer as writer
    from skillstream.services.publishing import Publisher
    from skillstream.services.task_skills import TaskSkillAPI

    monkeypatch.setattr(Publisher, "from_settings", classmethod(lambda cls, storage: None))
    monkeypatch.setattr(home, "open_stores", lambda *a, **k: nullcontext())
    monkeypatch.setattr(writer, "write_results", lambda *a, **k: None)
    TaskSkillAPI(settings)._write([])
