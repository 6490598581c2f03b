"""The run's metrics and traces, on real runs: an LLM run against the OpenAI-protocol stub scraped
over HTTP while it runs and traced into the OpenTelemetry SDK's in-memory exporter, a Kafka tail
run scraped while messages are produced, and the endpoint's refusal of a non-loopback host.

Series are process-wide (tests share this process), so each test compares values before and
after its own run."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from skillstream import metrics, telemetry
from skillstream.errors import ConfigError
from skillstream.flows.exposition import is_loopback, serving
from skillstream.flows.runner import Runner
from skillstream.settings import Settings, TelemetrySettings
from skillstream.storage.catalog import Catalog
from tests.flows.test_flow_llm import SESSIONS, rows_of, write_jsonl
from tests.flows.test_live_kafka import GAP, make_topic, send, start, stop, wave
from tests.memskill.conftest import (  # noqa: F401 - _no_llm_env and stub_settings: fixtures
    _no_llm_env,
    insert_each_turn,
    stub_settings,
)
from tests.servers.openai_stub import OpenAIStub
from tests.servers.ports import free_port
from tests.servers.processes import cli_env

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("clean_env")]

PRICES = {"stub-model": {"input": 2.5, "output": 10.0}}
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    """Every sample of a Prometheus text: (name, sorted labels) -> value."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def scrape(url: str) -> tuple[Samples, str]:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return parse(answer.read().decode()), answer.headers["Content-Type"]


