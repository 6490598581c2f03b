"""``skillstream run``: the main job."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from skillstream.cli.common import dumps, format_option, map_option, settings_from
from skillstream.errors import InputError

if TYPE_CHECKING:
    from bytewax.inputs import Source

    from skillstream.flows.progress import Counters
    from skillstream.flows.runner import Runner, Summary


def parse_pairs(pairs: tuple[str, ...], what: str) -> dict[str, str]:
    out = {}
    for p in pairs:
        if "=" not in p:
            raise click.BadParameter(f"{what} takes key=value, got {p!r}")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out


@click.command()
@click.option(
    "--source",
    help="File, folder or glob (local or an fsspec URI such as s3://bucket/logs/*.jsonl.gz), "
    "or kafka://HOST:PORT/TOPIC. Default: the bundled sample.",
)
@format_option
@map_option
@click.option(
    "--owner",
    default=None,
    metavar="ID",
    help="The owner of every message read, in place of its user_id (default: user_id, else the "
    "conversation): for chat exports whose owner is the account, such as ChatGPT's, where each "
    "conversation would otherwise be an owner of its own. Files only.",
)
@click.option(
    "--workers",
    "-w",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Bytewax workers in this process.",
)
@click.option(
    "--process-id",
    "-i",
    type=click.IntRange(min=0),
    default=None,
    help="This process's index in a cluster.",
)
@click.option("--addresses", "-a", default=None, help="Cluster addresses 'host:port;host:port'.")
@click.option(
    "--recovery-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Bytewax recovery folder; a rerun resumes from it.",
)
@click.option(
    "--llm", type=click.Choice(["rules", "openai"]), default=None, help="Extraction backend."
)
@click.option("--llm-base-url", default=None)
@click.option("--llm-model", default=None)
@click.option("--kafka-config", multiple=True, metavar="KEY=VALUE")
@click.option(
    "--tail/--no-tail", default=None, help="Kafka: keep reading new messages, or stop at the end."
)
@click.option("--events-to", default=None, help="kafka://HOST:PORT/TOPIC for memory change events.")
@click.option(
    "--max-failed-spans",
    type=int,
    default=None,
    help="Exit with code 3 when more spans than this failed (setting max_failed_spans; -1: no "
    "limit, the default).",
)
@click.option(
    "--max-dead-letters",
    type=int,
    default=None,
    help="Exit with code 3 when more records than this were dead-lettered (setting "
    "max_dead_letters; -1: no limit, the default).",
)
@click.option(
    "--metrics-addr",
    default=None,
    metavar="[HOST:]PORT",
    help="Serve Prometheus metrics at http://HOST:PORT/metrics while the run goes on; a bare PORT "
    "listens on 127.0.0.1 only (setting metrics_addr; another host needs metrics_public=true).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.pass_context
def run(
    ctx,
    source,
    fmt,
    mapping,
    owner,
    workers,
    process_id,
    addresses,
    recovery_dir,
    llm,
    llm_base_url,
    llm_model,
    kafka_config,
    tail,
    events_to,
    max_failed_spans,
    max_dead_letters,
    metrics_addr,
    as_json,
):
    """Read conversations, cut spans, extract memories and store them.

    Exit codes: 0 done; 2 a user error (bad option, setting or source, the home in use by another
    run); 3 done, but more spans failed or more records were dead-lettered than
    --max-failed-spans / --max-dead-letters allow; 1 an unexpected error.
    """
    settings = settings_from(
        ctx,
        llm=llm,
        llm_base_url=llm_base_url,
        llm_model=llm_model,
        max_failed_spans=max_failed_spans,
        max_dead_letters=max_dead_letters,
        metrics_addr=metrics_addr,
    )
    kafka_pairs = parse_pairs(kafka_config, "--kafka-config")
    if kafka_pairs:  # the source and the event sink both read settings.kafka_config
        settings = settings.with_keys(kafka_config={**settings.kafka.config, **kafka_pairs})
    if not source:
        from skillstream.flows.memory import default_sample

        source = str(default_sample())
        if not Path(source).exists():
            raise InputError(f"no --source given and the bundled sample {source} is missing")
    peers = tuple(a.strip() for a in addresses.split(";")) if addresses else ()
    _check_cluster(process_id, peers)
    from skillstream.flows.runner import RESUME, Cluster, Runner, dead_letters_command

    runner = Runner(
        settings,
        cluster=Cluster(
            process_id=process_id,
            addresses=peers,
            workers_per_process=workers,
        ),
        recovery_dir=recovery_dir,
        events_to=events_to,
        signals=True,
    )
    src = runner.source(
        source,
        format=fmt,
        mapping=parse_pairs(mapping, "--map"),
        kafka_config=kafka_pairs,
        tail=tail,
        owner=owner,
    )
    if settings.telemetry.metrics_addr:
        click.echo(f"note: metrics at http://{settings.telemetry.metrics_addr}/metrics", err=True)
    done = _run(runner, src)
    summary = done.as_dict()
    exceeded = over_limits(summary, settings.flow.max_failed_spans, settings.flow.max_dead_letters)
    summary["exceeded"] = exceeded
    summary["all_rejected"] = done.all_rejected
    click.echo(dumps(summary) if as_json else done.line())
    if done.stopped:
        click.echo(f"note: stopped before the input ended; {RESUME}", err=True)
    if done.all_rejected:
        click.echo(f"error: {runner.refused_all()}", err=True)
        ctx.exit(EXIT_USER_ERROR)
    if summary["dead_letters"] and not exceeded:
        click.echo(
            f"note: {summary['dead_letters']} records were refused and kept as dead letters: "
            f"{dead_letters_command(settings.storage.home)}",
            err=True,
        )
    if exceeded:
        click.echo("error: " + "; ".join(exceeded), err=True)
        ctx.exit(EXIT_OVER_LIMIT)


def _check_cluster(process_id: int | None, addresses: tuple[str, ...]) -> None:
    """Refuse a cluster that cannot form: a process index with no address of its own (Bytewax
    would wait for peers that never come), or an address that is not ``host:port``."""
    for a in addresses:
        host, _, port = a.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InputError(f"--addresses: {a!r} is not host:port")
    if process_id is not None and process_id > 0 and process_id >= max(1, len(addresses)):
        raise InputError(
            f"--process-id {process_id} names no process of the cluster: give --addresses with "
            f"one host:port per process (got {len(addresses)}); process ids count from 0"
        )


EXIT_USER_ERROR = 2
"""Exit code of a user error: here, a run whose input gave dead letters and not one message."""
EXIT_OVER_LIMIT = 3
"""Exit code of a run that finished with more failed spans or dead letters than allowed."""


def over_limits(summary: dict, max_failed_spans: int, max_dead_letters: int) -> list[str]:
    """The limits a finished run passed, in words (empty: none; a limit of -1 is no limit)."""
    out = []
    failed, dead = summary["spans_failed"], summary["dead_letters"]
    if 0 <= max_failed_spans < failed:
        out.append(f"{failed} spans failed, more than max_failed_spans={max_failed_spans}")
    if 0 <= max_dead_letters < dead:
        out.append(
            f"{dead} records were dead-lettered, more than max_dead_letters={max_dead_letters}"
        )
    return out


def _run(runner: Runner, source: Source) -> Summary:
    """Run the flow with a progress display (a bar on a terminal); the run's summary."""
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(runner.counters, stop), daemon=True)
    watcher.start()
    try:
        summary = runner.run(source)
    finally:
        stop.set()
        watcher.join(timeout=2)
    return summary


def _watch(counters: Counters, stop: threading.Event) -> None:
    """Progress: a bar on a terminal, a log line every 10 s otherwise."""
    tty = sys.stderr.isatty()
    bar = None
    if tty:
        from tqdm import tqdm

        bar = tqdm(unit=" msg", desc="messages", file=sys.stderr, leave=False)
    last = time.monotonic()
    while not stop.wait(0.5):
        c = counters.snapshot()
        if bar is not None:
            bar.n = c.get("messages", 0)
            bar.set_postfix(
                spans=c.get("spans_done", 0), memories=c.get("memory_changes", 0), refresh=False
            )
            bar.refresh()
        elif time.monotonic() - last >= 10:
            last = time.monotonic()
            click.echo(
                f"progress: {c.get('messages', 0)} messages, {c.get('spans_done', 0)} spans, "
                f"{c.get('memory_changes', 0)} memory changes",
                err=True,
            )
    if bar is not None:
        bar.close()
