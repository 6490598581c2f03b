"""``skillstream skills ...``, ``skillstream mcp`` and ``skillstream eval skills`` (task skills).

``--owner`` (env ``SKILLSTREAM_OWNER``) scopes a command to one owner. Without it, reads look at
every owner (a name that exists for several owners then needs ``--owner``) and writes go to the
owner ``default``.
"""

from __future__ import annotations

from pathlib import Path

import click

from skillstream.cli.common import dumps, existing_home, format_text, settings_from

OWNER_HELP = "Owner (user id) of the task skills; env SKILLSTREAM_OWNER."


def _api(ctx: click.Context, owner: str | None, *, create: bool = False):
    """The task-skill API of the home; unless ``create``, the home must exist already (a command
    that only reads or changes stored task skills creates nothing in a missing home)."""
    from skillstream.services.task_skills import TaskSkillAPI

    settings = settings_from(ctx)
    if not create:
        existing_home(settings)
    return TaskSkillAPI(settings, owner=owner)


def _owner_option(f):
    return click.option("--owner", envvar="SKILLSTREAM_OWNER", default=None, help=OWNER_HELP)(f)


@click.group("skills")
def skills() -> None:
    """Task skills: reusable procedures distilled from conversations."""


STATES = ("candidate", "active", "stale", "retired", "archived")


@skills.command("list")
@_owner_option
@click.option(
    "--all",
    "include_archived",
    is_flag=True,
    help="Every state but deleted (candidates, stale, retired, archived too).",
)
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice(STATES),
    help="Only task skills in this state (repeatable; default: active).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def list_cmd(ctx, owner, include_archived, states, as_json):
    """Names, descriptions, states and reliability of the task skills (served first)."""
    rows = _api(ctx, owner).list(include_archived=include_archived, states=states or None)
    columns = ["name", "state", "reliability", "description"]
    if not owner:
        columns = ["owner_id", *columns]
    if as_json:
        click.echo(dumps([{c: r[c] for c in columns} for r in rows]))
    else:
        click.echo(format_text(columns, rows, width=80))


@skills.command("show")
@click.argument("name")
@_owner_option
@click.option(
    "--json", "as_json", is_flag=True, help="Print the record as JSON instead of SKILL.md."
)
@click.pass_context
def show(ctx, name, owner, as_json):
    """Print a task skill's SKILL.md (counts as a use)."""
    from skillstream.distill.package import render_skill_md

    skill = _api(ctx, owner).show(name)
    if as_json:
        click.echo(dumps(skill.document()))
    else:
        click.echo(render_skill_md(skill), nl=False)


@skills.command("save")
@click.argument("path", type=click.Path(exists=True))
@_owner_option
@click.pass_context
def save(ctx, path, owner):
    """Save a task-skill folder (or its SKILL.md) as the next version."""
    skill = _api(ctx, owner, create=True).save_path(path)
    click.echo(f"saved {skill.owner_id}/{skill.name} version {skill.version}: {skill.package_url}")


@skills.command("patch")
@click.argument("name")
@click.option(
    "--section",
    "-s",
    required=True,
    help="description, triggers, procedure, pitfalls, preferences, examples, tools, "
    "verification, or scripts/<file> / references/<file>.",
)
@click.option("--text", "-t", required=True, help="New content ('-' reads standard input).")
@click.option("--append", is_flag=True, help="Add to the section instead of replacing it.")
@_owner_option
@click.pass_context
def patch(ctx, name, section, text, append, owner):
    """Replace (or append to) one section of a task skill: a new version."""
    if text == "-":
        text = click.get_text_stream("stdin").read()
    skill = _api(ctx, owner).patch(name, section, text, append=append)
    click.echo(
        f"patched {skill.owner_id}/{skill.name} to version {skill.version}: {skill.package_url}"
    )


@skills.command("delete")
@click.argument("name")
@_owner_option
@click.pass_context
def delete(ctx, name, owner):
    """Delete a task skill (soft: history and packages are kept)."""
    skill = _api(ctx, owner).delete(name)
    click.echo(f"deleted {skill.owner_id}/{skill.name} (version {skill.version})")


@skills.command("feedback")
@click.argument("name")
@click.option("--success/--failure", required=True, help="Whether using the task skill worked.")
@click.option("--note", default="", help="What happened (kept with the version).")
@_owner_option
@click.pass_context
def feedback(ctx, name, success, note, owner):
    """Record an outcome of a task skill: a new version; retired when it keeps failing."""
    got = _api(ctx, owner).feedback(name, success, note)
    click.echo(
        f"{got['name']} version {got['version']}: {got['state']}, "
        f"reliability {got['reliability']:.2f}" + (f" ({got['change']})" if got["change"] else "")
    )


