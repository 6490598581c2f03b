"""A conversation holding one secret of each default kind: afterwards no file of the home holds any.

The real CLI runs in subprocesses on a tmp home (``run`` with a Bytewax recovery folder inside the
home, ``maintain``, ``search`` with a secret in the query). Then every file under the home (LanceDB
data and indices, the DuckDB catalog and its WAL, recovery snapshots, artifacts) and everything the
commands printed (the logs) is searched byte for byte. The secrets are fake but match the patterns.
A canary word stored the same way proves that the byte search can see stored text at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from skillstream.redact import DEFAULT_PATTERNS, Redactor
from skillstream.storage.catalog import Catalog

PEM_BODY = "MIIEpAIBAAKCAQEA7fakeFAKEkeyBODYonlyForTests0123456789abcdefXYZ"
SECRETS = {
    "private_key": f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----",
    "aws_access_key": "AKIAIOSFODNN7FAKE123",
    "openai_key": "sk-proj-Zx9fakeKEY0123456789abcdEFGH",
    "github_token": "ghp_FAKE0123456789abcdefghijklmnopqrstuv",
    "slack_token": "xoxb-1234567890-FAKEtokenValueXYZ",
    "google_api_key": "AIzaSyFAKE0123456789abcdefghijklmnopqrs",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJmYWtlLXVzZXIifQ.c2lnbmF0dXJlLWZha2UtMTIz",
    "bearer_token": "fAkEbEaReRtOkEn0123456789",
    "password": "Hunter2SecretPass",
    "api_key": "ZZtopSecretApiKey12345",
    "credit_card": "4111 1111 1111 1111",
}
NEEDLES = {
    "private_key": [PEM_BODY],
    "credit_card": ["4111 1111 1111 1111", "4111111111111111"],
    "custom": ["EMP-551234"],
}
CANARY = "Zebracanary"


def _needles() -> dict[str, list[str]]:
    out = {}
    for name, secret in SECRETS.items():
        base = NEEDLES.get(name, [secret])
        out[name] = sorted({v for s in base for v in (s, s.lower())})
    out["custom"] = NEEDLES["custom"] + [NEEDLES["custom"][0].lower()]
    return out


def _conversation(path: Path) -> Path:
    turns = [
        f"Here is the deploy key:\n{SECRETS['private_key']}",
        f"My AWS key is {SECRETS['aws_access_key']} for the staging account.",
        f"Use {SECRETS['openai_key']} for the assistant.",
        f"The GitHub token {SECRETS['github_token']} expires soon.",
        f"Slack bot token: {SECRETS['slack_token']}",
        f"The maps key is {SECRETS['google_api_key']} in the app config.",
        f"My session cookie is {SECRETS['jwt']} right now.",
        f"Call it with Authorization: Bearer {SECRETS['bearer_token']} please.",
        f"My password is {SECRETS['password']} so do not share it.",
        f"The api_key = {SECRETS['api_key']} goes in the header.",
        f"Charge my card {SECRETS['credit_card']} for the trip.",
        "My employee number is EMP-551234 at work.",
        f"I love hiking with my dog {CANARY} in the mountains.",
    ]
    rows = [
        {
            "conversation_id": "c1",
            "user_id": "u1",
            "session_id": "s1",
            "role": "user",
            "name": "Sam",
            "content": t,
            "timestamp": f"2024-05-01T10:{i:02d}:00Z",
            "metadata": {"note": SECRETS["jwt"]} if i == 0 else None,
        }
        for i, t in enumerate(turns)
    ]
    lines = [json.dumps(r) for r in rows]
    # dead letters: broken JSON, a message over the length limit, a bad timestamp quoting a secret
    lines.append(
        '{"conversation_id": "c1", "role": "user", "content": "key '
        + SECRETS["aws_access_key"]
        + '", '
    )
    lines.append(
        json.dumps(
            {
                "conversation_id": "c1",
                "role": "user",
                "timestamp": "2024-05-01T11:00:00Z",
                "content": ("x " * 600) + SECRETS["github_token"],
            }
        )
    )
    lines.append(
        json.dumps(
            {
                "conversation_id": "c1",
                "role": "user",
                "content": "hi",
                "timestamp": SECRETS["openai_key"],
            }
        )
    )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _cli(home: Path, *args: str) -> str:
    exe = Path(sys.executable).with_name("skillstream")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [str(exe), "--home", str(home), "-vv", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


@pytest.mark.slow
def test_no_secret_reaches_any_file_of_the_home_or_the_logs(tmp_path):
    # one secret of each of these default kinds (tests/flows/test_secret_corpus.py has them all)
    assert set(SECRETS) <= {p.name for p in DEFAULT_PATTERNS}
    for pattern in (p for p in DEFAULT_PATTERNS if p.name in SECRETS):  # each caught on its own
        text = {"password": "password: ", "api_key": "api_key = ", "bearer_token": "Bearer "}.get(
            pattern.name, ""
        )
        assert Redactor((pattern,)).apply(text + SECRETS[pattern.name])[1] == [pattern.name], (
            pattern.name
        )
    home = tmp_path / "home"
    home.mkdir()
    (home / "skillstream.toml").write_text(
        'max_message_chars = 1000\n\n[policies."*"]\n'
        'sensitive_patterns = [{ name = "employee_id", '
        'regex = "EMP-\\\\d{6}", action = "redact" }]\n',
        encoding="utf-8",
    )
    src = _conversation(tmp_path / "chat.jsonl")
    logs = _cli(home, "run", "--source", str(src), "--recovery-dir", str(home / "recovery"))
    logs += _cli(home, "maintain", "--close-sessions")
    logs += _cli(
        home,
        "search",
        f"hiking {SECRETS['openai_key']} password is {SECRETS['password']}",
        "--owner",
        "u1",
    )

    found: dict[str, list[str]] = {}
    canary_files = []
    files = [p for p in home.rglob("*") if p.is_file()]
    assert any(p.suffix == ".lance" for p in files) and any(
        p.name == "catalog.duckdb" for p in files
    )
    assert any("recovery" in p.parts for p in files)
    for path in files:
        data = path.read_bytes()
        if CANARY.encode() in data or CANARY.lower().encode() in data:
            canary_files.append(path.name)
        for name, needles in _needles().items():
            for n in needles:
                if n.encode() in data:
                    found.setdefault(name, []).append(str(path.relative_to(home)))
    for name, needles in _needles().items():
        for n in needles:
            if n in logs:
                found.setdefault(name, []).append("<command output>")
    assert found == {}
    assert canary_files, "the byte search must be able to see stored text"

    # the stores did get the conversation, redacted, and the dead letters
    cat = Catalog(str(home / "catalog.duckdb"), read_only=True)
    try:
        redacted = {
            r["text"]
            for r in cat.sql(
                "SELECT text FROM memory_meta WHERE text LIKE '%REDACTED%'"
            ).to_pylist()
        }
        dead = cat.sql("SELECT reason, payload FROM dead_letters ORDER BY position").to_pylist()
        (query,) = cat.sql("SELECT query FROM queries").to_pylist()
    finally:
        cat.close()
    assert any("[REDACTED:employee_id]" in t for t in redacted) and len(redacted) >= 8
    assert len(dead) == 3 and "[REDACTED:openai_key]" in dead[2]["reason"]
    assert query["query"] == "hiking [REDACTED:openai_key] password is [REDACTED:password]"
