"""Task skills in a memories export: what ``export memories`` adds to the row of a task skill's
memory item, and what ``import memories`` writes back from it.

A stored task skill is a memory item too (``distill.memory_item``: kind ``task_skill``, its id
derived from the task skill's), so it travels in that item's row of the export file, in three
more columns that are null (or empty) on every other row:

================================  ========================================================
column                            holds
================================  ========================================================
``task_skill``                    the LanceDB ``task_skills`` row: the current version, its
                                  vector, its usage counts
``task_skill_versions``           its ``task_skill_versions`` rows, oldest first
``task_skill_packages``           the published package of each version, as the artifact
                                  store keeps it: ``version``, ``path`` (relative to the
                                  skills URI) and ``data`` (the zip's bytes)
================================  ========================================================

An import publishes the packages at the same paths under the home's own skills URI and points the
rows at them (a package URL names a file of the home it is in), writes the current version to
LanceDB before the catalog (the order of the store sink, so ``storage.reconcile`` repairs a crash
between the two), and in the catalog transaction upserts ``task_skills`` by version and adds the
versions the home lacks. A task skill whose memory item is not in the memories table (a deleted
one: its item leaves the table) does not travel.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pyarrow as pa

from skillstream import tables as declared
from skillstream.distill.memory_item import memory_id
from skillstream.distill.record import TaskSkill
from skillstream.settings import Settings
from skillstream.storage import filters
from skillstream.storage.artifacts import ArtifactStore, skills_store
from skillstream.storage.catalog import Catalog
from skillstream.storage.home import storage_options
from skillstream.storage.task_skills import VERSIONS, TaskSkillIndex

SKILL = "task_skill"
SKILL_VERSIONS = "task_skill_versions"
PACKAGES = "task_skill_packages"
COLUMNS = (SKILL, SKILL_VERSIONS, PACKAGES)


def _nullable(schema: pa.Schema) -> pa.StructType:
    # every field nullable: older pyarrow cannot cast a struct of nullable fields to one of
    # non-nullable fields (see transfer.file_schema); the stores check their own constraints.
    # A fixed-size list (the vector) is written as a list: under a null struct (a row that is no
    # task skill) its child holds no values, which older pyarrow refuses to read back as a
    # fixed-size list; the import's TaskSkill.from_row takes either
    return pa.struct([_loose(f).with_nullable(True) for f in schema])


def _loose(f: pa.Field) -> pa.Field:
    if pa.types.is_fixed_size_list(f.type):
        return f.with_type(pa.list_(f.type.value_type))
    return f


def file_fields(dim: int) -> list[pa.Field]:
    """The three task-skill columns of an export file for vectors of width ``dim``."""
    package = pa.struct(
        [
            pa.field("version", pa.int32()),
            pa.field("path", pa.string()),
            pa.field("data", pa.binary()),
        ]
    )
    return [
        pa.field(SKILL, _nullable(declared.task_skills_lance(dim))),
        pa.field(SKILL_VERSIONS, pa.list_(_nullable(declared.TASK_SKILL_VERSIONS))),
        pa.field(PACKAGES, pa.list_(package)),
    ]


class SkillExport:
    """The task skills of a home (or of one owner), ready to be attached to their items' rows.

    Args:
        settings: The home.
        cat: Its catalog, open.
        owner: Only this owner's task skills.
    """

    def __init__(self, settings: Settings, cat: Catalog, owner: str | None = None) -> None:
        self.store = skills_store(settings.storage)
        index = TaskSkillIndex.open(
            settings.storage.lancedb, storage_options(settings), create=False
        )
        rows: list[dict[str, Any]] = []
        if index.table.exists:
            where = filters.eq("owner_id", owner) if owner is not None else None
            rows = index.table.scan(where).to_pylist()
        self.skills = {memory_id(r["id"]): r for r in rows}
        self.versions: dict[str, list[dict[str, Any]]] = defaultdict(list)
        if rows and cat.has(VERSIONS):
            cur = cat.con.execute(
                f"SELECT * FROM {VERSIONS} WHERE skill_id IN (SELECT unnest(?::VARCHAR[])) "
                "ORDER BY skill_id, version",
                [[r["id"] for r in rows]],
            )
            for v in cur.fetch_arrow_table().to_pylist():
                self.versions[v["skill_id"]].append(v)

    def columns(self, ids: list[str], dim: int) -> list[pa.Array]:
        """The three task-skill columns for rows of these memory ids (in :data:`COLUMNS` order)."""
        skills, versions, packages = [], [], []
        for i in ids:
            row = self.skills.get(i)
            skills.append(row)
            history = self.versions.get(row["id"], []) if row else []
            versions.append(history)
            packages.append([p for v in history if (p := self._package(v)) is not None])
        types = [f.type for f in file_fields(dim)]
        return [pa.array(values, type=t) for values, t in zip((skills, versions, packages), types)]

    def _package(self, version: dict[str, Any]) -> dict[str, Any] | None:
        """A version's package as the store keeps it (``None``: it has none, or it is gone)."""
        url = version.get("package_url")
        if not url or not self.store.exists(url):
            return None
        return {
            "version": version["version"],
            "path": self.store.relative(url),
            "data": self.store.get(url),
        }


def skills_of(table: pa.Table, store: ArtifactStore) -> tuple[list[TaskSkill], list[dict]]:
    """The task skills and ``task_skill_versions`` rows of a batch of an export file, with their
    packages published in ``store`` and every package URL pointing there (none: not carried)."""
    if SKILL not in table.column_names:  # a file of format 1
        return [], []
    skills: list[TaskSkill] = []
    versions: list[dict] = []
    columns = (table.column(c).to_pylist() for c in COLUMNS)
    for row, history, packages in zip(*columns, strict=True):
        if row is None:
            continue
        urls = {p["version"]: store.put(p["path"], p["data"]) for p in packages or ()}
        skill = TaskSkill.from_row(row)
        skill.package_url = urls.get(skill.version)
        skills.append(skill)
        for v in history or ():
            v = {**v, "package_url": urls.get(v["version"])}
            if v.get("record"):
                record = json.loads(v["record"])
                record["package_url"] = v["package_url"]
                v["record"] = json.dumps(record, ensure_ascii=False, sort_keys=True)
            versions.append(v)
    return skills, versions
