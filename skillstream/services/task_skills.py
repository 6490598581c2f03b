"""The task-skill API: list, show, save, patch, delete, consolidate, export, import, search.

Used by the CLI (``skillstream skills ...``) and the MCP server. Reads go to LanceDB only, so they
work while a flow holds the DuckDB catalog. Writes go through the store sink's own write path
(``storage.writer.write_results``): LanceDB ``task_skills`` and, in one transaction, the catalog
tables ``task_skills`` and ``task_skill_versions``; they need the catalog, so they fail with a
clear error while a running flow holds it.

Rules:

* a name is unique per owner; every save, patch, import and delete writes a new version, and
  every version except a delete publishes its own package (earlier packages stay);
* ``show`` (``view``) bumps ``times_used`` and ``last_used_at`` and writes no version;
* ``consolidate`` merges an owner's duplicate task skills: the survivor's next version holds both
  sources and is published, the absorbed skill's next version is archived;
* ``delete`` is soft: status ``deleted``, hidden from lists and search, history and packages kept;
  saving the name again brings it back as the next version;
* trust (``distill.trust``): lists and search serve ``active`` skills unless asked for more
  (``states``), ranked by reliability, and show each skill's state and reliability; ``feedback``
  records an outcome (a new version, ``retired`` when its reliability falls below the threshold),
  ``pin`` keeps a skill active whatever its outcomes and age, and ``maintain`` moves unused skills
  to ``stale`` and ``archived``; every change of state is a version whose ``reason`` says why.

Example:
    >>> api = TaskSkillAPI(Settings.load(home=".skillstream"), owner="omar")  # doctest: +SKIP
    >>> [s["name"] for s in api.list()]  # doctest: +SKIP
    ['deploy-flask-app']
"""

from __future__ import annotations

import builtins
import contextlib
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from skillstream.distill import trust
from skillstream.distill.distiller import OwnerTaskSkills, TaskSkillDistiller
from skillstream.distill.factory import trust_rules
from skillstream.distill.imports import read_zip
from skillstream.distill.package import (
    package_files,
    section_items,
    skill_from_files,
    validate_files,
    write_folder,
)
from skillstream.distill.record import SECTIONS, TEXT_SECTIONS, TaskSkill, TaskSkillResult
from skillstream.errors import InputError
from skillstream.services.publishing import Publisher
from skillstream.settings import Settings, local_path
from skillstream.storage.home import storage_options
from skillstream.storage.task_skills import TaskSkillIndex
from skillstream.vocab import TaskSkillStatus

log = logging.getLogger(__name__)

DEFAULT_OWNER = "default"
PATCH_SECTIONS = {name: s.name for s in SECTIONS for name in s.patch}
"""``--section`` names and the field each edits; ``scripts/<file>`` and ``references/<file>``
set one file of the package."""


