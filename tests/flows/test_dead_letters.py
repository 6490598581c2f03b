"""1,000 valid lines and 50 invalid ones: exactly 50 dead letters, every valid line processed."""

from __future__ import annotations

import json

from skillstream.connectors.files import FileSource
from skillstream.storage.catalog import Catalog
from tests.factories import conversation_rows, run_flow


def invalid_lines() -> list[bytes]:
    ts = '"timestamp": "2024-03-01T10:00:00Z"'
    kinds = [
        lambda i: (
            b'{"conversation_id": "c1", "role": "user", "content": "broken '
            + str(i).encode()
            + b'"'
        ),
        lambda i: (
            f'{{"conversation_id": "c1", "role": "user", {ts}, "message_id": "nt{i}"}}'.encode()
        ),
        lambda i: (
            f'{{"conversation_id": "c1", "role": "user", "content": "x{i}", '
            f'"timestamp": "the {i}th"}}'.encode()
        ),
        lambda i: (
            f'{{"conversation_id": "c1", "role": "user", '
            f'"content": "{"long " * 5000}{i}", {ts}}}'.encode()
        ),
        lambda i: (
            b'{"conversation_id": "c1", "role": "user", "content": "bad \xff\xfe '
            + str(i).encode()
            + b'", '
            + ts.encode()
            + b"}"
        ),
    ]
    return [kinds[k](i) for k in range(5) for i in range(10)]


def test_fifty_invalid_lines_fifty_dead_letters(tmp_path, settings):
    rows = []
    for c in range(10):
        rows += conversation_rows(f"conv{c}", 100)
    assert len(rows) == 1000
    bad = invalid_lines()
    lines = [json.dumps(r).encode() for r in rows]
    # interleave the bad lines through the file
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        if i % 20 == 0 and bad:
            out.append(bad.pop())
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\n".join(out) + b"\n")

    counts = run_flow(settings, FileSource(path))
    assert counts["messages"] == 1000

    cat = Catalog(settings.storage.catalog, read_only=True)
    try:
        dl = cat.sql("select reason, payload from dead_letters").to_pylist()
        covered = cat.sql(
            "select distinct unnest(message_ids) as m from spans where status = 'done'"
        ).to_pylist()
    finally:
        cat.close()
    assert len(dl) == 50
    prefixes = sorted({d["reason"].split(" ")[0] for d in dl})
    assert sorted(prefixes) == ["broken", "invalid", "message", "missing", "timestamp"]
    assert all(d["payload"] is None or len(d["payload"]) <= 500 for d in dl)
    assert len(covered) == 1000
