"""Shared fixtures: the message and span factories of ``tests.factories``, the session's embedder,
and the session's real servers (llama.cpp, moto S3, the tansu Kafka broker, PostgreSQL), each
started once however many test folders use it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tests.factories import make_message, make_span  # noqa: E402


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


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL server for the session (initdb into a temporary folder, loopback only).

    Missing binaries are an error, not a skip: ``scripts/setup.sh test`` installs them.
    """
    from tests.servers.postgres import PostgresUnavailable, postgres_server

    try:
        with postgres_server() as server:
            yield server
    except PostgresUnavailable as e:
        pytest.fail(str(e))


@pytest.fixture
def lake_catalog(postgres) -> str:
    """A fresh database on the session's PostgreSQL, as a ``SKILLSTREAM_CATALOG`` DuckLake value."""
    import uuid

    return postgres.create_database(f"lake_{uuid.uuid4().hex[:12]}")


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory) -> Iterator[str]:
    """``HOST:PORT`` of a tansu broker (in-memory storage) running for the whole session."""
    from tests.servers.kafka import tansu_broker

    try:
        with tansu_broker(tmp_path_factory.mktemp("tansu")) as bootstrap:
            yield bootstrap
    except RuntimeError as e:
        pytest.fail(str(e))


@pytest.fixture
def topic_name() -> str:
    """A fresh topic name per test (the broker lives for the whole session)."""
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings of the developer's shell must not leak into the tests (the tests that run
    ``skillstream`` through its environment use it)."""
    for name in list(os.environ):
        if name.startswith("SKILLSTREAM_") or name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
            monkeypatch.delenv(name)
