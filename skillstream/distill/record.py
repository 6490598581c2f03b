"""The task-skill record and the values that flow through distillation.

A **task skill** is a reusable procedure for doing one kind of user task ("deploy a Flask app to
staging"), distilled from conversations. This module holds plain data only:

* :class:`TaskSkill`: the record (what ``SKILL.md`` renders, what the stores keep), whose name
  and sections are declared once in :class:`SkillContent`;
* :class:`TaskSegment`: the messages of one task inside a conversation (ranges may interleave);
* :class:`ConversationBlock`: the messages of a conversation between two idle gaps (what the flow
  hands to the distiller when a session closes);
* :class:`TaskSkillResult`: one change of one task skill, the unit the store sink writes.

Names follow the Agent Skills rules: lowercase ASCII letters, digits and single hyphens, at most 64
characters, no hyphen at either end. A task skill's id hashes its owner and name, so the name is
unique per owner and a replay writes the same id.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa

from skillstream.columns import STR_LIST, TS, arrow_fields, column, columns
from skillstream.distill.sections import FILES, LIST, TEXT, section, sections_of
from skillstream.errors import InputError
from skillstream.ids import prefixed_id, stable_id
from skillstream.model import CatalogRow, LLMCall, Message
from skillstream.vocab import TaskSkillStatus

NAME_MAX = 64
DESCRIPTION_MAX = 1024
NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")

CHANGES = (
    "created",
    "updated",
    "merged",
    "saved",
    "patched",
    "imported",
    "deleted",
    "feedback",
    "pinned",
    "unpinned",
    "aged",
)
"""What a new version of a task skill came from (``feedback``: an outcome was recorded;
``pinned``/``unpinned``: a person's pin; ``aged``: usage age moved its state, see
``distill.trust``)."""


def slugify(text: str, fallback: str = "task") -> str:
    """A valid task-skill name made from free text (``"Deploy App!"`` -> ``deploy-app``).

    Text without ASCII letters or digits (a Chinese title, say) gives ``fallback`` plus a short
    hash of the text, so different titles still get different names.
    """
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    if not slug:
        return f"{fallback}-{stable_id(text, size=4)}"
    if len(slug) > NAME_MAX:
        cut = slug[:NAME_MAX]
        slug = cut.rsplit("-", 1)[0] if "-" in cut else cut
    return slug.strip("-")


def name_problem(name: Any) -> str | None:
    """Why ``name`` is not a valid task-skill name, or ``None`` when it is."""
    if not isinstance(name, str) or not name:
        return "the name is empty"
    if len(name) > NAME_MAX:
        return f"the name has {len(name)} characters; at most {NAME_MAX} are allowed"
    if not NAME_RE.match(name):
        return (
            f"the name {name!r} must use lowercase letters a-z, digits and single hyphens, "
            "and must not start or end with a hyphen"
        )
    return None


def check_name(name: Any) -> str:
    """Return ``name`` when valid; raise ``InputError`` saying what is wrong otherwise."""
    problem = name_problem(name)
    if problem:
        raise InputError(f"invalid task-skill name: {problem}")
    return name


def skill_id(owner_id: str, name: str) -> str:
    """The id of an owner's task skill called ``name``."""
    return prefixed_id("tsk", owner_id, name)


def version_id(skill_id_: str, version: int) -> str:
    """The id of one version of a task skill."""
    return prefixed_id("tsv", skill_id_, version)


@dataclass
class SkillContent:
    """The name and sections of a task skill: what a distiller proposes and ``SKILL.md`` shows.

    Each section is declared here once (see :mod:`skillstream.distill.sections`); the record, the
    draft, the Arrow columns, the ``SKILL.md`` layout, the LLM schema and the patchable names are
    derived from these lines. A draft (``distill.draft.Draft``) leaves ``id`` and ``owner_id``
    empty.

    Attributes:
        id: ``skill_id(owner_id, name)``.
        owner_id: Whose skill it is; names are unique per owner.
        name: Agent Skills name (folder and zip name).
        title: Human title ("Flask App Deployment").
        description: What it does and when to use it (at most 1,024 characters).
        triggers: Keywords that should bring this skill up in a search.
        procedure: Ordered, reusable steps.
        experience: Lessons, pitfalls and error handling.
        preferences: The user's standing preferences for this task.
        examples: Output templates (markdown).
        tools: External tools and commands the task needs.
        verification: How to check the task worked.
        scripts: Generated scripts, ``{"file.py": "code"}`` (``scripts/`` in the package).
        references: Reference documents, ``{"notes.md": "text"}`` (``references/``).
        planned_scripts: Scripts worth writing, ``{"file.py": "purpose"}`` (full mode writes them).
        planned_references: Reference documents worth writing, ``{"file.md": "purpose"}``.
    """

    id: str = column(pa.string(), nullable=False, default="")
    owner_id: str = column(pa.string(), nullable=False, default="")
    name: str = column(pa.string(), nullable=False, default="")
    title: str = section(TEXT, patch=("title",))
    description: str = section(
        TEXT,
        heading="When to use",
        order=1,
        style="when",
        aliases=("trigger", "triggers"),
        patch=("description", "when", "when-to-use"),
        llm_required=True,
    )
    triggers: list[str] = section(LIST, patch=("triggers",))
    procedure: list[str] = section(
        LIST,
        heading="Procedure",
        order=2,
        style="numbered",
        aliases=("steps",),
        patch=("procedure", "steps"),
        llm_required=True,
    )
    experience: list[str] = section(
        LIST,
        heading="Pitfalls and experience",
        order=3,
        aliases=("pitfalls", "experience", "lessons"),
        patch=("experience", "pitfalls"),
    )
    preferences: list[str] = section(
        LIST,
        heading="User preferences",
        order=4,
        aliases=("preferences",),
        patch=("preferences",),
    )
    examples: list[str] = section(
        LIST, heading="Examples", order=5, style="examples", patch=("examples",)
    )
    tools: list[str] = section(
        LIST, heading="Tools", order=7, aliases=("tool usage",), patch=("tools",)
    )
    verification: list[str] = section(
        LIST, heading="Verification", order=9, patch=("verification",)
    )
    scripts: dict[str, str] = section(
        FILES, heading="Scripts", order=6, style="files", llm=False, planned="planned_scripts"
    )
    references: dict[str, str] = section(
        FILES,
        heading="References",
        order=8,
        style="files",
        llm=False,
        planned="planned_references",
    )
    planned_scripts: dict[str, str] = section(FILES)
    planned_references: dict[str, str] = section(FILES)


