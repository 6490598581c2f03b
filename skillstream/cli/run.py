"""``skillstream run``: the main job."""

from __future__ import annotations

import logging
import sys
import threading
import time
from contextlib import nullcontext
from datetime import timedelta
from pathlib import Path

import click

from skillstream.cli.common import dumps, format_option, map_option, settings_from
from skillstream.errors import InputError

log = logging.getLogger("skillstream.run")


def parse_pairs(pairs: tuple[str, ...], what: str) -> dict[str, str]:
    out = {}
    for p in pairs:
        if "=" not in p:
            raise click.BadParameter(f"{what} takes key=value, got {p!r}")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def make_source(
    source: str, fmt: str, mapping: dict[str, str], settings, kafka_config=None, tail=None
):
    """A Bytewax source for a path or a ``kafka://`` URI."""
    if source.startswith("kafka://"):
        from skillstream.connectors.kafka import kafka_source

        return kafka_source(source, settings, config=kafka_config or {}, tail=tail)
    from skillstream.connectors.files import FileSource
    from skillstream.redact import redactor_for
    from skillstream.storage.home import storage_options

    return FileSource(
        source,
        format=fmt,
        mapping=mapping or None,
        max_chars=settings.spans.max_message_chars,
        # the default patterns plus the policies' own
        redactor=redactor_for(settings.lifecycle.policies),
        storage_options=storage_options(settings),  # for s3:// and other fsspec sources
    )


@click.command()
@click.option(
    "--source",
    help="File, folder or glob (local or an fsspec URI such as s3://bucket/logs/*.jsonl.gz), "
    "or kafka://HOST:PORT/TOPIC. Default: the bundled sample.",
)
@format_option
@map_option
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
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.pass_context
def run(
    ctx,
    source,
    fmt,
    mapping,
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
    )
    kafka_pairs = parse_pairs(kafka_config, "--kafka-config")
    if kafka_pairs:  # the source and the event sink both read settings.kafka_config
        settings = settings.with_keys(kafka_config={**settings.kafka.config, **kafka_pairs})
    if not source:
        from skillstream.flows.memory import default_sample

        source = str(default_sample())
        if not Path(source).exists():
            raise InputError(f"no --source given and the bundled sample {source} is missing")
    if not settings.storage.home.startswith(("s3://", "oss://", "memory://")):
        Path(settings.storage.home).mkdir(parents=True, exist_ok=True)
    from skillstream.storage.lock import run_lock

    # One run per home: a DuckDB file's run lock lies beside it, and in a cluster process 0 holds
    # it for all. A shared catalog takes many writing processes, on many hosts; there is no local
    # file to lock, so keeping two clusters off one home is the operator's part (docs/scale-out.md).
    lock = nullcontext()
    if not settings.storage.shared_catalog:
        Path(settings.storage.catalog).parent.mkdir(parents=True, exist_ok=True)
        if process_id in (None, 0):
            lock = run_lock(settings.storage.catalog, settings.storage.home)
    with lock:
        summary = _run(
            settings,
            source,
            fmt,
            mapping,
            kafka_pairs,
            tail,
            workers,
            process_id,
            addresses,
            recovery_dir,
            events_to,
        )
    exceeded = over_limits(summary, settings.flow.max_failed_spans, settings.flow.max_dead_letters)
    summary["exceeded"] = exceeded
    if as_json:
        click.echo(dumps(summary))
    else:
        click.echo(
            f"read {summary['messages']} messages ({summary['dead_letters']} dead letters); "
            f"spans: {summary['spans_processed']} processed, "
            f"{summary['spans_already_processed']} already "
            f"processed, {summary['spans_failed']} failed; "
            f"{summary['memory_changes']} memory changes in "
            f"{summary['seconds']} s; home {settings.storage.home}"
        )
    if exceeded:
        click.echo("error: " + "; ".join(exceeded), err=True)
        ctx.exit(EXIT_OVER_LIMIT)


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


def _run(
    settings,
    source,
    fmt,
    mapping,
    kafka_pairs,
    tail,
    workers,
    process_id,
    addresses,
    recovery_dir,
    events_to,
) -> dict:
    """Build and run the memory flow; the run's summary."""
    from bytewax.recovery import RecoveryConfig
    from bytewax.run import cli_main

    from skillstream.flows import progress
    from skillstream.flows.memory import build_flow

    src = make_source(source, fmt, parse_pairs(mapping, "--map"), settings, kafka_pairs, tail)
    # Shards default to the cluster's worker count; a shared catalog gets one store partition per
    # shard and every process reconciles its own partitions' owners.
    processes = len(addresses.split(";")) if addresses else 1
    parts = build_flow(
        settings,
        src,
        workers=workers * processes,
        events_to=events_to,
        reconcile=settings.storage.shared_catalog or process_id in (None, 0),
        cluster=(process_id or 0, processes, workers),
    )

    recovery = None
    if recovery_dir:
        recovery = RecoveryConfig(str(_ensure_recovery(Path(recovery_dir))))

    progress.reset()
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(stop,), daemon=True)
    watcher.start()
    t0 = time.perf_counter()
    try:
        cli_main(
            parts.flow,
            workers_per_process=workers,
            process_id=process_id,
            addresses=addresses.split(";") if addresses else None,
            epoch_interval=timedelta(seconds=settings.flow.epoch_interval_s),
            recovery_config=recovery,
        )
    finally:
        stop.set()
        watcher.join(timeout=2)
    seconds = time.perf_counter() - t0
    counts = progress.snapshot()
    _finish(settings, parts.dim, process_id)
    summary = {
        "messages": counts.get("messages", 0),
        "dead_letters": counts.get("dead_letters", 0),
        "spans_processed": counts.get("spans_done", 0),
        "spans_already_processed": counts.get("spans_skipped", 0),
        "spans_failed": counts.get("spans_failed", 0),
        "memory_changes": counts.get("memory_changes", 0),
        "seconds": round(seconds, 2),
        "home": settings.storage.home,
    }
    return summary


def _ensure_recovery(path: Path, partitions: int = 4) -> Path:
    """Create and initialise a recovery folder on first use."""
    from bytewax.recovery import init_db_dir

    path.mkdir(parents=True, exist_ok=True)
    if not any(path.glob("part-*.sqlite3")):
        init_db_dir(path, partitions)
    return path


def _watch(stop: threading.Event) -> None:
    """Progress: a bar on a terminal, a log line every 10 s otherwise."""
    from skillstream.flows import progress

    tty = sys.stderr.isatty()
    bar = None
    if tty:
        from tqdm import tqdm

        bar = tqdm(unit=" msg", desc="messages", file=sys.stderr, leave=False)
    last = time.monotonic()
    while not stop.wait(0.5):
        c = progress.snapshot()
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


def _finish(settings, dim: int, process_id: int | None) -> None:
    """Fold new rows into the full-text index and compact a shared catalog (one process)."""
    if process_id not in (None, 0):
        return
    try:
        from skillstream.storage.home import open_index

        open_index(settings, dim).optimize()
    except Exception as e:  # noqa: BLE001 - an index refresh must not fail a finished run
        log.warning("could not optimise the memory index: %s", e)
    if settings.storage.shared_catalog:
        try:
            from skillstream.storage.catalog import open_catalog

            with open_catalog(settings.storage) as catalog:
                files = catalog.compact()
            log.info("shared catalog compacted: %s", files)
        except Exception as e:  # noqa: BLE001 - upkeep must not fail a finished run
            log.warning("could not compact the shared catalog: %s", e)