@skills.command("pin")
@click.argument("name")
@click.option("--unpin", is_flag=True, help="Remove the pin (the state stays as it is).")
@_owner_option
@click.pass_context
def pin(ctx, name, unpin, owner):
    """Pin a task skill: active and served, whatever its outcomes and usage age."""
    got = _api(ctx, owner).pin(name, pinned=not unpin)
    word = "unpinned" if unpin else "pinned"
    click.echo(f"{word} {got['name']} (version {got['version']}, {got['state']})")


@skills.command("maintain")
@_owner_option
@click.pass_context
def maintain(ctx, owner):
    """Move unused task skills to stale, then archived, by usage age (settings)."""
    changes = _api(ctx, owner).maintain()
    for c in changes:
        click.echo(f"{c['owner_id']}/{c['name']}: {c['old']} -> {c['new']} ({c['reason']})")
    if not changes:
        click.echo("no task skill changed state")


@skills.command("consolidate")
@_owner_option
@click.pass_context
def consolidate(ctx, owner):
    """Merge duplicate task skills: a new version of one, the other archived."""
    merged = _api(ctx, owner).consolidate()
    for gone, kept in merged:
        click.echo(f"merged {gone} into {kept}")
    if not merged:
        click.echo("no duplicate task skills")


@skills.command("export")
@click.argument("folder", type=click.Path(file_okay=False))
@_owner_option
@click.pass_context
def export(ctx, folder, owner):
    """Write every active task skill as an Agent Skills folder under FOLDER."""
    paths = _api(ctx, owner).export(folder)
    for p in paths:
        click.echo(str(p))
    click.echo(f"exported {len(paths)} task skill(s) to {folder}", err=True)


@skills.command("import")
@click.argument("zip_path", metavar="ZIP", type=click.Path(exists=True, dir_okay=False))
@_owner_option
@click.pass_context
def import_cmd(ctx, zip_path, owner):
    """Import a task-skill package <name>.zip (checked before anything is written)."""
    skill = _api(ctx, owner, create=True).import_zip(zip_path)
    click.echo(
        f"imported {skill.owner_id}/{skill.name} version {skill.version}: {skill.package_url}"
    )


@click.command("mcp")
@click.option("--owner", envvar="SKILLSTREAM_OWNER", required=True, help=OWNER_HELP)
@click.pass_context
def mcp_cmd(ctx, owner):
    """Serve task-skill and memory tools (search, add) over MCP on stdio, for one owner."""
    from skillstream.server.mcp_tools import build_server

    build_server(settings_from(ctx), owner).run("stdio")


@click.command("skills")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write the result as JSON to this file.",
)
@click.option(
    "--llm", type=click.Choice(["rules", "openai"]), default=None, help="Distiller backend."
)
@click.option(
    "--per-task", type=int, default=None, help="Use only the first N dialogues of each task."
)
@click.option(
    "--share",
    type=click.FloatRange(0, 1, min_open=True),
    default=None,
    help="Use only the first share of each task's dialogues (a shorter stream).",
)
@click.option(
    "--embed-threads",
    type=int,
    default=1,
    show_default=True,
    help="Torch threads for embedding. The run makes many small sequential embedding "
    "calls, where extra threads mostly add synchronisation (0: torch's default).",
)
@click.option(
    "--write", is_flag=True, help="Store the distilled task skills in the home and publish them."
)
@click.pass_context
def eval_skills(ctx, path, json_out, llm, per_task, share, embed_threads, write):
    """Task-skill evaluation on STAR dialogues: skills, tasks, purity, recall@1, llm_calls."""
    from skillstream.eval.skills import evaluate_star

    if embed_threads:
        import torch

        torch.set_num_threads(embed_threads)
    home = ctx.obj.get("home") if ctx.obj else None
    settings = settings_from(ctx, llm=llm) if home else _settings(llm)

    def progress(done: int, total: int) -> None:
        if done % 500 == 0 or done == total:
            click.echo(f"distilled {done}/{total} dialogues", err=True)

    result = evaluate_star(
        path, settings, per_task=per_task, share=share, write=write, progress=progress
    )
    text = dumps(result)
    if json_out:
        Path(json_out).write_text(text + "\n", encoding="utf-8")
    click.echo(text)


def _settings(llm):
    from skillstream.settings import Settings

    return Settings.load(llm=llm)
