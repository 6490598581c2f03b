"""Hostile input through the real CLI and stores: SQL that would write, secrets in odd places,
values a reader cannot hold, and generated hostile files among valid ones.

Each test runs the console script's ``main`` in this process on a real home (DuckDB catalog and
LanceDB in ``tmp_path``) and checks what the stores hold afterwards.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from skillstream.cli import main
from skillstream.connectors.files import FileSource
from skillstream.model import Message
from tests.connectors.hostile_files import READERS, hostile_files, valid_file
from tests.factories import chatgpt_export, conversation_rows, read_source, write_jsonl


def console(capsys, monkeypatch, *args: str) -> tuple[int, str, str]:
    """Run the console script's ``main`` in this process: (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["skillstream", *args])
    capsys.readouterr()
    code: int | str | None = 0
    try:
        main()
    except SystemExit as stop:
        code = stop.code
    out = capsys.readouterr()
    return (code if isinstance(code, int) else 1), out.out, out.err


def sql(capsys, monkeypatch, home: Path, query: str, *args: str) -> tuple[int, str, str]:
    return console(capsys, monkeypatch, "--home", str(home), "sql", query, *args)


def rows(capsys, monkeypatch, home: Path, query: str) -> list[dict]:
    code, out, err = sql(capsys, monkeypatch, home, query, "--json", "--max-rows", "0")
    assert code == 0, err
    return json.loads(out)


def stored_message_ids(capsys, monkeypatch, home: Path) -> set[str]:
    got = rows(capsys, monkeypatch, home, "select distinct unnest(message_ids) as m from spans")
    return {r["m"] for r in got}


def everything_stored(capsys, monkeypatch, home: Path) -> str:
    """Every row of every catalog table and of the memories, as JSON text."""
    tables = [r["name"] for r in rows(capsys, monkeypatch, home, "show tables")]
    assert "memory_meta" in tables and "dead_letters" in tables
    return "\n".join(
        json.dumps(rows(capsys, monkeypatch, home, f'select * from "{t}"')) for t in tables
    )


def digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }


@pytest.fixture(scope="module")
def small_home(tmp_path_factory) -> Path:
    from click.testing import CliRunner

    from skillstream.cli import cli

    root = tmp_path_factory.mktemp("hostile-sql")
    path = write_jsonl(root / "chat.jsonl", conversation_rows("ana", 12))
    res = CliRunner().invoke(cli, ["--home", str(root / "h"), "run", "--source", str(path)])
    assert res.exit_code == 0, res.output
    return root / "h"


# ---------------------------------------------------------------------------------------- SQL

WRITES = [
    "COPY (select 'x' as x) TO '{home}/catalog.duckdb' (FORMAT csv, USE_TMP_FILE false)",
    "COPY (select 'x' as x) TO '{home}/catalog.duckdb.wal' (FORMAT csv)",
    "COPY (select 'x' as x) TO '{home}/catalog.duckdb.tmp/x.csv' (FORMAT csv)",
    "COPY memory_meta TO '{home}/out.parquet'",
    "select * from read_text('{home}/catalog.duckdb')",
    "select * from read_blob('{home}/catalog.duckdb')",
    "select * from '{home}/out.csv'",
    "select * from glob('{home}/*')",
    "select * from query('select 1')",
    "select * from (select 1) t, read_csv('/etc/passwd')",
    "ATTACH '{home}/other.duckdb' AS o",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "BEGIN; BEGIN;",
    "CHECKPOINT",
    "SET threads = 1",
    "INSTALL httpfs",
    "EXPORT DATABASE '{home}/dump'",
    "PRAGMA version",
    "EXPLAIN ANALYZE COPY (select 1) TO '{home}/x.csv'",
    "DELETE FROM memory_meta",
    "CREATE TABLE t AS SELECT 1",
    "select 1; COPY (select 1) TO '{home}/x.csv'",
]


