"""LoCoMo adapter on a tiny hand-made file."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from skillstream.connectors.files import FileSource
from skillstream.connectors.locomo import (
    LocomoQA,
    iter_locomo,
    load_locomo_qa,
    parse_locomo_datetime,
)
from skillstream.errors import InputError
from skillstream.model import DeadLetter, Message
from tests.factories import drain, read_source

UTC = UTC


def sample(sample_id: str = "conv-1") -> dict:
    return {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            # Session 10 comes after session 2 (numeric order), whatever the key order.
            "session_10_date_time": "9:05 am on 1 June, 2023",
            "session_10": [{"speaker": "Ben", "dia_id": "D10:1", "text": "Back from Oslo!"}],
            "session_2_date_time": "1:56 pm on 8 May, 2023",
            "session_2": [
                {"speaker": "Ana", "dia_id": "D2:1", "text": "I adopted a cat."},
                {
                    "speaker": "Ben",
                    "dia_id": "D2:2",
                    "text": "Look at this.",
                    "img_url": ["https://example.org/x.jpg"],
                    "blip_caption": "a photo of a cat on a sofa",
                    "query": "cat sofa",
                },
                {"speaker": "Ana", "dia_id": "D2:3", "text": "So cute. Mine is grey."},
            ],
            "session_3_date_time": "12:00 pm on 9 May, 2023",  # a date without turns
            "session_4_date_time": "sometime in May",
            "session_4": [{"speaker": "Ana", "dia_id": "D4:1", "text": "Undated."}],
        },
        "qa": [
            {
                "question": "What pet did Ana adopt?",
                "answer": "a cat",
                "evidence": ["D2:1"],
                "category": 4,
            },
            {"question": "When?", "answer": 2023, "evidence": ["D2:1; D2:3"], "category": 2},
            {
                "question": "What did Ben adopt?",
                "evidence": ["D2:2"],
                "category": 5,
                "adversarial_answer": "a dog",
            },
        ],
    }


@pytest.fixture
def locomo_file(tmp_path):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([sample("conv-1"), sample("conv-2")]))
    return path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("12:05 am on 1 January, 2024", datetime(2024, 1, 1, 0, 5, tzinfo=UTC)),
        ("12:30 pm on 15 July, 2023", datetime(2023, 7, 15, 12, 30, tzinfo=UTC)),
    ],
)
def test_parse_locomo_datetime(text, expected):
    assert parse_locomo_datetime(text) == expected


def test_parse_locomo_datetime_refuses_other_shapes():
    with pytest.raises(ValueError, match="is not like '1:56 pm on 8 May, 2023'"):
        parse_locomo_datetime("8 May 2023")


def test_turns_become_canonical_records_in_session_order(locomo_file):
    records = list(iter_locomo(locomo_file))
    assert [p for p, _ in records] == list(range(10))
    first = records[:5]
    assert [r["message_id"] for _, r in first] == ["D2:1", "D2:2", "D2:3", "D4:1", "D10:1"]
    _, r = first[1]
    assert r == {
        "conversation_id": "conv-1",
        "user_id": "conv-1",
        "session_id": "conv-1/session_2",
        "message_id": "D2:2",
        "role": "user",
        "name": "Ben",
        "content": "Look at this.",
        "timestamp": datetime(2023, 5, 8, 13, 56, 30, tzinfo=UTC),
        "metadata": {
            "image_caption": "a photo of a cat on a sofa",
            "img_url": ["https://example.org/x.jpg"],
        },
    }


def test_file_source_reads_locomo(locomo_file):
    items = read_source(FileSource(locomo_file))
    msgs = [i for i in items if isinstance(i, Message)]
    letters = [i for i in items if isinstance(i, DeadLetter)]
    assert len(msgs) == 8
    start = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert [m.ts for m in msgs[:3]] == [start + timedelta(seconds=30 * i) for i in range(3)]
    m = msgs[1]
    assert (m.message_id, m.owner_id, m.session_id, m.role, m.speaker) == (
        "D2:2",
        "conv-1",
        "conv-1/session_2",
        "user",
        "Ben",
    )
    assert json.loads(m.metadata)["image_caption"] == "a photo of a cat on a sofa"
    assert msgs[3].session_id == "conv-1/session_10"
    # A session whose date cannot be read: its turns are dead letters, the rest goes on.
    assert [(d.position, d.reason) for d in letters] == [
        ("3", "timestamp 'sometime in May' is not ISO 8601 or epoch seconds"),
        ("8", "timestamp 'sometime in May' is not ISO 8601 or epoch seconds"),
    ]


def test_locomo_snapshot_and_resume(locomo_file):
    source = FileSource(locomo_file, batch_size=3)
    (key,) = source.list_parts()
    full = drain(source.build_part("in", key, None))
    part = source.build_part("in", key, None)
    head = drain(part, limit=2)
    resumed = source.build_part("in", key, part.snapshot())
    assert list(map(_timeless, head + drain(resumed))) == list(map(_timeless, full))


def _timeless(item):
    # Dead letters carry the time they were recorded; compare everything else.
    return replace(item, recorded_at=None) if isinstance(item, DeadLetter) else item


def test_load_locomo_qa(locomo_file):
    qa = load_locomo_qa(locomo_file)
    assert list(qa) == ["conv-1", "conv-2"]
    assert qa["conv-1"] == [
        LocomoQA("What pet did Ana adopt?", "a cat", ("D2:1",), 4),
        LocomoQA("When?", "2023", ("D2:1", "D2:3"), 2),
        LocomoQA("What did Ben adopt?", None, ("D2:2",), 5, adversarial_answer="a dog"),
    ]


def test_not_a_locomo_file(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"hello": 1}))
    with pytest.raises(InputError, match="is not a LoCoMo file"):
        list(iter_locomo(path))
    path.write_text("{")
    with pytest.raises(InputError, match="is not valid JSON"):
        load_locomo_qa(path)
