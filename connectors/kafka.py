"""Kafka in and out: chat messages from topics, memory change events to a topic.

Both ends are built on Bytewax's Kafka connector (``bytewax.connectors.kafka``) and
``confluent-kafka``. Addresses are URIs::

    kafka://HOST:PORT/TOPIC                 one broker, one topic
    kafka://H1:9092,H2:9092/chats,chats-eu  several bootstrap brokers, several topics (source only)

librdkafka properties (``security.protocol``, ``sasl.*``, ``fetch.wait.max.ms``...) come from
``Settings.kafka_config`` (env ``SKILLSTREAM_KAFKA_CONFIG`` as JSON, or ``--kafka-config
KEY=VALUE``); they are passed to every consumer, producer and admin client and never logged.

**Input records.** One JSON object per Kafka record, in the canonical chat-message format of
``skillstream.connectors.records`` (``conversation_id``, ``role``, ``content``, ``timestamp``, and
optionally ``user_id``, ``agent_id``, ``session_id``, ``message_id``, ``name``, ``metadata``)::

    key:   b"conv-42"
    value: {"conversation_id": "conv-42", "user_id": "u7", "session_id": "conv-42/s1",
            "message_id": "m-1001", "role": "user", "name": "Ana",
            "content": "I moved to Lisbon last week.", "timestamp": "2024-05-08T13:56:00Z"}

The record **key is the conversation id**. Kafka keeps order only within a partition, and the span
builder needs a conversation's messages in order, so every message of a conversation must go to one
partition: key by conversation id (``skillstream produce`` does). When the value has no
``conversation_id`` the key is used; when it has no ``timestamp`` the record's Kafka timestamp is
used (event time is what cuts spans, so prefer an explicit one).

A record that cannot be used (not UTF-8, not JSON, not a valid message, an empty value) becomes a
``DeadLetter`` with ``source = "kafka:TOPIC"`` and ``position = "TOPIC:PARTITION:OFFSET"``; the
stream goes on. Consumer errors (a broker that is gone, a deleted topic) stop the flow instead, so
that a recovery run can resume from the last snapshot.

**Resume state** is the Kafka offset of each partition, kept by Bytewax's recovery (the source never
commits offsets to a consumer group). Without a recovery folder a run starts at the beginning of
every partition; spans already in the ledger are then skipped, so a restart costs reading, not
extraction. With ``tail=False`` each partition is read to its end as it was
when the reader got there, then the source finishes: a batch run over a topic. The end is found by
librdkafka's partition-EOF signal, not by the broker's high watermark (tansu, the test broker,
reports a wrong one).

**Output events** (``memory_events_sink``): see ``skillstream.connectors.kafka_events``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bytewax.connectors.kafka import KafkaSource
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition

from skillstream.connectors.records import dead_letter, parse_record
from skillstream.errors import InputError
from skillstream.model import DeadLetter, Message
from skillstream.redact import DEFAULT_REDACTOR, Redactor
from skillstream.settings import Settings

log = logging.getLogger(__name__)

Item = Message | DeadLetter
"""What the Kafka source emits."""

SCHEME = "kafka://"
METADATA_TIMEOUT_S = 10.0
"""How long to wait for the brokers' metadata before giving up with a clear error."""
IDLE_POLL = timedelta(milliseconds=20)
"""Pause before polling a partition again after a poll that returned nothing."""

_QUIET = {"log.connection.close": "false"}


# ---------------------------------------------------------------------------------- addresses


@dataclass(frozen=True)
class KafkaAddress:
    """A parsed ``kafka://`` URI."""

    brokers: tuple[str, ...]
    topics: tuple[str, ...]

    @property
    def bootstrap(self) -> str:
        """The ``bootstrap.servers`` value."""
        return ",".join(self.brokers)