@dataclass(kw_only=True)
class TaskSkill(SkillContent):
    """A task skill: how to do one kind of task, with everything an agent needs to reuse it.

    The name and sections are those of :class:`SkillContent`; the rest is bookkeeping.

    Attributes:
        version: Increments on every change (distillation, save, patch, import, delete).
        status: ``active``, ``archived`` or ``deleted`` (soft).
        stats: Evidence the offline distiller keeps to merge later segments (step support,
            term counts); not rendered.
    """

    id: str = column(pa.string(), nullable=False)
    owner_id: str = column(pa.string(), nullable=False)
    name: str = column(pa.string(), nullable=False)
    version: int = column(pa.int32(), nullable=False, default=1)
    status: str = column(pa.string(), nullable=False, default=TaskSkillStatus.ACTIVE)
    lang: str = column(pa.string(), default="en")
    times_used: int = column(pa.int64(), default=0)
    last_used_at: datetime | None = column(TS, default=None)
    created_at: datetime | None = column(TS, default=None)
    updated_at: datetime | None = column(TS, default=None)
    package_url: str | None = column(pa.string(), default=None)
    source_conversation_ids: list[str] = column(STR_LIST, default_factory=list)
    source_segment_ids: list[str] = column(STR_LIST, default_factory=list)
    distiller: str = column(pa.string(), default="rules")
    stats: dict[str, Any] = column(pa.string(), json=True, default_factory=dict)
    vector: list[float] | None = column(None, default=None)

    @classmethod
    def new(cls, owner_id: str, name: str, **fields: Any) -> TaskSkill:
        """A version-1 task skill of ``owner_id`` called ``name`` (validated)."""
        check_name(name)
        return cls(id=skill_id(owner_id, name), owner_id=owner_id, name=name, **fields)

    def search_text(self) -> str:
        """What recall and full-text search see: title, name, description and triggers."""
        parts = [
            self.title,
            self.name.replace("-", " "),
            self.description,
            ", ".join(self.triggers),
        ]
        return "\n".join(p for p in parts if p)

    def copy(self) -> TaskSkill:
        """A deep enough copy: lists and dicts are new, so changes do not leak into the original."""
        new = dataclasses.replace(self)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, list):
                setattr(new, f.name, list(value))
            elif isinstance(value, dict):
                setattr(new, f.name, json.loads(json.dumps(value)))
        return new

    def row(self) -> dict[str, Any]:
        """Column values for the ``task_skills`` tables (dicts as JSON text, plus ``vector``)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = (
                json.dumps(value, ensure_ascii=False, sort_keys=True)
                if f.name in _JSON_FIELDS
                else value
            )
        out["search_text"] = self.search_text()
        return out

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> TaskSkill:
        """The record from a ``task_skills`` row (LanceDB or DuckDB); other columns are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key, value in row.items():
            if key not in names:
                continue
            if key in _JSON_FIELDS:
                value = json.loads(value) if isinstance(value, str) and value else {}
            elif key in _LIST_FIELDS and value is None:
                value = []
            values[key] = value
        if values.get("vector") is not None:
            values["vector"] = [float(x) for x in values["vector"]]
        return cls(**values)

    def document(self) -> dict[str, Any]:
        """The record as plain JSON-friendly data, without the vector and the merge evidence."""
        out = {}
        for f in dataclasses.fields(self):
            if f.name in ("vector", "stats"):
                continue
            value = getattr(self, f.name)
            out[f.name] = value.isoformat() if isinstance(value, datetime) else value
        return out


_JSON_FIELDS = frozenset(name for name, col in columns(TaskSkill) if col.json)
_LIST_FIELDS = frozenset(name for name, col in columns(TaskSkill) if col.type == STR_LIST)

