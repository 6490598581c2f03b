"""Bad settings stop ``skillstream run`` before any work: the real CLI in a subprocess exits with a
one-line error naming the setting, and no span is marked done, so once the setting is fixed the
same home processes every span (none counts as already processed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.factories import conversation_rows, write_jsonl

pytestmark = pytest.mark.slow

BAD = [
    ({"SKILLSTREAM_DEFAULT_SCOPE": "privat"}, (), "default_scope"),
    ({"SKILLSTREAM_POLICIES": '{"*": {"default_scope": "nope"}}'}, (), "default_scope"),
    (
        {"SKILLSTREAM_POLICIES": '{"*": {"writable_scopes": ["fleet"]}}'},
        (),
        "writable_scopes",
    ),
    ({"SKILLSTREAM_MEMORY_CAPACITIES": '{"Foo": 3}'}, (), "memory_capacities"),
    ({"SKILLSTREAM_RANK_WEIGHTS": '{"relevance": -1}'}, (), "rank_weights"),
    ({"SKILLSTREAM_DISTILL": "ture"}, (), "SKILLSTREAM_DISTILL"),
    ({"SKILLSTREAM_SPAN_TOKENS": "0"}, (), "SKILLSTREAM_SPAN_TOKENS"),
    ({"SKILLSTREAM_SPAN_TOKENS": "-5"}, (), "SKILLSTREAM_SPAN_TOKENS"),
    ({"SKILLSTREAM_DEFAULT_CONFIDENCE": "7"}, (), "SKILLSTREAM_DEFAULT_CONFIDENCE"),
    ({"SKILLSTREAM_EMBED_BATCH": "0"}, (), "SKILLSTREAM_EMBED_BATCH"),
    ({"SKILLSTREAM_IDLE_GAP_S": "nan"}, (), "SKILLSTREAM_IDLE_GAP_S"),
    ({"SKILLSTREAM_LLM_BASE_URL": "localhost:8080"}, (), "SKILLSTREAM_LLM_BASE_URL"),
    ({}, ("--workers", "0"), "--workers"),
    ({}, ("--workers", "-3"), "--workers"),
]


def _run(home: Path, src: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("skillstream")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SKILLSTREAM_")}
    return subprocess.run(
        [str(exe), "--home", str(home), "run", "--source", str(src), "--json", *args],
        capture_output=True,
        text=True,
        env={**clean, "HF_HUB_OFFLINE": "1", **env},
        timeout=600,
    )


def _done_spans(home: Path) -> int:
    catalog = home / "catalog.duckdb"
    if not catalog.exists():
        return 0
    import duckdb

    con = duckdb.connect(str(catalog), read_only=True)
    try:
        tables = {r[0] for r in con.sql("select table_name from duckdb_tables()").fetchall()}
        if "spans" not in tables:
            return 0
        return int(con.sql("select count(*) from spans").fetchone()[0])  # type: ignore[index]
    finally:
        con.close()


def test_bad_settings_stop_the_run_before_any_span_is_marked_done(tmp_path):
    home = tmp_path / "home"
    src = write_jsonl(tmp_path / "chat.jsonl", conversation_rows("c1", 12))
    for env, args, named in BAD:
        proc = _run(home, src, env, *args)
        assert proc.returncode == 2, (env, args, proc.stdout, proc.stderr[-2000:])
        assert named in proc.stderr and "Traceback" not in proc.stderr, (env, proc.stderr)
        assert _done_spans(home) == 0, (env, args)
    (home / "skillstream.toml").parent.mkdir(parents=True, exist_ok=True)
    (home / "skillstream.toml").write_bytes(b"llm_model = '\xff\xfe'\n")
    proc = _run(home, src, {})
    assert proc.returncode == 2 and "not UTF-8" in proc.stderr and _done_spans(home) == 0
    (home / "skillstream.toml").unlink()
    # the typo fixed: every span is processed now, none counts as already processed
    proc = _run(home, src, {"SKILLSTREAM_DEFAULT_SCOPE": "private"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout[proc.stdout.index("{") :])
    assert summary["spans_processed"] > 0 and summary["spans_already_processed"] == 0
    assert summary["memory_changes"] > 0 and _done_spans(home) == summary["spans_processed"]
