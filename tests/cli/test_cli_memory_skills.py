"""``skillstream memory-skills list|show|export|import`` on a real home."""

from __future__ import annotations

import json

from click.testing import CliRunner

from skillstream.cli import cli
from tests.memskill.conftest import _no_llm_env  # noqa: F401 - fixture


def invoke(home, *args):
    return CliRunner().invoke(cli, ["--home", str(home), "memory-skills", *args])


def test_list_show_export_import_cycle(tmp_path):
    home = tmp_path / "home"
    out = invoke(home, "list", "--json")
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)
    assert [(r["name"], r["version"], r["action"], r["source"]) for r in rows] == [
        ("insert", 1, "INSERT", "seed (not stored yet)"),
        ("update", 1, "UPDATE", "seed (not stored yet)"),
        ("delete", 1, "DELETE", "seed (not stored yet)"),
        ("skip", 1, "NOOP", "seed (not stored yet)"),
    ]
    assert not (home / "catalog.duckdb").exists()  # reading created nothing

    folder = tmp_path / "skills"
    out = invoke(home, "export", str(folder))
    assert out.exit_code == 0 and out.output.strip() == f"exported 4 memory skills to {folder}"
    update = folder / "update.md"
    update.write_text(
        update.read_text().replace(
            "keeping what is still true", "keeping every detail that is still true"
        )
    )
    out = invoke(home, "import", str(folder), "--dry-run")
    assert out.output.strip() == "would store 1 new version(s): update@2; 3 unchanged"
    out = invoke(home, "import", str(folder))
    assert (
        out.exit_code == 0
        and out.output.strip() == "stored 1 new version(s): update@2; 3 unchanged"
    )
    out = invoke(home, "import", str(folder), "--json")
    assert json.loads(out.output) == {
        "dry_run": False,
        "new_versions": [],
        "unchanged": ["delete", "insert", "skip", "update"],
    }

    out = invoke(home, "show", "update")
    assert out.output.startswith("---\nname: update\nversion: 2\n")
    assert "keeping every detail that is still true" in out.output
    out = invoke(home, "show", "update", "--version", "1")
    assert "version: 1" in out.output and "keeping what is still true" in out.output
    out = invoke(home, "show", "update", "--history", "--json")
    assert [(r["version"], r["source"]) for r in json.loads(out.output)] == [
        (1, "seed"),
        (2, "import"),
    ]
    out = invoke(home, "list")
    assert "update | 2" in out.output and "(4 rows)" in out.output


def test_bad_file_gives_a_clear_error_and_exit_code(tmp_path):
    bad = tmp_path / "bad.md"
    bad.write_text("---\nname: x\naction: MERGE\ndescription: d\n---\n")
    out = invoke(tmp_path / "home", "import", str(bad))
    assert out.exit_code != 0
    assert "'action' must be one of ['INSERT', 'UPDATE', 'DELETE', 'NOOP'], got 'MERGE'" in str(
        out.exception
    )
    out = invoke(tmp_path / "home", "show", "nope")
    assert "no memory skill 'nope' in the bank" in str(out.exception)
