"""The task skill is declared once: every view derived from it matches what the code wrote before.

The files in ``tests/golden/declarations`` were written by the code that spelled each view out by
hand; the derived views must stay byte-identical for existing data.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

from skillstream import tables
from skillstream.distill import llm
from skillstream.distill.draft import Draft
from skillstream.distill.package import build_zip, package_files, render_skill_md, skill_from_files
from skillstream.distill.record import SECTIONS, SkillContent, TaskSkill
from skillstream.services import task_skills as api
from skillstream.storage import task_skills as store

GOLDEN = Path(__file__).parents[1] / "golden" / "declarations"


def golden(name: str) -> str:
    return (GOLDEN / name).read_text()


def fixed_skill() -> TaskSkill:
    t = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    return TaskSkill.new(
        "omar",
        "deploy-flask-app",
        title="Flask App Deployment",
        description="Deploy a Flask app to staging with gunicorn and a health check.",
        triggers=["flask", "deploy", "staging"],
        procedure=[
            "Run the tests with pytest",
            "Build the image:\n docker build -t app .",
            "Push and restart the service",
        ],
        experience=["If the port is busy: stop the old container first"],
        preferences=["Always run the health check"],
        examples=["## Release note\n\n```bash\nmake deploy\n```", "Deployed v1.2 to staging."],
        tools=["docker", "pytest", "gunicorn"],
        verification=["curl /health returns 200"],
        scripts={"run.sh": "#!/bin/sh\nset -e\nmake deploy\n"},
        references={"notes.md": "# Notes\n\nUse the staging key AKIAIOSFODNN7EXAMPLE never.\n"},
        planned_scripts={"rollback.sh": "Roll back to the previous image."},
        planned_references={"ports.md": "Which ports the app needs."},
        version=3,
        lang="en",
        created_at=t,
        updated_at=t,
    )


def schema_doc(schema):
    return {
        "fields": [[f.name, str(f.type), f.nullable] for f in schema],
        "metadata": {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()},
    }


def test_skill_md_is_unchanged():
    assert render_skill_md(fixed_skill()) == golden("task_skill_SKILL.md")


def test_package_zip_and_reading_back_are_unchanged():
    want = json.loads(golden("task_skill_package.json"))
    skill = fixed_skill()
    files = package_files(skill)
    assert {k: v.decode() for k, v in files.items()} == want["files"]
    assert hashlib.sha256(build_zip(skill)).hexdigest() == want["zip_sha256"]
    back = json.loads(json.dumps(skill_from_files(files, "omar").document(), default=str))
    assert back == want["parsed_back"]
    assert list(skill.row()) == want["row_keys"]
    assert list(skill.document()) == want["document_keys"]


def test_arrow_columns_are_unchanged():
    want = json.loads(golden("arrow_schemas.json"))
    assert schema_doc(store.lance_schema(4)) == want["lance:task_skills:4"]
    assert schema_doc(tables.TASK_SKILLS) == want["task_skills"]


def test_llm_schemas_and_patch_names_are_unchanged():
    want = json.loads(golden("llm_schemas.json"))
    # Same keys in the same order: the schema is part of the request the model sees.
    assert json.dumps(llm.EXTRACT_SCHEMA) == json.dumps(want["extract"])
    assert json.dumps(llm.SCRIPTS_SCHEMA) == json.dumps(want["scripts"])
    assert json.dumps(llm.TOOLS_SCHEMA) == json.dumps(want["tools"])
    assert json.dumps(llm.REFERENCES_SCHEMA) == json.dumps(want["references"])
    assert api.PATCH_SECTIONS == json.loads(golden("patch_sections.json"))


def test_draft_is_a_partial_of_the_record():
    content = {f.name for f in dataclasses.fields(SkillContent)}
    assert content <= {f.name for f in dataclasses.fields(Draft)}
    assert content <= {f.name for f in dataclasses.fields(TaskSkill)}
    assert {s.name for s in SECTIONS} == content - {"id", "owner_id", "name"}


def test_every_view_is_derived_from_the_sections():
    from skillstream.distill import package

    names = [f.name for f in tables.TASK_SKILL_FIELDS]
    for s in SECTIONS:
        assert s.name in names
        assert (s in package.BODY) == (s.heading is not None)
        assert all(api.PATCH_SECTIONS[p] == s.name for p in s.patch)
        assert (s.name in llm.EXTRACT_SCHEMA["properties"]) == s.llm
        assert (s.name in llm.EXTRACT_SCHEMA["required"]) == s.llm_required
    assert set(api.PATCH_SECTIONS.values()) == {s.name for s in SECTIONS if s.patch}
