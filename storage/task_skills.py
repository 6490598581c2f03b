"""Where task skills live: the LanceDB ``task_skills`` table and two DuckDB catalog tables.

* LanceDB ``task_skills``: the current version of every task skill, with its vector and a
  full-text index on ``search_text`` (title, name, description, triggers), so a hybrid search needs
  no second store. The flow reads an owner's task skills from here when it starts.
* DuckDB ``task_skills``: the same columns without the vector, for SQL.
* DuckDB ``task_skill_versions``: one row per version (``created``, ``updated``, ``saved``,
  ``patched``, ``imported``, ``deleted``) with the package URL and the full record as JSON; packages
  of earlier versions stay where they were published.

All three tables are declared in ``skillstream.tables``; the store sink
(``storage.task_skill_writer``) writes both catalog tables in the same transaction as the rest of a
batch. ``times_used`` and ``last_used_at`` are bumped in LanceDB when a task skill is viewed (one
``UPDATE``, no new version); every later write carries the higher counters forward, so a view is
never lost to a concurrent distillation, and the catalog copy catches up on the next write.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa

from skillstream import tables
from skillstream.distill.record import TaskSkill, TaskSkillVersionRow, version_id
from skillstream.errors import InputError
from skillstream.lifecycle.ranking import relevance
from skillstream.settings import DEFAULT_RANK_WEIGHTS
from skillstream.storage import filters
from skillstream.storage.lance import LanceTable, connect
from skillstream.vocab import TaskSkillStatus

TABLE = "task_skills"
VERSIONS = "task_skill_versions"


def lance_schema(dim: int) -> pa.Schema:
    """Schema of the LanceDB ``task_skills`` table for vectors of width ``dim``."""
    return tables.task_skills_lance(dim)


def catalog_row(skill: TaskSkill) -> dict[str, Any]:
    """The DuckDB ``task_skills`` row of a task skill."""
    row = skill.row()
    row.pop("vector", None)
    return row


def version_row(
    skill: TaskSkill,
    change: str,
    *,
    segment_id: str | None = None,
    conversation_id: str | None = None,
    reason: str | None = None,
) -> TaskSkillVersionRow:
    """The ``task_skill_versions`` row of a task skill's current version."""
    return TaskSkillVersionRow(
        version_id=version_id(skill.id, skill.version),
        skill_id=skill.id,
        owner_id=skill.owner_id,
        name=skill.name,
        version=skill.version,
        change=change,
        status=skill.status,
        package_url=skill.package_url,
        segment_id=segment_id,
        conversation_id=conversation_id,
        record=json.dumps(skill.document(), ensure_ascii=False, sort_keys=True),
        created_at=skill.updated_at,
        reason=reason,
    )


