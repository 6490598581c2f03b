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
    "sql": ("skillstream.cli.sql", "sql"),
    "stats": ("skillstream.cli.query", "stats"),
    "config": ("skillstream.cli.query", "config_cmd"),
    "retry-failed": ("skillstream.cli.llm", "retry_failed"),
    "memory-skills": ("skillstream.cli.memory_skills", "memory_skills"),
    "skills": ("skillstream.cli.task_skills", "skills"),
    "mcp": ("skillstream.cli.task_skills", "mcp_cmd"),
    "history": ("skillstream.cli.lifecycle", "history"),
    "contradictions": ("skillstream.cli.lifecycle", "contradictions"),
    "maintain": ("skillstream.cli.lifecycle", "maintain"),
    "produce": ("skillstream.cli.kafka", "produce"),
    "eval": ("skillstream.cli.eval", "eval_group"),
    "export": ("skillstream.cli.transfer", "export_group"),
    "import": ("skillstream.cli.transfer", "import_group"),
}
"""name -> (module, attribute). A command's module is imported only when the command runs, so
``skillstream --help`` does not load the models, Bytewax or the stores."""


class LazyGroup(click.Group):
    """A click group whose commands are imported on first use (see ``COMMANDS``)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        spec = COMMANDS.get(name)
        if spec is None:
            return None
        mod, attr = spec
        command: click.Command = getattr(importlib.import_module(mod), attr)
        return command


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
    from skillstream.redact import install_log_redaction

    install_log_redaction()  # no log line carries a secret, whichever logger wrote it
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
