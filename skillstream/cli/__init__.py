"""The ``skillstream`` command.

Sub-commands live in small modules of this package and are registered in ``COMMANDS``; each module
exposes click commands. ``--home`` (env ``SKILLSTREAM_HOME``, default ``./.skillstream``) locates
every default store.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys

import click

COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("skillstream.cli.run", "run"),
    "search": ("skillstream.cli.query", "search"),
    "sql": ("skillstream.cli.query", "sql"),
    "stats": ("skillstream.cli.query", "stats"),
    "config": ("skillstream.cli.query", "config_cmd"),
}
"""name -> (module, attribute). Later components add their commands here."""

OPTIONAL_COMMANDS: dict[str, tuple[str, str]] = {
    "retry-failed": ("skillstream.cli.llm", "retry_failed"),
    "memory-skills": ("skillstream.cli.memory_skills", "memory_skills"),
    "skills": ("skillstream.cli.task_skills", "skills"),
    "mcp": ("skillstream.cli.task_skills", "mcp_cmd"),
    "history": ("skillstream.cli.lifecycle", "history"),
    "contradictions": ("skillstream.cli.lifecycle", "contradictions"),
    "maintain": ("skillstream.cli.lifecycle", "maintain"),
    "produce": ("skillstream.cli.kafka", "produce"),
    "eval": ("skillstream.cli.eval", "eval_group"),
}
"""Commands whose module may not exist yet in a given checkout; missing ones are left out."""


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        names = list(COMMANDS)
        for name, (mod, _) in OPTIONAL_COMMANDS.items():
            if importlib.util.find_spec(mod) is not None:
                names.append(name)
        return sorted(names)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        spec = COMMANDS.get(name) or OPTIONAL_COMMANDS.get(name)
        if spec is None:
            return None
        mod, attr = spec
        if name in OPTIONAL_COMMANDS and importlib.util.find_spec(mod) is None:
            return None
        return getattr(importlib.import_module(mod), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--home",
    envvar="SKILLSTREAM_HOME",
    default="./.skillstream",
    show_default=True,
    help="Folder (or URI) holding the default stores.",
)
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
@click.pass_context
def cli(ctx: click.Context, home: str, verbose: int) -> None:
    """skillstream: turn conversation streams into agent memory."""
    level = logging.WARNING - 10 * verbose
    logging.basicConfig(
        level=max(level, logging.DEBUG), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    ctx.obj = {"home": home}


def main() -> None:
    from skillstream.errors import SkillstreamError

    try:
        cli(standalone_mode=True)
    except SkillstreamError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