class TaskSkillAPI:
    """Task skills of one home, optionally scoped to one owner.

    Args:
        settings: The home.
        owner: Default owner of every call (the MCP server's scope); ``None`` means "any owner"
            for reads and ``DEFAULT_OWNER`` for writes.
        embed: Texts to unit vectors (default: the settings' embedder, loaded on first need).
        clock: Current time.
    """

    def __init__(
        self, settings: Settings, *, owner: str | None = None, embed: Any = None, clock: Any = None
    ) -> None:
        self.settings = settings
        self.owner = owner
        self._embed = embed
        self.clock = clock or (lambda: datetime.now(UTC))
        self.publisher = Publisher.from_settings(settings.storage)
        self._reconciled = False

    # ------------------------------------------------------------------ plumbing
    @property
    def embed(self) -> Any:
        if self._embed is None:
            from skillstream.embed import get_embedder

            self._embed = get_embedder(self.settings.embedding).encode
        return self._embed

    def _index(self, create: bool = False) -> TaskSkillIndex:
        dim = None
        if create:
            dim = int(self.embed(["dim"]).shape[1])
        return TaskSkillIndex.open(
            self.settings.storage.lancedb, storage_options(self.settings), dim, create=create
        )

    def _reconcile(self) -> None:
        """Before a command that writes: roll LanceDB back to what the catalog committed (an
        earlier command killed between its two writes left it ahead), once per service."""
        if self._reconciled:
            return
        from skillstream.storage.reconcile import reconcile_home

        index = self._index()
        if index.table.exists:
            reconcile_home(self.settings, int(self.embed(["dim"]).shape[1]), self.embed)
        self._reconciled = True

    def _owner(self, owner: str | None) -> str | None:
        return owner if owner is not None else self.owner

    def _write(self, results: list[TaskSkillResult]) -> None:
        from skillstream.storage.home import open_stores
        from skillstream.storage.writer import write_results

        dim = (
            len(results[0].skill.vector)
            if results and results[0].skill and results[0].skill.vector
            else 384
        )
        if not self.settings.storage.remote:
            local_path(self.settings.storage.home).mkdir(parents=True, exist_ok=True)
        with open_stores(self.settings, dim) as stores:
            write_results(stores, results)

    def _finish(self, skill: TaskSkill) -> TaskSkill:
        core = TaskSkillDistiller(_NoDistiller(), self.embed, publisher=self.publisher)  # type: ignore[arg-type]
        return core.finish(skill)

    @property
    def rules(self) -> trust.TrustRules:
        return trust_rules(self.settings.distillation)

    def _states(self, include_archived: bool, states: Sequence[str] | None) -> tuple[str, ...]:
        if states is not None:
            unknown = sorted(set(states) - set(trust.SHOWN))
            if unknown:
                raise InputError(
                    f"unknown task-skill states {unknown}; use some of {list(trust.SHOWN)}"
                )
            return tuple(states)
        return trust.SHOWN if include_archived else trust.SERVED

    def trust_of(self, skill: TaskSkill) -> dict[str, Any]:
        """A task skill's state, reliability, outcomes and pin."""
        c = trust.counters(skill)
        return {
            "state": skill.status,
            "reliability": round(trust.reliability(skill, self.rules), 4),
            "successes": int(c["successes"]),
            "failures": int(c["failures"]),
            "pinned": c["pinned"],
        }

    # ------------------------------------------------------------------ reading
    def list(
        self,
        owner: str | None = None,
        *,
        include_archived: bool = False,
        states: Sequence[str] | None = None,
    ) -> list[dict[str, Any]]:
        """The progressive-disclosure index: owner, name, description, version, state and
        reliability per task skill; served (``active``) skills only unless ``include_archived``
        (every state but deleted) or ``states`` asks for more; served first, the most reliable
        first."""
        skills = self._index().list(self._owner(owner), self._states(include_archived, states))
        return [
            {
                "owner_id": s.owner_id,
                "name": s.name,
                "description": s.description,
                "version": s.version,
                **self.trust_of(s),
            }
            for s in trust.serve_order(skills, self.rules)
        ]

    def get(
        self, name: str, owner: str | None = None, *, include_deleted: bool = False
    ) -> TaskSkill:
        """One task skill by name (no usage bump).

        Raises:
            InputError: when there is no such task skill, or the name is ambiguous across owners.
        """
        owner = self._owner(owner)
        found = self._index().find(owner, name)
        if not include_deleted:
            found = [s for s in found if s.status != TaskSkillStatus.DELETED]
        if not found:
            who = f" of owner {owner!r}" if owner is not None else ""
            raise InputError(
                f"no task skill named {name!r}{who}; 'skillstream skills list' shows the names"
            )
        if len(found) > 1:
            owners = sorted(s.owner_id for s in found)
            raise InputError(
                f"task skill {name!r} exists for several owners {owners}; pass --owner"
            )
        return found[0]

    def show(self, name: str, owner: str | None = None) -> TaskSkill:
        """One task skill by name; counts as a use (``times_used`` + 1, ``last_used_at`` now)."""
        skill = self.get(name, owner)
        now = self.clock()
        index = self._index()
        index.bump_usage(skill.id, now)
        self._bump_catalog(skill.id, now)
        return index.get(skill.id) or skill

    def _bump_catalog(self, skill_id: str, now: datetime) -> None:
        """Mirror a usage bump into the catalog when it is free (a running flow holds it)."""
        from skillstream.storage.catalog import CatalogLockedError, catalog_exists, open_catalog

        if not catalog_exists(self.settings.storage):
            return
        try:
            cat = open_catalog(self.settings.storage)
        except CatalogLockedError:
            log.info("catalog busy: the usage count reaches it with the task skill's next write")
            return
        with contextlib.closing(cat):
            cat.con.execute(
                "UPDATE task_skills SET times_used = coalesce(times_used, 0) + 1, last_used_at = ? "
                "WHERE id = ?",
                [now, skill_id],
            )

    def package(self, name: str, owner: str | None = None) -> bytes:
        """The published zip of a task skill's current version."""
        skill = self.get(name, owner, include_deleted=True)
        if not skill.package_url:
            raise InputError(f"task skill {name!r} has no published package")
        return self.publisher.read(skill.package_url)

    def search(
        self,
        query: str,
        owner: str | None = None,
        k: int = 5,
        *,
        states: Sequence[str] | None = None,
    ) -> builtins.list[dict[str, Any]]:
        """Hybrid search over name, description and triggers: served (``active``) skills unless
        ``states`` asks for more, each with its relevance (``score``), state and reliability,
        ordered by relevance times reliability (a skill that keeps failing sinks)."""
        vec = self.embed([query])[0]
        hits = self._index().search(
            query, vec, owner_id=self._owner(owner), k=k, statuses=self._states(False, states)
        )
        rows = [
            {
                "owner_id": s.owner_id,
                "name": s.name,
                "description": s.description,
                "score": round(score, 6),
                **self.trust_of(s),
            }
            for s, score in hits
        ]
        return sorted(rows, key=lambda r: -r["score"] * r["reliability"])

    # ------------------------------------------------------------------ writing
    def save(self, skill: TaskSkill, *, change: str = "saved") -> TaskSkill:
        """Store ``skill`` as the next version of the owner's task skill of that name (or as v1)."""
        self._reconcile()
        skill = skill.copy()
        now = self.clock()
        index = self._index(create=True)
        old = index.get(skill.id)
        if old is not None:
            skill.version = old.version + 1
            skill.created_at = old.created_at
            skill.times_used, skill.last_used_at = old.times_used, old.last_used_at
            skill.source_conversation_ids = old.source_conversation_ids
            skill.source_segment_ids = old.source_segment_ids
            skill.stats = old.stats
        else:
            skill.version = 1
            skill.created_at = now
        skill.updated_at = now
        skill.status = TaskSkillStatus.ACTIVE
        skill.distiller = "manual"
        skill = self._finish(skill)
        self._write([TaskSkillResult(skill.owner_id, change, skill=skill)])
        return skill

    def save_path(self, path: str | Path, owner: str | None = None) -> TaskSkill:
        """Save a package folder, or a ``SKILL.md`` file (its folder holds ``scripts/``...)."""
        p = Path(path)
        folder = p.parent if p.name == "SKILL.md" else p
        if not (folder / "SKILL.md").is_file():
            raise InputError(
                f"{path}: expected a task-skill folder holding SKILL.md, or a SKILL.md file"
            )
        files = {}
        for f in sorted(folder.rglob("*")):
            rel = f.relative_to(folder).as_posix()
            if f.is_symlink():
                raise InputError(f"{path}: {rel} is a symbolic link; links are not accepted")
            if f.is_file() and (
                rel == "SKILL.md" or rel.split("/")[0] in ("scripts", "references")
            ):
                files[rel] = f.read_bytes()
        name = self._name_in(files)
        problems = validate_files(name, files)
        if problems:
            raise InputError(f"{path} is not a valid task skill: " + "; ".join(problems))
        return self.save(skill_from_files(files, self._owner(owner) or DEFAULT_OWNER))

    def import_zip(self, path: str | Path | bytes, owner: str | None = None) -> TaskSkill:
        """Import ``<name>.zip`` after every safety check (see ``imports.read_zip``)."""
        _, files = read_zip(path)
        return self.save(
            skill_from_files(files, self._owner(owner) or DEFAULT_OWNER), change="imported"
        )

    def patch(
        self, name: str, section: str, text: str, owner: str | None = None, *, append: bool = False
    ) -> TaskSkill:
        """Replace (or append to) one section of a task skill; a new version."""
        self._reconcile()
        skill = self.get(name, owner).copy()
        key = section.strip().lower()
        if key.startswith(("scripts/", "references/")):
            folder, _, fname = key.partition("/")
            target = skill.scripts if folder == "scripts" else skill.references
            fname = section.strip().split("/", 1)[1]
            target[fname] = (target.get(fname, "") + "\n" + text) if append else text
        elif key in PATCH_SECTIONS:
            field = PATCH_SECTIONS[key]
            if field in TEXT_SECTIONS:
                value = text.strip()
                setattr(
                    skill, field, f"{getattr(skill, field)} {value}".strip() if append else value
                )
            else:
                items = section_items(text) if field != "examples" else [text.strip()]
                if field == "triggers":
                    items = [t.strip() for i in items for t in i.split(",") if t.strip()]
                setattr(skill, field, (getattr(skill, field) + items) if append else items)
        else:
            raise InputError(
                f"unknown section {section!r}; use one of {sorted(PATCH_SECTIONS)} or "
                "scripts/<file> / references/<file>"
            )
        files_ok = validate_files(skill.name, package_files(skill))
        if files_ok:
            raise InputError(f"the patch would make {name!r} invalid: " + "; ".join(files_ok))
        return self.save(skill, change="patched")

    def delete(self, name: str, owner: str | None = None) -> TaskSkill:
        """Soft delete: a new version with status ``deleted``; packages and history stay."""
        self._reconcile()
        skill = self.get(name, owner).copy()
        skill.version += 1
        skill.status = TaskSkillStatus.DELETED
        skill.updated_at = self.clock()
        self._write([TaskSkillResult(skill.owner_id, "deleted", skill=skill)])
        return skill

    def feedback(
        self, name: str, success: bool, note: str = "", owner: str | None = None
    ) -> dict[str, Any]:
        """Record whether using a task skill worked: a new version with the outcome counted;
        ``retired`` when its reliability falls below ``skill_retire_below``.

        Returns:
            The skill's name, version and trust (``trust_of``), and the change of state or None.
        """
        self._reconcile()
        skill, change = trust.record_outcome(
            self.get(name, owner), success, self.rules, self.clock(), note
        )
        word = "success" if success else "failure"
        reason = _reason(change) or (f"{word}: {note}" if note else word)
        self._write([TaskSkillResult(skill.owner_id, "feedback", skill=skill, reason=reason)])
        return {
            "name": skill.name,
            "version": skill.version,
            **self.trust_of(skill),
            "change": _reason(change),
        }

    def pin(self, name: str, owner: str | None = None, *, pinned: bool = True) -> dict[str, Any]:
        """Pin a task skill (active, served, and no outcome or age moves it) or unpin it."""
        self._reconcile()
        skill, change = trust.pin(self.get(name, owner), pinned, self.clock())
        action = "pinned" if pinned else "unpinned"
        self._write([TaskSkillResult(skill.owner_id, action, skill=skill, reason=_reason(change))])
        return {"name": skill.name, "version": skill.version, **self.trust_of(skill)}

    def maintain(self, owner: str | None = None) -> builtins.list[dict[str, Any]]:
        """Move the task skills whose usage age passed ``skill_stale_days`` or
        ``skill_archive_days`` to ``stale`` or ``archived`` (one version each, with its reason).

        Returns:
            One row per change: owner, name, old and new state, reason, time.
        """
        self._reconcile()
        index = self._index()
        if not index.table.exists:
            return []
        now = self.clock()
        results, out = [], []
        for skill in index.list(self._owner(owner), statuses=None):
            moved = trust.age_change(skill, self.rules, now)
            if moved is None:
                continue
            new, change = moved
            results.append(TaskSkillResult(new.owner_id, "aged", skill=new, reason=_reason(change)))
            out.append(
                {
                    "owner_id": new.owner_id,
                    "name": new.name,
                    "old": change.old,
                    "new": change.new,
                    "reason": change.reason,
                    "at": change.at.isoformat(),
                }
            )
        if results:
            self._write(results)
        return out

    def consolidate(self, owner: str | None = None) -> builtins.list[tuple[str, str]]:
        """Merge the duplicate task skills of each owner and fold its young ones that are due (see
        ``distill.consolidate``).

        Each merge writes a new, published version of the survivor (sources of both) and an
        archived version of the absorbed skill; earlier versions and packages stay.

        Returns:
            ``(absorbed name, survivor name)`` per merge, in the order they were made.
        """
        owner = self._owner(owner)
        self._reconcile()
        index = self._index()
        if not index.table.exists:
            return []
        core = TaskSkillDistiller(
            _NoDistiller(),  # type: ignore[arg-type]
            self.embed,
            publisher=self.publisher,
            recall_k=self.settings.distillation.recall_k,
            consolidate_threshold=self.settings.distillation.merge_threshold,
            clock=self.clock,
            trust=self.rules,
        )
        stored = index.list(owner, statuses=None)
        results: builtins.list[TaskSkillResult] = []
        for owner_id in sorted({s.owner_id for s in stored}):
            state = OwnerTaskSkills(owner_id)
            for skill in stored:
                if skill.owner_id == owner_id:
                    state.put(skill)
            order = sorted(
                (s for s in state.skills.values() if s.status in trust.LIVE),
                key=lambda s: (s.created_at or self.clock(), s.name),
            )
            for skill in order:
                current = state.skills[skill.id]
                if current.status in trust.LIVE:
                    results.extend(core.consolidate(state, current))
            results.extend(core.fold(state))
        if results:
            self._write(results)
        return [
            (gone.skill.name, kept.skill.name)
            for kept, gone in zip(results[::2], results[1::2])
            if kept.skill is not None and gone.skill is not None
        ]

    def export(self, folder: str | Path, owner: str | None = None) -> builtins.list[Path]:
        """Write every active task skill as a package folder ``<folder>/<name>/``.

        Raises:
            InputError: when two owners' task skills share a name (pass ``owner``).
        """
        skills = self._index().list(self._owner(owner), (TaskSkillStatus.ACTIVE,))
        names = [s.name for s in skills]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise InputError(
                f"task skills {dup} exist for several owners; "
                "export one owner at a time with --owner"
            )
        return [write_folder(folder, s.name, package_files(s)) for s in skills]

    @staticmethod
    def _name_in(files: dict[str, bytes]) -> str:
        from skillstream.distill.package import split_frontmatter

        front, _ = split_frontmatter(files["SKILL.md"].decode("utf-8", errors="replace"))
        return str(front.get("name", ""))


def _reason(change: trust.StateChange | None) -> str | None:
    """A change of state as the ``reason`` of its version row: ``old -> new: why``."""
    return None if change is None else f"{change.old} -> {change.new}: {change.reason}"


class _NoDistiller:
    """Stands in for a distiller where only ``finish`` is used."""

    name = "manual"