def parse_kafka_uri(uri: str, *, single_topic: bool = False) -> KafkaAddress:
    """Read ``kafka://HOST:PORT[,HOST:PORT...]/TOPIC[,TOPIC...]``.

    Args:
        uri: The URI.
        single_topic: Refuse more than one topic (a sink writes to one).

    Returns:
        Brokers and topics.

    Raises:
        InputError: The URI does not have that shape.
    """
    expected = "kafka://HOST:PORT/TOPIC" + ("" if single_topic else "[,TOPIC...]")
    if not isinstance(uri, str) or not uri.startswith(SCHEME):
        raise InputError(f"expected a Kafka address like {expected}, got {uri!r}")
    rest = uri[len(SCHEME) :]
    hosts, sep, topics_part = rest.partition("/")
    brokers = tuple(h.strip() for h in hosts.split(",") if h.strip())
    topics = tuple(t.strip() for t in topics_part.split(",") if t.strip())
    if not sep or not brokers or not topics:
        raise InputError(
            f"expected a Kafka address like {expected}, got {uri!r}: "
            + ("no broker" if not brokers else "no topic")
        )
    for b in brokers:
        host, colon, port = b.rpartition(":")
        if not colon or not host or not port.isdigit():
            raise InputError(f"broker {b!r} in {uri!r} is not HOST:PORT")
    for t in topics:
        if not all(c.isalnum() or c in "._-" for c in t) or len(t) > 249:
            raise InputError(
                f"topic {t!r} in {uri!r} is not a valid Kafka topic name "
                "(letters, digits, '.', '_' and '-', at most 249 characters)"
            )
    if single_topic and len(topics) > 1:
        raise InputError(f"expected one topic in {uri!r}, got {len(topics)}: {', '.join(topics)}")
    return KafkaAddress(brokers, topics)


