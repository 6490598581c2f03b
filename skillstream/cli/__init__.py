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
import traceback
from typing import IO, Any

import click

COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("skillstream.cli.run", "run"),
    "search": ("skillstream.cli.query", "search"),
    "sql": ("skillstream.cli.query", "sql"),
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
}
"""name -> (module, attribute). A command's module is imported only when the command runs, so
``skillstream --help`` does not load the models, Bytewax or the stores."""


class UserError(click.ClickException):
    """A user error (bad argument, input, setting or SQL) shown as one line; exit code 2."""

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True, file=file)


SQL_ERRORS = (
    "ParserException",
    "SyntaxException",
    "BinderException",
    "CatalogException",
    "ConversionException",
    "InvalidInputException",
    "OutOfRangeException",
    "ConstraintException",
    "NotImplementedException",
    "PermissionException",
)
"""DuckDB errors that a query given to ``skillstream sql`` causes (not a broken store)."""


def user_error(exc: BaseException, command: str | None) -> str | None:
    """The one-line message of a user error, or ``None`` when ``exc`` is not one.

    User errors are skillstream's own (``SkillstreamError``: bad input, settings, arguments, a busy
    home), a damaged zip archive, a catalog locked by another process, and DuckDB's errors about
    the query of ``skillstream sql``.
    """
    import zipfile

    from skillstream.errors import SkillstreamError

    if isinstance(exc, SkillstreamError):
        return _one_line(str(exc))
    if isinstance(exc, zipfile.BadZipFile):
        return _one_line(f"not a valid zip archive: {exc}")
    if "duckdb" in sys.modules:  # only a command that opened a catalog can raise its errors
        import duckdb

        if isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower():
            return _one_line(f"the home's catalog is in use by another process ({exc})")
        if command == "sql" and type(exc).__name__ in SQL_ERRORS and isinstance(exc, duckdb.Error):
            return _one_line(f"SQL: {exc}")
    return None


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " ".join(lines) or "unknown error"


class LazyGroup(click.Group):
    """A click group whose commands are imported on first use (see ``COMMANDS``).

    A user error raised by a command (see ``user_error``) is printed as one line and the command
    exits with code 2; with ``-v`` its traceback is printed first. Any other exception is a bug and
    keeps its traceback (exit code 1).
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as e:
            message = user_error(e, ctx.invoked_subcommand)
            if message is None:
                raise
            if (ctx.obj or {}).get("verbose"):
                traceback.print_exc(file=sys.stderr)
            raise UserError(message) from e

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
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    ctx.obj = {"home": home, "verbose": verbose}


def main() -> None:
    """The console script: exit 0 on success, 1 on an unexpected error (a bug, with its
    traceback), 2 on a user error (one line), 3 when ``run`` passed a failure threshold."""
    try:
        cli(standalone_mode=True)
    except Exception as e:  # an error outside a command (loading it): same rule
        message = user_error(e, None)
        if message is None:
            raise
        click.echo(f"error: {message}", err=True)
        sys.exit(2)