@pytest.mark.parametrize("query", WRITES)
def test_sql_that_writes_or_names_a_file_is_refused_and_the_home_is_intact(
    capsys, monkeypatch, small_home, query
):
    before = digest(small_home)
    count = rows(capsys, monkeypatch, small_home, "select count(*) as n from memory_meta")
    code, out, err = sql(capsys, monkeypatch, small_home, query.format(home=small_home))
    assert code == 2, (out, err)
    assert err.startswith("error: ") and "Traceback" not in err
    assert digest(small_home) == before
    assert rows(capsys, monkeypatch, small_home, "select count(*) as n from memory_meta") == count
    assert count[0]["n"] > 0


@pytest.mark.parametrize(
    "query",
    [
        "select count(*) as n from memories",
        "from memory_meta limit 1",
        "with a as (select id from memory_meta) select count(*) as n from a",
        "values (1, 'a')",
        "describe memory_meta",
        "show tables",
        "summarize memory_meta",
        "select * from range(3)",
        "select table_name from duckdb_tables()",
        "select unnest([1, 2]) as x",
    ],
)
def test_sql_that_reads_the_home_runs(capsys, monkeypatch, small_home, query):
    code, out, err = sql(capsys, monkeypatch, small_home, query, "--json")
    assert code == 0, err
    assert json.loads(out)


def test_sql_out_creates_no_folder(capsys, monkeypatch, small_home, tmp_path):
    target = tmp_path / "missing" / "deeper" / "out.csv"
    code, _, err = sql(capsys, monkeypatch, small_home, "select 1 as x", "--csv", "--out", target)
    assert code == 2 and "does not exist" in err
    assert not (tmp_path / "missing").exists()


def test_sql_csv_escapes_formula_cells(capsys, monkeypatch, small_home):
    query = "select '=HYPERLINK(\"http://x\")' as a, '+1' as b, '-2' as c, '@SUM(A1)' as d, 3 as e"
    code, out, _ = sql(capsys, monkeypatch, small_home, query, "--csv")
    assert code == 0
    assert out.splitlines()[1] == """"'=HYPERLINK(""http://x"")",'+1,'-2,'@SUM(A1),3"""


def test_sql_max_bytes_bounds_the_result(capsys, monkeypatch, small_home):
    query = "select repeat('x', 1000000) as big from range(40)"
    code, out, err = sql(capsys, monkeypatch, small_home, query, "--csv", "--max-bytes", "3100000")
    assert code == 0
    assert len(out.splitlines()) - 1 == 3  # three rows of a million bytes fit, not forty
    assert "stopped after 3 rows" in err


# ------------------------------------------------------------------------------------ secrets

SECRETS = {
    "POSTGRES_PASSWORD=Xk9fjw2LmQzz": "Xk9fjw2LmQzz",
    "MYSQL_ROOT_PASSWORD: hunter2hunter": "hunter2hunter",
    "ADMIN_PASS=s3cr3tAdminZ": "s3cr3tAdminZ",
    "DB_PWD=Zq81nVb0aQ": "Zq81nVb0aQ",
}
FOLDER_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def test_secrets_in_text_and_in_source_paths_are_stored_nowhere(capsys, monkeypatch, tmp_path):
    folder = tmp_path / FOLDER_TOKEN / "password=Hunter77secret"
    folder.mkdir(parents=True)
    chat = conversation_rows("env", 6)
    for row, text in zip(chat, SECRETS, strict=False):
        row["content"] = f"I set {text} on the staging box, remember it."
    path = write_jsonl(folder / "chat.jsonl", chat, extra_lines=[b"{broken"])
    home = tmp_path / "h"
    code, _, err = console(capsys, monkeypatch, "--home", str(home), "run", "--source", str(path))
    assert code == 0, err
    stored = everything_stored(capsys, monkeypatch, home)
    assert "dead_letters" in stored or stored
    for secret in [*SECRETS.values(), FOLDER_TOKEN, "Hunter77secret"]:
        assert secret not in stored
        assert secret not in err
    letters = rows(capsys, monkeypatch, home, "select source from dead_letters")
    assert letters and all("[REDACTED:" in r["source"] for r in letters)


