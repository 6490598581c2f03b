"""The CLI under bad input and bad timing: one-line user errors (exit 2), nothing created in a
missing home, one run per home (real processes), run exit codes, and a run with a message from
the future, run twice."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import lancedb
import pytest
from click.testing import CliRunner

from skillstream.cli import cli
from tests.cli.conftest import console
from tests.factories import conversation_rows, write_jsonl

SKILLSTREAM = [sys.executable, "-c", "from skillstream.cli import main; main()"]
REPO = Path(__file__).resolve().parents[2]


def invoke(home, *args, code: int = 0):
    res = CliRunner().invoke(cli, ["--home", str(home), *args])
    assert res.exit_code == code, (res.output, res.exception)
    return res


def process(*args, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [*SKILLSTREAM, *args], capture_output=True, text=True, env=env, timeout=600, **kw
    )


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """A home after one run of a small conversation file."""
    root = tmp_path_factory.mktemp("robust")
    path = write_jsonl(root / "chat.jsonl", conversation_rows("ana", 12))
    invoke(root / "h", "run", "--source", str(path))
    return root / "h"


# ------------------------------------------------------------------------------ user errors


def bad_checksum_zip(folder: Path) -> Path:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        info = zipfile.ZipInfo("tidy-desk/SKILL.md")
        info.external_attr = 0o100644 << 16  # a regular file
        zf.writestr(info, "---\nname: tidy-desk\n---\nclear the desk every evening\n")
    data = buf.getvalue().replace(b"every evening", b"every EVENING")
    path = folder / "tidy-desk.zip"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["sql", ""], "the SQL text is empty"),
        (["sql", "   "], "the SQL text is empty"),
        (["sql", "selec 1"], "SQL error: Parser Error"),
        (["sql", "select * from no_such_table"], "SQL error: Catalog Error"),
        (["sql", "select no_such_column from spans"], "SQL error: Binder Error"),
        (["search", "tea", "--k", "99999999999"], "k must be between 1 and 10000"),
        (["search", "tea", "--k", "0"], "k must be between 1 and 10000"),
        (["history", "no-such-memory"], "no memory"),
        (["run", "--source", "/no/such/file.jsonl"], "does not exist"),
    ],
)
def test_user_errors_are_one_line_and_exit_2(home, args, words, capsys, monkeypatch):
    code, out, err = console(capsys, monkeypatch, "--home", str(home), *args)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], err
    assert "Traceback" not in out + err


def test_a_zip_with_a_bad_checksum_is_one_line(home, tmp_path, capsys, monkeypatch):
    zip_path = str(bad_checksum_zip(tmp_path))
    code, out, err = console(capsys, monkeypatch, "--home", str(home), "skills", "import", zip_path)
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and "Bad CRC-32" in err


def test_the_console_script_prints_one_line_and_v_shows_the_traceback(home):
    quiet = process("--home", str(home), "sql", "selec 1")
    assert quiet.returncode == 2 and quiet.stdout == ""
    assert quiet.stderr.count("\n") == 1 and quiet.stderr.startswith(
        "error: SQL error: Parser Error"
    )
    loud = process("--home", str(home), "-v", "sql", "selec 1")
    assert loud.returncode == 2
    assert "Traceback (most recent call last)" in loud.stderr
    assert loud.stderr.rstrip().splitlines()[-1].startswith("error: SQL error: Parser Error")


# ------------------------------------------------------------------------------ missing home

READ_ONLY = [
    ["search", "tea"],
    ["sql", "select 1"],
    ["stats"],
    ["history", "m1"],
    ["contradictions"],
    ["maintain"],
    ["retry-failed"],
    ["skills", "list"],
    ["skills", "show", "x"],
    ["skills", "delete", "x"],
]


@pytest.mark.parametrize("args", READ_ONLY, ids=[" ".join(a) for a in READ_ONLY])
def test_commands_on_a_missing_home_create_nothing_and_say_so(tmp_path, args, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a default created in the current folder would show too
    home = tmp_path / "missing"
    code, out, err = console(capsys, monkeypatch, "--home", str(home), *args)
    assert code == 2 and "no catalog" in err and str(home) in err, (out, err)
    assert err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_skills_export_on_a_missing_home_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out_dir = str(tmp_path / "out")
    code, _, err = console(
        capsys, monkeypatch, "--home", str(tmp_path / "missing"), "skills", "export", out_dir
    )
    assert code == 2 and "no catalog" in err
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------ run lock

HOLD = """
import sys
from skillstream.storage.lock import run_lock
with run_lock(sys.argv[1], sys.argv[2]):
    print("held", flush=True)
    sys.stdin.readline()
