"""Hostile input files for every reader, generated from valid ones with a seed.

``valid_files(folder)`` writes one valid file per format; ``hostile_files(folder, fmt, n)``
writes ``n`` files of that format made to break a reader: values of the wrong type in every
place (lists as ids, objects as text, numbers past any range, deep nesting, 30,000-character
strings built to make patterns backtrack), broken bytes (cut short, flipped, not UTF-8, not gzip),
and for Parquet, columns whose values Python cannot hold. Each is deterministic in its seed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tests.factories import (
    chat_rows,
    chatgpt_export,
    claude_export,
    conversation_rows,
    locomo_sample,
    write_csv,
    write_jsonl,
    write_parquet,
)

STAR_DIALOGUES = [
    {
        "DialogueID": d,
        "Scenario": {"WizardCapabilities": [{"Domain": "hotel", "Task": "hotel_book"}]},
        "Events": [
            {"Agent": "User", "Action": "utter", "Text": f"I need a room {d}.", "UnixTime": 1e9},
            {"Agent": "Wizard", "Action": "utter", "Text": "Which night?", "UnixTime": 1e9 + 5},
            {"Agent": "User", "Action": "utter", "Text": "Friday night.", "UnixTime": 1e9 + 9},
        ],
    }
    for d in range(3)
]

READERS = ("jsonl", "csv", "parquet", "chatgpt", "claude", "locomo", "star")
"""The readers, by the ``format`` that reads them."""

SUFFIX = {
    "jsonl": ".jsonl",
    "csv": ".csv",
    "parquet": ".parquet",
    "chatgpt": ".json",
    "claude": ".json",
    "locomo": ".json",
    "star": ".jsonl",
}


def _hostile_values(rng: random.Random) -> list[Any]:
    deep: Any = "x"
    for _ in range(rng.choice((70, 300, 600))):
        deep = [deep] if rng.random() < 0.5 else {"k": deep}
    return [
        ["a", "b"],
        {"k": ["v"]},
        10**30,
        -(10**19),
        1e308,
        -1,
        0,
        True,
        None,
        "",
        " \r\n\t ",
        "\x00\ud800",
        "token-" * 5000,
        "x=token=" * 3000,
        "password: " + "a1" * 12000,
        "1 " * 10000,
        "99999-99-99T99:99:99",
        "The user prefers\rpoker.",
        deep,
    ]


def mutate(value: Any, rng: random.Random, rate: float) -> Any:
    """``value`` with some of its leaves, lists and objects replaced by hostile values."""
    if rng.random() < rate:
        return rng.choice(_hostile_values(rng))
    if isinstance(value, dict):
        out = {k: mutate(v, rng, rate) for k, v in value.items()}
        if rng.random() < rate:
            out[rng.choice(("mapping", "parent", "current_node", "children", "x"))] = rng.choice(
                _hostile_values(rng)
            )
        return out
    if isinstance(value, list):
        return [mutate(v, rng, rate) for v in value]
    return value


def _valid_document(fmt: str) -> Any:
    if fmt == "chatgpt":
        return chatgpt_export(2, 6)
    if fmt == "claude":
        return claude_export(2, 6)
    if fmt == "locomo":
        return [locomo_sample(k, 2, 6) for k in range(2)]
    if fmt == "star":
        return STAR_DIALOGUES
    return conversation_rows("hx", 8)


def _write_document(path: Path, fmt: str, doc: Any) -> None:
    if fmt in ("jsonl", "star"):
        lines = doc if isinstance(doc, list) else [doc]
        write_jsonl(path, [json.dumps(x, default=str).encode() for x in lines])
    elif fmt == "csv":
        rows = [r for r in (doc if isinstance(doc, list) else [doc]) if isinstance(r, dict)]
        keys = sorted({str(k) for r in rows for k in r}) or ["content"]
        fixed = [{k: json.dumps(r.get(k), default=str) for k in keys} for r in rows] or [{}]
        write_csv(path, [{k: row.get(k, "") for k in keys} for row in fixed])
    else:
        path.write_text(json.dumps(doc, default=str))


def _broken_bytes(data: bytes, rng: random.Random) -> bytes:
    kind = rng.randrange(5)
    if kind == 0 and data:
        return data[: rng.randrange(len(data))]
    if kind == 1:
        out = bytearray(data)
        for _ in range(max(1, len(out) // 50)):
            if out:
                out[rng.randrange(len(out))] = rng.randrange(256)
        return bytes(out)
    if kind == 2:
        return b"\xef\xbb\xbf" + data + b"\xff\xfe\x00"
    if kind == 3:
        return b"\x1f\x8b" + data[:100]  # claims gzip, is not
    return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))


def _hostile_parquet(path: Path, rng: random.Random) -> None:
    n = 3
    columns: dict[str, pa.Array] = {
        "conversation_id": pa.array(["pq-h"] * n),
        "role": pa.array(["user"] * n),
        "content": pa.array(["I like tea.", "token-" * 3000, "ok"]),
    }
    odd: list[tuple[str, Callable[[], pa.Array]]] = [
        ("timestamp", lambda: pa.array([0, 14645 * 365 * 86400, 1], pa.timestamp("s"))),
        ("timestamp", lambda: pa.array([0, 2**31 - 1, 5], pa.date32())),
        ("timestamp", lambda: pa.array([1, 1_700_000_000_000_000_001, 3], pa.timestamp("ns"))),
        ("timestamp", lambda: pa.array([None, None, None], pa.null())),
        ("timestamp", lambda: pa.array([[1], [2, 3], None], pa.list_(pa.int64()))),
        ("content", lambda: pa.array([b"\xff\xfe", b"ok", None], pa.binary())),
        ("content", lambda: pa.array([{"a": 1}, {"a": 2}, None], pa.struct([("a", pa.int8())]))),
        ("metadata", lambda: pa.array([1.5, float("nan"), float("inf")], pa.float64())),
        ("role", lambda: pa.array([1, 2, 3], pa.int64()).dictionary_encode()),
        ("timestamp", lambda: pa.array([10**9, -(10**12), 0], pa.duration("s"))),
    ]
    for name, make in rng.sample(odd, rng.randrange(1, 4)):
        columns[name] = make()
    pq.write_table(pa.table(columns), path)


def hostile_files(folder: Path, fmt: str, count: int, seed: int = 0) -> list[Path]:
    """``count`` hostile files of ``fmt`` in ``folder`` (named ``hostile-<fmt>-<i>``)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(count):
        rng = random.Random(f"{seed}-{fmt}-{i}")
        path = folder / f"hostile-{fmt}-{i}{SUFFIX[fmt]}"
        if fmt == "parquet" and i % 3 != 2:
            _hostile_parquet(path, rng)
        else:
            doc = mutate(_valid_document(fmt), rng, rate=rng.choice((0.05, 0.2, 0.5)))
            _write_document(path, fmt, doc)
            if i % 4 == 3:
                path.write_bytes(_broken_bytes(path.read_bytes(), rng))
        out.append(path)
    return out


def valid_file(folder: Path, fmt: str) -> Path:
    """One valid file of ``fmt`` in ``folder`` (named ``valid-<fmt>``)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"valid-{fmt}{SUFFIX[fmt]}"
    if fmt == "jsonl":
        write_jsonl(path, conversation_rows("vj", 12))
    elif fmt == "csv":
        write_csv(path, chat_rows(10))
    elif fmt == "parquet":
        write_parquet(path, chat_rows(10))
    else:
        _write_document(path, fmt, _valid_document(fmt))
    return path
