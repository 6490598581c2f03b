"""``eval skills`` on a small STAR-shaped file: exact figures, the command and its JSON file."""

from __future__ import annotations

import gzip
import json

import pytest
from click.testing import CliRunner

from skillstream.cli.task_skills import eval_skills
from skillstream.connectors.star import load_star_dialogues
from skillstream.eval.skills import evaluate_star, split_dialogues
from skillstream.settings import Settings

pytestmark = pytest.mark.slow

HOTEL = [
    ("User", "Hi, I want to book a hotel room in {city}."),
    ("Wizard", "Could I get your name, please?"),
    ("User", "{name}"),
    ("Wizard", "What dates would you like to stay at the hotel?"),
    ("User", "From Friday to Sunday."),
    ("Wizard", "How many guests will be staying in the room?"),
    ("User", "Two guests."),
    ("Wizard", "Your hotel room is booked."),
]
TRIVIA = [
    ("User", "Let's play a trivia game about {city}!"),
    ("Wizard", "Please answer the trivia question: what river flows through the city?"),
    ("User", "The {river}."),
    ("Wizard", "Correct! Would you like to continue playing trivia?"),
    ("User", "Yes, another trivia question please."),
    ("Wizard", "Which year was the old bridge built?"),
    ("User", "No idea, {name} would know."),
]
CITIES = [
    ("Paris", "Seine", "Alexis"),
    ("London", "Thames", "Ben"),
    ("Vienna", "Danube", "Chloe"),
    ("Cairo", "Nile", "Dmitri"),
    ("Budapest", "Danube", "Eva"),
]


def star_file(tmp_path):
    lines = []
    n = 1
    for task, turns in (("hotel_book", HOTEL), ("trivia", TRIVIA)):
        for city, river, name in CITIES:
            events = [{"Agent": "UserGuide", "Action": "instruct", "Text": "guide text"}]
            for i, (agent, text) in enumerate(turns):
                events.append(
                    {
                        "Agent": agent,
                        "Action": "utter",
                        "UnixTime": 1_600_000_000 + 100 * n + i,
                        "Text": text.format(city=city, river=river, name=name),
                    }
                )
            lines.append(
                {
                    "DialogueID": n,
                    "Scenario": {
                        "WizardCapabilities": [{"Task": task}],
                        "Domains": [task],
                        "Happy": True,
                        "MultiTask": False,
                    },
                    "Events": events,
                }
            )
            n += 1
    multi = dict(lines[0], DialogueID=99)
    multi["Scenario"] = {"WizardCapabilities": [{"Task": "hotel_book"}, {"Task": "trivia"}]}
    lines.append(multi)
    path = tmp_path / "star.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        for line in lines:
            fh.write(json.dumps(line) + "\n")
    return path


def test_split_is_per_task_and_single_task_only(tmp_path):
    split = split_dialogues(load_star_dialogues(star_file(tmp_path)))
    assert [d["dialogue_id"] for d in split.train] == [1, 2, 3, 4, 6, 7, 8, 9]
    assert [d["dialogue_id"] for d in split.test] == [5, 10]
    assert 99 not in split.task_of and len(split.task_of) == 10


def test_evaluation_figures(tmp_path, embedder):
    result = evaluate_star(
        star_file(tmp_path), Settings.from_keys(home=str(tmp_path / "home")), embed=embedder.encode
    )
    assert {k: result[k] for k in ("skills", "tasks", "purity", "recall@1", "llm_calls")} == {
        "skills": 2,
        "tasks": 2,
        "purity": 1.0,
        "recall@1": 1.0,
        "llm_calls": 0,
    }
    assert result["segments"] == {"created": 2, "updated": 6}
    assert result["per_task_skills"] == {"hotel_book": 1, "trivia": 1}
    assert (result["no_skill_dialogues"], result["recall@1_with_skill"]) == (0, 1.0)


def test_held_out_dialogues_of_a_task_with_no_served_skill_are_counted_apart(tmp_path, embedder):
    # four training dialogues per task, and a skill must be supported by five: none is served
    settings = Settings.from_keys(home=str(tmp_path / "home"), skill_min_support=5)
    result = evaluate_star(star_file(tmp_path), settings, embed=embedder.encode)
    assert (result["skills"], result["candidates"]) == (0, 2)
    assert (result["recall@1"], result["no_skill_dialogues"]) == (0.0, 2)
    assert result["recall@1_with_skill"] == 0.0


def test_the_command_prints_and_writes_json(tmp_path):
    out = tmp_path / "out.json"
    result = CliRunner().invoke(
        eval_skills,
        [str(star_file(tmp_path)), "--json", str(out), "--write"],
        obj={"home": str(tmp_path / "home")},
    )
    assert result.exit_code == 0, (result.output, result.exception)
    data = json.loads(out.read_text())
    assert data["skills"] == 2 and data["recall@1"] == 1.0
    assert len(list((tmp_path / "home" / "artifacts" / "task-skills" / "star").rglob("*.zip"))) == 2
