"""SKILL.md packages: rendering, the spec validator, zips, reading back, redaction."""

from __future__ import annotations

import io
import zipfile

import pytest

from skillstream.distill.package import (
    build_zip,
    package_files,
    parse_skill_md,
    render_skill_md,
    skill_from_files,
    split_frontmatter,
    validate_dir,
    validate_files,
    validate_skill_md,
    validate_zip,
    write_folder,
)
from skillstream.distill.record import TaskSkill, check_name, name_problem, slugify
from skillstream.errors import InputError


def sample_skill(**kw) -> TaskSkill:
    fields = dict(
        title="Deploy flask app",
        description="Deploy a Flask app to staging. Use it when a deploy to staging is asked for.",
        triggers=["deploy", "staging", "docker"],
        procedure=[
            "Run pytest.",
            "Build the image with docker build -t app:staging .",
            "Restart the service.",
        ],
        experience=["If the push fails with an authentication error: log in first."],
        preferences=["Always wants the health check before announcing."],
        examples=["## Deploy report\n\n- version: ...\n- health: 200"],
        tools=["docker", "pytest"],
        verification=["Check the health endpoint returns 200."],
        scripts={"run.sh": "#!/bin/sh\npytest\n"},
        references={"notes.md": "# Notes\n"},
        planned_scripts={"rollback.py": "Roll back to the previous image."},
        version=3,
    )
    fields.update(kw)
    return TaskSkill.new("omar", "deploy-flask-app", **fields)


def test_names_follow_the_agent_skills_rules():
    assert slugify("Deploy Flask App!") == "deploy-flask-app"
    assert slugify("a" * 70 + " b") == "a" * 64
    assert slugify("旅行规划").startswith("task-") and name_problem(slugify("旅行规划")) is None
    assert slugify("旅行规划") != slugify("部署应用")
    for bad in ("", "Deploy", "-a", "a-", "a--b", "a_b", "a" * 65, "ä"):
        assert name_problem(bad) is not None, bad
    with pytest.raises(InputError, match="lowercase letters"):
        check_name("Bad_Name")


def test_rendered_package_passes_the_validator_and_has_the_sections(tmp_path):
    skill = sample_skill()
    files = package_files(skill)
    assert sorted(files) == ["SKILL.md", "references/notes.md", "scripts/run.sh"]
    assert validate_files("deploy-flask-app", files) == []
    text = files["SKILL.md"].decode()
    front, body = split_frontmatter(text)
    assert set(front) == {"name", "description", "metadata"}
    assert front["metadata"] == {
        "version": "3",
        "triggers": "deploy, staging, docker",
        "owner": "omar",
        "title": "Deploy flask app",
        "lang": "en",
    }
    _, sections = parse_skill_md(text)
    assert list(sections) == [
        "when",
        "procedure",
        "experience",
        "preferences",
        "examples",
        "scripts",
        "tools",
        "references",
        "verification",
    ]
    assert "## Deploy report" in sections["examples"]  # an example's own headings stay inside it
    assert "2. Build the image with docker build -t app:staging ." in body
    assert "- planned `rollback.py`: Roll back to the previous image." in body
    folder = write_folder(tmp_path, skill.name, files)
    assert validate_dir(folder) == []
    assert (folder / "scripts" / "run.sh").stat().st_mode & 0o111