def test_a_presigned_url_is_read_and_its_signature_never_shown(capsys, monkeypatch, tmp_path):
    import fsspec

    signed = "?X-Amz-Signature=" + "f" * 64 + "&X-Amz-Credential=AKIAZ7QF3EXAMPLE4KQW"
    url = "memory://hostile-bucket/chat.jsonl" + signed
    rows_ = [*conversation_rows("url", 6)]
    with fsspec.open(url, "wb") as fh:
        fh.write(b"".join(json.dumps(r).encode() + b"\n" for r in rows_) + b"{broken\n")
    try:
        home = tmp_path / "h"
        code, _, err = console(capsys, monkeypatch, "--home", str(home), "run", "--source", url)
        assert code == 0, err
        assert len(stored_message_ids(capsys, monkeypatch, home)) == 6
        stored = everything_stored(capsys, monkeypatch, home)
        assert "X-Amz-Signature=[REDACTED:url_secret]" in stored  # the dead letter's source
        missing = url.replace("chat.jsonl", "gone.jsonl")
        code, _, err = console(capsys, monkeypatch, "--home", str(home), "run", "--source", missing)
        assert code == 2 and "X-Amz-Signature=[REDACTED:url_secret]" in err
        for shown in (stored, err):
            assert "f" * 64 not in shown and "AKIAZ7QF3EXAMPLE4KQW" not in shown
    finally:
        fsspec.filesystem("memory").rm("/hostile-bucket", recursive=True)


# ------------------------------------------------------------------- values a reader cannot hold


def run_and_count(capsys, monkeypatch, home: Path, source: Path, *extra: str) -> set[str]:
    """Run on ``source`` (a file or a folder); the message ids the spans hold afterwards."""
    args = ["--home", str(home), "run", "--source", str(source), *extra]
    code, _, err = console(capsys, monkeypatch, *args)
    assert code == 0, err
    return stored_message_ids(capsys, monkeypatch, home)


def expected_ids(paths: list[Path], fmt: str = "auto") -> set[str]:
    ids = set()
    for p in paths:
        items = read_source(FileSource(str(p), format=fmt))
        ids |= {m.message_id for m in items if isinstance(m, Message)}
    return ids


def test_odd_parquet_values_refuse_their_rows_only(capsys, monkeypatch, tmp_path):
    valid = write_jsonl(tmp_path / "valid.jsonl", conversation_rows("pv", 20))
    tmp_path = valid.parent
    n = 6
    good = {
        "conversation_id": ["pq"] * n,
        "user_id": ["pq"] * n,
        "role": ["user"] * n,
        "content": [f"I like tea number {i}." for i in range(n)],
    }
    overflow = pa.array([1_700_000_000 + i for i in range(n - 1)] + [14645 * 365 * 86400])
    pq.write_table(
        pa.table({**good, "timestamp": overflow.cast(pa.timestamp("s"))}), tmp_path / "s.parquet"
    )
    nanos = pa.array([1_700_000_000_000_000_001 + i * 10**9 for i in range(n)], pa.timestamp("ns"))
    pq.write_table(
        pa.table({**good, "conversation_id": ["ns"] * n, "timestamp": nanos}),
        tmp_path / "ns.parquet",
    )
    days = pa.array([19_000 + i for i in range(n - 1)] + [2**31 - 1], pa.date32())
    pq.write_table(
        pa.table({**good, "conversation_id": ["d"] * n, "timestamp": days}),
        tmp_path / "d.parquet",
    )
    sources = [valid, tmp_path / "s.parquet", tmp_path / "ns.parquet", tmp_path / "d.parquet"]
    want = expected_ids(sources)
    assert len(want) == 20 + 5 + 6 + 5
    assert run_and_count(capsys, monkeypatch, tmp_path / "h", tmp_path) == want


