"""Fixtures for the storage tests: a moto S3 server, settings in tmp_path, record factories."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from skillstream.model import (
    DeadLetter,
    LLMCall,
    Memory,
    MemoryEvent,
    Message,
    Span,
    SpanResult,
    TableRows,
)
from skillstream.settings import Settings
from tests.servers.ports import free_port  # noqa: F401 - re-exported for the tests here
from tests.servers.s3 import fresh_bucket

DIM = 8
T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
BUCKET = "skillstream-test"


@pytest.fixture
def s3(s3_endpoint):
    """An empty moto with one bucket; returns (endpoint, storage options)."""
    return s3_endpoint, fresh_bucket(s3_endpoint, BUCKET)


@pytest.fixture
def settings(tmp_path):
    """Settings whose stores all live under tmp_path (no environment or config file read)."""
    return Settings.from_keys(home=str(tmp_path / "home"))


def vec(seed: int) -> list[float]:
    return np.random.default_rng(seed).random(DIM, dtype=np.float32).tolist()


def make_memory(
    i: int, owner: str = "u1", text: str | None = None, version: int = 1, **kw
) -> Memory:
    kw.setdefault("vector", vec(i))
    return Memory(
        id=f"mem_{owner}_{i}",
        owner_id=owner,
        text=text or f"memory number {i} of {owner}",
        kind="fact",
        version=version,
        tags=["t"],
        created_at=T0,
        updated_at=T0 + timedelta(minutes=i),
        **kw,
    )


def make_span(n: int, owner: str = "u1") -> Span:
    msgs = tuple(
        Message(
            message_id=f"{owner}-s{n}-m{j}",
            conversation_id=f"c-{owner}",
            owner_id=owner,
            session_id="s1",
            role="user",
            speaker="User",
            text=f"message {j}",
            ts=T0 + timedelta(minutes=10 * n + j),
        )
        for j in range(2)
    )
    return Span(f"spn_{owner}_{n}", owner, f"c-{owner}", "s1", n, msgs, 12, "en")


def make_result(
    n: int, owner: str = "u1", memories=None, status: str = "done", rows=None
) -> SpanResult:
    span = make_span(n, owner)
    mems = memories if memories is not None else [make_memory(10 * n + k, owner) for k in range(2)]
    events = [
        MemoryEvent(
            event_id=f"evt_{m.id}_{m.version}",
            memory_id=m.id,
            owner_id=owner,
            event="created",
            reason="test",
            old_value=None,
            new_value=m.text,
            old_status=None,
            new_status=m.status,
            span_id=span.span_id,
            actor="test",
            event_ts=T0,
            recorded_at=T0,
        )
        for m in mems
    ]
    call = LLMCall(
        call_id=f"call_{span.span_id}",
        request_hash=f"h_{span.span_id}",
        purpose="extract",
        backend="rules",
        model=None,
        span_id=span.span_id,
        prompt_tokens=10,
        completion_tokens=5,
        latency_ms=1.5,
        status="ok",
        cached=False,
        attempts=1,
        error=None,
        created_at=T0,
    )
    return SpanResult(
        span=span,
        status=status,
        extractor="rules",
        memories=mems,
        events=events,
        llm_calls=[call],
        memory_skills=["insert"],
        n_ops=len(mems),
        processed_at=T0,
        rows=rows or TableRows(),
    )


def make_dead_letter(i: int) -> DeadLetter:
    return DeadLetter(
        id=f"dl_{i}",
        source="chat.jsonl",
        position=str(i),
        stage="parse",
        reason="not JSON",
        payload="{oops",
        recorded_at=T0,
    )