def client_config(address: KafkaAddress, config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """librdkafka properties: the bootstrap servers, quiet connection logs, then ``config``."""
    out: dict[str, Any] = {"bootstrap.servers": address.bootstrap, **_QUIET}
    out.update({str(k): v for k, v in (config or {}).items()})
    return out


def _admin(address: KafkaAddress, config: Mapping[str, Any] | None):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    try:
        return AdminClient(client_config(address, config))
    except (KafkaException, ValueError, TypeError) as e:
        raise InputError(
            f"bad Kafka client configuration ({e}); properties are librdkafka's "
            "(https://github.com/confluentinc/librdkafka/blob/master/CONFIGURATION.md)"
        ) from e


def list_partitions(
    address: KafkaAddress,
    config: Mapping[str, Any] | None = None,
    timeout: float = METADATA_TIMEOUT_S,
) -> dict[str, list[int]]:
    """Partition numbers of each topic of ``address``, read from the cluster metadata.

    The whole-cluster metadata is asked for (not per topic), so a missing topic is reported
    instead of being auto-created by a broker that does that.

    Raises:
        InputError: A broker does not answer within ``timeout`` seconds, or a topic is missing.
    """
    from confluent_kafka import KafkaException

    admin = _admin(address, config)
    try:
        meta = admin.list_topics(timeout=timeout)
    except KafkaException as e:
        raise InputError(
            f"no answer from the Kafka broker(s) {address.bootstrap} within {timeout:g} s; "
            f"check the address and that the broker is running ({e})"
        ) from e
    out: dict[str, list[int]] = {}
    for topic in address.topics:
        tm = meta.topics.get(topic)
        if tm is None or tm.error is not None or not tm.partitions:
            known = sorted(t for t in meta.topics if not t.startswith("__"))
            raise InputError(
                f"Kafka topic {topic!r} does not exist on {address.bootstrap}"
                + (f" (topics there: {', '.join(known[:20])})" if known else "")
                + "; create it, e.g. with 'skillstream produce FILE --to "
                f"kafka://{address.bootstrap}/{topic}'"
            )
        out[topic] = sorted(tm.partitions)
    return out


def ensure_topic(
    address: KafkaAddress,
    partitions: int,
    config: Mapping[str, Any] | None = None,
    timeout: float = METADATA_TIMEOUT_S,
) -> tuple[int, bool]:
    """Create the (single) topic of ``address`` with ``partitions`` partitions when missing.

    Returns:
        ``(partitions the topic has, whether it was created now)``.

    Raises:
        InputError: The broker does not answer, or refuses to create the topic.
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    if partitions < 1:
        raise InputError(f"a topic needs at least 1 partition, got {partitions}")
    topic = address.topics[0]
    try:
        return len(list_partitions(address, config, timeout)[topic]), False
    except InputError as e:
        if "does not exist" not in str(e):
            raise
    admin = _admin(address, config)
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
        operation_timeout=timeout,
        request_timeout=timeout,
    )
    try:
        futures[topic].result(timeout=timeout)
        created = True
    except KafkaException as e:
        err = e.args[0] if e.args else None
        if getattr(err, "code", lambda: None)() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise InputError(f"could not create Kafka topic {topic!r}: {e}") from e
        created = False  # another client created it meanwhile
    return len(list_partitions(address, config, timeout)[topic]), created


# ---------------------------------------------------------------------------------- records


def message_record(message: Message) -> dict[str, Any]:
    """The canonical JSON object for a ``Message`` (what ``skillstream produce`` writes).

    Parsing it back with ``parse_record`` gives the same message (ids included), apart from
    ``source`` and ``position``, which say where it was read.
    """
    record: dict[str, Any] = {
        "conversation_id": message.conversation_id,
        "user_id": message.owner_id,
        "session_id": message.session_id,
        "message_id": message.message_id,
        "role": message.role,
        "name": message.speaker,
        "content": message.text,
        "timestamp": message.ts.isoformat(),
    }
    if message.agent_id is not None:
        record["agent_id"] = message.agent_id
    if message.metadata is not None:
        record["metadata"] = json.loads(message.metadata)
    return record


@dataclass(frozen=True)
class _Decode:
    max_chars: int
    redactor: Redactor


def decode_record(
    value: bytes | None,
    key: bytes | None,
    *,
    topic: str,
    partition: int,
    offset: int,
    timestamp: tuple[int, int] | None = None,
    max_chars: int = 20000,
    redactor: Redactor = DEFAULT_REDACTOR,
) -> Item:
    """Turn one Kafka record into a ``Message`` or a ``DeadLetter`` (see the module docstring).

    Args:
        value: The record's value.
        key: The record's key (the conversation id).
        topic: Where the record was read.
        partition: Its partition.
        offset: Its offset.
        timestamp: ``(type, epoch milliseconds)`` as confluent-kafka gives it; type 0 means none.
        max_chars: Longest accepted content, in characters.
        redactor: Sensitive-data rules.
    """
    source = f"kafka:{topic}"
    position = f"{topic}:{partition}:{offset}"

    def refuse(reason: str, payload: str | None) -> DeadLetter:
        return dead_letter(
            reason, source=source, position=position, payload=payload, redactor=redactor
        )

    if value is None or not value.strip():
        return refuse("empty record value; expected a JSON chat message", None)
    raw = value[3:] if value.startswith(b"\xef\xbb\xbf") else value
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return refuse(f"invalid UTF-8 at byte {e.start}", raw.decode("utf-8", errors="replace"))
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        return refuse(f"broken JSON: {e}", text)
    except RecursionError:
        return refuse("broken JSON: nested too deeply", text)
    if isinstance(obj, dict):
        if obj.get("conversation_id") in (None, "") and key:
            try:
                obj["conversation_id"] = key.decode("utf-8")
            except UnicodeDecodeError:
                pass
        if obj.get("timestamp") in (None, "") and timestamp and timestamp[0] != 0:
            obj["timestamp"] = timestamp[1] / 1000.0
    return parse_record(
        obj, source=source, position=position, max_chars=max_chars, redactor=redactor
    )


# ---------------------------------------------------------------------------------- source


class KafkaMessageSource(FixedPartitionedSource[Item, int | None]):
    """Chat messages from Kafka topics; one source partition per Kafka partition.

    A thin layer over Bytewax's ``KafkaSource``: that class reads and keeps offsets, this one
    turns each record into a ``Message`` or a ``DeadLetter`` (see the module docstring) and
    reports a missing topic or an unreachable broker clearly.

    Delivery: at least once under Bytewax recovery (records after the last snapshot are read
    again); message ids are deterministic, so the idempotent store sink collapses the repeats.

    Args:
        address: Brokers and topics.
        tail: Keep waiting for new records (``True``), or stop at the end of each partition.
        config: Extra librdkafka consumer properties.
        batch_size: Records per poll.
        max_chars: Longest accepted content, in characters.
        redactor: Sensitive-data rules.
    """

    def __init__(
        self,
        address: KafkaAddress,
        *,
        tail: bool = True,
        config: Mapping[str, Any] | None = None,
        batch_size: int = 1000,
        max_chars: int = 20000,
        redactor: Redactor = DEFAULT_REDACTOR,
    ) -> None:
        if batch_size < 1:
            raise InputError(f"batch_size must be at least 1, got {batch_size}")
        self.address = address
        self.tail = tail
        self._config = dict(_QUIET, **{str(k): v for k, v in (config or {}).items()})
        self._inner = KafkaSource(
            list(address.brokers),
            list(address.topics),
            tail=tail,
            add_config=dict(self._config),
            batch_size=batch_size,
            raise_on_errors=True,
        )
        self._decode = _Decode(max_chars, redactor)

    def list_parts(self) -> list[str]:
        """``"PARTITION-TOPIC"`` for every partition (Bytewax's naming)."""
        parts = list_partitions(self.address, self._config)
        return [f"{p}-{topic}" for topic, ps in parts.items() for p in ps]

    def build_part(
        self, step_id: str, for_part: str, resume_state: int | None
    ) -> StatefulSourcePartition[Item, int | None]:
        """Open one Kafka partition at the resume offset (or the beginning)."""
        idx, _, topic = for_part.partition("-")
        if topic not in self.address.topics:
            raise InputError(
                f"cannot resume Kafka partition {for_part!r}: topic {topic!r} is not one of "
                f"{', '.join(self.address.topics)}; run with the same topics or a fresh recovery "
                "folder"
            )
        inner = self._inner.build_part(step_id, for_part, resume_state)
        return _KafkaPartition(inner, self._decode)


class _KafkaPartition(StatefulSourcePartition[Item, int | None]):
    def __init__(self, inner: StatefulSourcePartition, decode: _Decode) -> None:
        self._inner = inner
        self._decode = decode
        self._idle = False

    def next_batch(self) -> list[Item]:
        batch = self._inner.next_batch()  # raises StopIteration at the end (tail=False)
        self._idle = not batch
        d = self._decode
        return [
            decode_record(
                m.value,
                m.key,
                topic=m.topic,
                partition=m.partition,
                offset=m.offset,
                timestamp=m.timestamp,
                max_chars=d.max_chars,
                redactor=d.redactor,
            )
            for m in batch
        ]

    def next_awake(self) -> datetime | None:
        return datetime.now(UTC) + IDLE_POLL if self._idle else None

    def snapshot(self) -> int | None:
        return self._inner.snapshot()

    def close(self) -> None:
        self._inner.close()


def kafka_source(
    uri: str,
    settings: Settings,
    config: Mapping[str, Any] | None = None,
    tail: bool | None = None,
) -> KafkaMessageSource:
    """The source ``skillstream run --source kafka://...`` reads.

    Args:
        uri: ``kafka://HOST:PORT/TOPIC[,TOPIC]``.
        settings: ``kafka_config``, ``max_message_chars`` and the policies' sensitive-data
            patterns are used.
        config: librdkafka properties that override ``settings.kafka_config``.
        tail: ``None`` or ``True``: follow the topics; ``False``: stop at their end.

    Raises:
        InputError: A bad URI, an unreachable broker or a missing topic (checked now, before the
            flow starts).
    """
    from skillstream.redact import redactor_for

    address = parse_kafka_uri(uri)
    merged = {**(settings.kafka.config or {}), **(config or {})}
    list_partitions(address, merged)  # fail fast, with a clear message
    return KafkaMessageSource(
        address,
        tail=True if tail is None else bool(tail),
        config=merged,
        max_chars=settings.spans.max_message_chars,
        redactor=redactor_for(settings.lifecycle.policies),
    )


# ---------------------------------------------------------------------------------- event sink


def memory_events_sink(uri: str, settings: Settings):
    """The sink behind ``skillstream run --events-to kafka://HOST:PORT/TOPIC``.

    See ``skillstream.connectors.kafka_events.MemoryEventSink``. A missing topic is created with
    ``settings.kafka_events_partitions`` partitions.
    """
    from skillstream.connectors.kafka_events import MemoryEventSink

    address = parse_kafka_uri(uri, single_topic=True)
    return MemoryEventSink(
        address,
        settings.kafka.config,
        partitions=settings.kafka.events_partitions,
    )
