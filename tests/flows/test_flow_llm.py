"""The memory flow with the MemSkill executor against a real OpenAI-protocol HTTP server (the stub).

Real Bytewax runs, real LanceDB and DuckDB files, the real ``openai`` client; the server is the
scripted ``OpenAIStub`` that counts requests.
"""

from __future__ import annotations

import json
import shutil
from collections import deque
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from bytewax.testing import run_main
from click.testing import CliRunner

from skillstream.cli import cli
from skillstream.cli.llm import retry_failed_spans
from skillstream.connectors.files import FileSource
from skillstream.errors import InputError
from skillstream.llm import OpenAIBackend, open_cache
from skillstream.memskill.executor import MemSkillExecutor
from skillstream.settings import Settings
from skillstream.storage.catalog import Catalog
from tests.factories import flow_of, run_flow
from tests.memskill.conftest import (  # noqa: F401 - _no_llm_env and stub_settings: fixtures
    _no_llm_env,
    insert_each_turn,
    span_turns,
    stub_settings,
)
from tests.servers.openai_stub import OpenAIStub, delay, garbage_body, rate_limited, server_error

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)

pytestmark = pytest.mark.slow


def rows_of(owner: str, sessions: list[list[str]], name: str = "Sam") -> list[dict]:
    rows, i = [], 0
    for s, turns in enumerate(sessions):
        for j, text in enumerate(turns):
            user = j % 2 == 0
            rows.append(
                {
                    "conversation_id": f"{owner}-conv",
                    "user_id": owner,
                    "session_id": f"{owner}-s{s}",
                    "message_id": f"{owner}-{i}",
                    "role": "user" if user else "assistant",
                    "name": name if user else "Assistant",
                    "content": text,
                    "timestamp": (T0 + timedelta(days=s, minutes=j)).isoformat(),
                }
            )
            i += 1
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def sql(settings, query):
    cat = Catalog(settings.storage.catalog, read_only=True)
    try:
        cat.attach_lance(settings.storage.lancedb, settings.storage.storage_options)
        return cat.sql(query).to_pylist()
    finally:
        cat.close()


EXTRACTED = "select {cols} from memories where kind <> 'summary' order by id"
"""Memories written by the executor (the lifecycle's session summaries are left out)."""


def fast_executor(settings) -> MemSkillExecutor:
    backend = OpenAIBackend(
        settings.llm,
        cache=open_cache(settings.llm, settings.storage.home),
        backoff_base_s=0.01,
        backoff_max_s=0.05,
    )
    return MemSkillExecutor(backend, structured=True, max_tokens=settings.llm.extract_max_tokens)


SESSIONS = [
    [
        "I just moved to Lisbon for a nursing job.",
        "That's exciting! How is it going?",
        "Great so far, my sister Ana lives nearby.",
    ],
    [
        "I adopted a grey cat called Miso last weekend.",
        "Lovely! Cats are great company.",
        "I also started learning the cello.",
    ],
]


def test_faults_fail_the_span_then_retry_failed_completes_it_exactly_once(
    tmp_path,
    stub_settings,  # noqa: F811
    monkeypatch,
):
    faults = deque(
        [delay(3.0), rate_limited(), server_error(500), garbage_body(), "this is not JSON"]
    )

    def script(body):
        return faults.popleft() if faults else insert_each_turn(body)

    src = write_jsonl(tmp_path / "c.jsonl", rows_of("u1", SESSIONS))
    with OpenAIStub(script) as stub:
        settings = stub_settings(stub.url, llm_timeout_s=1.0, llm_max_retries=4)
        counts = run_flow(settings, FileSource(src), executor=fast_executor(settings))
        assert stub.count == 6  # 5 failed attempts for the first span, 1 for the second
        spans = sql(
            settings,
            "select span_id, status, attempts, memory_skills, error from spans order by seq",
        )
        assert [(s["status"], s["attempts"]) for s in spans] == [("failed", 5), ("done", 1)]
        failed_id = spans[0]["span_id"]
        assert "failed after 5 attempt(s)" in spans[0]["error"]
        calls = sql(
            settings,
            f"select status, error from llm_calls where span_id = '{failed_id}' order by attempts",
        )
        assert [c["status"] for c in calls] == ["error"] * 5
        errors = " | ".join(c["error"] for c in calls)
        for expected in ("timed out", "HTTP 429", "HTTP 500", "not JSON", "no JSON"):
            assert expected in errors
        (pending,) = sql(settings, "select span_id, status, retries, messages from failed_spans")
        assert (pending["span_id"], pending["status"], pending["retries"]) == (
            failed_id,
            "pending",
            0,
        )
        assert [m["text"] for m in json.loads(pending["messages"])] == SESSIONS[0]
        before = sql(settings, EXTRACTED.format(cols="id, text"))
        assert before and all("Lisbon" not in m["text"] for m in before)

        # The server answers properly now: retry through the CLI.
        for k, v in {
            "SKILLSTREAM_LLM": "openai",
            "SKILLSTREAM_LLM_BASE_URL": stub.url,
            "SKILLSTREAM_LLM_MODEL": "stub-model",
            "SKILLSTREAM_LLM_RESPONSE_FORMAT": "json_schema",
        }.items():
            monkeypatch.setenv(k, v)
        out = CliRunner().invoke(cli, ["--home", settings.storage.home, "retry-failed", "--json"])
        assert out.exit_code == 0, out.output
        summary = json.loads(out.output)
        assert (summary["pending"], summary["done"], summary["failed"], summary["llm_calls"]) == (
            1,
            1,
            0,
            1,
        )
        assert stub.count == 7

        spans = sql(settings, "select status, attempts from spans order by seq")
        assert [s["status"] for s in spans] == ["done", "done"]
        (row,) = sql(settings, "select status, retries, resolved_at from failed_spans")
        assert (row["status"], row["retries"]) == ("resolved", 1) and row["resolved_at"] is not None
        after = sql(settings, EXTRACTED.format(cols="id, text, span_id"))
        assert {m["id"] for m in before} < {m["id"] for m in after}
        lisbon = [m for m in after if "Lisbon" in m["text"]]
        assert [m["span_id"] for m in lisbon] == [failed_id]
        created = sql(
            settings,
            "select count(*) as n from memory_events where event = 'created' and "
            "actor = 'extractor'",
        )[0]["n"]
        assert created == len(after) == len({m["text"] for m in after})

        # Nothing left to retry, and a re-run of the flow asks nothing.
        assert retry_failed_spans(settings).pending == 0
        counts = run_flow(settings, FileSource(src))
        assert stub.count == 7 and counts["spans_skipped"] == 2
        assert sql(settings, EXTRACTED.format(cols="id, text, span_id")) == after


