"""Task-skill packages in the Agent Skills format: ``SKILL.md`` + ``scripts/`` + ``references/``.

A package is a folder named after the task skill::

    deploy-flask-app/
        SKILL.md            YAML frontmatter (name, description, metadata) and the body
        scripts/run.sh      generated scripts (full mode), if any
        references/notes.md reference documents, if any

The frontmatter holds only ``name`` and ``description``, plus ``metadata``, a map of strings
(``version``, ``triggers``, ``owner``, ``title``, ``lang``), as the format allows. The body has the
sections *When to use*, *Procedure*, *Pitfalls and experience*, *User preferences*, *Examples*,
*Scripts*, *Tools*, *References* and *Verification* (empty ones are left out).

:func:`zip_package` gives ``<name>.zip`` with the folder at its root; the bytes depend only on the
content (fixed timestamps, sorted members), so a replay publishes the same file. Every text file
passes the sensitive-data rules (:mod:`skillstream.redact`) on the way in, so a secret that reached
a task skill (through ``skills save``, an import or a model's answer) never reaches a package.

:func:`validate_files` / :func:`validate_dir` check a package against the format's rules (the
"spec validator"); :func:`parse_skill_md` and :func:`skill_from_files` read a package back.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from skillstream.distill.record import (
    DESCRIPTION_MAX,
    FILE_SECTIONS,
    LIST_SECTIONS,
    SECTIONS,
    TEXT_SECTIONS,
    TaskSkill,
    name_problem,
    skill_id,
)
from skillstream.distill.sections import Section
from skillstream.errors import InputError
from skillstream.redact import DEFAULT_REDACTOR

FRONTMATTER_KEYS = frozenset(
    {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
)
BODY_MAX_LINES = 500
FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)

BODY = tuple(sorted((s for s in SECTIONS if s.heading), key=lambda s: s.order))
"""Sections with a body heading, in the order ``SKILL.md`` shows them."""
SECTION_ALIASES = {alias: s.key for s in BODY for alias in (str(s.heading).lower(), *s.aliases)}
"""Body headings (lower-cased) a parsed ``SKILL.md`` understands, and the field each fills."""


def redact(text: str) -> str:
    """``text`` with every sensitive pattern replaced."""
    return DEFAULT_REDACTOR.apply(text)[0]


def redact_skill(skill: TaskSkill) -> TaskSkill:
    """A copy of the task skill with the sensitive-data rules applied to every text field."""
    out = skill.copy()
    for name in TEXT_SECTIONS:
        setattr(out, name, redact(getattr(out, name)))
    for name in LIST_SECTIONS:
        setattr(out, name, [redact(x) for x in getattr(out, name)])
    for name in FILE_SECTIONS:
        setattr(out, name, {k: redact(v) for k, v in getattr(out, name).items()})
    return out


# ----------------------------------------------------------------------------- rendering
def render_skill_md(skill: TaskSkill) -> str:
    """The ``SKILL.md`` text of a task skill."""
    meta = {
        "version": str(skill.version),
        "triggers": ", ".join(skill.triggers),
        "owner": skill.owner_id,
        "title": skill.title or skill.name,
        "lang": skill.lang,
    }
    front = {
        "name": skill.name,
        "description": skill.description or skill.title or skill.name,
        "metadata": meta,
    }
    head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=10_000).strip()
    lines = ["---", head, "---", "", f"# {skill.title or skill.name}", ""]

    for sec in BODY:
        body = _body(skill, sec)
        if body:
            lines.extend([f"## {sec.heading}", "", *body, ""])
    return redact("\n".join(lines).rstrip() + "\n")


def _body(skill: TaskSkill, sec: Section) -> list[str]:
    """The lines under a section's heading (empty: the heading is left out)."""
    value = getattr(skill, sec.name)
    if sec.style == "when":
        when = [value] if value else []
        if skill.triggers:
            when.append("")
            when.append("Triggers: " + ", ".join(skill.triggers))
        return when
    if sec.style == "numbered":
        return [f"{i}. {_one_line(s)}" for i, s in enumerate(value, 1)]
    if sec.style == "examples":
        examples: list[str] = []
        for i, ex in enumerate(value, 1):
            fence = "`" * max(3, _longest_run(ex, "`") + 1)
            examples.extend([f"### Example {i}", "", f"{fence}markdown", ex.strip(), fence, ""])
        return examples[:-1]
    if sec.style == "files":
        files = [f"- `{sec.name}/{n}`" for n in sorted(value)]
        planned = getattr(skill, sec.planned) if sec.planned else {}
        return files + [f"- planned `{n}`: {_one_line(p)}" for n, p in sorted(planned.items())]
    return [f"- {_one_line(s)}" for s in value]


