"""``skillstream export memories`` and ``import memories``: a home's memories as Parquet.

No extraction and no LLM: the memories move with their ids, versions, vectors and lifecycle events
(see ``storage.transfer``), to back up a home, move it, or merge homes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from skillstream.cli.common import dumps, settings_from

if TYPE_CHECKING:
    from skillstream.storage.transfer import Transfer


@click.group("export")
def export_group() -> None:
    """Write what a home holds to files."""


@export_group.command("memories")
@click.option(
    "--out",
    required=True,
    metavar="PATH",
    help="The Parquet file to write (local path or fsspec URI, e.g. s3://bucket/m.parquet).",
)
@click.option("--owner", default=None, help="Only this owner's memories.")
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
@click.pass_context
def export_memories_cmd(ctx, out, owner, as_json):
    """Memories with their vectors and events, one row per memory, to a Parquet file."""
    from dataclasses import asdict

    from skillstream.cli.query import open_catalog
    from skillstream.storage.transfer import export_memories

    settings = settings_from(ctx)
    open_catalog(settings).close()  # a clear error for a home that was never run
    done = export_memories(settings, out, owner=owner)
    if as_json:
        click.echo(dumps(asdict(done)))
    else:
        click.echo(
            f"exported {done.memories} memories ({done.events} events; {done.task_skills} task "
            f"skills with {done.task_skill_versions} versions) to {out}"
        )


@click.group("import")
def import_group() -> None:
    """Read files written by 'skillstream export' into a home."""


@import_group.command("memories")
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
@click.pass_context
def import_memories_cmd(ctx, path, as_json):
    """Memories from a file of 'export memories', with their ids, versions and events, and the
    task skills among them with their versions and packages.

    The home is created when missing; a memory already stored is replaced only by a row of an
    equal or higher version, so importing a file twice changes nothing. The counts are of what
    was new to the home; the memories it already held are counted apart.
    """
    from dataclasses import asdict

    from skillstream.settings import local_path
    from skillstream.storage.transfer import import_memories

    settings = settings_from(ctx)
    if not settings.storage.remote:
        local_path(settings.storage.home).mkdir(parents=True, exist_ok=True)
    done = import_memories(settings, path)
    if as_json:
        click.echo(dumps(asdict(done)))
    else:
        click.echo(import_line(done))


def import_line(done: Transfer) -> str:
    """What an import wrote, in words: what was new, and what the home already held."""
    if not (done.memories or done.events or done.task_skill_versions):
        return f"nothing new in {done.path}: the home already holds its {done.unchanged} memories"
    line = (
        f"imported {done.memories} new memories ({done.events} events; {done.task_skills} task "
        f"skills, {done.task_skill_versions} versions) from {done.path}"
    )
    return line + (f"; {done.unchanged} memories were already stored" if done.unchanged else "")
