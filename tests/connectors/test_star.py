"""STAR adapter on tiny hand-made dialogues, plain and gzip."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from skillstream.connectors.files import FileSource
from skillstream.connectors.star import SYNTHETIC_EPOCH, iter_star, load_star_dialogues
from skillstream.errors import InputError
from skillstream.model import Message
from tests.factories import drain, read_source, write_jsonl

UTC = UTC
T0 = 1589375664


def dialogue(dialogue_id: int, tasks: list[str], events: list[dict]) -> dict:
    return {
        "DialogueID": dialogue_id,
        "FORMAT-VERSION": 7,
        "Scenario": {
            "Domains": ["hotel"],
            "Happy": True,
            "MultiTask": len(tasks) > 1,
            "WizardCapabilities": [{"Domain": "hotel", "Task": t} for t in tasks],
        },
        "Events": events,
    }


DIALOGUES = [
    dialogue(
        1,
        ["hotel_book", "hotel_search"],
        [
            {"Agent": "UserGuide", "Action": "instruct", "Text": "Be rude.", "UnixTime": T0},
            {"Agent": "User", "Action": "utter", "Text": "I need a room.", "UnixTime": T0 + 5},
            {
                "Agent": "Wizard",
                "Action": "request_suggestions",
                "Text": "name?",
                "UnixTime": T0 + 9,
            },
            {
                "Agent": "Wizard",
                "Action": "pick_suggestion",
                "ActionLabel": "hotel_ask_name",
                "ActionLabelOptions": ["hotel_ask_name"],
                "Text": "What is your name?",
                "UnixTime": T0 + 12,
            },
            {"Agent": "Wizard", "Action": "query", "APIName": "hotel_book", "UnixTime": T0 + 20},
            {"Agent": "KnowledgeBase", "Action": "return_item", "UnixTime": T0 + 21},
            {"Agent": "Wizard", "Action": "utter", "Text": "Booked, anything else?"},  # no time
            {"Agent": "User", "Action": "complete", "UnixTime": T0 + 40},
        ],
    ),
    dialogue(
        2,
        ["ride_book"],
        [
            {"Agent": "User", "Action": "utter", "Text": "Get me a taxi."},  # no time at all
            {"Agent": "Wizard", "Action": "utter", "Text": "Where to?"},
            {"Agent": "User", "Action": "utter", "Text": "   "},  # empty: a dead letter
        ],
    ),
]


@pytest.fixture(params=["jsonl", "jsonl.gz"])
def star_file(request, tmp_path):
    return write_jsonl(
        tmp_path / f"star.{request.param}",
        [DIALOGUES[0], b"", DIALOGUES[1]],
        gz=request.param.endswith("gz"),
    )


def test_only_conversation_events_become_records(star_file):
    records = [r for _, r in iter_star(star_file)]
    assert [(r["message_id"], r["role"], r["content"]) for r in records] == [
        ("star-1:1", "user", "I need a room."),
        ("star-1:2", "assistant", "What is your name?"),
        ("star-1:3", "assistant", "Booked, anything else?"),
        ("star-2:1", "user", "Get me a taxi."),
        ("star-2:2", "assistant", "Where to?"),
        ("star-2:3", "user", "   "),
    ]
    assert records[1]["metadata"] == {
        "tasks": ["hotel_book", "hotel_search"],
        "action_label": "hotel_ask_name",
    }
    assert records[0]["metadata"] == {"tasks": ["hotel_book", "hotel_search"]}
    assert {(r["conversation_id"], r["session_id"], r["user_id"]) for r in records[:3]} == {
        ("star-1", "star-1", "star")
    }


def test_times_are_the_events_own_or_deterministic(star_file):
    ts = [r["timestamp"] for _, r in iter_star(star_file)]
    own = datetime.fromtimestamp(T0, tz=UTC)
    assert ts[:3] == [
        own + timedelta(seconds=5),
        own + timedelta(seconds=12),
        own + timedelta(seconds=22),  # one second after the last timed event (KnowledgeBase)
    ]
    base = SYNTHETIC_EPOCH + timedelta(hours=2)
    assert ts[3:] == [base, base + timedelta(seconds=30), base + timedelta(seconds=60)]


def test_file_source_reads_star_with_an_owner(star_file):
    items = read_source(FileSource(star_file, format="star", owner_id="travel-team"))
    msgs = [i for i in items if isinstance(i, Message)]
    assert [m.message_id for m in msgs] == [
        "star-1:1",
        "star-1:2",
        "star-1:3",
        "star-2:1",
        "star-2:2",
    ]
    assert {m.owner_id for m in msgs} == {"travel-team"}
    assert (msgs[0].speaker, msgs[1].speaker) == ("User", "Assistant")
    assert json.loads(msgs[1].metadata)["tasks"] == ["hotel_book", "hotel_search"]
    (letter,) = [i for i in items if not isinstance(i, Message)]
    assert (letter.position, letter.reason) == ("5", "missing required field 'content'")


def test_star_snapshot_and_resume(star_file):
    source = FileSource(star_file, format="star", batch_size=2)
    (key,) = source.list_parts()
    full = [
        i.message_id for i in drain(source.build_part("in", key, None)) if isinstance(i, Message)
    ]
    part = source.build_part("in", key, None)
    head = drain(part, limit=1)
    tail = drain(source.build_part("in", key, part.snapshot()))
    assert [i.message_id for i in head + tail if isinstance(i, Message)] == full


def test_load_star_dialogues(star_file):
    dialogues = load_star_dialogues(star_file)
    assert [(d["id"], d["tasks"], d["multi_task"]) for d in dialogues] == [
        ("star-1", ["hotel_book", "hotel_search"], True),
        ("star-2", ["ride_book"], False),
    ]
    turns = dialogues[0]["turns"]
    assert [(t["role"], t["action_label"]) for t in turns] == [
        ("user", None),
        ("assistant", "hotel_ask_name"),
        ("assistant", None),
    ]


def test_directory_with_format_star_takes_jsonl_files(tmp_path):
    write_jsonl(tmp_path / "a.jsonl.gz", DIALOGUES[:1], gz=True)
    write_jsonl(tmp_path / "b.jsonl", DIALOGUES[1:])
    (tmp_path / "tasks.json").write_text("{}")
    assert FileSource(tmp_path, format="star").files == {
        str(tmp_path / "a.jsonl.gz"): "star",
        str(tmp_path / "b.jsonl"): "star",
    }


def test_not_a_star_file(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"conversation_id": "c"}])
    with pytest.raises(InputError, match="line 1: expected a STAR dialogue object"):
        load_star_dialogues(path)
