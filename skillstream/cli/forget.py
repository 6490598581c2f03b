"""``skillstream forget --owner ID``: erase every trace of one owner from the home.

See docs/forget.md for what goes from which store, what stays (backups made elsewhere, older
object versions of a versioned bucket) and the tombstones that keep a replay from bringing the
owner's messages back.
"""

from __future__ import annotations

import click

from skillstream.cli.common import dumps, settings_from


@click.command("forget")
@click.option("--owner", required=True, help="The owner id to erase, exactly as stored.")
@click.option("--yes", is_flag=True, help="Proceed without asking.")
@click.option("--dry-run", is_flag=True, help="Count what would be erased; change nothing.")
@click.option(
    "--recovery-dir",
    "recovery_dirs",
    multiple=True,
    metavar="PATH",
    help="A Bytewax recovery folder of runs on this home (repeatable); its snapshots lose the "
    "owner too.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the counts per store as JSON.")
@click.pass_context
def forget(ctx, owner, yes, dry_run, recovery_dirs, as_json):
    """Erase every trace of one owner from every store of the home.

    Memories (fleet-scoped ones too), their versions and events, the span ledger, LLM calls and
    cached answers, dead letters, query log, task skills with every package version, recovery
    snapshots: all of the owner goes, other owners' content stays as it was. Refused while a run
    holds the home. Running it again after an interruption finishes the job.
    """
    from skillstream.services.forget import forget_owner

    settings = settings_from(ctx)
    if not dry_run and not yes:
        click.confirm(
            f"Erase every trace of owner {owner!r} from {settings.storage.home}? "
            "This cannot be undone",
            abort=True,
        )
    report = forget_owner(settings, owner, recovery_dirs=recovery_dirs, dry_run=dry_run)
    if as_json:
        click.echo(dumps(report.to_dict()))
        return
    verb = "would erase" if dry_run else "erased"
    click.echo(f"{verb} {report.total} rows, files and entries in {report.seconds:.1f} s")
    for store, counts in sorted(report.counts.items()):
        shown = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "nothing"
        click.echo(f"  {store}: {shown}")