def test_chatgpt_ids_that_are_lists_end_nothing(capsys, monkeypatch, tmp_path):
    tmp_path = tmp_path / "in"
    tmp_path.mkdir()
    good = tmp_path / "good.json"
    good.write_text(json.dumps(chatgpt_export(2, 6)))
    odd = chatgpt_export(2, 6)
    odd[0]["current_node"] = ["gpt-0-5"]
    first = next(iter(odd[1]["mapping"].values()))
    for node in odd[1]["mapping"].values():
        if node is not first:
            node["parent"] = [node["parent"]]
    bad = tmp_path / "odd.json"
    bad.write_text(json.dumps(odd))
    valid = write_jsonl(tmp_path / "more.jsonl", conversation_rows("cg", 10))
    want = expected_ids([good, valid])
    assert len(want) == 12 + 10
    assert run_and_count(capsys, monkeypatch, tmp_path.parent / "h", tmp_path) == want


# ---------------------------------------------------------------------------------- the fuzz


@pytest.mark.parametrize("fmt", READERS)
def test_generated_hostile_files_among_valid_ones(capsys, monkeypatch, tmp_path, fmt):
    folder = tmp_path / "in"
    valid = valid_file(folder, fmt)
    hostile = hostile_files(folder, fmt, 8)
    named = fmt in ("star", "locomo", "chatgpt", "claude")
    want = expected_ids([valid], fmt if named else "auto")
    assert want
    extra = ("--format", fmt) if named else ()
    got = run_and_count(capsys, monkeypatch, tmp_path / "h", folder, *extra)
    assert want <= got  # no valid record lost, and the run ended with exit 0
    refused = rows(capsys, monkeypatch, tmp_path / "h", "select distinct source from dead_letters")
    assert refused and len(hostile) == 8


# ------------------------------------------------------------------------ medium and low


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["run", "-i", "5"], "names no process of the cluster"),
        (["run", "-i", "2", "-a", "127.0.0.1:1;127.0.0.1:2"], "names no process of the cluster"),
        (["run", "-a", "localhost"], "is not host:port"),
        (["import", "memories", "/nonexistent/export.parquet"], "cannot open"),
    ],
)
def test_arguments_that_cannot_work_are_user_errors(capsys, monkeypatch, tmp_path, args, words):
    code, _, err = console(capsys, monkeypatch, "--home", str(tmp_path / "h"), *args)
    assert code == 2 and words in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("code", "words"),
    [(30, "read-only file system"), (13, "permission denied"), (28, "no space left")],
)
def test_a_home_that_cannot_be_written_is_a_user_error(code, words):
    import errno

    from skillstream.cli import as_input_error

    assert errno.errorcode[code] in ("EROFS", "EACCES", "ENOSPC")
    err = as_input_error(OSError(code, "x", "/home/catalog.duckdb"), "run")
    assert err is not None and words in str(err)


def test_a_bare_carriage_return_does_not_split_a_statement(capsys, monkeypatch, tmp_path):
    chat = conversation_rows("cr", 3)
    chat[0]["content"] = "I prefer\rpoker over chess."
    path = write_jsonl(tmp_path / "chat.jsonl", chat)
    home = tmp_path / "h"
    code, _, err = console(capsys, monkeypatch, "--home", str(home), "run", "--source", str(path))
    assert code == 0, err
    texts = [r["text"] for r in rows(capsys, monkeypatch, home, "select text from memory_meta")]
    assert any("poker" in t and "prefer" in t for t in texts), texts


def test_the_python_api_refuses_the_same_sql(small_home):
    import skillstream
    from skillstream.errors import InputError

    home = skillstream.open(str(small_home))
    before = digest(small_home)
    query = f"COPY (select 'x' as x) TO '{small_home}/catalog.duckdb' (FORMAT csv)"
    with pytest.raises(InputError, match="only reads the home"):
        home.sql(query)
    assert digest(small_home) == before
    assert home.sql("select count(*) as n from memory_meta").arrow.column("n")[0].as_py() > 0
