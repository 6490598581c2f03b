"""The memory skill bank in a real DuckDB catalog file: seeds, versions, export and import."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from skillstream.errors import InputError
from skillstream.memskill.bank import MemorySkillBank
from skillstream.memskill.files import read_skill_file, to_markdown
from skillstream.memskill.seeds import PRIMITIVES
from skillstream.memskill.versions import MemorySkillVersion, seed_versions, split_instruction
from skillstream.services.pipeline import load_memory_skills
from skillstream.settings import Settings
from skillstream.storage.catalog import Catalog

NEW_SKILL = """---
name: capture-temporal-context
action: INSERT
description: Keep when things happened, as absolute dates.
---

## Purpose
Questions often ask when something happened.

## When to use
The span mentions a time, even a relative one.

## How to apply
Write the absolute date into the memory text.

## Constraints
Only INSERT operations.
"""


class Clock:
    def __init__(self) -> None:
        self.t = datetime(2024, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.t += timedelta(seconds=1)
        return self.t


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings.load(home=str(tmp_path / "home"))


@pytest.fixture
def bank(settings):
    Path(settings.storage.catalog).parent.mkdir(parents=True, exist_ok=True)
    cat = Catalog(settings.storage.catalog)
    yield MemorySkillBank(cat, clock=Clock())
    cat.close()


def test_no_catalog_file_or_empty_bank_gives_the_primitives(settings, bank):
    assert load_memory_skills(Settings.load(home="/nonexistent/skillstream-home")) == list(
        PRIMITIVES
    )
    assert not bank.stored()
    assert bank.active_skills() == list(PRIMITIVES)
    bank.catalog.close()
    assert load_memory_skills(settings) == list(PRIMITIVES)  # file exists, table empty


def test_seed_versions_keep_the_primitive_instructions():
    for v, p in zip(seed_versions(), PRIMITIVES):
        assert v.to_skill() == p
        assert v.version_id == f"{p.name}@1" and v.purpose and v.constraints
    assert split_instruction("intro\nPurpose: a\nmore\nConstraints: c") == {
        "purpose": "a\nmore",
        "when_to_use": "",
        "how_to_apply": "intro",
        "constraints": "c",
    }


def test_export_edit_import_makes_a_new_version_and_nothing_else(settings, bank, tmp_path):
    folder = tmp_path / "skills"
    assert sorted(p.name for p in bank.export(folder)) == [
        "delete.md",
        "insert.md",
        "skip.md",
        "update.md",
    ]
    text = (folder / "insert.md").read_text()
    assert text.startswith("---\nname: insert\nversion: 1\naction: INSERT\nstatus: active\n")
    (folder / "insert.md").write_text(
        text.replace("only INSERT operations.", "only INSERT operations; one fact per item.")
    )
    report = bank.import_files([folder])
    assert [v.version_id for v in report.created] == ["insert@2"]
    assert sorted(report.unchanged) == ["delete", "skip", "update"]
    assert [v.version for v in bank.history("insert")] == [1, 2]
    assert (
        bank.history("insert")[0].source == "seed" and bank.history("insert")[1].source == "import"
    )
    assert bank.catalog.count("memory_skills") == 5
    again = bank.import_files([folder])
    assert again.created == [] and bank.catalog.count("memory_skills") == 5
    bank.catalog.close()
    active = load_memory_skills(settings)
    assert [s.name for s in active] == ["insert", "update", "delete", "skip"]
    assert active[0].version == 2 and active[0].instruction.endswith("one fact per item.")


def test_new_and_retired_memory_skills(settings, bank, tmp_path):
    (tmp_path / "new.md").write_text(NEW_SKILL)
    bank.import_files([tmp_path / "new.md"])
    assert [v.name for v in bank.active()] == [
        "insert",
        "update",
        "delete",
        "skip",
        "capture-temporal-context",
    ]
    retired = bank.retire("delete")
    assert retired is not None and retired.version == 2 and retired.status == "retired"
    assert bank.retire("delete") is None
    assert "delete" not in [s.name for s in bank.active_skills()]
    assert [v.name for v in bank.current()][2] == "delete"
    folder = tmp_path / "out"
    bank.export(folder, include_retired=False)
    assert not (folder / "delete.md").exists() and (folder / "capture-temporal-context.md").exists()


def test_files_round_trip(tmp_path):
    v = seed_versions()[1]
    p = tmp_path / "update.md"
    p.write_text(to_markdown(v))
    back = read_skill_file(p)
    assert back.based_on == 1 and back.version.content() == v.content()


def test_yaml_files_are_read_too(bank, tmp_path):
    (tmp_path / "a.yaml").write_text(
        "name: keep-names\naction: UPDATE\ndescription: Keep nicknames with the person.\n"
        "purpose: p\nwhen_to_use: w\nhow_to_apply: h\nconstraints: c\n"
    )
    report = bank.import_files([tmp_path / "a.yaml"])
    assert [(v.name, v.action, v.how_to_apply) for v in report.created] == [
        ("keep-names", "UPDATE", "h")
    ]


BAD = [
    ("no front matter\n## Purpose\nx", "expected a Markdown file starting with a '---'"),
    (NEW_SKILL.replace("action: INSERT", "action: MERGE"), "'action' must be one of"),
    (NEW_SKILL.replace("name: capture-temporal-context", "name: Capture Time"), "'name' must be"),
    (
        NEW_SKILL.replace("## Constraints\nOnly INSERT operations.\n", ""),
        "missing or empty sections: ['Constraints']",
    ),
    (NEW_SKILL.replace("## Purpose", "## Goal"), "unknown section '## Goal'"),
    (NEW_SKILL.replace("description:", "owner: me\ndescription:"), "unknown fields ['owner']"),
    (
        NEW_SKILL.replace("status", "x").replace(
            "action: INSERT", "action: INSERT\nstatus: paused"
        ),
        "'status' must be one of",
    ),
    (
        NEW_SKILL.replace("Keep when things happened, as absolute dates.", "x " * 200),
        "keep it under 300",
    ),
    (
        NEW_SKILL.replace("---\n\n## Purpose", "---\nstray text\n## Purpose"),
        "text before the first",
    ),
    ("---\n: [\n---\n", "the YAML is not valid"),
]


@pytest.mark.parametrize("text, message", BAD)
def test_invalid_files_are_refused_and_nothing_is_written(bank, tmp_path, text, message):
    (tmp_path / "good.md").write_text(NEW_SKILL.replace("capture-temporal-context", "other"))
    (tmp_path / "bad.md").write_text(text)
    with pytest.raises(InputError, match=re.escape(message)):
        bank.import_files([tmp_path])
    assert not bank.stored()


def test_duplicate_names_stale_files_and_an_empty_active_set_are_refused(bank, tmp_path):
    (tmp_path / "a.md").write_text(NEW_SKILL)
    (tmp_path / "b.md").write_text(NEW_SKILL)
    with pytest.raises(InputError, match="defined twice"):
        bank.import_files([tmp_path])
    folder = tmp_path / "x"
    bank.export(folder)
    old = (folder / "skip.md").read_text()
    (folder / "skip.md").write_text(old.replace("small talk", "chit-chat"))
    bank.import_files([folder / "skip.md"])
    (folder / "skip.md").write_text(old.replace("small talk", "pleasantries"))
    with pytest.raises(
        InputError, match="exported from version 1 of 'skip', but the bank now holds version 2"
    ):
        bank.import_files([folder / "skip.md"])
    assert [v.version_id for v in bank.import_files([folder / "skip.md"], force=True).created] == [
        "skip@3"
    ]
    for name in ("insert", "update", "delete", "skip"):
        p = folder / f"{name}.md"
        p.write_text(
            p.read_text()
            .replace("status: active", "status: retired")
            .replace("version: 1", "version: 3")
        )
    with pytest.raises(InputError, match="no memory skill would be active"):
        bank.import_files([folder], force=True)


def test_dry_run_reports_without_writing(bank, tmp_path):
    (tmp_path / "new.md").write_text(NEW_SKILL)
    report = bank.import_files([tmp_path], dry_run=True)
    assert [v.version_id for v in report.created] == ["capture-temporal-context@1"]
    assert not bank.stored()


def test_versions_are_rows_of_the_catalog_table(bank):
    bank.ensure_seeded()
    rows = bank.catalog.sql(
        "select version_id, action, status, source from memory_skills order by 1"
    ).to_pylist()
    assert rows == [
        {"version_id": "delete@1", "action": "DELETE", "status": "active", "source": "seed"},
        {"version_id": "insert@1", "action": "INSERT", "status": "active", "source": "seed"},
        {"version_id": "skip@1", "action": "NOOP", "status": "active", "source": "seed"},
        {"version_id": "update@1", "action": "UPDATE", "status": "active", "source": "seed"},
    ]
    assert (
        MemorySkillVersion.from_row(
            bank.catalog.sql("select * from memory_skills where name = 'insert'").to_pylist()[0]
        ).to_skill()
        == PRIMITIVES[0]
    )
    with pytest.raises(InputError, match="no memory skill 'nope' in the bank"):
        bank.get("nope")