def _longest_run(text: str, ch: str) -> int:
    runs = re.findall(re.escape(ch) + "+", text)
    return max((len(r) for r in runs), default=0)


_FENCE = re.compile(r"^(`{3,}|~{3,})")


def _one_line(text: str) -> str:
    return re.sub(r"\s*\n\s*", " ", str(text)).strip()


def package_files(skill: TaskSkill) -> dict[str, bytes]:
    """The package's files, by path inside the skill folder (``SKILL.md``, ``scripts/x``...)."""
    files = {"SKILL.md": render_skill_md(skill).encode("utf-8")}
    for folder in FOLDERS:
        for name, text in sorted(getattr(skill, folder).items()):
            if not FILE_NAME.match(name):
                raise InputError(
                    f"task skill {skill.name!r}: {folder} file "
                    f"name {name!r} is not a plain file name "
                    "(letters, digits, '.', '_', '-'; no folders)"
                )
            files[f"{folder}/{name}"] = redact(text).encode("utf-8")
    return files


def zip_package(name: str, files: Mapping[str, bytes]) -> bytes:
    """``<name>.zip`` bytes: the files under a folder ``<name>/``, deterministic."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for rel in sorted(files):
            info = zipfile.ZipInfo(f"{name}/{rel}", date_time=_FIXED_TIME)
            mode = 0o755 if rel.startswith("scripts/") else 0o644
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, files[rel])
    return buf.getvalue()


def build_zip(skill: TaskSkill) -> bytes:
    """The zipped package of a task skill."""
    return zip_package(skill.name, package_files(skill))


def write_folder(root: str | Path, name: str, files: Mapping[str, bytes]) -> Path:
    """Write a package's files into ``root/<name>/`` and return that folder."""
    folder = Path(root) / name
    for rel, data in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if rel.startswith("scripts/"):
            path.chmod(0o755)
    return folder


