"""The default run on the bundled sample, then the ``skills`` commands on what it stored."""

from __future__ import annotations

import io
import json
import shutil
import stat
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillstream.cli import cli
from skillstream.distill.package import build_zip, validate_dir, validate_zip
from skillstream.distill.record import TaskSkill
from skillstream.errors import InputError
from skillstream.storage.catalog import Catalog

pytestmark = pytest.mark.slow


def invoke(home: Path, *args: str, input: str | None = None):
    result = CliRunner().invoke(
        cli, ["--home", str(home), *args], input=input, catch_exceptions=True
    )
    return result


def ok(home: Path, *args: str) -> str:
    result = invoke(home, *args)
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def rows(home: Path, sql: str) -> list[dict]:
    cat = Catalog(str(home / "catalog.duckdb"), read_only=True)
    try:
        return cat.sql(sql).to_pylist()
    finally:
        cat.close()


def zips(home: Path) -> list[str]:
    root = home / "artifacts" / "task-skills"
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.zip"))


@pytest.fixture(scope="module")
def sample_home(tmp_path_factory) -> Path:
    """A home after the default run (`skillstream run`) on the bundled sample."""
    home = tmp_path_factory.mktemp("sample") / "home"
    out = ok(home, "run", "--json")
    assert json.loads(out[out.index("{") :])["messages"] == 34
    return home


@pytest.fixture
def home(sample_home, tmp_path) -> Path:
    """A private copy of the sample home (tests below change it)."""
    dst = tmp_path / "home"
    shutil.copytree(sample_home, dst)
    return dst


def test_the_default_run_publishes_spec_valid_task_skill_zips(sample_home):
    # the first session makes a candidate (not published); the second supports it: active
    assert zips(sample_home) == ["omar/deploy-flask-app/v2/deploy-flask-app.zip"]
    root = sample_home / "artifacts" / "task-skills"
    for rel in zips(sample_home):
        assert validate_zip((root / rel).read_bytes()) == [], rel
    versions = rows(
        sample_home,
        "select name, version, change, status, reason, package_url from task_skill_versions "
        "order by version",
    )
    assert [(r["version"], r["change"], r["status"], r["reason"]) for r in versions] == [
        (1, "created", "candidate", "new: candidate"),
        (2, "updated", "active", "candidate -> active: supported by 2 segments"),
    ]
    assert versions[0]["package_url"] is None
    assert versions[1]["package_url"] == (root / zips(sample_home)[0]).as_uri()
    (current,) = rows(
        sample_home, "select owner_id, name, version, status, package_url from task_skills"
    )
    assert current == {
        "owner_id": "omar",
        "name": "deploy-flask-app",
        "version": 2,
        "status": "active",
        "package_url": (root / zips(sample_home)[0]).as_uri(),
    }


def test_a_second_run_over_the_same_input_adds_no_version(home):
    ok(home, "run", "--json")
    assert len(zips(home)) == 1
    assert rows(home, "select count(*) as n from task_skill_versions")[0]["n"] == 2


def test_list_and_show_with_usage_counts(home):
    listed = json.loads(ok(home, "skills", "list", "--json"))
    assert [(r["owner_id"], r["name"]) for r in listed] == [("omar", "deploy-flask-app")]
    assert set(listed[0]) == {"owner_id", "name", "state", "reliability", "description"}
    assert (listed[0]["state"], listed[0]["reliability"]) == ("active", 0.5)
    assert json.loads(ok(home, "skills", "list", "--owner", "maya", "--json")) == []
    text = ok(home, "skills", "show", "deploy-flask-app")
    assert text.startswith("---\nname: deploy-flask-app\n") and "## Procedure" in text
    shown = json.loads(ok(home, "skills", "show", "deploy-flask-app", "--owner", "omar", "--json"))
    assert shown["times_used"] == 2 and shown["last_used_at"]
    assert rows(home, "select times_used from task_skills")[0]["times_used"] == 2
    missing = invoke(home, "skills", "show", "no-such-skill")
    assert isinstance(
        missing.exception, InputError
    ) and "no task skill named 'no-such-skill'" in str(missing.exception)


def test_patch_delete_export_and_save_make_versions_and_keep_packages(home, tmp_path):
    out = ok(
        home,
        "skills",
        "patch",
        "deploy-flask-app",
        "--section",
        "pitfalls",
        "--text",
        "Never deploy on Fridays.",
        "--append",
    )
    assert "to version 3" in out
    skill_md = ok(home, "skills", "show", "deploy-flask-app")
    assert "- Never deploy on Fridays." in skill_md and "version: '3'" in skill_md
    bad = invoke(home, "skills", "patch", "deploy-flask-app", "--section", "budget", "--text", "x")
    assert isinstance(bad.exception, InputError) and "unknown section 'budget'" in str(
        bad.exception
    )

    export = tmp_path / "export"
    ok(home, "skills", "export", str(export))
    assert [p.name for p in export.iterdir()] == ["deploy-flask-app"]
    assert validate_dir(export / "deploy-flask-app") == []

    ok(home, "skills", "delete", "deploy-flask-app")
    assert json.loads(ok(home, "skills", "list", "--json")) == []
    assert zips(home) == [f"omar/deploy-flask-app/v{v}/deploy-flask-app.zip" for v in (2, 3)]

    secret = "sk-" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2"
    md = export / "deploy-flask-app" / "SKILL.md"
    md.write_text(
        md.read_text().replace(
            "## Procedure\n", f"## Procedure\n\n0. Export OPENAI_API_KEY={secret}\n"
        )
    )
    out = ok(home, "skills", "save", str(export / "deploy-flask-app"), "--owner", "omar")
    assert "version 5" in out
    changes = rows(home, "select version, change from task_skill_versions order by version")
    assert [(r["version"], r["change"]) for r in changes] == [
        (1, "created"),
        (2, "updated"),
        (3, "patched"),
        (4, "deleted"),
        (5, "saved"),
    ]
    v5 = (home / "artifacts/task-skills/omar/deploy-flask-app/v5/deploy-flask-app.zip").read_bytes()
    body = zipfile.ZipFile(io.BytesIO(v5)).read("deploy-flask-app/SKILL.md").decode()
    assert secret not in body and "[REDACTED:openai_key]" in body
    assert json.loads(ok(home, "skills", "list", "--json"))[0]["name"] == "deploy-flask-app"