def test_retry_failed_keeps_a_span_pending_while_the_server_still_fails(tmp_path, stub_settings):  # noqa: F811
    src = write_jsonl(tmp_path / "c.jsonl", rows_of("u1", SESSIONS[:1]))
    with OpenAIStub(default=server_error(503)) as stub:
        settings = stub_settings(stub.url, llm_max_retries=1)
        run_main(flow_of(settings, FileSource(src), executor=fast_executor(settings)))
        assert stub.count == 2
        with pytest.raises(
            InputError,
            match=r"extracted with \['memskill'\], but the configured executor is 'rules'",
        ):
            retry_failed_spans(
                Settings.load(home=settings.storage.home)
            )  # SKILLSTREAM_LLM forgotten
        summary = retry_failed_spans(settings, executor=fast_executor(settings))
        assert (summary.pending, summary.done, summary.failed, summary.llm_calls) == (1, 0, 1, 2)
        (row,) = sql(settings, "select status, retries from failed_spans")
        assert (row["status"], row["retries"]) == ("pending", 1)
        assert sql(settings, "select status from spans") == [{"status": "failed"}]


def test_rerun_and_replay_with_the_same_llm_configuration_make_zero_requests(
    tmp_path,
    stub_settings,  # noqa: F811
):
    rows = (
        rows_of("u1", SESSIONS)
        + rows_of("u2", SESSIONS[::-1], "Kim")
        + rows_of("u3", SESSIONS, "Lea")
    )
    src = write_jsonl(tmp_path / "c.jsonl", rows)
    with OpenAIStub(insert_each_turn, latency_s=0.3) as stub:
        settings = stub_settings(stub.url)
        counts = run_flow(settings, FileSource(src))  # executor from the settings
        spans = sql(
            settings,
            "select owner_id, seq, status, extractor, "
            "memory_skills from spans order by owner_id, seq",
        )
        assert len(spans) == 6 and {s["status"] for s in spans} == {"done"}
        assert {s["extractor"] for s in spans} == {"memskill"}
        assert stub.count == 6  # one call per span
        # Owners overlap; each owner's spans reach the server in order.
        assert stub.max_in_flight >= 2
        for name, sessions in (("Sam", SESSIONS), ("Kim", SESSIONS[::-1]), ("Lea", SESSIONS)):
            firsts = [t for body in stub.requests for n, t in span_turns(body)[:1] if n == name]
            assert firsts == [sessions[0][0], sessions[1][0]]
        # No controller is trained: every span gets every primitive (none is withheld).
        every = ["insert", "update", "delete", "skip"]
        assert [s["memory_skills"] for s in spans if s["seq"] == 0] == [every] * 3
        ok = sql(
            settings, "select count(*) as n from llm_calls where status = 'ok' and not cached"
        )[0]["n"]
        assert ok == 6
        memories = sql(settings, EXTRACTED.format(cols="id, text, owner_id"))
        assert len(memories) == 3 * 4  # two user turns per span, two spans per owner

        counts = run_flow(settings, FileSource(src))
        assert stub.count == 6 and counts["spans_skipped"] == 6

        # Replay from scratch with the same configuration: every answer comes from the cache.
        shutil.rmtree(settings.storage.lancedb)
        Path(settings.storage.catalog).unlink()
        counts = run_flow(settings, FileSource(src))
        assert stub.count == 6 and counts["spans_done"] == 6
        assert sql(settings, EXTRACTED.format(cols="id, text, owner_id")) == memories
        cached = sql(settings, "select count(*) as n from llm_calls where cached")[0]["n"]
        assert cached == 6


def test_run_command_with_llm_options_uses_the_memskill_executor(tmp_path, monkeypatch):
    monkeypatch.setenv("SKILLSTREAM_DISTILL", "false")  # only extraction calls reach the stub
    src = write_jsonl(tmp_path / "c.jsonl", rows_of("u1", SESSIONS))
    home = tmp_path / "home"
    with OpenAIStub(insert_each_turn) as stub:
        out = CliRunner().invoke(
            cli,
            [
                "--home",
                str(home),
                "run",
                "--source",
                str(src),
                "--llm",
                "openai",
                "--llm-base-url",
                stub.url,
                "--llm-model",
                "stub-model",
                "--json",
            ],
        )
        assert out.exit_code == 0, out.output
        summary = json.loads(out.output[out.output.index("{") :])
        assert (summary["spans_processed"], summary["spans_failed"]) == (2, 0)
        assert stub.count == 2 and {b["model"] for b in stub.requests} == {"stub-model"}
        assert stub.requests[0]["response_format"]["type"] == "json_schema"
