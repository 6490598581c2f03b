"""``skillstream export memories`` and ``import memories``: a home's memories as Parquet.

No extraction and no LLM: the memories move with their ids, versions, vectors and lifecycle events
(see ``storage.transfer``), to back up a home, move it, or merge homes.
"""

from __future__ import annotations

import click

from skillstream.cli.common import dumps, settings_from


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
        click.echo(f"exported {done.memories} memories ({done.events} events) to {out}")


@click.group("import")
def import_group() -> None:
    """Read files written by 'skillstream export' into a home."""


@import_group.command("memories")
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
@click.pass_context
def import_memories_cmd(ctx, path, as_json):
    """Memories from a file of 'export memories', with their ids, versions and events.

    The home is created when missing; a memory already stored is replaced only by a row of an
    equal or higher version, so importing a file twice changes nothing.
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
        click.echo(f"imported {done.memories} memories ({done.events} events) from {path}")