def now() -> Samples:
    return parse(metrics.render()[0].decode())


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def moved(after: Samples, before: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def catalog_rows(settings: Settings, query: str) -> list[dict[str, Any]]:
    with Catalog(settings.storage.catalog, read_only=True) as cat:
        return cat.sql(query).to_pylist()


@pytest.fixture(scope="module")
def exported() -> Iterator[Any]:
    """The SDK's in-memory exporter behind the process's tracer provider."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # the first SDK setup of the process
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    telemetry.set_tracing(False)


def test_llm_run_serves_its_metrics_while_it_runs_and_traces_its_work(
    tmp_path,
    stub_settings,  # noqa: F811
    embedder,
    exported,
):
    src = write_jsonl(tmp_path / "c.jsonl", rows_of("u1", SESSIONS) + rows_of("u2", SESSIONS))
    exported.clear()
    during: list[tuple[Samples, str]] = []
    with OpenAIStub(insert_each_turn) as stub:
        # the two owners say the same things: without the response cache each span is one
        # billed request, whichever owner's span reaches the model first
        settings = stub_settings(
            stub.url,
            metrics_addr=str(free_port()),
            tracing=True,
            llm_prices=PRICES,
            llm_cache=False,
        )
        runner = Runner(settings, embedder=embedder)

        def scrape_once(result: Any) -> None:  # called from the flow, while the run goes on
            if not during:
                assert runner.metrics_url is not None
                during.append(scrape(runner.metrics_url))

        runner.collect = scrape_once
        before = now()
        summary = runner.run(runner.source(str(src)))
    after = now()
    counts = summary.counts
    assert counts["messages"] == 12 and counts["spans_done"] == 4

    # served over HTTP during the run, in the Prometheus text format, with the contract names
    (scraped, content_type) = during[0]
    assert content_type.startswith("text/plain")
    assert value(scraped, "skillstream_messages_total", stage="read") > value(
        before, "skillstream_messages_total", stage="read"
    )
    assert ("skillstream_spans_total", (("status", "done"),)) in scraped
    assert runner.metrics_url is not None
    with pytest.raises(OSError):  # the endpoint ends with the run
        scrape(runner.metrics_url)

    # the run's counts, by stage and status
    assert moved(after, before, "skillstream_messages_total", stage="read") == 12
    assert moved(after, before, "skillstream_messages_total", stage="admitted") == 12
    assert moved(after, before, "skillstream_spans_total", status="done") == 4
    assert moved(after, before, "skillstream_span_extraction_seconds_count", status="done") == 4
    assert moved(after, before, "skillstream_memory_changes_total") == counts["memory_changes"]
    assert value(after, "skillstream_open_spans") == value(before, "skillstream_open_spans")
    assert moved(after, before, "skillstream_store_commit_seconds_count") >= 1

    # LLM requests, tokens and cost from the rows the run stored
    calls = catalog_rows(
        settings,
        "SELECT purpose, count(*) AS n, sum(prompt_tokens)::BIGINT AS p, "
        "sum(completion_tokens)::BIGINT AS c "
        "FROM llm_calls WHERE status = 'ok' AND NOT cached GROUP BY purpose",
    )
    assert [c["purpose"] for c in calls] == ["extract"] and calls[0]["n"] == 4
    p, c = calls[0]["p"], calls[0]["c"]
    labels = {"purpose": "extract", "model": "stub-model"}
    assert moved(after, before, "skillstream_llm_requests_total", status="ok", **labels) == 4
    assert moved(after, before, "skillstream_llm_prompt_tokens_total", **labels) == p
    assert moved(after, before, "skillstream_llm_completion_tokens_total", **labels) == c
    assert moved(after, before, "skillstream_llm_cost_total", **labels) == pytest.approx(
        (p * 2.5 + c * 10.0) / 1e6
    )
    stored = catalog_rows(settings, "SELECT status, count(*) AS n FROM memory_meta GROUP BY 1")
    assert stored and all(
        value(after, "skillstream_stored_memories", status=r["status"]) == r["n"] for r in stored
    )
    texts = moved(after, before, "skillstream_embedding_texts_total", backend="local")
    assert texts > 0

    # traces: one span per extracted span, its LLM call inside it, embeddings and commits
    spans = exported.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}
    extract = [s for s in spans if s.name == "extract span"]
    chats = [s for s in spans if s.name == "chat stub-model"]
    assert len(extract) == 4 and len(chats) == 4
    for chat in chats:
        a = chat.attributes
        assert chat.parent is not None and by_id[chat.parent.span_id].name == "extract span"
        assert (a["gen_ai.operation.name"], a["gen_ai.request.model"]) == ("chat", "stub-model")
        assert a["gen_ai.provider.name"] == "openai"
    tokens = sorted(
        (s.attributes["gen_ai.usage.input_tokens"], s.attributes["gen_ai.usage.output_tokens"])
        for s in chats
    )
    rows = catalog_rows(settings, "SELECT prompt_tokens, completion_tokens FROM llm_calls")
    assert tokens == sorted((r["prompt_tokens"], r["completion_tokens"]) for r in rows)
    embeddings = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "embeddings"]
    assert sum(s.attributes["skillstream.embedding.texts"] for s in embeddings) == texts
    commits = [s for s in spans if s.name == "update_memory memories"]
    assert commits and all(s.attributes["gen_ai.memory.store.id"] == "memories" for s in commits)
    # no message text reaches a span
    said = [t for session in SESSIONS for t in session]
    for s in spans:
        assert not any(str(v) in said or "Lisbon" in str(v) for v in s.attributes.values())


def test_a_run_without_tracing_emits_no_span(tmp_path, embedder, exported):
    src = write_jsonl(tmp_path / "c.jsonl", rows_of("u1", SESSIONS[:1]))
    exported.clear()
    settings = Settings.from_keys(home=str(tmp_path / "home"), distill=False, tracing=False)
    runner = Runner(settings, embedder=embedder)
    assert runner.run(runner.source(str(src))).counts["spans_done"] == 1
    assert exported.get_finished_spans() == ()


def test_kafka_tail_run_is_scraped_while_messages_arrive_and_its_lag_returns_to_zero(
    tmp_path: Path, kafka_broker, topic_name
):
    make_topic(kafka_broker, topic_name)
    home, log, port = tmp_path / "home", tmp_path / "run.log", free_port()
    uri = f"kafka://{kafka_broker}/{topic_name}"
    args = ["--home", str(home), "run", "--source", uri, "--metrics-addr", str(port)]
    proc = start(args, cli_env(home, **GAP, SKILLSTREAM_DISTILL="false"), log)
    url = f"http://127.0.0.1:{port}/metrics"

    def until(check: Any, what: str) -> Samples:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"the run exited ({proc.returncode}) waiting for {what}\n"
                    f"{log.read_text()[-3000:]}"
                )
            try:
                samples, _ = scrape(url)
            except OSError:
                samples = {}
            if samples and check(samples):
                return samples
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}: {samples}\n{log.read_text()[-3000:]}")
            time.sleep(0.2)

    def read(s: Samples) -> float:
        return value(s, "skillstream_messages_total", stage="read")

    def lags(s: Samples) -> list[float]:
        return [v for (name, _), v in s.items() if name == "skillstream_kafka_consumer_lag"]

    try:
        first = until(lambda s: True, "the metrics endpoint")
        assert read(first) == 0 and lags(first) == []
        send(kafka_broker, topic_name, wave(0))
        one = until(lambda s: read(s) == 12 and lags(s) and set(lags(s)) == {0.0}, "wave 0")
        until(lambda s: value(s, "skillstream_spans_total", status="done") == 4, "its spans")
        send(kafka_broker, topic_name, wave(1))
        two = until(lambda s: read(s) == 24 and set(lags(s)) == {0.0}, "wave 1")
        assert value(two, "skillstream_messages_total", stage="admitted") == 24
        assert len(lags(two)) >= len(lags(one)) >= 1
    finally:
        stop(proc, log)


def test_the_endpoint_is_loopback_unless_said_otherwise():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.0.2.7")
    assert TelemetrySettings(metrics_addr="9464").metrics_addr == "127.0.0.1:9464"
    with pytest.raises(ConfigError, match="metrics_public"):
        with serving(TelemetrySettings(metrics_addr="0.0.0.0:9464")):
            pass
    with serving(TelemetrySettings(metrics_addr="")) as url:
        assert url is None
