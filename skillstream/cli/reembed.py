"""``skillstream reembed --to MODEL``: move a home's vectors to another embedding model.

See ``skillstream.services.reembed`` and docs/embedders.md.
"""

from __future__ import annotations

import click

from skillstream.cli.common import dumps, settings_from


@click.command("reembed")
@click.option(
    "--to",
    "model",
    required=True,
    metavar="MODEL",
    help="The new model: 'use-multilingual', 'minilm' or a local sentence-transformers folder.",
)
@click.option("--batch", default=512, show_default=True, help="Texts embedded at a time.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def reembed(ctx, model, batch, as_json):
    """Embed every memory and task skill of the home again with another model.

    The vectors, the tables' width and indexes and the model the home records change; ids,
    versions and every catalog row stay. The home's skillstream.toml then names the model. Refused
    while a run holds the home; a move that was stopped goes on where it stopped when run again.
    """
    from skillstream.services.reembed import check_model
    from skillstream.services.reembed import reembed as move

    check_model(model)
    settings = settings_from(ctx)

    def progress(table: str, done: int, total: int) -> None:
        if not as_json:
            click.echo(f"  {table}: {done}/{total}", err=True)

    report = move(settings, model, batch=batch, progress=progress)
    if as_json:
        click.echo(dumps(report.as_dict()))
        return
    click.echo(
        f"moved {settings.storage.home} from {report.model_from or 'an unnamed model'} to "
        f"{report.model_to} ({report.dim} dimensions) in {report.seconds:.1f} s"
    )
    for table, counts in report.tables.items():
        click.echo(
            f"  {table}: {counts['rows']} rows, {counts['embedded']} embedded now"
            + (f", {counts['resumed']} from the stopped move" if counts["resumed"] else "")
        )
    for note in report.notes:
        click.echo(f"  note: {note}")
