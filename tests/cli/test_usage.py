"""What a new user meets first, through the real command: a home that is a file, an unknown
``--map`` field, an input whose every record is refused, a mistyped setting name (environment or
TOML), ``--home`` after the command and ``run --owner``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.cli.conftest import console
from tests.factories import conversation_rows, write_jsonl

SKILLSTREAM = [sys.executable, "-c", "from skillstream.cli import main; main()"]
REPO = Path(__file__).resolve().parents[2]


def process(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SKILLSTREAM_")}
    full = {**clean, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.run(
        [*SKILLSTREAM, *args], capture_output=True, text=True, env=full, timeout=600
    )


def one_error_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ------------------------------------------------------------------------------ the home


@pytest.mark.parametrize(
    "args",
    [["run"], ["import", "memories", "x.parquet"], ["search", "tea"], ["stats"], ["config"]],
    ids=["run", "import", "search", "stats", "config"],
)
def test_a_home_that_is_a_file_is_a_usage_error(tmp_path, args, capsys, monkeypatch):
    home = tmp_path / "notes.txt"
    home.write_text("not a home\n")
    code, out, err = console(capsys, monkeypatch, "--home", str(home), *args)
    line = one_error_line(err)
    assert code == 2 and str(home) in line and "is a file, not a folder" in line, (out, err)
    assert home.read_text() == "not a home\n"


def test_home_is_taken_after_the_command_too(tmp_path, capsys, monkeypatch):
    src = write_jsonl(tmp_path / "chat.jsonl", conversation_rows("ana", 6))
    home = tmp_path / "h"
    monkeypatch.chdir(tmp_path)
    code, out, err = console(capsys, monkeypatch, "run", "--source", str(src), "--home", str(home))
    assert code == 0 and "read 6 messages" in out, (out, err)
    assert (home / "catalog.duckdb").exists() and not (tmp_path / ".skillstream").exists()
    code, out, err = console(capsys, monkeypatch, "skills", "list", "--home", str(home), "--json")
    assert code == 0 and json.loads(out) == [], (out, err)
    # given twice, the one after the command wins
    code, out, _ = console(capsys, monkeypatch, "--home", "nowhere", "stats", "--home", str(home))
    assert code == 0 and "spans" in out


# ------------------------------------------------------------------------------ the input


def test_an_unknown_map_field_is_a_usage_error_naming_the_fields(tmp_path, capsys, monkeypatch):
    src = write_jsonl(tmp_path / "chat.jsonl", conversation_rows("ana", 3))
    code, out, err = console(
        capsys, monkeypatch, "--home", str(tmp_path / "h"), "run", "--source", str(src),
        "--map", "text=body",
    )  # fmt: skip
    line = one_error_line(err)
    assert code == 2 and "cannot map 'text'" in line and "conversation_id, role, content" in line
    assert not (tmp_path / "h").exists()


def dead_letters(home: Path) -> list[str]:
    con = duckdb.connect(str(home / "catalog.duckdb"), read_only=True)
    try:
        return [r[0] for r in con.execute("select reason from dead_letters").fetchall()]
    finally:
        con.close()


def test_an_input_whose_every_record_is_refused_fails_and_says_why(tmp_path, capsys, monkeypatch):
    rows = conversation_rows("ana", 4)
    src = write_jsonl(tmp_path / "chat.jsonl", [{"text": r["content"]} for r in rows])
    home = tmp_path / "h"
    code, out, err = console(capsys, monkeypatch, "--home", str(home), "run", "--source", str(src))
    line = one_error_line(err)
    assert code == 2 and "read 0 messages (4 dead letters)" in out, (out, err)
    assert "every record of the input was refused" in line
    assert "(4 of 4): missing required field 'conversation_id'" in line
    assert "from dead_letters" in line
    assert len(dead_letters(home)) == 4  # kept, to be looked at

    # a wrong --format: the file is one dead letter, and the run fails the same way
    code, out, err = console(
        capsys, monkeypatch, "--home", str(home), "run", "--source", str(src), "--format",
        "parquet", "--json",
    )  # fmt: skip
    assert code == 2 and json.loads(out)["all_rejected"] is True
    assert "every record of the input was refused" in one_error_line(err)


def test_an_input_with_some_refused_records_passes_and_counts_them(tmp_path, capsys, monkeypatch):
    rows = conversation_rows("ana", 6)
    rows[2] = {"text": "no conversation"}
    src = write_jsonl(tmp_path / "chat.jsonl", rows)
    code, out, err = console(
        capsys, monkeypatch, "--home", str(tmp_path / "h"), "run", "--source", str(src)
    )
    assert code == 0 and "read 5 messages (1 dead letters)" in out, (out, err)
    assert "1 records were refused and kept as dead letters" in err and "error" not in err


def test_run_owner_sets_the_owner_of_every_message(tmp_path, capsys, monkeypatch):
    src = write_jsonl(
        tmp_path / "chat.jsonl", conversation_rows("c1", 3) + conversation_rows("c2", 3)
    )
    home = tmp_path / "h"
    code, out, err = console(
        capsys, monkeypatch, "--home", str(home), "run", "--source", str(src), "--owner", "ana"
    )
    assert code == 0, (out, err)
    con = duckdb.connect(str(home / "catalog.duckdb"), read_only=True)
    try:
        owners = {r[0] for r in con.execute("select owner_id from spans").fetchall()}
    finally:
        con.close()
    assert owners == {"ana"}


# ------------------------------------------------------------------------------ settings


def test_a_mistyped_environment_variable_is_warned_about_with_the_likely_name(tmp_path):
    proc = process(
        "--home",
        str(tmp_path / "h"),
        "config",
        env={"SKILLSTREAM_SPAN_TOKEN": "256", "SKILLSTREAM_OWNER": "ana"},
    )
    assert proc.returncode == 0, proc.stderr
    warned = [line for line in proc.stderr.splitlines() if "WARNING" in line]
    assert len(warned) == 1, proc.stderr  # SKILLSTREAM_OWNER is the product's own
    assert "SKILLSTREAM_SPAN_TOKEN is not a setting" in warned[0]
    assert "did you mean 'SKILLSTREAM_SPAN_TOKENS'?" in warned[0]


def test_an_unknown_toml_key_is_an_error_with_the_likely_key(tmp_path, capsys, monkeypatch):
    home = tmp_path / "h"
    home.mkdir()
    (home / "skillstream.toml").write_text("span_token = 256\n")
    code, _, err = console(capsys, monkeypatch, "--home", str(home), "config")
    line = one_error_line(err)
    assert code == 2 and "unknown setting 'span_token'; did you mean 'span_tokens'?" in line
    assert "llm_model" not in line  # not the list of every key


# ------------------------------------------------------------------------------ stopping


def test_a_stopped_run_says_how_to_go_on(tmp_path, capsys, monkeypatch):
    from skillstream.flows.runner import Runner

    src = write_jsonl(tmp_path / "chat.jsonl", conversation_rows("ana", 3))
    monkeypatch.setattr(Runner, "execute", lambda self, flow: self.stop())  # what SIGTERM does
    code, out, err = console(
        capsys, monkeypatch, "--home", str(tmp_path / "h"), "run", "--source", str(src)
    )
    assert code == 0 and out.startswith("read "), (out, err)
    assert "stopped before the input ended; run the same command again to go on" in err


def test_an_interrupted_run_says_how_to_go_on(tmp_path, capsys, monkeypatch):
    from skillstream.flows.runner import Runner

    def interrupted(self, flow):
        raise KeyboardInterrupt

    src = write_jsonl(tmp_path / "chat.jsonl", conversation_rows("ana", 3))
    monkeypatch.setattr(Runner, "execute", interrupted)
    code, out, err = console(
        capsys, monkeypatch, "--home", str(tmp_path / "h"), "run", "--source", str(src)
    )
    assert code == 130 and "Traceback" not in err, (out, err)
    assert "interrupted: what was written stays written; run the same command again" in err
