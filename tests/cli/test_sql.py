"""``skillstream sql``: output formats, the sandbox, the row limit, SQL mistakes as user errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import lancedb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from skillstream.cli import cli
from skillstream.errors import InputError
from tests.cli.conftest import invoke

QUERY = "select id, kind, confidence, event_ts, tags from memories order by id"
REPO = Path(__file__).resolve().parents[2]


def fails(home, *args):
    res = CliRunner().invoke(cli, ["--home", str(home), "sql", *args])
    assert res.exit_code != 0
    return res.exception


def test_every_format_gives_the_same_rows(sample_home, tmp_path):
    rows = json.loads(invoke(sample_home, "sql", QUERY, "--format", "json"))
    n = lancedb.connect(str(sample_home / "lancedb")).open_table("memories").count_rows()
    assert len(rows) == n > 10
    assert json.loads(invoke(sample_home, "sql", QUERY, "--json")) == rows

    csv_lines = invoke(sample_home, "sql", QUERY, "--format", "csv").splitlines()
    assert csv_lines[0] == "id,kind,confidence,event_ts,tags" and len(csv_lines) == n + 1
    assert [line.split(",")[0] for line in csv_lines[1:]] == [r["id"] for r in rows]

    text = invoke(sample_home, "sql", QUERY)
    assert text.splitlines()[0].split(" | ")[0].strip() == "id" and f"({n} rows)" in text

    pq_path, arrow_path = tmp_path / "out" / "m.parquet", tmp_path / "m.arrow"
    pq_path.parent.mkdir()
    invoke(sample_home, "sql", QUERY, "--format", "parquet", "--out", str(pq_path))
    invoke(sample_home, "sql", QUERY, "--format", "arrow", "--out", str(arrow_path))
    from_parquet = pq.read_table(pq_path)
    from_arrow = pa.ipc.open_file(str(arrow_path)).read_all()
    assert from_parquet.equals(from_arrow)
    assert from_parquet.column("id").to_pylist() == [r["id"] for r in rows]
    assert pl.read_ipc(arrow_path)["kind"].to_list() == [r["kind"] for r in rows]

    csv_out = tmp_path / "m.csv"
    invoke(sample_home, "sql", QUERY, "--format", "csv", "--out", str(csv_out))
    assert csv_out.read_text().splitlines() == csv_lines


def test_the_sandbox_keeps_sql_inside_the_home(sample_home, tmp_path):
    secret = tmp_path / "secret.csv"
    secret.write_text("a\nhidden-value\n")
    target = tmp_path / "copied.csv"
    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("create table t as select 1 as x")
    con.close()

    attempts = [
        f"copy (select * from memories) to '{target}'",
        f"select * from read_csv('{secret}')",
        f"select * from '{secret}'",
        f"attach '{other}' as o (read_write)",
        f"attach '{other}' as o; delete from o.t",
        "set enable_external_access = true; select 1",
        "set lock_configuration = false",
        "install httpfs",
        "select * from glob('/etc/*')",
    ]
    for query in attempts:
        error = fails(sample_home, query)
        assert isinstance(error, InputError), (query, error)
    assert not target.exists()
    assert duckdb.connect(str(other), read_only=True).execute("select x from t").fetchall() == [
        (1,)
    ]
    assert "--allow-external-access" in str(fails(sample_home, f"copy (select 1) to '{target}'"))

    # the memories view (catalog joined with LanceDB) still works inside the sandbox
    rows = json.loads(invoke(sample_home, "sql", "select count(*) as n from memories", "--json"))
    assert rows[0]["n"] > 10

    # the explicit flag opens it
    invoke(sample_home, "sql", f"copy (select 1 as one) to '{target}'", "--allow-external-access")
    assert target.read_text().splitlines() == ["one", "1"]
    out = invoke(
        sample_home, "sql", f"select * from read_csv('{secret}')", "--allow-external-access"
    )
    assert "hidden-value" in out


def test_row_limit_stops_large_results(sample_home, tmp_path):
    res = CliRunner().invoke(
        cli, ["--home", str(sample_home), "sql", "select * from range(100000000)", "--json"]
    )
    assert res.exit_code == 0
    rows = json.loads(res.stdout)
    assert len(rows) == 10_000 and rows[-1] == {"range": 9999}
    assert "stopped after 10000 rows" in res.stderr

    rows = json.loads(
        invoke(sample_home, "sql", "select * from range(1000)", "--json", "--max-rows", "7")
    )
    assert [r["range"] for r in rows] == list(range(7))
    out = tmp_path / "all.parquet"
    invoke(
        sample_home,
        "sql",
        "select * from range(25000)",
        "--format",
        "parquet",
        "--max-rows",
        "0",
        "--out",
        str(out),
    )
    assert pq.read_table(out).num_rows == 25_000


def test_a_huge_result_does_not_eat_memory(sample_home, tmp_path):
    """Read 200,000 of 100 million rows in a child process: DuckDB streams, so the child's peak
    memory stays far below the 800 MB that the whole result would take."""
    # VmHWM: the peak resident memory of this program since it started (ru_maxrss would also
    # count the forked pytest process)
    child = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stderr.write("
        "[ln for ln in open('/proc/self/status') if ln.startswith('VmHWM')][0]))\n"
        "from skillstream.cli import main\n"
        "main()\n"
    )
    out = tmp_path / "r.csv"
    proc = subprocess.run(
        [sys.executable, "-c", child, "--home", str(sample_home), "sql"]
        + ["select * from range(100000000)", "--format", "csv", "--max-rows", "200000"]
        + ["--out", str(out)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "stopped after 200000 rows" in proc.stderr
    peak_kb = int(proc.stderr.rsplit("VmHWM:", 1)[1].split()[0])
    assert peak_kb < 600 * 1024, f"peak {peak_kb // 1024} MB"
    with open(out) as fh:
        assert sum(1 for _ in fh) == 200_001


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("", "empty"),
        ("  -- only a comment\n ;", "empty"),
        ("selec 1", "syntax error"),
        ("select * from no_such_table", "no_such_table"),
    ],
)
def test_sql_mistakes_are_user_errors(sample_home, query, says):
    error = fails(sample_home, query)
    assert isinstance(error, InputError) and says in str(error)


def test_one_format_at_a_time(sample_home):
    error = fails(sample_home, "select 1", "--json", "--format", "csv")
    assert isinstance(error, InputError) and "one output format" in str(error)
