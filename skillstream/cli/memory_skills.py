"""``skillstream memory-skills list|show|export|import``: the memory skill bank.

Edit loop::

    skillstream memory-skills export ./memory-skills      # one Markdown file per memory skill
    $EDITOR ./memory-skills/insert.md                      # or add a new file
    skillstream memory-skills import ./memory-skills       # checked; changed files: new versions
    skillstream memory-skills show insert --history

``list``, ``show`` and ``export`` open the catalog read-only (they work while no flow holds it, and
show the four primitives when nothing is stored yet); ``import`` writes to it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import click

from skillstream.cli.common import dumps, format_text, settings_from
from skillstream.vocab import MemorySkillStatus


@contextlib.contextmanager
def _bank(settings: Any, write: bool = False) -> Iterator[Any]:
    from skillstream.memskill.bank import MemorySkillBank
    from skillstream.storage.catalog import Catalog, catalog_exists, open_catalog

    if not write and not catalog_exists(settings.storage):
        cat = Catalog(":memory:", read_only=False)  # an empty bank reads as the primitives
    else:
        cat = open_catalog(settings.storage, read_only=not write)
    try:
        yield MemorySkillBank(cat)
    finally:
        cat.close()


@click.group("memory-skills")
def memory_skills() -> None:
    """The memory skill bank: routines the controller selects and the LLM executor follows."""


@memory_skills.command("list")
@click.option("--all", "show_all", is_flag=True, help="Also retired memory skills.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def list_cmd(ctx: click.Context, show_all: bool, as_json: bool) -> None:
    """Current version of every memory skill, with the spans it was selected for."""
    settings = settings_from(ctx)
    with _bank(settings) as bank:
        stored = bank.stored()
        usage = bank.usage()
        rows = [
            {
                "name": v.name,
                "version": v.version,
                "action": v.action,
                "status": v.status,
                "spans": usage.get(v.name, 0),
                "source": v.source if stored else "seed (not stored yet)",
                "description": v.description,
            }
            for v in bank.current()
            if show_all or v.status == MemorySkillStatus.ACTIVE
        ]
    if as_json:
        click.echo(dumps(rows))
    else:
        click.echo(format_text(list(rows[0]) if rows else ["name"], rows, width=70))


@memory_skills.command("show")
@click.argument("name")
@click.option("--version", "version", type=int, default=None, help="A past version.")
@click.option("--history", is_flag=True, help="List every version instead.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def show(ctx: click.Context, name: str, version: int | None, history: bool, as_json: bool) -> None:
    """One memory skill as its file text (or its versions with --history)."""
    from skillstream.memskill.files import to_markdown

    settings = settings_from(ctx)
    with _bank(settings) as bank:
        if history:
            versions = bank.history(name) or [bank.get(name)]
            rows = [
                {
                    "version": v.version,
                    "status": v.status,
                    "action": v.action,
                    "source": v.source,
                    "created_at": v.created_at,
                    "description": v.description,
                }
                for v in versions
            ]
            click.echo(dumps(rows) if as_json else format_text(list(rows[0]), rows, width=70))
            return
        v = bank.get(name, version)
    if as_json:
        click.echo(dumps(v.row()))
    else:
        click.echo(to_markdown(v), nl=False)


@memory_skills.command("export")
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("--active-only", is_flag=True, help="Leave retired memory skills out.")
@click.pass_context
def export(ctx: click.Context, folder: str, active_only: bool) -> None:
    """Write one Markdown file per memory skill into FOLDER."""
    settings = settings_from(ctx)
    with _bank(settings) as bank:
        paths = bank.export(folder, include_retired=not active_only)
    click.echo(f"exported {len(paths)} memory skills to {folder}")


@memory_skills.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--force", is_flag=True, help="Accept files exported from an older version.")
@click.option("--dry-run", is_flag=True, help="Validate and report; store nothing.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def import_cmd(
    ctx: click.Context, paths: tuple[str, ...], force: bool, dry_run: bool, as_json: bool
) -> None:
    """Validate memory skill files (or folders of them) and store changes as new versions."""
    settings = settings_from(ctx)
    with _bank(settings, write=not dry_run) as bank:
        report = bank.import_files(list(paths), force=force, dry_run=dry_run)
    summary = {
        "dry_run": dry_run,
        "new_versions": [v.version_id for v in report.created],
        "unchanged": report.unchanged,
    }
    if as_json:
        click.echo(dumps(summary))
        return
    verb = "would store" if dry_run else "stored"
    click.echo(
        f"{verb} {len(report.created)} new version(s)"
        + (f": {', '.join(summary['new_versions'])}" if report.created else "")
        + f"; {len(report.unchanged)} unchanged"
    )
