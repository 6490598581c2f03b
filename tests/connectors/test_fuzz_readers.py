"""Every reader, fed generated hostile files among valid ones, reads every valid record and ends.

For each format, a source over one valid file and many hostile ones (``hostile_files``) is read
to its end: no exception leaves the source, the hostile files give dead letters (a file of a header
and nothing else gives nothing), and the valid file gives exactly the messages it gives when read
alone.
"""

from __future__ import annotations

import json

import pytest

from skillstream.connectors.files import FileSource
from skillstream.connectors.records import parse_record
from skillstream.model import DeadLetter, Message
from tests.connectors.hostile_files import READERS, hostile_files, valid_file
from tests.factories import read_source

HOSTILE_PER_FORMAT = 24


def messages_of(items, source: str) -> list[Message]:
    return [m for m in items if isinstance(m, Message) and m.source == source]


@pytest.mark.parametrize("fmt", READERS)
def test_hostile_files_lose_no_valid_record_and_end_nothing(tmp_path, fmt):
    valid = valid_file(tmp_path / "in", fmt)
    alone = read_source(FileSource(str(valid), format=fmt))
    expected = messages_of(alone, str(valid))
    assert expected and len(expected) == len(alone)

    hostile = hostile_files(tmp_path / "in", fmt, HOSTILE_PER_FORMAT)
    items = read_source(FileSource([str(valid), *map(str, hostile)], format=fmt))

    assert messages_of(items, str(valid)) == expected
    assert all(isinstance(i, (Message, DeadLetter)) for i in items)
    letters = [i for i in items if isinstance(i, DeadLetter)]
    assert letters  # the generator does make records a reader must refuse
    assert all(len(d.payload or "") <= 500 and len(d.reason) <= 2000 for d in letters)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("metadata", {"deep": json.loads("[" * 65 + "]" * 65)}, "nested more than 64 levels deep"),
        ("metadata", {"big": "x" * 70_000}, "the limit is 65536"),
        ("conversation_id", "c" * 2_000, "the limit is 1024"),
    ],
)
def test_a_record_over_its_budget_is_a_dead_letter_with_the_reason(field, value, words):
    row = {
        "conversation_id": "c1",
        "role": "user",
        "content": "hello there",
        "timestamp": "2024-01-01T00:00:00Z",
        field: value,
    }
    item = parse_record(row, source="s", position=0)
    assert isinstance(item, DeadLetter) and words in item.reason, item


def test_a_csv_row_pyarrow_cannot_split_or_decode_costs_only_itself(tmp_path):
    path = tmp_path / "mixed.csv"
    path.write_bytes(
        b"conversation_id,role,content,timestamp\n"
        b"c,user,hello one,2024-01-01T00:00:00Z\n"
        b"c,user,\xff\xfe bad,x,y,z\n"
        b"c,user,caf\xe9 alone,2024-01-01T00:00:30Z\n"
        b"c,user,hello two,2024-01-01T00:01:00Z\n"
    )
    items = read_source(FileSource(str(path)))
    assert [m.text for m in items if isinstance(m, Message)] == ["hello one", "hello two"]
    reasons = sorted(d.reason for d in items if isinstance(d, DeadLetter))
    assert reasons == [
        "CSV row has 6 cells; the header has 4",
        "invalid UTF-8 in column 'content' at byte 3",
    ]
