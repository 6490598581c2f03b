"""The secret corpus (``tests.factories.secret_corpus``, one line per format people paste) through
the redactor, the whole flow and the LLM path: no secret reaches any stored byte or log line.

The flow tests run the real CLI in a subprocess on a tmp home: ``run`` (Bytewax, LanceDB, the
DuckDB catalog, task-skill distillation and publishing), ``maintain``, ``search``. Secrets sit in
the message texts, the metadata and every identifier field. Afterwards every file of the home is
searched byte for byte (zip members unpacked), every LanceDB and DuckDB table is read back row by
row (so compressed columns are searched too), and so is everything the commands printed with
``-vv``. A canary word stored the same way proves that each search sees stored text.

The LLM path runs ``run --llm openai`` against the scripted OpenAI-protocol server
(``tests.servers.openai_stub``), which puts the whole corpus into every answer it gives (memory
operations, task chunking, task-skill drafts): a model echoing secrets. The prompts never held them
(the messages were redacted at parse time), so only the redaction of answers keeps them out.
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from skillstream.connectors.records import parse_record
from skillstream.model import DeadLetter, Message
from skillstream.redact import DEFAULT_PATTERNS, DEFAULT_REDACTOR, LogRedactor, redact_id
from tests.factories import secret_corpus
from tests.servers.openai_stub import OpenAIStub

CANARY = "Zebracanary"
T0 = datetime(2025, 5, 6, 14, 0, tzinfo=UTC)
BENIGN = [
    "the answer hit max_tokens: finish_reason=length",
    "my boarding pass is valid until Friday",
    "call me at 555-123-4567 or 2023 05 08 12",
    "order 1234 5678 9012 3456 arrived",
    "see https://example.com/docs?page=2&sort=asc for details",
    "connect to postgres://localhost:5432/app as app",
    "the token count was 512 and the password field is required",
    "version 10.4.2.1 shipped; server 192.168.100.200 is up",
    "I love hiking in the mountains with my sister.",
    "我昨天去爬山了，天气很好。",
]


def _needles(secret: str) -> list[str]:
    """A secret as stored text might hold it: as written, lower-cased (keyword indexes), and a
    card number without its separators."""
    out = {secret, secret.lower()}
    digits = "".join(ch for ch in secret if ch.isdigit())
    if len(digits) >= 13 and not any(ch.isalpha() for ch in secret):
        out.add(digits)
    return sorted(out)


# ------------------------------------------------------------------------------ the redactor


def test_the_corpus_has_at_least_30_formats_and_uses_every_default_rule():
    corpus = secret_corpus()
    assert len({fmt for fmt, _, _ in corpus}) >= 30
    used = set()
    for _, _, line in corpus:
        used.update(DEFAULT_REDACTOR.apply(line)[1])
    # every built-in rule except the one-word password (a quoted one wins on the corpus line) and
    # the card rule variants are hit by some line
    unused = {p.name for p in DEFAULT_PATTERNS} - used
    assert unused <= {"password"} or unused == set(), unused


@pytest.mark.parametrize(("fmt", "secret", "line"), secret_corpus(), ids=lambda x: str(x)[:30])
def test_each_format_is_redacted(fmt, secret, line):
    out, hits = DEFAULT_REDACTOR.apply(f"note: {line} ok")
    assert hits, fmt
    for needle in _needles(secret):
        assert needle not in out, (fmt, out)
    assert out.startswith("note: ") and "[REDACTED:" in out


@pytest.mark.parametrize("text", BENIGN)
def test_ordinary_text_is_left_alone(text):
    assert DEFAULT_REDACTOR.apply(text) == (text, [])


def test_the_hints_that_skip_rules_are_in_every_match():
    import re

    from skillstream.redact import _CHECKS, _HINTS

    assert set(_HINTS) | {"credit_card"} == {p.name for p in DEFAULT_PATTERNS}
    checked = 0
    for pattern in DEFAULT_PATTERNS:
        check = _CHECKS.get(pattern.name, lambda m: True)
        for _, _, line in secret_corpus():
            for m in re.finditer(pattern.regex, line):
                if not check(m):  # a candidate the rule's check refuses is no match
                    continue
                checked += 1
                hints = _HINTS.get(pattern.name, ("",))
                assert any(h in m.group(0).lower() for h in hints), (pattern.name, m.group(0))
    assert checked >= 48


def test_redaction_is_idempotent():
    for _, _, line in secret_corpus():
        once = DEFAULT_REDACTOR.apply(line)[0]
        assert DEFAULT_REDACTOR.apply(once) == (once, [])


def test_identifiers_holding_a_secret_become_a_stable_hash():
    corpus = secret_corpus()
    key = corpus[0][1]
    row = {
        "conversation_id": f"conv-{key}",
        "user_id": f"user {corpus[11][1]}",
        "agent_id": corpus[14][1],
        "session_id": f"sess-{corpus[4][1]}",
        "message_id": f"m-{corpus[6][1]}",
        "name": corpus[30][2],
        "role": "user",
        "content": "hello",
        "timestamp": "2025-05-06T14:00:00Z",
    }
    m = parse_record(row, source="s", position=0)
    assert isinstance(m, Message)
    fields = [m.conversation_id, m.owner_id, m.agent_id, m.session_id, m.message_id, m.speaker]
    assert all(f and f.startswith("redacted-") for f in fields), fields
    assert len(set(fields)) == len(fields)  # different ids stay apart
    again = parse_record(row, source="s", position=0)
    assert again == m  # a replay gets the same ids
    assert redact_id("team-standup") == ("team-standup", [])
    assert parse_record(
        {**row, "conversation_id": "c1"}, source="s", position=0
    ).conversation_id == ("c1")


def test_an_identifier_matching_a_reject_rule_makes_a_dead_letter_without_payload():
    from skillstream.redact import Redactor, SensitivePattern

    (aws,) = [p for p in DEFAULT_PATTERNS if p.name == "aws_access_key"]
    reject = Redactor(DEFAULT_PATTERNS).with_patterns(
        [SensitivePattern(aws.name, aws.regex, "reject")]
    )
    key = secret_corpus()[0][1]
    row = {"conversation_id": f"c-{key}", "role": "user", "content": "hi", "timestamp": 0}
    d = parse_record(row, source="s", position=0, redactor=reject)
    assert isinstance(d, DeadLetter) and d.payload is None and key not in d.reason


def test_the_log_filter_redacts_messages_arguments_and_tracebacks(caplog):
    _, key, _ = secret_corpus()[0]
    _, token, _ = secret_corpus()[4]
    log = logging.getLogger("skillstream.test.secrets")
    handler = logging.StreamHandler(stream := io.StringIO())
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.addFilter(LogRedactor())
    log.addHandler(handler)
    try:
        log.warning("conversation %s skipped", f"conv-{key}")
        try:
            raise ValueError(f"bad token {token}")
        except ValueError:
            log.exception("failed")
    finally:
        log.removeHandler(handler)
    text = stream.getvalue()
    assert "conversation conv-[REDACTED:aws_access_key] skipped" in text
    assert "ValueError: bad token [REDACTED:github_token]" in text
    assert key not in text and token not in text


# ------------------------------------------------------------------------------ the whole flow


def _rows(canary: str) -> list[dict[str, Any]]:
    """One procedural conversation (so a task skill is distilled and published) whose steps paste
    the corpus, with secrets in the metadata and in every identifier field."""
    corpus = secret_corpus()
    ids = {
        "conversation_id": f"deploy-{corpus[0][1]}",
        "user_id": f"omar-{corpus[11][1]}",
        "agent_id": f"bot-{corpus[14][1]}",
        "session_id": f"s1-{corpus[4][1]}",
    }
    rows: list[dict[str, Any]] = [
        {
            **ids,
            "role": "user",
            "name": "Omar",
            "content": f"How do I deploy our app to staging? My dog {canary} says hi.",
        }
    ]
    for i, (_, _, line) in enumerate(corpus):
        word = (
            ("First", "Then", "Next", "After that")[min(i, 3)] if i < len(corpus) - 1 else "Finally"
        )
        rows.append(
            {
                **ids,
                "role": "assistant",
                "name": f"Assistant {corpus[30][2]}" if i == 3 else "Assistant",
                "message_id": f"m{i}-{corpus[6][1]}" if i % 5 == 0 else None,
                "content": f"{word}, configure the deploy step {i} with this value: {line}",
                "metadata": {"paste": line, corpus[44][1]: "key named by a secret"}
                if i % 7 == 0
                else None,
            }
        )
    rows.append({**ids, "role": "user", "name": "Omar", "content": "Thanks, that worked!"})
    for i, r in enumerate(rows):
        r["timestamp"] = (T0 + timedelta(minutes=i)).isoformat()
    return [{k: v for k, v in r.items() if v is not None} for r in rows]


def _cli(home: Path, *args: str, env: dict[str, str] | None = None) -> str:
    exe = Path(sys.executable).with_name("skillstream")
    proc = subprocess.run(
        [str(exe), "--home", str(home), "-vv", *args],
        capture_output=True,
        text=True,
        # the corpus holds one occurrence of its task: its skill is served (and its package
        # published, to be checked) at once rather than after a second occurrence
        env={
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "SKILLSTREAM_SKILL_MIN_SUPPORT": "1",
            **(env or {}),
        },
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def _stored(home: Path) -> dict[str, bytes]:
    """Everything the home holds, by where: each file's bytes, each zip member unpacked, and each
    LanceDB and DuckDB table read back row by row."""
    import duckdb
    import lancedb

    out: dict[str, bytes] = {}
    for path in sorted(p for p in home.rglob("*") if p.is_file()):
        data = path.read_bytes()
        out[str(path.relative_to(home))] = data
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                for name in z.namelist():
                    out[f"{path.relative_to(home)}!{name}"] = z.read(name)
    db = lancedb.connect(str(home / "lancedb"))
    for name in db.table_names():
        rows = db.open_table(name).to_arrow().to_pylist()
        out[f"lance:{name}"] = json.dumps(rows, default=str, ensure_ascii=False).encode()
    con = duckdb.connect(str(home / "catalog.duckdb"), read_only=True)
    try:
        for (name,) in con.sql("select table_name from duckdb_tables()").fetchall():
            rows = con.sql(f'select * from "{name}"').fetch_arrow_table().to_pylist()
            out[f"duckdb:{name}"] = json.dumps(rows, default=str, ensure_ascii=False).encode()
    finally:
        con.close()
    return out


def _leaks(stored: dict[str, bytes], logs: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for fmt, secret, _ in secret_corpus():
        for needle in _needles(secret):
            for where, data in stored.items():
                if needle.encode() in data:
                    found.setdefault(fmt, []).append(where)
            if needle in logs:
                found.setdefault(fmt, []).append("<command output>")
    return found


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def _check_home(home: Path, logs: str, canary: str) -> dict[str, bytes]:
    stored = _stored(home)
    assert any(k.startswith("lance:") for k in stored) and any(
        k.startswith("duckdb:") for k in stored
    )
    assert _leaks(stored, logs) == {}
    seen = [k for k, v in stored.items() if canary.encode() in v or canary.lower().encode() in v]
    assert any(k.startswith("lance:") for k in seen) and any(k.startswith("duckdb:") for k in seen)
    return stored


@pytest.mark.slow
def test_no_secret_of_the_corpus_reaches_the_home_or_the_logs(tmp_path):
    home = tmp_path / "home"
    src = _write(tmp_path / "chat.jsonl", _rows(CANARY))
    key = secret_corpus()[0][1]
    logs = _cli(home, "run", "--source", str(src), "--recovery-dir", str(home / "recovery"))
    logs += _cli(home, "maintain", "--close-sessions")
    logs += _cli(home, "search", f"deploy {key} {secret_corpus()[30][2]}")
    stored = _check_home(home, logs, CANARY)
    skill_md = [v for k, v in stored.items() if "task-skills" in k and k.endswith("SKILL.md")]
    assert skill_md, "a task-skill package must have been published"
    # the package was built from the (redacted) steps
    assert all(b"[REDACTED:webhook_url]" in v and b"[REDACTED:password" in v for v in skill_md)


def _echo_secrets(body: dict[str, Any]) -> str:
    """A model that repeats every secret of the corpus in whatever it answers."""
    lines = [line for _, _, line in secret_corpus()]
    echo = " | ".join(lines)
    schema = (body.get("response_format") or {}).get("json_schema", {})
    name, props = schema.get("name", ""), schema.get("schema", {}).get("properties", {})
    if name == "extract":
        ops = [
            {"action": "INSERT", "text": f"Omar noted: {line}", "kind": "fact"} for line in lines
        ]
        ops.append({"action": "INSERT", "text": f"Omar has a dog called {CANARY}.", "kind": "fact"})
        return json.dumps({"operations": ops})
    if name == "distill_chunk":
        return json.dumps({"tasks": [{"name": f"deploy {lines[0]}", "ranges": [[0, 0]]}]})
    answer: dict[str, Any] = {}
    for key, spec in props.items():
        kind = spec.get("type")
        if kind == "boolean":
            answer[key] = False
        elif kind == "array":
            answer[key] = [f"configure {line}" for line in lines]
        elif kind == "object":
            answer[key] = {f"step_{i}.sh": f"echo '{line}'" for i, line in enumerate(lines[:5])}
        else:
            answer[key] = f"deploy with {echo}"
    answer["name"] = f"deploy {lines[4]}"
    answer["update_of"] = ""
    return json.dumps(answer)


@pytest.mark.slow
def test_an_llm_echoing_the_corpus_stores_no_secret(tmp_path):
    home = tmp_path / "home"
    rows = [
        {k: v for k, v in r.items() if k != "metadata"}
        for r in _rows("Zebrabenign")
        if r["role"] == "user" or "step 1 " in r["content"] or "step 2 " in r["content"]
    ]
    src = _write(tmp_path / "chat.jsonl", rows)
    with OpenAIStub(_echo_secrets) as stub:
        logs = _cli(
            home,
            "run",
            "--source",
            str(src),
            "--llm",
            "openai",
            "--llm-base-url",
            stub.url,
            env={
                "SKILLSTREAM_LLM_API_KEY": "sk-test-" + "k" * 20,
                "SKILLSTREAM_DISTILL_FULL": "1",
                "SKILLSTREAM_DISTILL_MIN_STEPS": "0",
            },
        )
        asked = {
            (r.get("response_format") or {}).get("json_schema", {}).get("name")
            for r in stub.requests
        }
        prompts = json.dumps(stub.requests)
    assert {"extract", "distill_chunk", "distill_extract"} <= asked, asked
    for _, secret, _ in secret_corpus():  # the prompts never held them: the answers did
        assert secret not in prompts
    stored = _check_home(home, logs, CANARY)
    assert (home / "llm-cache.sqlite").exists()
    # a task skill was distilled from the echoed answers and stored (what the model invented
    # names tokens no source holds, so the grounding check keeps it unpublished), and no secret
    # is in it or anywhere else (_check_home)
    versions = json.loads(stored["duckdb:task_skill_versions"])
    assert versions, "a task skill must have been distilled and stored"
