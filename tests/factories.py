"""Small factories for the tests: messages and spans, chat logs in each file format, conversation
rows for the flows, and LoCoMo-shaped samples. Every test folder builds its data from here."""

from __future__ import annotations

import csv
import gzip
import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from skillstream.model import DeadLetter, Message, Span
from skillstream.spans import SpanBuilder, SpanState

if TYPE_CHECKING:
    from skillstream.connectors.files import FileSource

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)

# ------------------------------------------------------------------------------ messages and spans


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


# ------------------------------------------------------------------------------- chat log files

T = "2024-05-08T13:56:{:02d}Z"


def chat_rows(n: int = 10) -> list[dict[str, Any]]:
    """``n`` valid canonical rows over two conversations, every value as text (CSV-friendly)."""
    rows = []
    for i in range(n):
        conv = "c1" if i % 2 == 0 else "c2"
        rows.append(
            {
                "conversation_id": conv,
                "role": "user" if i % 3 else "assistant",
                "content": f"message number {i} about hiking in the Alps",
                "timestamp": T.format(i),
                "user_id": f"owner-{conv}",
                "session_id": f"{conv}/s1",
                "metadata": json.dumps({"i": i}),
            }
        )
    return rows


def write_jsonl(
    path: Path, lines: Sequence[Any], extra_lines: Sequence[bytes] = (), *, gz: bool = False
) -> Path:
    """Write JSONL: dicts are encoded, ``bytes`` are written as they are (for broken lines);
    ``extra_lines`` come last."""
    data = b"".join(
        (line if isinstance(line, bytes) else json.dumps(line).encode("utf-8")) + b"\n"
        for line in [*lines, *extra_lines]
    )
    path.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    return path


def write_parquet(path: Path, rows: list[dict[str, Any]], row_group_size: int = 4) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=row_group_size)
    return path


def write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def drain(part: Any, limit: int | None = None) -> list[Message | DeadLetter]:
    """Call ``next_batch`` until the partition ends (or ``limit`` batches were read)."""
    out: list[Message | DeadLetter] = []
    batches = 0
    while limit is None or batches < limit:
        try:
            out.extend(part.next_batch())
        except StopIteration:
            break
        batches += 1
    return out


def read_source(source: FileSource) -> list[Message | DeadLetter]:
    """Read every partition of a source, in order, without a dataflow."""
    from skillstream.connectors.files import read_all

    return read_all(source)


def portable(m: Message) -> Message:
    """A message without where it was read from, to compare reads of different files."""
    return replace(m, source=None, position=None)


# ------------------------------------------------------------------- conversation rows (flows)

CONVERSATION_T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)

SENTENCES = [
    "I love hiking in the mountains.",
    "I am planning a trip to Kyoto next month.",
    "My sister Lena works as a nurse in Berlin.",
    "Yesterday I adopted a cat named Miso.",
    "I think remote work is better for focus.",
    "I prefer green tea over coffee.",
    "Last week I started learning the cello.",
    "I work as a product designer at Acme.",
    "Thanks, that's helpful!",
    "We visited the science museum with the kids on Sunday.",
]


