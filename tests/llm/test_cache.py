"""The response cache: SQLite file shared by threads and processes, and the in-memory variant."""

from __future__ import annotations

import dataclasses
import sqlite3
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest

from skillstream.errors import ConfigError
from skillstream.llm.cache import CachedAnswer, MemoryCache, SqliteCache, cache_path, open_cache
from skillstream.settings import Settings

ANSWER = CachedAnswer(
    text='{"ops": []}', prompt_tokens=120, completion_tokens=7, model="m", purpose="extract"
)


def dataclassed(**kw) -> CachedAnswer:
    return dataclasses.replace(ANSWER, **kw)


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_round_trip(tmp_path: Path, kind: str) -> None:
    cache = SqliteCache(tmp_path / "c.sqlite") if kind == "sqlite" else MemoryCache()
    assert cache.get("k1") is None
    cache.put("k1", ANSWER)
    got = cache.get("k1")
    assert got is not None
    assert (got.text, got.prompt_tokens, got.completion_tokens, got.model, got.purpose) == (
        '{"ops": []}',
        120,
        7,
        "m",
        "extract",
    )
    cache.put("k1", CachedAnswer(text="[]", prompt_tokens=1, completion_tokens=1))
    assert cache.get("k1").text == "[]"  # type: ignore[union-attr]
    assert len(cache) == 1
    cache.close()


def test_sqlite_file_is_wal_and_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "llm-cache.sqlite"
    with SqliteCache(path) as cache:
        cache.put("k", dataclassed(created_at=datetime(2024, 1, 1, tzinfo=UTC)))
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with SqliteCache(path) as again:
        got = again.get("k")
        assert got is not None and got.created_at == datetime(2024, 1, 1, tzinfo=UTC)


def test_sqlite_is_thread_safe(tmp_path: Path) -> None:
    cache = SqliteCache(tmp_path / "c.sqlite")

    def work(i: int) -> str | None:
        cache.put(f"k{i}", dataclassed(text=f"t{i}"))
        got = cache.get(f"k{i}")
        return got.text if got else None

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(200)))
    assert results == [f"t{i}" for i in range(200)]
    assert len(cache) == 200


WRITER = textwrap.dedent(
    """
    import sys
    from skillstream.llm.cache import CachedAnswer, SqliteCache
    path, prefix = sys.argv[1], sys.argv[2]
    cache = SqliteCache(path)
    for i in range(150):
        answer = CachedAnswer(text=f"{prefix}{i}", prompt_tokens=i, completion_tokens=1)
        cache.put(f"{prefix}{i}", answer)
        assert cache.get(f"{prefix}{i}") is not None
    print(len(cache))
    """
)


def test_sqlite_is_safe_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cache = SqliteCache(path)  # the file exists and is open here while the others write
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), p], stdout=subprocess.PIPE, text=True
        )
        for p in ("a", "b", "c")
    ]
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out
    assert len(cache) == 450
    got = cache.get("b149")
    assert got is not None and (got.text, got.prompt_tokens) == ("b149", 149)


def test_not_a_database_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "llm-cache.sqlite"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ConfigError, match="cannot open it as SQLite"):
        SqliteCache(path)


def test_open_cache_follows_settings(tmp_path: Path) -> None:
    assert open_cache(Settings.from_keys(llm_cache=False).llm, str(tmp_path)) is None
    cache = open_cache(Settings.from_keys().llm, str(tmp_path))
    assert isinstance(cache, SqliteCache) and cache.path == tmp_path / "llm-cache.sqlite"
    cache.close()
    assert cache_path("s3://bucket/prefix") == Path(".skillstream") / "llm-cache.sqlite"