# ----------------------------------------------------------------------------- validation
def split_frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """The YAML frontmatter (as a dict) and the body of a ``SKILL.md``.

    Raises:
        InputError: when the text does not start with a ``---`` block holding a YAML mapping.
    """
    text = text.lstrip("\ufeff")
    if not text.startswith("---"):
        raise InputError("SKILL.md must start with a '---' line opening the YAML frontmatter")
    m = re.match(r"^---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|$)", text, re.DOTALL)
    if not m:
        raise InputError("SKILL.md frontmatter is not closed by a '---' line")
    try:
        data = yaml.safe_load(m.group(1))
    except yaml.YAMLError as e:
        raise InputError(f"SKILL.md frontmatter is not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise InputError("SKILL.md frontmatter must be a YAML mapping of keys to values")
    return data, text[m.end() :]


def skill_md_text(name: str, description: str, content: str) -> str:
    """A ``SKILL.md`` from its name, description and markdown body (front matter + body)."""
    front = yaml.safe_dump(
        {"name": name, "description": description},
        sort_keys=False,
        allow_unicode=True,
        width=10_000,
    ).strip()
    return f"---\n{front}\n---\n\n{content.strip()}\n"


def validate_skill_md(text: str, folder: str | None = None) -> list[str]:
    """Problems of a ``SKILL.md`` text against the Agent Skills rules (empty list: valid)."""
    try:
        front, body = split_frontmatter(text)
    except InputError as e:
        return [str(e)]
    problems = []
    extra = sorted(set(map(str, front)) - FRONTMATTER_KEYS)
    if extra:
        problems.append(
            f"frontmatter keys {extra} are not allowed; allowed: {sorted(FRONTMATTER_KEYS)} "
            "(put other fields under 'metadata')"
        )
    name = front.get("name")
    problem = name_problem(name)
    if problem:
        problems.append(f"frontmatter 'name': {problem}")
    elif folder is not None and name != folder:
        problems.append(f"frontmatter name {name!r} must equal the folder name {folder!r}")
    desc = front.get("description")
    if not isinstance(desc, str) or not desc.strip():
        problems.append("frontmatter 'description' is required and must be non-empty text")
    else:
        if len(desc) > DESCRIPTION_MAX:
            problems.append(f"'description' has {len(desc)} characters; at most {DESCRIPTION_MAX}")
        if "<" in desc or ">" in desc:
            problems.append("'description' must not contain angle brackets")
    comp = front.get("compatibility")
    if comp is not None and (not isinstance(comp, str) or len(comp) > 500):
        problems.append("'compatibility' must be text of at most 500 characters")
    meta = front.get("metadata")
    if meta is not None:
        if not isinstance(meta, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in meta.items()
        ):
            problems.append("'metadata' must map strings to strings")
    for key in ("license", "allowed-tools"):
        if key in front and not isinstance(front[key], str):
            problems.append(f"'{key}' must be text")
    if len(body.splitlines()) > BODY_MAX_LINES:
        problems.append(
            f"the body has {len(body.splitlines())} lines; keep it under {BODY_MAX_LINES}"
        )
    return problems


def validate_files(folder: str, files: Mapping[str, bytes]) -> list[str]:
    """Problems of a package given as ``{path inside the folder: bytes}`` (empty list: valid)."""
    problems = []
    problem = name_problem(folder)
    if problem:
        problems.append(f"folder name: {problem}")
    for rel in files:
        parts = rel.split("/")
        if rel.startswith("/") or "\\" in rel or any(p in ("", ".", "..") for p in parts):
            problems.append(f"file path {rel!r} must be a plain relative path inside the folder")
    if "SKILL.md" not in files:
        return problems + ["the folder has no SKILL.md"]
    try:
        text = files["SKILL.md"].decode("utf-8")
    except UnicodeDecodeError:
        return problems + ["SKILL.md is not UTF-8 text"]
    return problems + validate_skill_md(text, folder)


def validate_dir(path: str | Path) -> list[str]:
    """Problems of a package folder on disk (empty list: valid); symbolic links are refused."""
    root = Path(path)
    if not root.is_dir():
        return [f"{root} is not a folder"]
    files: dict[str, bytes] = {}
    problems = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_symlink():
            problems.append(f"{rel} is a symbolic link")
        elif p.is_file():
            files[rel] = p.read_bytes()
    return problems + validate_files(root.name, files)


def validate_zip(data: bytes) -> list[str]:
    """Problems of ``<name>.zip`` bytes: one top folder that is a valid package."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as e:
        return [f"not a zip archive: {e}"]
    tops = {n.split("/", 1)[0] for n in zf.namelist()}
    if len(tops) != 1:
        return [f"the archive must hold exactly one top folder, found {sorted(tops)}"]
    top = tops.pop()
    files = {
        n.split("/", 1)[1]: zf.read(n) for n in zf.namelist() if not n.endswith("/") and "/" in n
    }
    return validate_files(top, files)


# ----------------------------------------------------------------------------- reading back
def parse_skill_md(text: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The frontmatter and the body sections (``{field or heading: text}``) of a ``SKILL.md``."""
    front, body = split_frontmatter(text)
    sections: dict[str, str] = {}
    current = None
    buf: list[str] = []
    fence: str | None = None
    for line in body.splitlines():
        f = _FENCE.match(line)
        if f and fence is None:
            fence = f.group(1)
        elif (
            f
            and fence
            and line.strip() == fence[0] * len(f.group(1))
            and len(f.group(1)) >= len(fence)
        ):
            fence = None
        m = re.match(r"^##\s+(.+?)\s*#*\s*$", line) if fence is None and not f else None
        if m and not line.startswith("###"):
            if current is not None:
                sections[current] = "\n".join(buf).strip()
            heading = m.group(1).strip()
            current = SECTION_ALIASES.get(heading.lower(), heading)
            buf = []
        elif current is not None:
            buf.append(line)
    if current is not None:
        sections[current] = "\n".join(buf).strip()
    return front, sections


def section_items(text: str) -> list[str]:
    """List items of a section: numbered or bulleted lines (indented continuations joined);
    other text counts one item per paragraph."""
    items: list[str] = []
    bullet = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+(.*)$")
    mode = None
    for line in text.splitlines():
        m = bullet.match(line)
        if m:
            items.append(m.group(1).strip())
            mode = "bullet"
        elif not line.strip():
            mode = None
        elif mode == "para" or (mode == "bullet" and line.startswith((" ", "\t"))):
            items[-1] += " " + line.strip()
        else:
            items.append(line.strip())
            mode = "para"
    return [i for i in items if i]


def examples_of(text: str) -> list[str]:
    """Examples of an *Examples* section: one per ``### `` block (a fenced block is unwrapped),
    else the whole text as one example."""
    blocks: list[list[str]] = []
    fence: str | None = None
    for line in text.splitlines():
        f = _FENCE.match(line)
        if fence is None and line.startswith("### "):
            blocks.append([])
            continue
        if f and fence is None:
            fence = f.group(1)
        elif (
            f
            and fence
            and line.strip() == fence[0] * len(f.group(1))
            and len(f.group(1)) >= len(fence)
        ):
            fence = None
        if not blocks:
            blocks.append([])
        blocks[-1].append(line)
    out = []
    for lines in blocks:
        body = "\n".join(lines).strip()
        m = re.match(r"^(`{3,}|~{3,})[^\n]*\n(.*)\n\1\s*$", body, re.DOTALL)
        body = m.group(2).strip() if m else body
        if body:
            out.append(body)
    return out


def skill_from_files(files: Mapping[str, bytes], owner_id: str) -> TaskSkill:
    """A task skill (not yet versioned) from a package's files.

    Sections the format names fill their fields; any other section is kept as a reference document
    (``references/<heading>.md``) so nothing of an imported package is lost.

    Raises:
        InputError: when ``SKILL.md`` is missing or not valid.
    """
    if "SKILL.md" not in files:
        raise InputError("the package has no SKILL.md")
    text = files["SKILL.md"].decode("utf-8", errors="replace")
    front, sections = parse_skill_md(text)
    name = str(front.get("name", ""))
    meta = front.get("metadata") or {}
    meta = meta if isinstance(meta, dict) else {}
    skill = TaskSkill(
        id=skill_id(owner_id, name),
        owner_id=owner_id,
        name=name,
        description=str(front.get("description", "")).strip(),
        title=str(meta.get("title") or name.replace("-", " ").capitalize()),
        lang=str(meta.get("lang") or "en"),
        distiller="manual",
    )
    triggers = str(meta.get("triggers") or "")
    skill.triggers = [t.strip() for t in triggers.split(",") if t.strip()]
    for key, value in sections.items():
        sec = _BY_KEY.get(key)
        if sec is not None and sec.style in ("numbered", "bullets"):
            setattr(skill, key, section_items(value))
        elif sec is not None and sec.style == "examples":
            setattr(skill, key, examples_of(value))
        elif sec is not None and sec.planned:
            setattr(skill, sec.planned, _planned(value))
        elif key != "when" and value:
            fname = re.sub(r"[^a-z0-9]+", "-", key.lower()).strip("-") or "section"
            skill.references[f"{fname[:60]}.md"] = f"# {key}\n\n{value}\n"
    for rel, data in files.items():
        folder, _, fname = rel.partition("/")
        if folder in FOLDERS and FILE_NAME.match(fname):
            getattr(skill, folder)[fname] = data.decode("utf-8", errors="replace")
    for folder, planned in FOLDERS.items():
        done = getattr(skill, folder)
        setattr(skill, planned, {k: v for k, v in getattr(skill, planned).items() if k not in done})
    return skill


_BY_KEY = {s.key: s for s in BODY}
FOLDERS = {s.name: s.planned for s in SECTIONS if s.planned}
"""Package folders (``scripts``, ``references``) and the field listing their planned files."""


def _planned(text: str) -> dict[str, str]:
    out = {}
    for item in section_items(text):
        m = re.match(r"^planned\s+`([^`]+)`:\s*(.*)$", item)
        if m and FILE_NAME.match(m.group(1)):
            out[m.group(1)] = m.group(2)
    return out