def conversation_rows(
    cid: str, n: int, *, start: datetime = CONVERSATION_T0, owner: str | None = None
) -> list[dict]:
    rows = []
    for i in range(n):
        role = "user" if i % 3 != 2 else "assistant"
        text = (
            SENTENCES[(i * 7 + len(cid)) % len(SENTENCES)]
            if role == "user"
            else f"Noted, point {i}."
        )
        rows.append(
            {
                "conversation_id": cid,
                "user_id": owner or cid,
                "session_id": f"{cid}-s{i // 40}",
                "message_id": f"{cid}-{i}",
                "role": role,
                "name": "Sam" if role == "user" else "Assistant",
                "content": f"{text} (note {i})" if role == "user" and i % 5 == 0 else text,
                "timestamp": (start + timedelta(minutes=2 * i + 600 * (i // 40))).isoformat(),
            }
        )
    return rows


# ------------------------------------------------------------------------------ LoCoMo samples

NAMES = [("Ana", "Ben"), ("Caro", "Dev"), ("Eli", "Fay"), ("Gus", "Hana"), ("Ivo", "Jun")]
FACTS = [
    "I love hiking in the mountains.",
    "I am planning a trip to Kyoto next month.",
    "My sister Lena works as a nurse in Berlin.",
    "Yesterday I adopted a cat named Miso.",
    "I prefer green tea over coffee.",
    "Last week I started learning the cello.",
    "I work as a product designer at Acme.",
    "We visited the science museum with the kids on Sunday.",
    "My favourite book is The Left Hand of Darkness.",
    "I moved to Lisbon two years ago.",
    "I am training for a half marathon in October.",
    "My brother Tom is getting married in June.",
]
REPLIES = ["That sounds great!", "Oh nice, tell me more.", "Wow, good for you.", "Interesting!"]
MONTHS = ["January", "February", "March", "April", "May", "June"]


def locomo_sample(k: int, sessions: int = 3, turns: int = 8) -> dict:
    """One LoCoMo sample: two speakers, dated sessions, ``dia_id`` turn ids, an image turn."""
    a, b = NAMES[k % len(NAMES)]
    conv: dict = {"speaker_a": a, "speaker_b": b}
    for s in range(1, sessions + 1):
        conv[f"session_{s}_date_time"] = (
            f"{1 + (k + s) % 11}:{(7 * s) % 60:02d} pm on {1 + s * 3} {MONTHS[(k + s) % 6]}, 2023"
        )
        session = []
        for t in range(1, turns + 1):
            speaker = a if t % 2 else b
            if t % 2:
                text = FACTS[(k * 5 + s * 3 + t) % len(FACTS)]
            else:
                text = REPLIES[(k + s + t) % len(REPLIES)]
            turn: dict[str, Any] = {"speaker": speaker, "dia_id": f"D{s}:{t}", "text": text}
            if t == 4 and s == 1:
                turn.update(
                    img_url=["https://example.org/p.jpg"],
                    blip_caption="a photo of a dog on a beach",
                )
            session.append(turn)
        conv[f"session_{s}"] = session
    return {"sample_id": f"conv-{k}", "conversation": conv, "qa": []}


def write_locomo(path: Path, samples: int = 4, sessions: int = 3, turns: int = 8) -> Path:
    """A LoCoMo JSON file of ``samples`` conversations."""
    path.write_text(json.dumps([locomo_sample(k, sessions, turns) for k in range(samples)]))
    return path


# ------------------------------------------------------------- ChatGPT and Claude data exports


def chatgpt_export(conversations: int = 2, turns: int = 6) -> list[dict]:
    """A ChatGPT ``conversations.json``: a message tree per conversation, with a hidden system
    node, an edited first prompt (a branch the user left), an image part and ``current_node``."""
    out = []
    for c in range(conversations):
        base = 1715176560.0 + c * 86400  # 2024-05-08T13:56:00Z
        mapping: dict[str, dict] = {}

        def node(nid: str, parent: str | None, message: dict | None, mapping=mapping) -> None:
            mapping[nid] = {"id": nid, "message": message, "parent": parent, "children": []}
            if parent:
                mapping[parent]["children"].append(nid)

        def msg(mid: str, role: str, parts: list, t: float, ctype: str = "text") -> dict:
            return {
                "id": mid,
                "author": {"role": role, "name": None, "metadata": {}},
                "create_time": t,
                "update_time": None,
                "content": {"content_type": ctype, "parts": parts},
                "status": "finished_successfully",
                "end_turn": role == "assistant",
                "weight": 1.0,
                "metadata": {},
                "recipient": "all",
            }

        node(f"root-{c}", None, None)
        node(f"sys-{c}", f"root-{c}", msg(f"sys-{c}", "system", [""], base))
        # the first prompt, then edited: the old branch stays in the tree, off the active path
        node(f"old-{c}", f"sys-{c}", msg(f"old-{c}", "user", ["Draft I threw away."], base + 1))
        parent = f"sys-{c}"
        for t in range(turns):
            nid = f"gpt-{c}-{t}"
            if t % 2 == 0:
                text = FACTS[(c * 5 + t) % len(FACTS)]
                parts: list = [text]
                if t == 2:
                    parts = [{"content_type": "image_asset_pointer", "asset_pointer": "x"}, text]
                node(nid, parent, msg(nid, "user", parts, base + 60 * (t + 1)))
            else:
                reply = REPLIES[(c + t) % len(REPLIES)]
                node(nid, parent, msg(nid, "assistant", [reply], base + 60 * (t + 1)))
            parent = nid
        out.append(
            {
                "title": f"Chat {c}",
                "create_time": base,
                "update_time": base + 3600,
                "mapping": mapping,
                "current_node": parent,
                "conversation_id": f"gpt-conv-{c}",
                "id": f"gpt-conv-{c}",
                "moderation_results": [],
                "is_archived": False,
            }
        )
    return out


def claude_export(conversations: int = 2, turns: int = 6) -> list[dict]:
    """A Claude ``conversations.json``: ``chat_messages`` with ``sender``, ``text`` and
    ``content`` parts (one message carries its text only in ``content``)."""
    out = []
    for c in range(conversations):
        start = datetime(2024, 6, 1, 9, 0, tzinfo=UTC) + timedelta(days=c)
        messages = []
        for t in range(turns):
            when = (start + timedelta(minutes=t)).isoformat().replace("+00:00", "Z")
            if t % 2 == 0:
                sender, text = "human", FACTS[(c * 3 + t + 4) % len(FACTS)]
            else:
                sender, text = "assistant", REPLIES[(c + t) % len(REPLIES)]
            content = [{"type": "text", "text": text, "start_timestamp": when, "citations": []}]
            messages.append(
                {
                    "uuid": f"cl-{c}-{t}",
                    "text": "" if t == 2 else text,
                    "content": content,
                    "sender": sender,
                    "created_at": when,
                    "updated_at": when,
                    "attachments": [],
                    "files": [],
                }
            )
        out.append(
            {
                "uuid": f"claude-conv-{c}",
                "name": f"Conversation {c}",
                "created_at": start.isoformat(),
                "updated_at": start.isoformat(),
                "account": {"uuid": "acct-1"},
                "chat_messages": messages,
            }
        )
    return out


# ------------------------------------------------------------------------------ secret corpus


def _fake(alphabet: str, n: int, seed: int) -> str:
    """``n`` characters of ``alphabet``, spread deterministically (format-valid, not a real key)."""
    return "".join(alphabet[(seed * 7 + i * 13 + i * i) % len(alphabet)] for i in range(n))


_UP = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_HEX = "0123456789abcdef"
_B64 = _ALNUM + "/+"


def _luhn_complete(digits: str) -> str:
    """``digits`` plus the check digit that makes the whole number pass the Luhn test."""
    for d in "0123456789":
        total, alt = 0, True
        for ch in reversed(digits + d):
            alt = not alt
            v = int(ch) * (2 if alt else 1)
            total += v - 9 if v > 9 else v
        if total % 10 == 0:
            return digits + d
    raise AssertionError("unreachable")


def _card(prefix: str, n: int, sep: str, groups: Sequence[int], seed: int) -> str:
    digits = _luhn_complete(prefix + _fake("0123456789", n - len(prefix) - 1, seed))
    out, at = [], 0
    for g in groups:
        out.append(digits[at : at + g])
        at += g
    return sep.join(out)


def secret_corpus() -> list[tuple[str, str, str]]:
    """(format, secret, a chat line that pastes it) for every secret format the redactor must
    catch. Each secret is fake but has its format's shape (prefix, alphabet, length, checksum), so
    a detector has to recognise the format, not a value. ``secret`` is the part that must never be
    stored; it is long and odd enough to be found by a byte search of every stored file."""
    pem_body = _fake(_B64, 64, 31)
    ssh_body = _fake(_B64, 70, 32)
    rows = [
        ("aws access key id", "AKIA" + _fake(_UP, 16, 1), "my key id is {s}"),
        ("aws secret key", _fake(_B64, 40, 2), "aws_secret_access_key = {s}"),
        ("aws secret in env", _fake(_B64, 40, 3), "export AWS_SECRET_ACCESS_KEY={s}"),
        ("aws session key id", "ASIA" + _fake(_UP, 16, 4), "temporary creds {s} expire soon"),
        ("github classic token", "ghp_" + _fake(_ALNUM, 36, 5), "use {s} for the push"),
        (
            "github fine-grained token",
            "github_pat_" + _fake(_ALNUM, 22, 6) + "_" + _fake(_ALNUM, 59, 7),
            "new token: {s}",
        ),
        ("gitlab token", "glpat-" + _fake(_ALNUM, 20, 8), "the CI uses {s}"),
        (
            "slack bot token",
            "xoxb-" + _fake("0123456789", 12, 9) + "-" + _fake(_ALNUM, 24, 9),
            "bot token {s}",
        ),
        (
            "slack webhook",
            "https://hooks.slack.com/services/T"
            + _fake(_UP, 8, 10)
            + "/B"
            + _fake(_UP, 8, 11)
            + "/"
            + _fake(_ALNUM, 24, 12),
            "post alerts to {s} please",
        ),
        (
            "discord webhook",
            "https://discord.com/api/webhooks/"
            + _fake("0123456789", 18, 13)
            + "/"
            + _fake(_ALNUM + "-_", 68, 14),
            "the hook is {s}",
        ),
        (
            "teams webhook",
            "https://contoso.webhook.office.com/webhookb2/"
            + _fake(_HEX, 32, 15)
            + "@"
            + _fake(_HEX, 32, 16)
            + "/IncomingWebhook/"
            + _fake(_HEX, 32, 17),
            "Teams channel hook: {s}",
        ),
        ("payment live secret key", "sk_live_" + _fake(_ALNUM, 24, 18), "charge with {s}"),
        ("payment restricted key", "rk_live_" + _fake(_ALNUM, 24, 19), "reporting key {s}"),
        ("payment webhook secret", "whsec_" + _fake(_ALNUM, 32, 20), "verify with {s}"),
        ("openai project key", "sk-proj-" + _fake(_ALNUM + "-_", 48, 21), "OPENAI key {s}"),
        ("anthropic key", "sk-ant-api03-" + _fake(_ALNUM + "-_", 60, 22), "claude key {s}"),
        ("google api key", "AIza" + _fake(_ALNUM + "-_", 35, 23), "maps key {s}"),
        ("google oauth client secret", "GOCSPX-" + _fake(_ALNUM + "-_", 28, 24), "secret {s}"),
        (
            "jwt",
            "eyJhbGciOiJIUzI1NiJ9." + _fake(_ALNUM, 40, 25) + "." + _fake(_ALNUM + "-_", 43, 26),
            "session cookie {s}",
        ),
        ("bearer token", _fake(_ALNUM, 32, 27), "curl -H 'Authorization: Bearer {s}'"),
        ("basic auth header", _fake(_ALNUM, 28, 28) + "==", "Authorization: Basic {s}"),
        (
            "rsa private key",
            pem_body,
            "-----BEGIN RSA PRIVATE KEY-----\n" + pem_body + "\n-----END RSA PRIVATE KEY-----",
        ),
        (
            "openssh private key",
            ssh_body,
            "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\n{s}\n-----END OPENSSH PRIVATE KEY-----",
        ),
        (
            "postgres url password",
            "Pg" + _fake(_ALNUM, 14, 33),
            "postgres://app:{s}@db.internal:5432/prod",
        ),
        (
            "mongodb url password",
            "Mg" + _fake(_ALNUM, 14, 34),
            "mongodb+srv://admin:{s}@cluster0.example.net/?retryWrites=true",
        ),
        ("redis url password", "Rd" + _fake(_ALNUM, 14, 35), "REDIS_URL=redis://:{s}@cache:6379/0"),
        ("card with spaces", _card("4", 16, " ", (4, 4, 4, 4), 36), "card {s} exp 04/29"),
        ("card with dots", _card("5", 16, ".", (4, 4, 4, 4), 37), "my card is {s}"),
        ("card with dashes", _card("37", 15, "-", (4, 6, 5), 38), "amex {s}"),
        ("card plain", _card("6011", 16, "", (16,), 39), "pay with {s} now"),
        ("password is", "Hx" + _fake(_ALNUM, 10, 40), "my password is {s} don't share"),
        (
            "quoted multi-word password",
            "violet " + _fake("abcdefghij", 6, 41) + " tango staple",
            'password: "{s}"',
        ),
        ("pass colon", "Tr0" + _fake(_ALNUM, 9, 42), "wifi pass: {s}"),
        ("chinese password", "Cn" + _fake(_ALNUM, 10, 43), "我的密码是{s}"),
        ("api key assignment", _fake(_ALNUM, 32, 44), "api_key={s}"),
        ("huggingface token", "hf_" + _fake(_ALNUM, 34, 45), "HF token {s}"),
        ("npm token", "npm_" + _fake(_ALNUM, 36, 46), "//registry/:_authToken={s}"),
        ("pypi token", "pypi-AgEIcHlwaS5vcmc" + _fake(_ALNUM + "-_", 60, 47), "twine -p {s}"),
        (
            "sendgrid key",
            "SG." + _fake(_ALNUM + "-_", 22, 48) + "." + _fake(_ALNUM + "-_", 43, 49),
            "mail via {s}",
        ),
        ("twilio api key", "SK" + _fake(_HEX, 32, 50), "twilio {s}"),
        (
            "telegram bot token",
            "7" + _fake("0123456789", 8, 51) + ":AA" + _fake(_ALNUM + "-_", 33, 52),
            "bot {s}",
        ),
        (
            "azure storage key",
            _fake(_B64, 86, 53) + "==",
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={s};EndpointSuffix=x",
        ),
        (
            "presigned url signature",
            _fake(_HEX, 64, 54),
            "https://b.s3.amazonaws.com/f?X-Amz-Expires=60&X-Amz-Signature={s}",
        ),
        ("digitalocean token", "dop_v1_" + _fake(_HEX, 64, 55), "doctl auth {s}"),
        ("shopify token", "shpat_" + _fake(_HEX, 32, 56), "store token {s}"),
        ("client secret yaml", _fake(_ALNUM, 24, 57), "client_secret: {s}"),
        ("mailgun key", "key-" + _fake(_HEX, 32, 58), "mailgun {s}"),
        ("square token", "sq0atp-" + _fake(_ALNUM + "-_", 22, 59), "square {s}"),
    ]
    return [(fmt, secret, line.format(s=secret)) for fmt, secret, line in rows]


def flow_of(settings: Any, source: Any, *, workers: int = 1, **options: Any) -> Any:
    """The memory dataflow of a run of ``source`` on the home of ``settings``, as the runner
    defines it (the home read and reconciled now); run it with Bytewax's testing runners."""
    from skillstream.flows.runner import Cluster, Runner

    return Runner(settings, cluster=Cluster(workers_per_process=workers), **options).dataflow(
        source
    )


def run_flow(settings: Any, source: Any, **options: Any) -> dict[str, int]:
    """Run the memory flow over ``source`` in this thread (no lock, no finish); its counters."""
    from bytewax.testing import run_main

    from skillstream.flows.runner import Runner

    runner = Runner(settings, **options)
    run_main(runner.dataflow(source))
    return runner.counters.snapshot()
