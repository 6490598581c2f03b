"""The memory skill bank: versioned memory skills in the catalog, exported to files and back.

Every memory skill is a row of the catalog table ``memory_skills`` (``tables.MEMORY_SKILLS``) per
*version*: ``name@version`` is the key, the highest version of a name is its current state, and a
change of any kind (new wording, new action type, retirement) is written as a new version. Nothing
is updated in place except the usage counters that a trainer keeps on the current version.
(Fields of a memory skill: ``memskill.versions``; the file format: ``memskill.files``.)

An empty bank means the four primitives of ``memskill.seeds``: :meth:`MemorySkillBank.active_skills`
returns them when the table holds no row (and ``services.pipeline.load_memory_skills`` when the
catalog file or the table does not exist), and the first write stores them as version 1 so that
edits start from them.

:meth:`MemorySkillBank.export` writes one Markdown file per memory skill;
:meth:`MemorySkillBank.import_files` validates every given file before writing anything and stores
a new version for each file whose content differs from the current version (unchanged files add
nothing), in one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from skillstream.errors import InputError
from skillstream.extract import MemorySkill
from skillstream.memskill.files import read_skill_file, skill_files, to_markdown
from skillstream.memskill.seeds import PRIMITIVES
from skillstream.memskill.versions import SEED_NAMES, MemorySkillVersion, seed_versions
from skillstream.vocab import MemorySkillStatus

TABLE = "memory_skills"
MAX_ACTIVE = 30
"""Active memory skills the bank holds at most (the MemSkill reference caps its bank near 30)."""


# ---------------------------------------------------------------------------- the bank
class SkillCatalog(Protocol):
    """What the bank needs of a catalog (``storage.catalog.Catalog`` is one)."""

    def sql(self, query: str, params: Any = None) -> Any: ...

    def count(self, table: str) -> int: ...

    def upsert(self, table: str, rows: Any, *, version: str | None = None) -> int: ...

    def transaction(self) -> AbstractContextManager[Any]: ...


@dataclass
class ImportReport:
    """What an import did: new versions stored, and files that matched the current version."""

    created: list[MemorySkillVersion] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


class MemorySkillBank:
    """The bank in an open catalog (read-only catalogs can list, show and export).

    Args:
        catalog: An open catalog (``storage.catalog.Catalog``).
        clock: Time source for ``created_at``.
    """

    def __init__(self, catalog: SkillCatalog, clock: Any = None) -> None:
        self.catalog = catalog
        self.clock = clock or (lambda: datetime.now(UTC))

    # ------------------------------------------------------------------ reading
    def _has_table(self) -> bool:
        rows = self.catalog.sql(
            "SELECT count(*) AS n FROM information_schema.tables WHERE table_name = ?", [TABLE]
        ).to_pylist()
        return bool(rows and rows[0]["n"])

    def history(self, name: str | None = None) -> list[MemorySkillVersion]:
        """Every stored version (of ``name``), by name then version."""
        if not self._has_table():
            return []
        if name is None:
            rows = self.catalog.sql(f"SELECT * FROM {TABLE} ORDER BY name, version").to_pylist()
        else:
            rows = self.catalog.sql(
                f"SELECT * FROM {TABLE} WHERE name = ? ORDER BY version", [name]
            ).to_pylist()
        return [MemorySkillVersion.from_row(r) for r in rows]

    def stored(self) -> bool:
        """True when the bank holds at least one row (else it reads as the seeds)."""
        return bool(self._has_table() and self.catalog.count(TABLE))

    def current(self) -> list[MemorySkillVersion]:
        """The latest version of every memory skill (active and retired), in bank order.

        Bank order: the primitives in seed order, then the others by the time their first version
        was stored, then by name. An empty bank gives the seeds.
        """
        versions = self.history()
        if not versions:
            return seed_versions()
        latest: dict[str, MemorySkillVersion] = {}
        first: dict[str, datetime | None] = {}
        for v in versions:  # ordered by name, then version
            latest[v.name] = v
            first.setdefault(v.name, v.created_at)

        def order(name: str) -> tuple:
            seed = SEED_NAMES.index(name) if name in SEED_NAMES else len(SEED_NAMES)
            t = first.get(name)
            return (seed, t.timestamp() if t else 0.0, name)

        return [latest[n] for n in sorted(latest, key=order)]

    def active(self) -> list[MemorySkillVersion]:
        """Current versions with status ``active``."""
        return [v for v in self.current() if v.status == MemorySkillStatus.ACTIVE]

    def active_skills(self) -> list[MemorySkill]:
        """The selectable memory skills (the seeds for an empty bank)."""
        return [v.to_skill() for v in self.active()] or list(PRIMITIVES)

    def get(self, name: str, version: int | None = None) -> MemorySkillVersion:
        """One version (the current one by default).

        Raises:
            InputError: no memory skill (version) of that name.
        """
        versions = self.history(name) or [v for v in seed_versions() if v.name == name]
        if version is not None:
            versions = [v for v in versions if v.version == version]
        if not versions:
            names = [v.name for v in self.current()]
            what = f"memory skill {name!r}"
            if version:
                what = f"version {version} of {what}"
            raise InputError(f"no {what} in the bank; known memory skills: {names}")
        return versions[-1]

    # ------------------------------------------------------------------ writing
    def ensure_seeded(self) -> int:
        """Store the primitives as version 1 when the bank is empty; returns rows written."""
        if self.stored():
            return 0
        now = self.clock()
        rows = [replace(v, created_at=now).row() for v in seed_versions()]
        return int(self.catalog.upsert(TABLE, rows))

    def put(self, version: MemorySkillVersion, source: str = "api") -> MemorySkillVersion | None:
        """Store ``version``'s content as the next version of its name, if it changed anything.

        Returns:
            The stored version, or ``None`` when the content equals the current version's.
        """
        with self.catalog.transaction():
            self.ensure_seeded()
            return self._put(version, source, self._latest())

    def retire(self, name: str, source: str = "api") -> MemorySkillVersion | None:
        """Store a ``retired`` version of ``name`` (it leaves selection); ``None`` if already."""
        cur = self.get(name)
        return self.put(replace(cur, status=MemorySkillStatus.RETIRED), source)

    def _latest(self) -> dict[str, MemorySkillVersion]:
        return {v.name: v for v in self.history()}

    def _put(
        self, version: MemorySkillVersion, source: str, latest: dict[str, MemorySkillVersion]
    ) -> MemorySkillVersion | None:
        cur = latest.get(version.name)
        if cur is not None and cur.content() == version.content():
            return None
        new = replace(
            version,
            version=(cur.version + 1) if cur else 1,
            source=source,
            created_at=self.clock(),
            usage_count=0,
            reward_mean=None,
            recent_rewards=(),
        )
        self.catalog.upsert(TABLE, [new.row()])
        latest[new.name] = new
        return new

    def import_files(
        self, paths: Sequence[str | Path], *, force: bool = False, dry_run: bool = False
    ) -> ImportReport:
        """Validate memory skill files and store every changed one as a new version.

        All files are checked before anything is written; the writes happen in one transaction.

        Args:
            paths: Files and folders (``.md``, ``.yaml``, ``.yml``).
            force: Accept files exported from an older version than the current one (their
                content replaces the newer versions' content).
            dry_run: Check and report, write nothing.

        Raises:
            InputError: an invalid file, a name given twice, a stale file without ``force``, or a
                bank that would end with no active memory skill or more than ``MAX_ACTIVE``.
        """
        files = [read_skill_file(p) for p in skill_files(paths)]
        seen: dict[str, str] = {}
        for f in files:
            if f.version.name in seen:
                raise InputError(
                    f"memory skill {f.version.name!r} is defined twice: {seen[f.version.name]} and "
                    f"{f.path}"
                )
            seen[f.version.name] = f.path
        latest = {v.name: v for v in self.current()}
        for f in files:
            cur = latest.get(f.version.name)
            if (
                not force
                and cur is not None
                and f.based_on is not None
                and f.based_on < cur.version
                and cur.content() != f.version.content()
            ):
                raise InputError(
                    f"{f.path}: the file was exported from version {f.based_on} of "
                    f"{cur.name!r}, but the bank now holds version {cur.version}; export again "
                    "and redo the edit, or pass --force to replace the newer version's content"
                )
        after = dict(latest)
        for f in files:
            after[f.version.name] = f.version
        active = [v for v in after.values() if v.status == MemorySkillStatus.ACTIVE]
        if not active:
            raise InputError("after this import no memory skill would be active; keep at least one")
        if len(active) > MAX_ACTIVE:
            raise InputError(
                f"after this import {len(active)} memory skills would be active, more than the "
                f"bank's limit of {MAX_ACTIVE}; retire some (status: retired)"
            )
        report = ImportReport()
        if dry_run:
            for f in files:
                cur = latest.get(f.version.name)
                if cur is not None and cur.content() == f.version.content():
                    report.unchanged.append(f.version.name)
                else:
                    report.created.append(
                        replace(f.version, version=(cur.version + 1) if cur else 1)
                    )
            return report
        with self.catalog.transaction():
            self.ensure_seeded()
            stored = self._latest()
            for f in files:
                new = self._put(f.version, "import", stored)
                if new is None:
                    report.unchanged.append(f.version.name)
                else:
                    report.created.append(new)
        return report

    def export(self, folder: str | Path, *, include_retired: bool = True) -> list[Path]:
        """Write the current version of every memory skill to ``folder/<name>.md``."""
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for v in self.current():
            if v.status != MemorySkillStatus.ACTIVE and not include_retired:
                continue
            path = out / f"{v.name}.md"
            path.write_text(to_markdown(v), encoding="utf-8")
            written.append(path)
        return written

    def record_rewards(self, rewards: dict[str, list[float]], keep: int = 20) -> int:
        """Add a trainer's per-skill rewards to the current versions' usage statistics.

        ``usage_count`` grows by the number of rewards, ``reward_mean`` is the running mean over
        all of them and ``recent_rewards`` keeps the last ``keep``. Returns the rows rewritten.
        """
        rows = []
        with self.catalog.transaction():
            self.ensure_seeded()
            for v in self.current():
                got = rewards.get(v.name) or []
                if not got:
                    continue
                n = v.usage_count + len(got)
                total = (v.reward_mean or 0.0) * v.usage_count + sum(got)
                recent = (tuple(v.recent_rewards) + tuple(float(r) for r in got))[-keep:]
                rows.append(
                    replace(v, usage_count=n, reward_mean=total / n, recent_rewards=recent).row()
                )
            if rows:
                self.catalog.upsert(TABLE, rows)
        return len(rows)

    def usage(self) -> dict[str, int]:
        """Spans (status ``done``) each memory skill was selected for, from the span ledger."""
        rels = {
            r["table_name"]
            for r in self.catalog.sql(
                "SELECT table_name FROM information_schema.tables"
            ).to_pylist()
        }
        if "spans" not in rels:
            return {}
        rows = self.catalog.sql(
            "SELECT name, count(*) AS n FROM (SELECT unnest(memory_skills) AS name FROM spans "
            "WHERE status = 'done') GROUP BY name"
        ).to_pylist()
        return {r["name"]: int(r["n"]) for r in rows}
