"""How a task-skill field is declared: its column type, and for a section, how it is shown.

Every field of :class:`~skillstream.distill.record.TaskSkill` is declared once, in the record's
class body, with :func:`section` (content a distiller proposes and ``SKILL.md`` shows) or
:func:`column` (identity and bookkeeping). The declaration carries everything the other views need,
so they are derived from the record instead of written out again:

* the Arrow columns of the LanceDB and catalog ``task_skills`` tables (:func:`arrow_fields`);
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
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

TEXT = "text"
"""A section holding one text (``title``, ``description``)."""
LIST = "list"
"""A section holding a list of strings (one bullet, step or example each)."""
FILES = "files"
"""A section holding files, ``{"name": "text"}``, stored as JSON text."""

TS = pa.timestamp("us", tz="UTC")
STR_LIST = pa.list_(pa.string())
_ARROW = {TEXT: pa.string(), LIST: STR_LIST, FILES: pa.string()}

STYLES = ("when", "numbered", "bullets", "examples", "files")
"""How a body section renders: the *When to use* paragraph (description and triggers), a numbered
list, a bulleted list, fenced examples, or the package's files with the planned ones."""

_KEY = "skillstream"


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

    @property
    def key(self) -> str:
        """The key of its body text in ``package.parse_skill_md`` (``when`` for *When to use*)."""
        return "when" if self.style == "when" else self.name

    @property
    def arrow_type(self) -> pa.DataType:
        return _ARROW[self.shape]


@dataclass(frozen=True)
class Column:
    """A stored column of the record.

    Attributes:
        type: Arrow type, or ``None`` for a field the tables do not hold as such (the vector, whose
            width comes from the embedding model).
        nullable: Whether the column may be null.
        json: Stored as JSON text (dicts).
        section: The section it is, if any.
    """

    type: pa.DataType | None
    nullable: bool = True
    json: bool = False
    section: Section | None = None


def section(shape: str, *, default: Any = dataclasses.MISSING, **how: Any) -> Any:
    """A record field that is a section (``how``: the :class:`Section` attributes)."""
    sec = Section(shape=shape, **how)
    meta = {_KEY: Column(sec.arrow_type, json=shape == FILES, section=sec)}
    if default is not dataclasses.MISSING:
        return dataclasses.field(default=default, metadata=meta)
    factory: Any = {TEXT: str, LIST: list, FILES: dict}[shape]
    return dataclasses.field(default_factory=factory, metadata=meta)


def column(
    type_: pa.DataType | None,
    *,
    nullable: bool = True,
    json: bool = False,
    default: Any = dataclasses.MISSING,
    default_factory: Any = dataclasses.MISSING,
) -> Any:
    """A record field that is a plain stored column."""
    meta = {_KEY: Column(type_, nullable=nullable, json=json)}
    return dataclasses.field(default=default, default_factory=default_factory, metadata=meta)


def columns(cls: type) -> list[tuple[str, Column]]:
    """The declared columns of a dataclass, in field order, with their names."""
    out = []
    for f in dataclasses.fields(cls):
        col = f.metadata.get(_KEY)
        if col is not None:
            out.append((f.name, col))
    return out


def sections_of(cls: type) -> tuple[Section, ...]:
    """The sections of a dataclass, in field order, with their names filled in."""
    return tuple(
        dataclasses.replace(col.section, name=name)
        for name, col in columns(cls)
        if col.section is not None
    )


def arrow_fields(cls: type, extra: Iterable[pa.Field] = ()) -> list[pa.Field]:
    """Arrow fields of every typed column of a dataclass, in field order, then ``extra``."""
    out = [
        pa.field(name, col.type, nullable=col.nullable)
        for name, col in columns(cls)
        if col.type is not None
    ]
    return out + list(extra)
