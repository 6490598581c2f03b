"""One version of a memory skill: its fields, its instruction text and its table row.

A memory skill has a short *description* (the only part the controller embeds for selection), four
instruction sections (purpose, when to use, how to apply, constraints) that the executor shows the
LLM, the one *action* type it may produce (INSERT, UPDATE, DELETE or NOOP) and a *status*
(``active`` or ``retired``). ``MemorySkillVersion`` holds one stored version of it;
``MemorySkillVersion.to_skill`` gives the ``extract.MemorySkill`` the controller and executors use.

A version may also carry an *offline form* (``extract.OfflineForm``: example sentences of what to
keep or skip, patterns, a threshold), which the offline rules executor runs (``rules.offline``).
It is stored as JSON in the ``offline`` column; rows written before the column existed read as
having none, and a version without one hashes as it always did.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from skillstream.extract import MemorySkill, OfflineForm
from skillstream.memskill.seeds import PRIMITIVES
from skillstream.vocab import MemorySkillStatus, Op

ACTIONS: tuple[str, ...] = tuple(str(op) for op in Op)
STATUSES: tuple[str, ...] = tuple(str(s) for s in MemorySkillStatus)
SECTIONS: tuple[tuple[str, str], ...] = (
    ("purpose", "Purpose"),
    ("when_to_use", "When to use"),
    ("how_to_apply", "How to apply"),
    ("constraints", "Constraints"),
)
"""(field, heading) of the instruction sections, in the order the executor shows them."""
SEED_NAMES = tuple(s.name for s in PRIMITIVES)


@dataclass(frozen=True)
class MemorySkillVersion:
    """One version of a memory skill, as stored in the bank.

    Attributes:
        name: Identifier (lower case, ``a-z0-9_-``), stable across versions.
        version: 1 for the first version, +1 per change.
        description: One or two sentences; embedded by the controller for selection.
        purpose, when_to_use, how_to_apply, constraints: The instruction sections.
        action: The operation type the memory skill may produce.
        status: ``active`` (selectable) or ``retired``.
        source: Who wrote the version: ``seed``, ``import``, ``designer``...
        created_at: When the version was stored (``None`` for seeds not stored yet).
        usage_count, reward_mean, recent_rewards: Usage statistics kept by a trainer.
        offline: What the offline executor does with the skill (``None``: its action only).
    """

    name: str
    version: int
    description: str
    purpose: str
    when_to_use: str
    how_to_apply: str
    constraints: str
    action: str
    status: str = MemorySkillStatus.ACTIVE
    source: str = "seed"
    created_at: datetime | None = None
    usage_count: int = 0
    reward_mean: float | None = None
    recent_rewards: tuple[float, ...] = field(default=())
    offline: OfflineForm | None = None

    @property
    def version_id(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def instruction(self) -> str:
        """The sections as one text, ``Heading: text`` per section (the executor's wording)."""
        return "\n".join(f"{title}: {getattr(self, key)}" for key, title in SECTIONS)

    def content(self) -> dict[str, str]:
        """What makes a version differ from another (no version number, source or counters)."""
        out = {k: getattr(self, k) for k in ("description", "action", "status")}
        out.update({key: getattr(self, key) for key, _ in SECTIONS})
        if self.offline is not None:
            out["offline"] = offline_json(self.offline)
        return out

    def content_hash(self) -> str:
        doc = json.dumps(self.content(), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(doc.encode("utf-8")).hexdigest()[:16]

    def to_skill(self) -> MemorySkill:
        """The ``MemorySkill`` the controller and the executors work with."""
        return MemorySkill(
            name=self.name,
            description=self.description,
            instruction=self.instruction,
            action=self.action,
            version=self.version,
            offline=self.offline,
        )

    def row(self) -> dict[str, Any]:
        """The ``memory_skills`` table row."""
        row: dict[str, Any] = {
            "version_id": self.version_id,
            "name": self.name,
            "version": self.version,
            "source": self.source,
            "content_hash": self.content_hash(),
            "created_at": self.created_at,
            "usage_count": self.usage_count,
            "reward_mean": self.reward_mean,
            "recent_rewards": list(self.recent_rewards),
        }
        row.update(self.content())
        row["offline"] = None if self.offline is None else offline_json(self.offline)
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> MemorySkillVersion:
        return cls(
            name=row["name"],
            version=int(row["version"]),
            description=row["description"],
            purpose=row.get("purpose") or "",
            when_to_use=row.get("when_to_use") or "",
            how_to_apply=row.get("how_to_apply") or "",
            constraints=row.get("constraints") or "",
            action=row["action"],
            status=row.get("status") or MemorySkillStatus.ACTIVE,
            source=row.get("source") or "",
            created_at=row.get("created_at"),
            usage_count=int(row.get("usage_count") or 0),
            reward_mean=row.get("reward_mean"),
            recent_rewards=tuple(row.get("recent_rewards") or ()),
            offline=parse_offline(row.get("offline")),
        )

    @classmethod
    def from_skill(cls, skill: MemorySkill, source: str = "seed") -> MemorySkillVersion:
        """A version from a ``MemorySkill`` whose instruction uses ``Heading: text`` sections."""
        sections = split_instruction(skill.instruction)
        return cls(
            name=skill.name,
            version=skill.version,
            description=skill.description,
            action=skill.action.upper(),
            source=source,
            purpose=sections["purpose"],
            when_to_use=sections["when_to_use"],
            how_to_apply=sections["how_to_apply"],
            constraints=sections["constraints"],
            offline=skill.offline,
        )


def skill_row(s: MemorySkill) -> dict[str, Any]:
    """A memory skill as JSON-ready values (snapshots, resumable state, checkpoints)."""
    return {
        "name": s.name,
        "description": s.description,
        "instruction": s.instruction,
        "action": s.action,
        "version": s.version,
        "offline": None if s.offline is None else s.offline.to_dict(),
    }


def skill_from_row(row: dict[str, Any]) -> MemorySkill:
    """The memory skill of ``skill_row``'s values (rows written without ``offline`` have none)."""
    offline = row.get("offline")
    return MemorySkill(
        str(row["name"]),
        str(row["description"]),
        str(row["instruction"]),
        str(row["action"]),
        int(row["version"]),
        None if not offline else OfflineForm.from_dict(offline),
    )


def carried_skills(meta: dict[str, str]) -> list[MemorySkill]:
    """The memory skills a controller checkpoint carries whole (``bank`` in its meta, written by
    ``eval.training_harness.carried_bank``); none for a checkpoint that carries none."""
    text = meta.get("bank") or ""
    return [skill_from_row(r) for r in json.loads(text)] if text else []


def offline_json(form: OfflineForm) -> str:
    """The stored text of an offline form (canonical JSON: equal forms give equal text)."""
    return json.dumps(form.to_dict(), sort_keys=True, ensure_ascii=False)


def parse_offline(text: str | None) -> OfflineForm | None:
    """The offline form of a stored ``offline`` value (``None`` or empty: none)."""
    if not text:
        return None
    return OfflineForm.from_dict(json.loads(text))


def split_instruction(text: str) -> dict[str, str]:
    """Split ``Purpose: ...\\nWhen to use: ...`` text into the section fields.

    Lines that do not start a section continue the previous one; text before the first heading
    goes to ``how_to_apply``. Missing sections are empty strings.
    """
    titles = {title.lower(): key for key, title in SECTIONS}
    out = {key: [] for key, _ in SECTIONS}  # type: dict[str, list[str]]
    current = "how_to_apply"
    for line in text.splitlines():
        head, sep, rest = line.partition(":")
        key = titles.get(head.strip().lower()) if sep else None
        if key is not None:
            current = key
            line = rest
        out[current].append(line.strip())
    return {k: "\n".join(v).strip() for k, v in out.items()}


def seed_versions() -> list[MemorySkillVersion]:
    """The four primitives as version-1 bank entries."""
    return [MemorySkillVersion.from_skill(s, source="seed") for s in PRIMITIVES]
