"""How a task-skill field is declared: its column type, and for a section, how it is shown.

Every field of :class:`~skillstream.distill.record.TaskSkill` is declared once, in the record's
class body, with :func:`section` (content a distiller proposes and ``SKILL.md`` shows) or
:func:`skillstream.columns.column` (identity and bookkeeping). The declaration carries everything
the other views need, so they are derived from the record instead of written out again:

* the Arrow columns of the LanceDB and catalog ``task_skills`` tables
  (:func:`skillstream.columns.arrow_fields`);
* the ``SKILL.md`` body: which heading shows a section, in what order and style, and which other
  headings mean the same section when a package is read back (:attr:`Section.heading`,
  :attr:`Section.order`, :attr:`Section.style`, :attr:`Section.aliases`);
* the LLM extraction schema (:attr:`Section.llm`, :attr:`Section.llm_required`);
* the names ``skills patch --section`` accepts (:attr:`Section.patch`);
* the draft a distiller returns (``distill.draft.Draft`` shares the section fields).

Adding a section is adding one ``section(...)`` line to the record.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from skillstream.columns import STR_LIST, column, columns

TEXT = "text"
"""A section holding one text (``title``, ``description``)."""
LIST = "list"
"""A section holding a list of strings (one bullet, step or example each)."""
FILES = "files"
"""A section holding files, ``{"name": "text"}``, stored as JSON text."""

_ARROW = {TEXT: pa.string(), LIST: STR_LIST, FILES: pa.string()}

STYLES = ("when", "numbered", "bullets", "examples", "files")
"""How a body section renders: the *When to use* paragraph (description and triggers), a numbered
list, a bulleted list, fenced examples, or the package's files with the planned ones."""


@dataclass(frozen=True)
class Section:
    """One section of a task skill.

    Attributes:
        name: The record's field name (filled in from the class body).
        shape: ``TEXT``, ``LIST`` or ``FILES``.
        heading: The ``SKILL.md`` body heading showing it, or ``None`` when no heading of its own
            does (the title is the page title, triggers are in the frontmatter).
        order: Position of the heading in the body.
        style: How the heading's body renders and reads back (one of ``STYLES``).
        aliases: Other headings (lower case) that mean this section when reading ``SKILL.md``.
        patch: ``--section`` names that edit it (empty: not patchable).
        llm: Whether the extraction answer carries it.
        llm_required: Whether the extraction answer must carry it.
        planned: For ``FILES``: the field listing the files worth writing, shown under the same
            heading.
    """

    name: str = ""
    shape: str = TEXT
    heading: str | None = None
    order: int = 0
    style: str = "bullets"
    aliases: tuple[str, ...] = ()
    patch: tuple[str, ...] = ()
    llm: bool = True
    llm_required: bool = False
    planned: str | None = None

    def __post_init__(self) -> None:
        if self.shape not in _ARROW:
            raise ValueError(f"section shape {self.shape!r} is not one of {sorted(_ARROW)}")
        if self.style not in STYLES:
            raise ValueError(f"section style {self.style!r} is not one of {STYLES}")

    @property
    def key(self) -> str:
        """The key of its body text in ``package.parse_skill_md`` (``when`` for *When to use*)."""
        return "when" if self.style == "when" else self.name

    @property
    def arrow_type(self) -> pa.DataType:
        return _ARROW[self.shape]


def section(shape: str, *, default: Any = dataclasses.MISSING, **how: Any) -> Any:
    """A record field that is a section (``how``: the :class:`Section` attributes)."""
    sec = Section(shape=shape, **how)
    if default is dataclasses.MISSING:
        factory: Any = {TEXT: str, LIST: list, FILES: dict}[shape]
        return column(sec.arrow_type, json=shape == FILES, info=sec, default_factory=factory)
    return column(sec.arrow_type, json=shape == FILES, info=sec, default=default)


def sections_of(cls: type) -> tuple[Section, ...]:
    """The sections of a dataclass, in field order, with their names filled in."""
    return tuple(
        dataclasses.replace(col.info, name=name)
        for name, col in columns(cls)
        if isinstance(col.info, Section)
    )
