"""FileSource: formats, file discovery, dead letters from files, snapshot and resume."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from skillstream.connectors.files import FileSource, detect_format
from skillstream.errors import InputError
from skillstream.model import DeadLetter, Message
from tests.connectors.test_records import BASE, PRIVATE_KEY, REJECT_KEYS
from tests.factories import (
    chat_rows,
    drain,
    portable,
    read_source,
    write_csv,
    write_jsonl,
    write_parquet,
)


def messages(items) -> list[Message]:
    return [i for i in items if isinstance(i, Message)]


def test_jsonl_parquet_and_csv_read_the_same_messages(tmp_path):
    rows = chat_rows(10)
    reads = {
        fmt: read_source(FileSource(writer(tmp_path / f"chat.{fmt}", rows)))
        for fmt, writer in (("jsonl", write_jsonl), ("parquet", write_parquet), ("csv", write_csv))
    }
    gz = read_source(FileSource(write_jsonl(tmp_path / "chat.jsonl.gz", rows, gz=True)))
    expected = [portable(m) for m in reads["jsonl"]]
    assert len(expected) == 10 and all(isinstance(m, Message) for m in expected)
    for items in [*reads.values(), gz]:
        assert [portable(m) for m in items] == expected
    assert [m.position for m in reads["parquet"]] == list(range(10))
    assert [m.position for m in reads["csv"]] == list(range(10))
    assert [m.position for m in gz] == list(range(10))
    assert reads["jsonl"][0].source == str(tmp_path / "chat.jsonl")


def test_jsonl_position_is_the_byte_offset_of_the_line(tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", chat_rows(3))
    offsets = [0]
    for raw in path.read_bytes().splitlines(keepends=True)[:-1]:
        offsets.append(offsets[-1] + len(raw))
    assert [m.position for m in read_source(FileSource(path))] == offsets


def test_every_invalid_kind_gives_exactly_one_dead_letter(tmp_path):
    good = chat_rows(6)
    bad_lines = {
        b'{"conversation_id": "c1" "role": "user"}': "broken JSON: Expecting ',' delimiter",
        json.dumps({**BASE, "content": ""}).encode(): "missing required field 'content'",
        json.dumps(
            {**BASE, "timestamp": "yesterday"}
        ).encode(): "timestamp 'yesterday' is not ISO 8601",
        json.dumps(
            {**BASE, "content": "x" * 25000}
        ).encode(): "message has 25000 characters; limit is 20000",
        json.dumps(BASE).encode()[:30] + b"\xff" + b'"}': "invalid UTF-8 at byte 30",
        json.dumps({**BASE, "role": "robot"}).encode(): "role 'robot' is not one of",
        json.dumps({k: v for k, v in BASE.items() if k != "conversation_id"}).encode(): (
            "missing required field 'conversation_id'"
        ),
        json.dumps({**BASE, "content": PRIVATE_KEY}).encode(): (
            "rejected: message matches sensitive-data pattern 'private_key'"
        ),
    }
    lines: list = []
    for i, raw in enumerate(bad_lines):
        lines += [good[i % len(good)] if i < len(good) else None, raw]
    lines = [line for line in lines if line is not None] + [b"", *good[len(bad_lines) :]]
    path = write_jsonl(tmp_path / "mixed.jsonl", lines)

    items = read_source(FileSource(path, redactor=REJECT_KEYS))
    letters = [i for i in items if isinstance(i, DeadLetter)]
    assert len(letters) == len(bad_lines)
    for letter, prefix in zip(letters, bad_lines.values(), strict=True):
        assert letter.reason.startswith(prefix), (letter.reason, prefix)
    assert len({letter.reason for letter in letters}) == len(bad_lines)
    assert len({letter.id for letter in letters}) == len(bad_lines)
    assert letters[-1].payload is None
    assert [portable(m) for m in messages(items)] == [
        portable(m) for m in read_source(FileSource(write_jsonl(tmp_path / "g.jsonl", good)))
    ]


def test_mapping_option_for_renamed_columns(tmp_path):
    rows = [
        {"thread": "t1", "who": "human", "text": f"hello {i}", "sent": f"2024-01-01T00:00:0{i}"}
        for i in range(3)
    ]
    mapping = {"conversation_id": "thread", "role": "who", "content": "text", "timestamp": "sent"}
    for path in (write_csv(tmp_path / "r.csv", rows), write_parquet(tmp_path / "r.parquet", rows)):
        items = read_source(FileSource(path, mapping=mapping))
        assert [(m.conversation_id, m.role, m.text) for m in items] == [
            ("t1", "user", f"hello {i}") for i in range(3)
        ]


def test_csv_reads_every_cell_as_text_and_reports_bad_rows(tmp_path):
    path = tmp_path / "c.csv"
    path.write_bytes(
        b"conversation_id,role,content,timestamp\n"
        b'7,user,"two\nlines",1715176560\n'
        b"7,user,too few cells\n"
        b"7,user,caf\xe9 latin-1,1715176560\n"
        b"7,assistant,fine,2024-05-08T13:56:00\n"
    )
    items = read_source(FileSource(path))
    # A row pyarrow cannot split is reported when its block is read, ahead of that block's rows.
    short, first, latin, last = items
    assert (first.conversation_id, first.text, first.position) == ("7", "two\nlines", 0)
    assert short.reason == "CSV row has 3 cells; the header has 4"
    assert short.position == "line:3"  # pyarrow's row count from the header, quotes kept whole
    assert latin.reason == "invalid UTF-8 in column 'content' at byte 3"
    assert latin.position == "1"
    assert last.position == 2


def test_parquet_native_types(tmp_path):
    from datetime import datetime

    table = pa.table(
        {
            "conversation_id": ["c1"],
            "role": ["user"],
            "content": ["hi"],
            "timestamp": pa.array([datetime(2024, 5, 8, 13, 56)], pa.timestamp("us")),
            "metadata": pa.array([{"lang": "en"}]),
        }
    )
    pq.write_table(table, tmp_path / "n.parquet")
    (m,) = read_source(FileSource(tmp_path / "n.parquet"))
    assert m.ts == datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
    assert json.loads(m.metadata) == {"lang": "en"}


def test_owner_override(tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", chat_rows(2))
    assert {m.owner_id for m in read_source(FileSource(path, owner_id="team"))} == {"team"}


# ------------------------------------------------------------------------------- file discovery


def test_directory_and_glob_expand_to_sorted_matching_files(tmp_path):
    for name in ("b.jsonl", "a.csv", "c.parquet", "d.jsonl.gz", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "e.jsonl").write_bytes(b"")
    src = FileSource(tmp_path)
    assert src.files == {
        str(tmp_path / "a.csv"): "csv",
        str(tmp_path / "b.jsonl"): "jsonl",
        str(tmp_path / "c.parquet"): "parquet",
        str(tmp_path / "d.jsonl.gz"): "jsonl",
    }
    assert list(FileSource(tmp_path, format="jsonl").files) == [
        str(tmp_path / "b.jsonl"),
        str(tmp_path / "d.jsonl.gz"),
    ]
    assert list(FileSource(str(tmp_path / "**" / "*.jsonl")).files) == [
        str(tmp_path / "b.jsonl"),
        str(tmp_path / "sub" / "e.jsonl"),
    ]
    assert src.list_parts() == list(src.files)


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("a.jsonl", "jsonl"),
        ("a.NDJSON", "jsonl"),
        ("a.jsonl.gz", "jsonl"),
        ("a.parquet", "parquet"),
        ("a.csv", "csv"),
        ("a.json", "json"),
        ("a.txt", None),
    ],
)
def test_detect_format(name, fmt):
    assert detect_format(name) == fmt


def test_clear_errors_at_construction(tmp_path):
    with pytest.raises(InputError, match="input file '.*missing.jsonl' does not exist"):
        FileSource(tmp_path / "missing.jsonl")
    with pytest.raises(InputError, match="no input paths given"):
        FileSource([])
    with pytest.raises(InputError, match="unknown format 'xml'"):
        FileSource(tmp_path, format="xml")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(InputError, match="cannot tell the format of .*notes.txt"):
        FileSource(tmp_path / "notes.txt")
    with pytest.raises(InputError, match="holds no readable file"):
        FileSource(tmp_path)
    with pytest.raises(InputError, match="no jsonl file matches the pattern"):
        FileSource(str(tmp_path / "*.jsonl"), format="jsonl")
    with pytest.raises(InputError, match="batch_size must be at least 1"):
        FileSource(tmp_path / "notes.txt", format="jsonl", batch_size=0)
    src = FileSource(tmp_path / "notes.txt", format="jsonl")
    with pytest.raises(InputError, match="cannot resume partition 'other.jsonl'"):
        src.build_part("in", "other.jsonl", None)


def test_unreadable_parquet_is_one_dead_letter_for_the_file(tmp_path):
    path = tmp_path / "fake.parquet"
    path.write_text("not parquet")
    part = FileSource(path).build_part("in", str(path), None)
    [dead] = part.next_batch()
    assert isinstance(dead, DeadLetter) and dead.position == "file" and dead.stage == "read"
    assert "is not a readable Parquet file" in dead.reason and str(path) in dead.reason
    with pytest.raises(StopIteration):
        part.next_batch()


# ------------------------------------------------------------------------- snapshot and resume


def _files_for_every_format(tmp_path: Path) -> list[FileSource]:
    rows = chat_rows(11)
    broken = [*rows[:4], b"{broken", b"", *rows[4:]]
    return [
        FileSource(write_jsonl(tmp_path / "r.jsonl", broken), batch_size=3),
        FileSource(write_jsonl(tmp_path / "r.jsonl.gz", broken, gz=True), batch_size=3),
        FileSource(write_parquet(tmp_path / "r.parquet", rows, row_group_size=4), batch_size=3),
        FileSource(write_csv(tmp_path / "r.csv", rows), batch_size=3),
    ]


def _key(item) -> tuple:
    return (type(item).__name__, str(item.position), getattr(item, "message_id", None))


@pytest.mark.parametrize("source_index", range(4), ids=["jsonl", "jsonl.gz", "parquet", "csv"])
@pytest.mark.parametrize("batches_before", [0, 1, 2, 5])
def test_snapshot_and_resume_round_trip(tmp_path, source_index, batches_before):
    source = _files_for_every_format(tmp_path)[source_index]
    (key,) = source.list_parts()
    full = drain(source.build_part("in", key, None))

    part = source.build_part("in", key, None)
    head = drain(part, limit=batches_before)
    state = part.snapshot()
    assert isinstance(state, int)
    part.close()
    resumed = source.build_part("in", key, state)
    tail = drain(resumed)
    resumed.close()

    assert [_key(i) for i in head + tail] == [_key(i) for i in full]
    assert len({_key(i) for i in head + tail}) == len(full)
    assert [portable(m) for m in messages(head + tail)] == [portable(m) for m in messages(full)]


def test_snapshot_does_not_move_without_a_batch(tmp_path):
    source = FileSource(write_jsonl(tmp_path / "a.jsonl", chat_rows(4)), batch_size=2)
    part = source.build_part("in", source.list_parts()[0], None)
    assert part.snapshot() == 0
    part.next_batch()
    first = part.snapshot()
    assert first == part.snapshot() > 0
    assert Counter(type(i).__name__ for i in drain(part)) == {"Message": 2}
    with pytest.raises(StopIteration):
        part.next_batch()
