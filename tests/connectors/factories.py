"""Small factories for the connector tests: chat logs written to tmp_path in each format."""

from __future__ import annotations

import csv
import gzip
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from skillstream.connectors.files import FileSource, read_all
from skillstream.model import DeadLetter, Message

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


def write_jsonl(path: Path, lines: list[Any], *, gz: bool = False) -> Path:
    """Write JSONL: dicts are encoded, ``bytes`` are written as they are (for broken lines)."""
    data = b"".join(
        (line if isinstance(line, bytes) else json.dumps(line).encode("utf-8")) + b"\n"
        for line in lines
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
    return read_all(source)


def portable(m: Message) -> Message:
    """A message without where it was read from, to compare reads of different files."""
    return replace(m, source=None, position=None)