def test_feedback_retires_pin_restores_and_each_change_has_its_reason(home):
    for note in ("wrong registry", "push refused", "health check failed"):
        out = ok(home, "skills", "feedback", "deploy-flask-app", "--failure", "--note", note)
    assert "retired, reliability 0.20" in out
    assert json.loads(ok(home, "skills", "list", "--json")) == []
    listed = json.loads(ok(home, "skills", "list", "--state", "retired", "--json"))
    assert [(r["name"], r["state"], r["reliability"]) for r in listed] == [
        ("deploy-flask-app", "retired", 0.2)
    ]
    assert "pinned deploy-flask-app (version 6, active)" in ok(
        home, "skills", "pin", "deploy-flask-app"
    )
    ok(home, "skills", "feedback", "deploy-flask-app", "--failure")
    assert json.loads(ok(home, "skills", "list", "--json"))[0]["state"] == "active"
    assert "no task skill changed state" in ok(home, "skills", "maintain")
    versions = rows(
        home,
        "select version, change, status, reason from task_skill_versions where version > 2 "
        "order by version",
    )
    assert [(r["version"], r["change"], r["status"], r["reason"]) for r in versions] == [
        (3, "feedback", "active", "failure: wrong registry"),
        (4, "feedback", "active", "failure: push refused"),
        (
            5,
            "feedback",
            "retired",
            "active -> retired: reliability 0.20 below 0.4 after failure: health check failed",
        ),
        (6, "pinned", "active", "retired -> active: pinned by a person"),
        (7, "feedback", "active", "failure"),
    ]


def _zip(entries: list[tuple[str, bytes, int]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            zf.writestr(info, data)
    return buf.getvalue()


GOOD_MD = (
    b"---\nname: fix-printer\ndescription: Fix a jammed office "
    b"printer.\n---\n\n## Procedure\n1. Open tray 2.\n2. Remove the paper.\n"
)
REG = stat.S_IFREG | 0o644


@pytest.mark.parametrize(
    "entries,message",
    [
        (
            [("fix-printer/SKILL.md", GOOD_MD, REG), ("fix-printer/../../evil.sh", b"x", REG)],
            "climbs out of the folder with '..'",
        ),
        (
            [("fix-printer/SKILL.md", GOOD_MD, REG), ("/etc/cron.d/evil", b"x", REG)],
            "has an absolute path",
        ),
        (
            [
                ("fix-printer/SKILL.md", GOOD_MD, REG),
                ("fix-printer/scripts/link", b"/etc/passwd", stat.S_IFLNK | 0o777),
            ],
            "is a symbolic link",
        ),
        (
            [
                ("fix-printer/SKILL.md", GOOD_MD, REG),
                ("fix-printer/references/big.md", b"x" * 1_000_001, REG),
            ],
            "at most 1000000 are accepted per file",
        ),
        (
            [("Fix_Printer/SKILL.md", GOOD_MD.replace(b"fix-printer", b"Fix_Printer"), REG)],
            "is not a valid task-skill name",
        ),
        (
            [("fix-printer/SKILL.md", GOOD_MD.replace(b"name: fix-printer", b"name: other"), REG)],
            "must equal the folder name",
        ),
        ([("a/SKILL.md", GOOD_MD, REG), ("b/SKILL.md", GOOD_MD, REG)], "exactly one top folder"),
    ],
)
def test_import_rejects_unsafe_archives_and_writes_nothing(home, tmp_path, entries, message):
    before_zips = zips(home)
    before_rows = rows(home, "select count(*) as n from task_skill_versions")[0]["n"]
    bad = tmp_path / "bad.zip"
    bad.write_bytes(_zip(entries))
    result = invoke(home, "skills", "import", str(bad), "--owner", "omar")
    assert isinstance(result.exception, InputError), result.output
    assert message in str(result.exception)
    assert zips(home) == before_zips
    assert rows(home, "select count(*) as n from task_skill_versions")[0]["n"] == before_rows


def test_import_of_a_valid_zip(home, tmp_path):
    good = tmp_path / "fix-printer.zip"
    good.write_bytes(
        _zip(
            [
                ("fix-printer/SKILL.md", GOOD_MD, REG),
                ("fix-printer/scripts/clear.sh", b"echo ok\n", REG),
            ]
        )
    )
    out = ok(home, "skills", "import", str(good), "--owner", "lin")
    assert "imported lin/fix-printer version 1" in out
    shown = json.loads(ok(home, "skills", "show", "fix-printer", "--json"))
    assert shown["procedure"] == ["Open tray 2.", "Remove the paper."] and shown["scripts"] == {
        "clear.sh": "echo ok\n"
    }
    again = build_zip(
        TaskSkill.new(
            "lin",
            "fix-printer",
            description="Fix a jammed office printer.",
            procedure=["Open tray 2."],
        )
    )
    good.write_bytes(again)
    assert "version 2" in ok(home, "skills", "import", str(good), "--owner", "lin")
    assert "lin/fix-printer/v2/fix-printer.zip" in zips(home)
