"""Memory skill files: one Markdown file per memory skill, for users to edit and import back.

Layout (``to_markdown`` writes it, ``read_skill_file`` reads and validates it)::

    ---
    name: insert
    version: 1
    action: INSERT
    status: active
    description: Record new lasting information from the span as separate memory items.
    ---

    ## Purpose
    ...
    ## When to use
    ...
    ## How to apply
    ...
    ## Constraints
    ...

A memory skill with an offline form (what the offline executor keeps or skips by example,
``extract.OfflineForm``) has one more front-matter key, a mapping::

    offline:
      threshold: 0.6
      prototypes: [I keep my passport in the top drawer., ...]
      patterns: ['\bpassport\b']
      skip: [Haha that is so funny.]

``version`` names the version the file was exported from; it is not the version an import stores
(the bank numbers versions itself). ``.yaml``/``.yml`` files with the same keys and the sections as
``purpose``, ``when_to_use``, ``how_to_apply`` and ``constraints`` are read too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from skillstream.errors import InputError
from skillstream.extract import OfflineForm
from skillstream.memskill.versions import ACTIONS, SECTIONS, STATUSES, MemorySkillVersion
from skillstream.vocab import MemorySkillStatus

MAX_DESCRIPTION_CHARS = 300
MAX_SECTION_CHARS = 4000
MAX_EXAMPLES = 50
"""Prototypes, patterns or skip examples an offline form holds at most (each)."""
MAX_EXAMPLE_CHARS = 500
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,47}$")
FILE_SUFFIXES = (".md", ".yaml", ".yml")

_HEADING = re.compile(r"^##[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


def to_markdown(v: MemorySkillVersion) -> str:
    """The file text of one version (see the module docstring)."""
    front = {
        "name": v.name,
        "version": v.version,
        "action": str(v.action),
        "status": str(v.status),
        "description": v.description,
    }
    if v.offline is not None:
        front["offline"] = v.offline.to_dict()
    head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=1000).strip()
    body = "\n\n".join(f"## {title}\n\n{getattr(v, key).strip()}" for key, title in SECTIONS)
    return f"---\n{head}\n---\n\n{body}\n"


@dataclass(frozen=True)
class SkillFile:
    """A memory skill read from a file, validated, not yet stored."""

    path: str
    version: MemorySkillVersion
    based_on: int | None
    """The ``version`` the file names (the version it was exported from), if any."""


def read_skill_file(path: str | Path) -> SkillFile:
    """Read and validate one memory skill file (Markdown with front matter, or YAML).

    Raises:
        InputError: the file cannot be read or its content is not a valid memory skill; the
            message names the file, what was expected and what was found.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{p}: cannot read the memory skill file: {e}") from e
    if p.suffix.lower() in (".yaml", ".yml"):
        data = _yaml(p, text)
        sections = {key: data.pop(key, None) for key, _ in SECTIONS}
    else:
        m = _FRONT.match(text)
        if m is None:
            raise InputError(
                f"{p}: expected a Markdown file starting with a '---' YAML front matter block "
                "(name, action, description...) followed by '## Purpose', '## When to use', "
                "'## How to apply' and '## Constraints' sections; see `skillstream memory-skills "
                "export` for the layout"
            )
        data = _yaml(p, m.group(1))
        sections = _sections(p, text[m.end() :])
    return _validated(p, data, sections)