class TaskSkillIndex:
    """The LanceDB ``task_skills`` table.

    Args:
        db: A LanceDB connection (``storage.lance.connect``).
        dim: Vector width; ``None`` takes it from the existing table (reads only).
        create: Create the table (and its full-text index) when missing.

    Raises:
        InputError: when the table must be created and ``dim`` is unknown.
    """

    def __init__(self, db: Any, dim: int | None = None, *, create: bool = True) -> None:
        self.db = db
        if dim is None:
            dim = _existing_dim(db)
        if dim is None:
            if create:
                raise InputError(
                    "the task_skills table does not exist yet; give the vector width to create it"
                )
            dim = 1
            create = False
        self.dim = dim
        self.table = LanceTable(
            db,
            TABLE,
            lance_schema(dim),
            key="id",
            fts_columns=("search_text",),
            version_column="version",
            create=create,
        )

    @classmethod
    def open(
        cls,
        uri: str,
        storage_options: dict | None = None,
        dim: int | None = None,
        *,
        create: bool = True,
    ) -> TaskSkillIndex:
        return cls(connect(uri, storage_options), dim, create=create)

    # ------------------------------------------------------------------ writing
    def upsert(self, skills: Iterable[TaskSkill]) -> int:
        """Write task skills by id (the highest version wins); usage counters never go down."""
        items = list(skills)
        if not items:
            return 0
        usage = self._usage([s.id for s in items])
        rows = []
        for s in items:
            if s.vector is None or len(s.vector) != self.dim:
                raise InputError(
                    f"task skill {s.name!r} needs a vector of {self.dim} dimensions "
                    "before it is stored"
                )
            row = s.row()
            used, last = usage.get(s.id, (0, None))
            row["times_used"] = max(int(row.get("times_used") or 0), used)
            if last is not None and (row.get("last_used_at") is None or row["last_used_at"] < last):
                row["last_used_at"] = last
            row["vector"] = np.asarray(s.vector, dtype=np.float32)
            rows.append(row)
        return self.table.upsert(rows)

    def _usage(self, ids: Sequence[str]) -> dict[str, tuple[int, datetime | None]]:
        if not self.table.exists:
            return {}
        got = self.table.scan(
            filters.is_in("id", ids), columns=["id", "times_used", "last_used_at"]
        )
        return {r["id"]: (int(r["times_used"] or 0), r["last_used_at"]) for r in got.to_pylist()}

    def bump_usage(self, skill_id: str, when: datetime) -> None:
        """Add one to ``times_used`` and set ``last_used_at`` (no new version)."""
        self.table._require().update(
            where=filters.eq("id", skill_id),
            values_sql={
                "times_used": "coalesce(times_used, 0) + 1",
                "last_used_at": f"CAST({filters.literal(when.isoformat())} AS TIMESTAMP)",
            },
        )

    # ------------------------------------------------------------------ reading
    def get(self, skill_id: str) -> TaskSkill | None:
        rows = self.table.scan(filters.eq("id", skill_id)).to_pylist()
        return TaskSkill.from_row(rows[0]) if rows else None

    def by_ids(self, ids: Sequence[str]) -> list[TaskSkill]:
        """The stored task skills with these ids (any status)."""
        if not ids:
            return []
        return [
            TaskSkill.from_row(r)
            for r in self.table.scan(filters.is_in("id", list(ids))).to_pylist()
        ]

    def find(self, owner_id: str | None, name: str) -> list[TaskSkill]:
        """Task skills called ``name``, of one owner (of every owner when ``owner_id`` is None)."""
        where = filters.where_all(
            filters.eq("name", name),
            filters.eq("owner_id", owner_id) if owner_id is not None else None,
        )
        return [TaskSkill.from_row(r) for r in self.table.scan(where).to_pylist()]

    def list(
        self,
        owner_id: str | None = None,
        statuses: Sequence[str] | None = (TaskSkillStatus.ACTIVE,),
    ) -> list[TaskSkill]:
        """Task skills (of one owner or all), sorted by owner and name."""
        where = filters.where_all(
            filters.eq("owner_id", owner_id) if owner_id is not None else None,
            filters.is_in("status", statuses) if statuses is not None else None,
        )
        out = [TaskSkill.from_row(r) for r in self.table.scan(where).to_pylist()]
        return sorted(out, key=lambda s: (s.owner_id, s.name))

    def search(
        self,
        text: str | None,
        vector: Any = None,
        *,
        owner_id: str | None = None,
        k: int = 5,
        statuses: Sequence[str] = (TaskSkillStatus.ACTIVE,),
        keyword_weight: float = DEFAULT_RANK_WEIGHTS["keyword"],
    ) -> builtins.list[tuple[TaskSkill, float]]:
        """Hybrid search (vector + BM25 on ``search_text``), best first, scored by relevance as
        memory search scores it (``lifecycle.ranking.relevance``: cosine similarity lifted by
        the full-text match), so the two searches' scores are on one scale."""
        where = filters.where_all(
            filters.eq("owner_id", owner_id) if owner_id is not None else None,
            filters.is_in("status", statuses),
        )
        hits = self.table.search(text, vector, where=where, k=k).to_pylist()
        best_keyword = max((float(h.get("keyword") or 0.0) for h in hits), default=0.0)
        best_score = max((float(h.get("score") or 0.0) for h in hits), default=0.0)
        scored = [
            (
                TaskSkill.from_row(h),
                round(relevance(h, best_keyword, best_score, keyword_weight), 6),
            )
            for h in hits
        ]
        scored.sort(key=lambda pair: -pair[1])  # stable: ties keep the store's order
        return scored

    def optimize(self) -> None:
        self.table.optimize()


def _existing_dim(db: Any) -> int | None:
    try:
        tbl = db.open_table(TABLE)
    except ValueError:
        return None
    field = tbl.schema.field("vector")
    return int(field.type.list_size)
