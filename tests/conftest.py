"""Shared fixtures: small factories for messages and spans, the session's embedder, and the
session's real servers (llama.cpp, moto S3), each started once however many test folders use it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from skillstream.model import Message, Span  # noqa: E402
from skillstream.spans import SpanBuilder, SpanState  # noqa: E402

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)


def make_message(
    text: str,
    *,
    i: int = 0,
    role: str = "user",
    speaker: str | None = None,
    conversation_id: str = "c1",
    owner_id: str | None = None,
    session_id: str = "s1",
    ts: datetime | None = None,
    metadata: str | None = None,
) -> Message:
    return Message(
        message_id=f"{conversation_id}-m{i}",
        conversation_id=conversation_id,
        owner_id=owner_id or conversation_id,
        session_id=session_id,
        role=role,
        speaker=speaker or ("User" if role == "user" else "Assistant"),
        text=text,
        ts=ts or (T0 + timedelta(minutes=i)),
        metadata=metadata,
    )


def make_span(
    turns: list[tuple[str, str]], *, conversation_id: str = "c1", ts: datetime | None = None
) -> Span:
    """A span from (role, text) pairs, one minute apart."""
    base = ts or T0
    msgs = [
        make_message(
            text, i=i, role=role, conversation_id=conversation_id, ts=base + timedelta(minutes=i)
        )
        for i, (role, text) in enumerate(turns)
    ]
    builder = SpanBuilder(lambda s: len(s.split()), budget=10**9)
    state = SpanState()
    for m in msgs:
        builder.add(state, m)
    return builder.flush(state)[0]


@pytest.fixture
def message_factory():
    return make_message


@pytest.fixture
def span_factory():
    return make_span


@pytest.fixture(scope="session")
def embedder():
    from skillstream.embed import get_embedder

    return get_embedder("minilm")


@pytest.fixture(scope="session")
def llama_base_url() -> Iterator[str]:
    """Base URL of a real llama.cpp server with SmolLM2-135M (model alias ``smollm2``).

    Skipped only when llama-cpp-python is not installed (scripts/install_llama.sh installs it);
    a missing model or a server that does not start is an error.
    """
    from tests.servers.llama import LlamaUnavailable, llama_cpp_installed, llama_server

    if not llama_cpp_installed():
        pytest.skip("llama-cpp-python is not installed; run scripts/install_llama.sh")
    try:
        with llama_server() as url:
            yield url
    except LlamaUnavailable as e:
        pytest.fail(str(e))


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server on a free loopback port for the session."""
    from tests.servers.s3 import moto_server

    with moto_server() as endpoint:
        yield endpoint
