"""Memory change events to Kafka: the sink behind ``skillstream run --events-to kafka://...``.

Built on ``confluent-kafka``'s producer (Bytewax's ``KafkaSink`` takes ready-made messages; this
sink takes the flow's results and turns each lifecycle event into one JSON record). Addresses and
client properties work as in ``skillstream.connectors.kafka``.

Example consumer (any Kafka client works; this is plain confluent-kafka)::

    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": "127.0.0.1:9092", "group.id": "memory-watch",
                  "auto.offset.reset": "earliest"})
    c.subscribe(["memory-events"])
    seen = set()
    while True:
        msg = c.poll(1.0)
        if msg is None or msg.error():
            continue
        event = json.loads(msg.value())
        if event["event_id"] in seen:   # a replay after a crash: already handled
            continue
        seen.add(event["event_id"])
        print(event["owner_id"], event["event"], event["new_value"])
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from bytewax.outputs import DynamicSink, StatelessSinkPartition

from skillstream.connectors.kafka import KafkaAddress, client_config, ensure_topic
from skillstream.errors import InputError, TransientError
from skillstream.model import Memory, MemoryEvent

EVENT_SCHEMA = 1
"""Version of the memory-event JSON layout (field ``schema`` of every event)."""


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def event_record(
    event: MemoryEvent, memory: Memory | None, conversation_id: str | None
) -> dict[str, Any]:
    """The JSON object published for one memory change.

    Every field of ``MemoryEvent`` (times as ISO 8601 text), plus ``schema``, the
    ``conversation_id`` and ``memory``: the memory's state after the change's span or maintenance
    pass (every column but the vector), or ``None`` when the result does not hold it.
    """
    out: dict[str, Any] = {"schema": EVENT_SCHEMA}
    for f in dataclasses.fields(event):
        out[f.name] = _jsonable(getattr(event, f.name))
    out["conversation_id"] = conversation_id
    out["memory"] = (
        None
        if memory is None
        else {k: _jsonable(v) for k, v in memory.row().items() if k != "vector"}
    )
    return out


def result_events(result: Any) -> list[tuple[str, dict[str, Any]]]:
    """``(key, event JSON)`` for every memory change of a result, in order.

    A ``SpanResult`` counts when its span was processed now (``status == "done"``), a
    ``MaintenanceResult`` (lifecycle maintenance: decay, expiry, capacity) always; skipped and
    failed spans changed nothing.
    """
    if getattr(result, "status", None) not in ("done", "maintenance"):
        return []
    memories = {m.id: m for m in result.memories}
    span = getattr(result, "span", None)
    out = []
    for e in result.events:
        memory = memories.get(e.memory_id)
        conversation = (
            span.conversation_id
            if span is not None
            else (memory.conversation_id if memory is not None else None)
        )
        out.append((e.owner_id, event_record(e, memory, conversation)))
    return out


class MemoryEventSink(DynamicSink[Any]):
    """Publish every memory change of the flow's span results to one Kafka topic, as JSON.

    One record per ``MemoryEvent`` that the flow writes to the ``memory_events`` table: the
    changes of processed spans (``created``, ``updated``, ``merged``, ``deleted``,
    ``reinforced``...) and of the flow's lifecycle maintenance passes (``decayed``, ``expired``,
    ``archived``...). The record key is the owner id, so one owner's events stay in order in one
    partition; headers ``event_id`` and ``event`` repeat those fields for consumers that filter
    without parsing. Spans that were skipped (already in the ledger) or failed publish nothing.

    Value layout (``schema`` 1): every column of ``memory_events`` plus two fields::

        {"schema": 1, "event_id": "evt_...", "memory_id": "mem_...", "owner_id": "u7",
         "event": "created", "reason": "new information", "old_value": null,
         "new_value": "...", "old_status": null, "new_status": "activated",
         "span_id": "spn_...", "actor": "...", "event_ts": "2024-05-08T13:56:00+00:00",
         "recorded_at": "...", ...,
         "conversation_id": "conv-42",
         "memory": {"id": "mem_...", "text": "...", "kind": "fact", "status": "activated",
                    "version": 1, ...}}

    ``memory`` is the memory's state after the span or maintenance pass (without the vector).

    Delivery guarantee: **at least once, with deterministic event ids.** Each batch is flushed
    and every delivery confirmed before ``write_batch`` returns (a failed delivery raises, which
    stops the flow), so an epoch's events are on the broker before Bytewax snapshots the epoch.
    After a crash, the spans since the last snapshot are processed again and publish their events
    again, with the same ``event_id`` (a hash of memory, span, event kind and sequence number):
    consumers that need exactly-once keep the ids they have seen (or upsert by ``event_id``).
    Events may reach the topic a moment before the store sink has committed the same span.
    """

    def __init__(
        self,
        address: KafkaAddress,
        config: Mapping[str, Any] | None = None,
        *,
        partitions: int = 1,
        flush_timeout_s: float = 30.0,
    ) -> None:
        if len(address.topics) != 1:
            raise InputError(f"the event sink writes one topic, got {', '.join(address.topics)}")
        self.address = address
        self.topic = address.topics[0]
        self._config = dict(config or {})
        self.partitions = partitions
        self.flush_timeout_s = flush_timeout_s

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _EventPartition:
        """A producer for this worker; creates the topic if it is missing."""
        ensure_topic(self.address, self.partitions, self._config)
        return _EventPartition(self)


class _EventPartition(StatelessSinkPartition[Any]):
    def __init__(self, sink: MemoryEventSink) -> None:
        from confluent_kafka import Producer

        cfg = client_config(sink.address, {"enable.idempotence": True, "acks": "all"})
        cfg.update(sink._config)
        self._producer = Producer(cfg)
        self._topic = sink.topic
        self._timeout = sink.flush_timeout_s
        self._errors: list[str] = []
        self._lock = threading.Lock()

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            with self._lock:
                self._errors.append(str(err))

    def write_batch(self, items: list[Any]) -> None:
        sent = 0
        for result in items:
            if isinstance(result, tuple) and len(result) == 2:
                result = result[1]
            for key, record in result_events(result):
                self._produce(key, record)
                sent += 1
        if sent:
            self._flush()

    def _produce(self, key: str, record: dict[str, Any]) -> None:
        value = json.dumps(record, ensure_ascii=False).encode("utf-8")
        headers = [("event_id", record["event_id"].encode()), ("event", record["event"].encode())]
        while True:
            try:
                self._producer.produce(
                    self._topic,
                    key=key.encode("utf-8"),
                    value=value,
                    headers=headers,
                    on_delivery=self._delivered,
                )
                break
            except BufferError:  # local queue full: let deliveries drain, then retry
                self._producer.poll(0.1)
        self._producer.poll(0)

    def _flush(self) -> None:
        left = self._producer.flush(self._timeout)
        with self._lock:
            errors, self._errors = self._errors, []
        if left or errors:
            raise TransientError(
                f"could not deliver memory events to Kafka topic {self._topic!r}: "
                + (f"{left} still queued after {self._timeout:g} s" if left else "")
                + ("; " if left and errors else "")
                + (f"{len(errors)} failed, first: {errors[0]}" if errors else "")
                + "; the run stops so that a recovery run publishes them again"
            )

    def close(self) -> None:
        self._producer.flush(self._timeout)