SECTIONS = sections_of(SkillContent)
"""Every section of a task skill, in field order."""
SECTION = {s.name: s for s in SECTIONS}
LIST_SECTIONS = tuple(s.name for s in SECTIONS if s.shape == LIST)
"""Fields that hold a list of strings (one bullet, step or example each)."""
TEXT_SECTIONS = tuple(s.name for s in SECTIONS if s.shape == TEXT)
"""Fields that hold one text."""
FILE_SECTIONS = tuple(s.name for s in SECTIONS if s.shape == FILES)
"""Fields that hold files (``{"name": "text"}``, JSON in the tables)."""
SEARCH_TEXT = pa.field("search_text", pa.string())
"""The column :meth:`TaskSkill.search_text` fills (``row()`` adds it)."""


def task_skill_fields() -> list[pa.Field]:
    """Arrow columns of a task skill, without the vector, then ``search_text`` (dicts as JSON)."""
    return arrow_fields(TaskSkill, [SEARCH_TEXT])


@dataclass(frozen=True, kw_only=True)
class TaskSkillVersionRow(CatalogRow):
    """A row of ``task_skill_versions``: one version of a task skill, the full record as JSON."""

    version_id: str = column(pa.string(), nullable=False)
    skill_id: str = column(pa.string(), nullable=False)
    owner_id: str = column(pa.string(), nullable=False)
    name: str = column(pa.string(), nullable=False)
    version: int = column(pa.int32(), nullable=False)
    change: str = column(pa.string(), nullable=False)
    status: str | None = column(pa.string(), default=None)
    package_url: str | None = column(pa.string(), default=None)
    segment_id: str | None = column(pa.string(), default=None)
    conversation_id: str | None = column(pa.string(), default=None)
    record: str | None = column(pa.string(), default=None)
    created_at: datetime | None = column(TS, default=None)
    reason: str | None = column(pa.string(), default=None)
    """Why the state changed with this version (``old -> new: why``), or what it recorded."""


@dataclass(frozen=True)
class ConversationBlock:
    """Messages of one conversation between two closes (idle gap, session change, end of input)."""

    block_id: str
    owner_id: str
    conversation_id: str
    messages: tuple[Message, ...]
    held: tuple[str, ...] = ()
    """Ids of its messages that were held in the home (released once the block is distilled)."""

    @classmethod
    def of(
        cls, messages: list[Message] | tuple[Message, ...], held: Iterable[str] = ()
    ) -> ConversationBlock:
        msgs = tuple(messages)
        if not msgs:
            raise InputError("a conversation block needs at least one message")
        first = msgs[0]
        bid = prefixed_id(
            "blk", first.owner_id, first.conversation_id, [m.message_id for m in msgs]
        )
        ids = {m.message_id for m in msgs}
        kept = tuple(i for i in held if i in ids)
        return cls(bid, first.owner_id, first.conversation_id, msgs, kept)


@dataclass(frozen=True)
class TaskSegment:
    """The messages of one task inside a block (their positions may interleave with other tasks).

    Attributes:
        segment_id: Hash of the owner, the conversation and the message ids (a replay gives the
            same id).
        title: A broad task name proposed by the chunker ("Travel planning"); may be empty.
        positions: Indexes of the messages in their block, ascending.
    """

    segment_id: str
    owner_id: str
    conversation_id: str
    messages: tuple[Message, ...]
    positions: tuple[int, ...] = ()
    title: str = ""
    lang: str = "en"

    @classmethod
    def of(
        cls, block: ConversationBlock, positions: list[int], title: str = "", lang: str = "en"
    ) -> TaskSegment:
        pos = sorted(set(positions))
        msgs = tuple(block.messages[i] for i in pos)
        sid = prefixed_id(
            "tseg", block.owner_id, block.conversation_id, [m.message_id for m in msgs]
        )
        return cls(sid, block.owner_id, block.conversation_id, msgs, tuple(pos), title, lang)

    @property
    def end_ts(self) -> datetime:
        return self.messages[-1].ts

    @property
    def unowned_id(self) -> str:
        """The id this segment had when segment ids did not name their owner: a home written
        then lists it among its task skills' sources, and a re-run must still recognise it."""
        return prefixed_id("tseg", self.conversation_id, [m.message_id for m in self.messages])


@dataclass
class TaskSkillResult:
    """One outcome of distillation or of an API call, written by the store sink.

    ``skill`` is the new state of the task skill when something changed (``action`` one of
    ``CHANGES``); ``None`` when the segment was gated out, already distilled, or failed.
    """

    owner_id: str
    action: str
    skill: TaskSkill | None = None
    segment_id: str | None = None
    conversation_id: str | None = None
    llm_calls: list[LLMCall] = field(default_factory=list)
    error: str | None = None
    reason: str | None = None
    """Why the skill's state changed with this result (the version row's ``reason``)."""
    invented: list[str] = field(default_factory=list)
    """Concrete tokens of the draft its sources do not contain (``distill.grounding``)."""

    @property
    def changed(self) -> bool:
        return self.skill is not None and self.action in CHANGES