"""


def test_one_run_per_home_with_two_real_processes(tmp_path):
    chat = write_jsonl(tmp_path / "chat.jsonl", conversation_rows("bo", 6))
    home = tmp_path / "h"
    home.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(home / "catalog.duckdb"), str(home)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        second = process("--home", str(home), "run", "--source", str(chat))
        assert second.returncode == 2, second.stderr
        assert second.stderr.count("\n") == 1
        assert f"is in use by another run (pid {holder.pid}" in second.stderr
        assert not (home / "catalog.duckdb").exists()  # the refused run touched nothing
        # the holder dies without releasing anything: the lock goes with it
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        third = process("--home", str(home), "run", "--source", str(chat), "--json")
        assert third.returncode == 0, third.stderr
        summary = json.loads(third.stdout[third.stdout.index("{") :])
        assert summary["spans_processed"] > 0 and summary["exceeded"] == []
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=30)


# ------------------------------------------------------------------------------ exit codes


def test_run_exits_3_past_the_dead_letter_limit(tmp_path):
    lines = conversation_rows("cy", 6)
    path = write_jsonl(tmp_path / "chat.jsonl", lines, [b"{broken", b'{"role": "user"}'])
    res = invoke(
        tmp_path / "h", "run", "--source", str(path), "--max-dead-letters", "1", "--json", code=3
    )
    summary = json.loads(res.stdout[res.stdout.index("{") : res.stdout.rindex("}") + 1])
    assert summary["dead_letters"] == 2 and summary["spans_processed"] > 0
    assert summary["exceeded"] == ["2 records were dead-lettered, more than max_dead_letters=1"]
    assert "error: 2 records were dead-lettered" in res.stderr
    # within the limit (here from the environment): exit 0
    res = CliRunner().invoke(
        cli,
        ["--home", str(tmp_path / "h2"), "run", "--source", str(path)],
        env={"SKILLSTREAM_MAX_DEAD_LETTERS": "2"},
    )
    assert res.exit_code == 0, res.output


def test_run_exits_3_past_the_failed_span_limit(tmp_path, monkeypatch):
    from tests.servers.openai_stub import OpenAIStub, http_error

    monkeypatch.setenv("SKILLSTREAM_LLM_API_KEY", "not-a-real-key")
    path = write_jsonl(tmp_path / "chat.jsonl", conversation_rows("di", 4))
    with OpenAIStub(default=http_error(400, "this model refuses")) as stub:
        args = ["run", "--source", str(path), "--llm", "openai", "--llm-base-url", stub.url]
        res = invoke(tmp_path / "h", *args, "--max-failed-spans", "0", "--json", code=3)
        summary = json.loads(res.stdout[res.stdout.index("{") : res.stdout.rindex("}") + 1])
        assert summary["spans_failed"] >= 1
        assert "more than max_failed_spans=0" in res.stderr
        # no limit (the default): the same failures exit 0
        invoke(tmp_path / "h3", *args)


# ------------------------------------------------------------------------------ time window


def test_a_message_from_the_future_run_twice(tmp_path):
    rows = conversation_rows("eve", 30, start=datetime(2025, 5, 1, 8, tzinfo=UTC), owner="eve")
    rows.insert(
        10,
        dict(
            rows[10],
            message_id="far",
            content="I will retire on the Moon.",
            timestamp="9999-12-31T23:59:59Z",
        ),
    )
    rows.insert(
        4, dict(rows[4], message_id="old", content="I was born.", timestamp="0001-01-01T00:00:00Z")
    )
    path = write_jsonl(tmp_path / "chat.jsonl", rows)
    home = tmp_path / "h"

    def memories() -> list[dict]:
        table = lancedb.connect(str(home / "lancedb")).open_table("memories")
        return table.to_arrow().select(["id", "status", "event_ts"]).to_pylist()

    first = invoke(home, "run", "--source", str(path), "--json").stdout
    one = json.loads(first[first.index("{") :])
    assert one["dead_letters"] == 2 and one["spans_failed"] == 0
    stored = memories()
    assert stored and {m["status"] for m in stored} <= {"generated", "activated"}
    assert {m["event_ts"].year for m in stored if m["event_ts"]} == {2025}

    again = invoke(home, "run", "--source", str(path), "--json").stdout
    two = json.loads(again[again.index("{") :])
    assert two["spans_processed"] == 0 and two["spans_already_processed"] == one["spans_processed"]
    assert sorted(memories(), key=lambda m: m["id"]) == sorted(stored, key=lambda m: m["id"])
    dead = json.loads(
        invoke(home, "sql", "select stage, reason from dead_letters", "--json").stdout
    )
    assert len(dead) == 2 and {d["stage"] for d in dead} == {"admit"}
    # maintenance and a summary of the store still work on the home
    invoke(home, "maintain", "--json")
    stats = json.loads(invoke(home, "stats", "--json").stdout)
    after = memories()  # maintenance may add summaries or topic nodes; nothing of the run is lost
    assert stats["memories"] == len(after) and {m["id"] for m in stored} <= {m["id"] for m in after}
    assert all(m["event_ts"].year < 9999 for m in after if m["event_ts"])