def test_validator_names_each_broken_rule(tmp_path):
    good = render_skill_md(sample_skill())
    assert validate_skill_md(good, "other-name") == [
        "frontmatter name 'deploy-flask-app' must equal the folder name 'other-name'"
    ]
    bad = good.replace("name: deploy-flask-app", "name: Deploy_App\nversion: 3")
    problems = validate_skill_md(bad)
    assert any("keys ['version'] are not allowed" in p for p in problems)
    assert any("'name'" in p and "lowercase" in p for p in problems)
    assert validate_skill_md("no frontmatter") == [
        "SKILL.md must start with a '---' line opening the YAML frontmatter"
    ]
    assert validate_skill_md("---\nname: a\n") == [
        "SKILL.md frontmatter is not closed by a '---' line"
    ]
    long_desc = "---\nname: a\ndescription: " + "x" * 1025 + "\n---\nbody\n"
    assert validate_skill_md(long_desc) == ["'description' has 1025 characters; at most 1024"]
    angle = "---\nname: a\ndescription: use <this>\n---\n"
    assert validate_skill_md(angle) == ["'description' must not contain angle brackets"]
    meta = "---\nname: a\ndescription: d\nmetadata:\n  version: 3\n---\n"
    assert validate_skill_md(meta) == ["'metadata' must map strings to strings"]
    assert validate_files("a", {"x.md": b""}) == ["the folder has no SKILL.md"]
    link_dir = tmp_path / "a"
    link_dir.mkdir()
    (link_dir / "SKILL.md").write_text("---\nname: a\ndescription: d\n---\n")
    (link_dir / "evil").symlink_to("/etc/passwd")
    assert validate_dir(link_dir) == ["evil is a symbolic link"]


def test_zip_is_deterministic_and_unpacks_to_a_valid_folder(tmp_path):
    skill = sample_skill()
    data = build_zip(skill)
    assert data == build_zip(skill.copy())
    assert validate_zip(data) == []
    zf = zipfile.ZipFile(io.BytesIO(data))
    assert sorted(zf.namelist()) == [
        "deploy-flask-app/SKILL.md",
        "deploy-flask-app/references/notes.md",
        "deploy-flask-app/scripts/run.sh",
    ]
    zf.extractall(tmp_path)
    assert validate_dir(tmp_path / "deploy-flask-app") == []


def test_a_package_reads_back_into_the_same_record():
    skill = sample_skill()
    back = skill_from_files(package_files(skill), "omar")
    for field in (
        "name",
        "title",
        "description",
        "triggers",
        "procedure",
        "experience",
        "preferences",
        "examples",
        "tools",
        "verification",
        "scripts",
        "references",
        "planned_scripts",
        "lang",
    ):
        assert getattr(back, field) == getattr(skill, field), field
    assert back.id == skill.id


def test_foreign_sections_are_kept_as_reference_documents():
    text = (
        "---\nname: fix-printer\ndescription: Fix the office printer when it jams.\n---\n\n"
        "## When to Use\nPrinter jams.\n\n## Procedure\n1. "
        "Open tray 2.\n2. Remove the paper\n   gently.\n\n"
        "## Pitfalls\n- Do not pull hard.\n\n## Background\nThe printer is an HP 4000.\n"
    )
    front, sections = parse_skill_md(text)
    assert sections["procedure"] == "1. Open tray 2.\n2. Remove the paper\n   gently."
    skill = skill_from_files({"SKILL.md": text.encode()}, "u1")
    assert skill.procedure == ["Open tray 2.", "Remove the paper gently."]
    assert skill.experience == ["Do not pull hard."]
    assert skill.references == {"background.md": "# Background\n\nThe printer is an HP 4000.\n"}


def test_secrets_never_reach_a_package():
    secret_key = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    aws = "AKIA" + "ABCDEFGHIJKLMNOP"
    skill = sample_skill(
        procedure=[f"Export OPENAI_API_KEY={secret_key} and run the job."],
        experience=["If it fails, the password is hunter22secret, reset it."],
        scripts={"run.sh": f"export AWS_ACCESS_KEY_ID={aws}\n"},
        description=f"Deploy with token {secret_key}.",
    )
    data = build_zip(skill)
    zf = zipfile.ZipFile(io.BytesIO(data))
    blob = b"".join(zf.read(n) for n in zf.namelist())
    for secret in (secret_key, aws, "hunter22secret"):
        assert secret.encode() not in blob
    assert b"[REDACTED:openai_key]" in blob and b"[REDACTED:aws_access_key]" in blob
    assert validate_zip(data) == []
