"""Grounding: every concrete token of a task skill must come from the conversations it was
distilled from.

A skill an agent follows is only as good as the commands, paths, URLs, file names and tool names it
names; a distiller (an LLM most of all) can write ones nobody used. :func:`concrete_tokens` finds
them in a skill's sections and files:

* **commands**: backticked text, and a command that starts with a well-known tool
  (``steps.commands_in``);
* **URLs**: ``http://`` and ``https://`` addresses;
* **paths**: text with a slash that starts at the root, the home or the current folder (``/etc/x``,
  ``~/x``, ``./x``), or that ends in a file name (``config/app.yaml``);
* **file names**: a name with an extension of one to five letters or digits (``app.yaml``);
* **tool names**: the entries of the ``tools`` section and well-known tools (``steps.tools_in``).

:func:`invented` returns those that the sources do not contain (case-insensitive, white space
folded; comment lines of script files, such as the shebang a generated script starts with, are
not checked). **The generalisation rule**: a token may hold placeholders, ``<name>``, ``{name}``,
``$NAME`` or ``${NAME}`` (a value the sources gave, written generally); the token is grounded when
the text around its placeholders appears in the sources in order, each placeholder standing for
any text (``kubectl rollout status deploy/<service>`` is grounded by ``kubectl rollout status
deploy/api``). Nothing else counts as a generalisation.

A draft with invented tokens is not published: a new skill stays a ``candidate`` with the tokens
in ``stats["grounding"]`` and the reason on its version; an update of a skill is refused and the
skill stays as it was (see ``TaskSkillDistiller``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from skillstream.distill import steps as st
from skillstream.distill.record import FILE_SECTIONS, LIST_SECTIONS, TEXT_SECTIONS, TaskSkill

GROUNDING = "grounding"
"""``stats`` key: ``{"invented": [...]}`` of a draft that failed the check."""

_URL = re.compile(r"https?://[^\s<>()\"'`]+")
_PATH = re.compile(
    r"(?<![\w/.])(?:(?:~|\.{1,2})?/[\w.${}<>-]+(?:/[\w.${}<>-]+)*|"
    r"[\w.${}<>-]+(?:/[\w.${}<>-]+)+\.[A-Za-z0-9]{1,5})(?![\w/])"
)
_FILE = re.compile(r"(?<![\w/.@-])[A-Za-z_][\w-]*\.(?:[a-z]{1,5}\d?)(?![\w.])")
_PLACEHOLDER = re.compile(r"<[^<>\s]{1,40}>|\{[^{}\s]{1,40}\}|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")
_NOT_FILES = frozenset("e.g i.e etc.".split())
_TRAIL = ".,;:!?)]}'\""


def concrete_tokens(skill: TaskSkill) -> list[str]:
    """The commands, URLs, paths, file names and tool names a skill names, first seen first."""
    texts: list[str] = []
    for name in LIST_SECTIONS:
        if name != "triggers":
            texts.extend(getattr(skill, name))
    for name in TEXT_SECTIONS:
        value = getattr(skill, name)
        if name != "description" and isinstance(value, str):
            texts.append(value)
    for name in FILE_SECTIONS:
        for body in getattr(skill, name).values():
            # comment lines (a script's shebang and notes) are the package's, not a claim
            texts.extend(line for line in body.splitlines() if not line.lstrip().startswith("#"))
    found: list[str] = [t.strip() for t in skill.tools if t.strip()]
    for text in texts:
        found.extend(tokens_in(text))
    return list(dict.fromkeys(t for t in found if t))


def tokens_in(text: str) -> list[str]:
    """The concrete tokens of one text (see the module docstring)."""
    out = [c for c in st.commands_in(text)]
    out += [u.rstrip(_TRAIL) for u in _URL.findall(text)]
    rest = _URL.sub(" ", text)
    out += [p.rstrip(_TRAIL) for p in _PATH.findall(rest) if len(p) > 2]
    out += [f for f in _FILE.findall(rest) if f.lower() not in _NOT_FILES]
    out += st.tools_in(text)
    return out


def _fold(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def grounded(token: str, source: str) -> bool:
    """Whether ``token`` appears in ``source`` (already folded), placeholders standing for any
    text (the generalisation rule)."""
    token = _fold(token)
    if not token:
        return True
    if token in source:
        return True
    parts = _PLACEHOLDER.split(token)
    if len(parts) == 1:
        return False
    literal = [re.escape(p) for p in parts]
    pattern = r"\S*?".join(literal) if all(len(p.strip()) == len(p) for p in parts) else None
    if pattern is not None and re.search(pattern, source):
        return True
    return bool(re.search(r".*?".join(literal), source))


def invented(skill: TaskSkill, sources: Iterable[str]) -> list[str]:
    """The concrete tokens of ``skill`` that ``sources`` (texts it was distilled from, and the
    text of its earlier, grounded version) do not contain."""
    source = _fold("\n".join(sources))
    return [t for t in concrete_tokens(skill) if not grounded(t, source)]


def skill_text(skill: TaskSkill) -> str:
    """Every text of a skill that tokens can come from (an earlier version as a source)."""
    parts: list[str] = [*skill.tools]
    for name in LIST_SECTIONS:
        parts.extend(getattr(skill, name))
    for name in TEXT_SECTIONS:
        value = getattr(skill, name)
        if isinstance(value, str):
            parts.append(value)
    for name in FILE_SECTIONS:
        parts.extend(getattr(skill, name).values())
    return "\n".join(parts)
