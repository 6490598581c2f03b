"""``skillstream produce``: backfill chat logs from files into a Kafka topic.

Every valid message of the input is written as one JSON record in the canonical format (see
``skillstream.connectors.kafka``), keyed by its conversation id, so a conversation stays in one
partition and in order. Records that cannot be parsed are not produced; they are counted and the
first few reasons are printed (a file-source run would put them in the dead letters).

The records' Kafka timestamps are the time of producing, not the messages' event time (which is in
the JSON): a broker applies retention by record timestamp, and a backfill of last year's logs
stamped with last year's dates would be deleted at once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import click

from skillstream.cli.common import dumps, format_option, map_option, settings_from
from skillstream.cli.run import parse_pairs
from skillstream.errors import InputError, TransientError

if TYPE_CHECKING:
    from confluent_kafka import KafkaError

SHOWN_REASONS = 5


def _messages(source) -> Iterator:
    """Every item of a ``FileSource``, file after file, streaming (nothing is held in memory)."""
    for key in source.list_parts():
        part = source.build_part("produce", key, None)
        try:
            while True:
                try:
                    batch = part.next_batch()
                except StopIteration:
                    break
                yield from batch
        finally:
            part.close()


@click.command()
@click.argument("path", nargs=-1, required=True)
@click.option("--to", "to", required=True, metavar="kafka://HOST:PORT/TOPIC", help="Target topic.")
@format_option
@map_option
@click.option(
    "--partitions",
    type=int,
    default=3,
    show_default=True,
    help="Partitions of the topic if it has to be created.",
)
@click.option(
    "--kafka-config", multiple=True, metavar="KEY=VALUE", help="librdkafka producer property."
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.pass_context
def produce(
    ctx: click.Context,
    path: tuple[str, ...],
    to: str,
    fmt: str,
    mapping: tuple[str, ...],
    partitions: int,
    kafka_config: tuple[str, ...],
    as_json: bool,
) -> None:
    """Write the chat messages of PATH (files, folders, globs) to a Kafka topic.

    The topic is created with --partitions partitions when it does not exist.
    """
    import json

    from confluent_kafka import KafkaException, Producer

    from skillstream.connectors.kafka import (
        client_config,
        ensure_topic,
        message_record,
        parse_kafka_uri,
    )
    from skillstream.flows.runner import open_source
    from skillstream.model import Message

    settings = settings_from(ctx)
    address = parse_kafka_uri(to, single_topic=True)
    config = {**settings.kafka.config, **parse_pairs(kafka_config, "--kafka-config")}
    # the files are read as a run reads them (size limit, redaction, storage options)
    source = open_source(
        settings, list(path), format=fmt, mapping=parse_pairs(mapping, "--map") or None
    )
    n_parts, created = ensure_topic(address, partitions, config)
    topic = address.topics[0]

    errors: list[str] = []

    def delivered(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    cfg = client_config(address, {"enable.idempotence": True, "acks": "all", "linger.ms": 20})
    cfg.update(config)
    try:
        producer = Producer(cfg)
    except KafkaException as e:
        raise InputError(f"bad Kafka producer configuration: {e}") from e
    t0 = time.perf_counter()
    produced, invalid, conversations = 0, 0, set()
    reasons: list[str] = []
    for item in _messages(source):
        if not isinstance(item, Message):
            invalid += 1
            if len(reasons) < SHOWN_REASONS:
                reasons.append(f"{item.source} at {item.position}: {item.reason}")
            continue
        value = json.dumps(message_record(item), ensure_ascii=False).encode("utf-8")
        while True:
            try:
                producer.produce(
                    topic,
                    key=item.conversation_id.encode("utf-8"),
                    value=value,
                    on_delivery=delivered,
                )
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
        produced += 1
        conversations.add(item.conversation_id)
    left = producer.flush(60)
    if left or errors:
        raise TransientError(
            f"Kafka did not confirm {left + len(errors)} of {produced} records on {to}"
            + (f"; first error: {errors[0]}" if errors else "")
            + "; produce again (message ids are stable, so the memory flow ignores repeats)"
        )
    summary = {
        "produced": produced,
        "conversations": len(conversations),
        "invalid_records": invalid,
        "topic": topic,
        "partitions": n_parts,
        "topic_created": created,
        "seconds": round(time.perf_counter() - t0, 2),
    }
    if as_json:
        click.echo(dumps(summary))
    else:
        click.echo(
            f"produced {produced} messages of {len(conversations)} conversations to {topic} "
            f"({n_parts} partitions{', created' if created else ''}) in {summary['seconds']} s"
            + (f"; {invalid} invalid records left out" if invalid else "")
        )
    for r in reasons:
        click.echo(f"invalid record: {r}", err=True)
