"""The ``skillstream`` command.

Sub-commands live in small modules of this package and are registered in ``COMMANDS``; each module
exposes click commands. ``--home`` (env ``SKILLSTREAM_HOME``, default ``./.skillstream``) locates
every default store.
"""

from __future__ import annotations

import errno
import importlib
import logging
import os
import sys
import traceback
from typing import Any

import click

from skillstream.errors import InputError, SkillstreamError

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
    "forget": ("skillstream.cli.forget", "forget"),
    "reembed": ("skillstream.cli.reembed", "reembed"),
    "produce": ("skillstream.cli.kafka", "produce"),
    "eval": ("skillstream.cli.eval", "eval_group"),
    "export": ("skillstream.cli.transfer", "export_group"),
    "import": ("skillstream.cli.transfer", "import_group"),
    "serve": ("skillstream.cli.serve", "serve"),
}
"""name -> (module, attribute). A command's module is imported only when the command runs, so
``skillstream --help`` does not load the models, Bytewax or the stores."""


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


_UNWRITABLE = {
    errno.EACCES: "the home cannot be written: permission denied; give the user write access "
    "or choose another --home",
    errno.EROFS: "the home is on a read-only file system; choose another --home",
    errno.ENOSPC: "no space left on the device of the home; free space and run the command "
    "again (a run resumes where it stopped)",
    errno.EPERM: "the home cannot be written: operation not permitted",
}
"""``errno`` -> what a write error means for the user (EACCES, EROFS, ENOSPC, EPERM)."""


def as_input_error(exc: BaseException, command: str | None) -> InputError | None:
    """A user error that is not skillstream's own, as an ``InputError`` (``None``: not one).

    Those are a damaged zip archive, a home that cannot be written (read-only, no permission, a
    full disk), a catalog locked by another process, and DuckDB's errors about the query of
    ``skillstream sql``.
    """
    import zipfile

    if isinstance(exc, zipfile.BadZipFile):
        return InputError(f"not a valid zip archive: {exc}")
    if isinstance(exc, OSError) and exc.errno in _UNWRITABLE:
        return InputError(f"{_UNWRITABLE[exc.errno]} ({exc})")
    if "duckdb" in sys.modules:  # only a command that opened a catalog can raise its errors
        import duckdb

        if isinstance(exc, duckdb.IOException):
            text = str(exc)
            if "lock" in text.lower():
                return InputError(f"the home's catalog is in use by another process ({exc})")
            for code, why in _UNWRITABLE.items():
                if os.strerror(code) in text:
                    return InputError(f"{why} ({one_line(text)})")

        if command == "sql" and type(exc).__name__ in SQL_ERRORS and isinstance(exc, duckdb.Error):
            return InputError(f"SQL: {exc}")
    return None


def one_line(text: str) -> str:
    """An error message on one line (DuckDB's point at the query with a caret on a second)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " ".join(lines) or "unknown error"


EXIT_INTERRUPTED = 130
"""Exit code of a command stopped by Ctrl-C (128 + SIGINT, as shells report it)."""


class LazyGroup(click.Group):
    """A click group whose commands are imported on first use (see ``COMMANDS``).

    User errors leave a command as ``SkillstreamError`` (those of other libraries are converted by
    ``as_input_error``); ``main`` prints them as one line and exits with code 2, and with ``-v``
    their traceback is printed first. Any other exception is a bug and keeps its traceback.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        spec = COMMANDS.get(name)
        if spec is None:
            return None
        mod, attr = spec
        command: click.Command = getattr(importlib.import_module(mod), attr)
        _take_home_after(command)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SkillstreamError:
            if (ctx.obj or {}).get("verbose"):
                traceback.print_exc(file=sys.stderr)
            raise
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            # a second Ctrl-C (the first one stops a run cleanly), or one outside a run
            then = ""
            if ctx.invoked_subcommand == "run":
                from skillstream.flows.runner import RESUME

                then = f"; {RESUME}"
            click.echo(f"\ninterrupted: what was written stays written{then}", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except Exception as e:
            converted = as_input_error(e, ctx.invoked_subcommand)
            if converted is None:
                raise
            if (ctx.obj or {}).get("verbose"):
                traceback.print_exc(file=sys.stderr)
            raise converted from e


HOME_HELP = "Folder (or URI) holding the default stores."


def _set_home(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.find_root().obj["home"] = value


def _take_home_after(command: click.Command) -> None:
    """Let ``--home`` come after a command's name too (``skillstream run --home DIR``): the
    command and, for a group, each of its commands get the option, which sets the home the
    group's ``--home`` would. Given in both places, the later one wins."""
    if not any(p.name == "home" for p in command.params):
        command.params.append(
            click.Option(
                ["--home"],
                default=None,
                expose_value=False,
                is_eager=True,
                callback=_set_home,
                metavar="DIR",
                help=HOME_HELP + " As 'skillstream --home DIR COMMAND'.",
            )
        )
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _take_home_after(sub)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--home",
    envvar="SKILLSTREAM_HOME",
    default="./.skillstream",
    show_default=True,
    help=HOME_HELP + " Also accepted after the command.",
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
    ctx.obj = {"home": home, "verbose": verbose}


def main() -> None:
    """The console script.

    Exit codes: 0 done; 1 an unexpected error (a bug), with its traceback; 2 a user error
    (``SkillstreamError``, see ``LazyGroup``), printed as one line ``error: ...`` (``-v`` prints
    its traceback first), or a ``run`` whose input gave not one message; 3 ``run`` finished past
    a failure limit; 130 interrupted (Ctrl-C), with how to go on.
    """
    try:
        cli(standalone_mode=True)
    except SkillstreamError as e:
        click.echo(f"error: {one_line(str(e))}", err=True)
        sys.exit(2)
