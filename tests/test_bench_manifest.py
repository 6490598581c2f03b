"""Every published figure has a command: the results files the README and docs cite, those in
``benchmarks/results/`` and those ``benchmarks/manifest.py`` lists are the same files, and each
listed command names a script that exists and writes into the results folder only."""

from __future__ import annotations

import json
import re
import string
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT / "benchmarks"))

import manifest  # noqa: E402

CITED = re.compile(r"benchmarks/results/([A-Za-z0-9_.-]*[A-Za-z0-9_-])")
PLACEHOLDERS = {"python", "skillstream", "data", "results", "scratch", "cache"}


def leaves(tokens: list[Token]) -> Iterator[Token]:
    for token in tokens:
        if token.children:
            yield from leaves(token.children)
        else:
            yield token


def cited_in(text: str) -> set[str]:
    """The ``benchmarks/results/`` files a markdown text names: in its prose, code spans, code
    blocks and link targets (a code span broken over two lines counts as one)."""
    found: set[str] = set()
    for token in leaves(MarkdownIt("commonmark").enable("table").parse(text)):
        for part in (token.content, str(token.attrs.get("href") or "")):
            found.update(CITED.findall(part))
    return found


def cited_by_docs() -> dict[str, list[str]]:
    """Each results file the README and docs/*.md cite, with the files citing it."""
    out: dict[str, list[str]] = {}
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for name in cited_in(doc.read_text(encoding="utf-8")):
            out.setdefault(name, []).append(str(doc.relative_to(ROOT)))
    return out


def test_the_parser_finds_citations_wherever_markdown_puts_them():
    text = (
        "Figures in `benchmarks/results/a.md`. Run `tool --json\n"
        "benchmarks/results/b.json --report-dir benchmarks/results` (see\n"
        "[the table](../benchmarks/results/c.md)).\n\n"
        "```bash\npython x.py --json benchmarks/results/d-1.json \\\n  --more\n```\n\n"
        "| x | y |\n|---|---|\n| benchmarks/results/e_f.png. | 1 |\n"
    )
    assert cited_in(text) == {"a.md", "b.json", "c.md", "d-1.json", "e_f.png"}


def test_the_docs_cite_only_listed_results_files():
    listed = manifest.results_files()
    unlisted = {name: docs for name, docs in cited_by_docs().items() if name not in listed}
    assert unlisted == {}, "cited, but no command in benchmarks/manifest.py writes them"


def test_every_file_in_the_results_folder_is_listed_and_every_listed_one_is_there():
    present = {p.name for p in RESULTS.iterdir()}
    listed = set(manifest.results_files())
    assert present - listed == set(), "in benchmarks/results/ but in no entry of the manifest"
    assert listed - present == set(), "listed in the manifest but not in benchmarks/results/"


def test_names_are_unique_and_files_belong_to_one_benchmark():
    manifest.by_name()
    files = [name for bench in manifest.BENCHMARKS for name in bench.files]
    assert len(files) == len(set(files))


@pytest.mark.parametrize("bench", manifest.BENCHMARKS, ids=lambda b: b.name)
def test_a_listed_command_runs_a_script_that_exists(bench):
    assert (ROOT / bench.script).is_file(), bench.script
    scripts = {arg for cmd in bench.commands for arg in cmd if arg.startswith("benchmarks/")}
    scripts = {arg for arg in scripts if arg.endswith(".py")}
    assert all((ROOT / s).is_file() for s in scripts), scripts
    assert bench.script in scripts or any("{skillstream}" in cmd for cmd in bench.commands)


def declared_options(cmd: tuple[str, ...]) -> set[str] | None:
    """The options the program of ``cmd`` declares: a benchmark script's ``add_argument`` names,
    or the click options of a ``skillstream`` command (``None``: the command does not exist)."""
    if cmd[0] == "{python}":
        text = (ROOT / cmd[1]).read_text(encoding="utf-8")
        return set(re.findall(r"add_argument\(\s*\"(--[a-z0-9-]+)\"", text))
    import click

    from skillstream.cli import cli

    ctx = click.Context(cli)
    command: click.Command | None = cli
    options = {o for p in cli.params for o in p.opts}
    for word in [a for a in cmd[1:] if not a.startswith("-") and "{" not in a]:
        if not isinstance(command, click.Group):
            break
        command = command.get_command(ctx, word)
        if command is None:
            return None
        options |= {o for p in command.params for o in p.opts}
    return options


@pytest.mark.parametrize("bench", manifest.BENCHMARKS, ids=lambda b: b.name)
def test_a_listed_command_uses_only_options_its_program_declares(bench):
    for cmd in bench.commands:
        declared = declared_options(cmd)
        assert declared is not None, f"no such command: {' '.join(cmd)}"
        used = {arg for arg in cmd if arg.startswith("--")}
        assert used - declared == set(), " ".join(cmd)


@pytest.mark.parametrize("bench", manifest.BENCHMARKS, ids=lambda b: b.name)
def test_a_listed_command_writes_its_files_into_the_results_folder(bench):
    args = [arg for cmd in bench.commands for arg in cmd]
    named = {arg.removeprefix("{results}/") for arg in args if arg.startswith("{results}/")}
    assert named <= set(bench.writes), "a command names a results file the entry does not list"
    for arg in args:
        assert "benchmarks/results" not in arg, "results go through {results}, not a path"
    fields = {f for arg in args for _, f, _, _ in string.Formatter().parse(arg) if f}
    unknown = {f for f in fields - PLACEHOLDERS if f not in bench.needs}
    assert unknown == set(), "an environment variable the entry's needs do not name"


def test_make_bench_runs_the_manifest():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("\nbench:", 1)[1].split("\n\n", 1)[0]
    assert "benchmarks/run_all.py" in recipe
    assert "$(ONLY)" in recipe


def test_a_file_written_by_hand_shows_the_figures_of_its_command():
    """``memskill_locomo.md`` is analysis written by hand: its table must show the validation
    figures that ``memskill_locomo.json`` holds, so a new run cannot leave it behind unnoticed."""
    text = (RESULTS / "memskill_locomo.md").read_text(encoding="utf-8")
    val = json.loads((RESULTS / "memskill_locomo.json").read_text(encoding="utf-8"))["val"]
    for policy in ("all", "random", "untrained", "trained"):
        row = f"{val[policy]['recall@10']:.4f}", str(val[policy]["memories"])
        assert all(figure in text for figure in row), (policy, row)
