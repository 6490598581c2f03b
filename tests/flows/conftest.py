"""Fixtures for flow tests: conversation files and helpers to read back the stores."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from skillstream.settings import Settings

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)

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
    cid: str, n: int, *, start: datetime = T0, owner: str | None = None
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


def write_jsonl(path: Path, rows: list[dict], extra_lines: list[bytes] = ()) -> Path:
    with path.open("wb") as f:
        for r in rows:
            f.write(json.dumps(r).encode() + b"\n")
        for line in extra_lines:
            f.write(line + b"\n")
    return path


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings.load(home=str(tmp_path / "home"), epoch_interval_s=0.0, span_tokens=128)


def memory_ids(settings: Settings, dim: int = 384) -> list[str]:
    from skillstream.storage.lance import MemoryIndex

    idx = MemoryIndex(settings.storage.lancedb, dim, settings.storage.storage_options)
    return sorted(idx.table.to_arrow().column("id").to_pylist())