def _yaml(p: Path, text: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise InputError(f"{p}: the YAML is not valid: {e}") from e
    if not isinstance(data, dict):
        raise InputError(f"{p}: expected a YAML mapping of fields, got {type(data).__name__}")
    return dict(data)


def _sections(p: Path, body: str) -> dict[str, Any]:
    titles = {title.lower(): key for key, title in SECTIONS}
    marks = list(_HEADING.finditer(body))
    out: dict[str, Any] = {}
    lead = body[: marks[0].start()].strip() if marks else body.strip()
    if lead:
        raise InputError(
            f"{p}: text before the first '## ' section ({lead[:60]!r}); put it in a section"
        )
    for i, m in enumerate(marks):
        key = titles.get(m.group(1).strip().lower())
        if key is None:
            raise InputError(
                f"{p}: unknown section '## {m.group(1).strip()}'; the sections are "
                + ", ".join(f"'## {t}'" for _, t in SECTIONS)
            )
        if key in out:
            raise InputError(f"{p}: section '## {m.group(1).strip()}' appears twice")
        end = marks[i + 1].start() if i + 1 < len(marks) else len(body)
        out[key] = body[m.end() : end].strip()
    return out


def _validated(p: Path, data: dict[str, Any], sections: dict[str, Any]) -> SkillFile:
    known = {"name", "version", "action", "status", "description", "offline"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise InputError(f"{p}: unknown fields {unknown}; the fields are {sorted(known)}")
    name = data.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise InputError(
            f"{p}: 'name' must be 1-48 characters of a-z, 0-9, '_' or '-' starting with a letter, "
            f"got {name!r}"
        )
    action = str(data.get("action") or "").strip().upper()
    if action not in ACTIONS:
        raise InputError(
            f"{p}: 'action' must be one of {list(ACTIONS)}, got {data.get('action')!r}"
        )
    status = str(data.get("status") or MemorySkillStatus.ACTIVE).strip().lower()
    if status not in STATUSES:
        raise InputError(
            f"{p}: 'status' must be one of {list(STATUSES)}, got {data.get('status')!r}"
        )
    desc = data.get("description")
    if not isinstance(desc, str) or not desc.strip():
        raise InputError(f"{p}: 'description' must be a non-empty sentence (what the skill is for)")
    desc = " ".join(desc.split())
    if len(desc) > MAX_DESCRIPTION_CHARS:
        raise InputError(
            f"{p}: 'description' has {len(desc)} characters; keep it under "
            f"{MAX_DESCRIPTION_CHARS} (details belong in the sections)"
        )
    based_on = data.get("version")
    if based_on is not None and (
        isinstance(based_on, bool) or not isinstance(based_on, int) or based_on < 1
    ):
        raise InputError(f"{p}: 'version' must be a positive integer, got {based_on!r}")
    missing = [
        title
        for key, title in SECTIONS
        if not isinstance(sections.get(key), str) or not sections[key].strip()
    ]
    if missing:
        raise InputError(
            f"{p}: missing or empty sections: {missing}; every memory skill needs "
            + ", ".join(t for _, t in SECTIONS)
        )
    for key, title in SECTIONS:
        if len(sections[key]) > MAX_SECTION_CHARS:
            raise InputError(
                f"{p}: section {title!r} has {len(sections[key])} characters (at most "
                f"{MAX_SECTION_CHARS})"
            )
    version = MemorySkillVersion(
        name=name,
        version=based_on or 0,
        description=desc,
        action=action,
        status=status,
        source="import",
        offline=_offline(p, data.get("offline")),
        **{key: sections[key].strip() for key, _ in SECTIONS},
    )
    return SkillFile(str(p), version, based_on)


def _offline(p: Path, data: Any) -> OfflineForm | None:
    """The validated ``offline`` mapping of a file (``None`` when absent)."""
    if data is None:
        return None
    keys = {"threshold", "prototypes", "patterns", "skip"}
    if not isinstance(data, dict) or set(data) - keys:
        raise InputError(
            f"{p}: 'offline' must be a mapping of {sorted(keys)}, got "
            f"{sorted(data) if isinstance(data, dict) else type(data).__name__}"
        )
    threshold = data.get("threshold", 0.6)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise InputError(f"{p}: 'offline.threshold' must be a number, got {threshold!r}")
    if not 0.0 < float(threshold) <= 1.0:
        raise InputError(f"{p}: 'offline.threshold' is a cosine in (0, 1], got {threshold}")
    for key in ("prototypes", "patterns", "skip"):
        items = data.get(key) or []
        if not isinstance(items, list) or not all(isinstance(x, str) and x.strip() for x in items):
            raise InputError(f"{p}: 'offline.{key}' must be a list of non-empty strings")
        if len(items) > MAX_EXAMPLES or any(len(x) > MAX_EXAMPLE_CHARS for x in items):
            raise InputError(
                f"{p}: 'offline.{key}' holds at most {MAX_EXAMPLES} entries of at most "
                f"{MAX_EXAMPLE_CHARS} characters"
            )
    for rx in data.get("patterns") or []:
        try:
            re.compile(rx)
        except re.error as e:
            raise InputError(f"{p}: 'offline.patterns' has an invalid pattern {rx!r}: {e}") from e
    form = OfflineForm.from_dict(data)
    if not (form.prototypes or form.patterns or form.skip):
        raise InputError(f"{p}: 'offline' needs prototypes, patterns or skip examples")
    return form


def skill_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand files and folders into the memory skill files they hold (sorted per folder)."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out.extend(sorted(f for f in p.iterdir() if f.suffix.lower() in FILE_SUFFIXES))
        elif p.is_file():
            out.append(p)
        else:
            raise InputError(f"{p}: no such file or folder of memory skill files")
    if not out:
        raise InputError(
            f"no memory skill files ({', '.join(FILE_SUFFIXES)}) in {[str(p) for p in paths]}"
        )
    return out
