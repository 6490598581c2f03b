"""Regenerate the results files of ``benchmarks/results/``: every one, or those named.

    python benchmarks/run_all.py                      every benchmark (hours; ``make bench``)
    python benchmarks/run_all.py --only ingest        one (``make bench ONLY=ingest``)
    python benchmarks/run_all.py --only locomo.md     the benchmark that writes this file
    python benchmarks/run_all.py --list               the commands, with nothing run

The table of benchmarks and their commands is ``benchmarks/manifest.py``. Each benchmark runs from
the repository root with its own temporary ``{scratch}`` folder (removed afterwards) and the
caller's environment minus its ``SKILLSTREAM_`` variables, plus the benchmark's own settings.
A benchmark fails when a command fails or when a file it should write was not written; the others
still run, and the exit status is 1 if any failed. Timing figures want a quiet machine: run them
with nothing else running, and say the load in the commit that brings the files.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from manifest import BENCHMARKS, Bench, by_name, results_files  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = "benchmarks/results"
DATA = "../shared/data"
CACHE = Path.home() / ".cache" / "skillstream" / "scale"


class Placeholders(dict[str, str]):
    """The values of a command's placeholders; any other name is an environment variable."""

    def __missing__(self, key: str) -> str:
        value = os.environ.get(key)
        if not value:
            raise LookupError(f"the command needs the environment variable {key}, which is not set")
        return value


def render(bench: Bench, values: Mapping[str, str]) -> list[list[str]]:
    """``bench``'s commands with their placeholders filled in.

    Raises:
        LookupError: A placeholder names an environment variable that is not set.
    """
    fill = Placeholders(values)
    return [[arg.format_map(fill) for arg in cmd] for cmd in bench.commands]


def select(names: Sequence[str]) -> list[Bench]:
    """The benchmarks named (a benchmark's name or a results file it writes), in table order.

    Raises:
        SystemExit: A name is neither.
    """
    if not names:
        return list(BENCHMARKS)
    benches, files = by_name(), results_files()
    wanted: set[str] = set()
    for name in names:
        if name in benches:
            wanted.add(name)
        elif name in files:
            wanted.add(files[name].name)
        else:
            raise SystemExit(
                f"no benchmark or results file {name!r}; the benchmarks are: {', '.join(benches)}"
            )
    return [b for b in BENCHMARKS if b.name in wanted]


def environment(bench: Bench) -> dict[str, str]:
    """The caller's environment without its ``SKILLSTREAM_`` settings, plus ``bench.env``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLSTREAM_")}
    env.update(bench.env)
    return env


def show(bench: Bench, commands: Sequence[Sequence[str]] | None, error: str = "") -> str:
    """A benchmark as text: name, files, what it needs and its commands."""
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in bench.env.items())
    lines = [f"{bench.name}: {', '.join(bench.files)}"]
    if bench.needs:
        lines.append(f"  needs: {bench.needs}")
    if error:
        lines.append(f"  cannot run: {error}")
    for cmd in commands if commands is not None else bench.commands:
        lines.append("  " + " ".join(filter(None, [env, shlex.join(cmd)])))
    for src, dst in bench.copies:
        lines.append(f"  then copy {{scratch}}/{src} to {{results}}/{dst}")
    for name in bench.by_hand:
        lines.append(f"  then update {name} by hand from the files above")
    return "\n".join(lines)


def run(bench: Bench, values: dict[str, str]) -> str:
    """Run ``bench`` in a scratch folder of its own; return what went wrong ('' if nothing)."""
    results = Path(values["results"])
    results.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"ss-bench-{bench.name}-"))
    started = time.time()
    try:
        commands = render(bench, {**values, "scratch": str(scratch)})
        print(show(bench, commands), flush=True)
        for cmd in commands:
            done = subprocess.run(cmd, cwd=ROOT, env=environment(bench), check=False)
            if done.returncode != 0:
                return f"{shlex.join(cmd)} exited with {done.returncode}"
        for src, dst in bench.copies:
            shutil.copyfile(scratch / src, results / dst)
    except (LookupError, OSError) as e:
        return str(e)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    stale = [
        name
        for name in bench.writes
        if not (results / name).exists() or (results / name).stat().st_mtime < started
    ]
    if stale:
        return f"not written: {', '.join(stale)}"
    print(f"{bench.name}: done in {(time.time() - started) / 60:.1f} min", flush=True)
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--only",
        action="append",
        default=[],
        help="a benchmark, or a results file it writes (repeatable, or comma-separated)",
    )
    p.add_argument("--list", action="store_true", help="print the commands and run nothing")
    p.add_argument("--data", default=DATA, help=f"the evaluation data (default {DATA})")
    p.add_argument("--results", default=RESULTS, help=f"where results go (default {RESULTS})")
    p.add_argument("--cache", default=str(CACHE), help="where scale.py keeps its big homes")
    args = p.parse_args(argv)
    names = [n for arg in args.only for n in arg.replace(",", " ").split()]
    benches = select(names)
    skillstream = Path(sys.executable).parent / "skillstream"
    values = {
        "python": sys.executable,
        "skillstream": str(skillstream),
        "data": args.data,
        "results": args.results,
        "cache": args.cache,
    }
    if args.list:
        for bench in benches:
            try:
                print(show(bench, render(bench, {**values, "scratch": "{scratch}"})))
            except LookupError as e:
                print(show(bench, None, str(e)))
        return 0
    failed = {}
    for bench in benches:
        error = run(bench, values)
        if error:
            print(f"{bench.name}: FAILED: {error}", file=sys.stderr, flush=True)
            failed[bench.name] = error
    by_hand = [name for bench in benches for name in bench.by_hand]
    if by_hand:
        print(f"written by hand, update from the new figures: {', '.join(by_hand)}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
