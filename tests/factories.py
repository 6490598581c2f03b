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
            turn = {"speaker": speaker, "dia_id": f"D{s}:{t}", "text": text}
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
