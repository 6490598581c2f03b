"""Prompts and heuristic word lists carry nothing from the evaluation data: no LoCoMo speaker name
and no STAR task name (nor a word only STAR's task names use). A product prompt tuned to the
benchmark's people or a word list grown to fit its tasks would make the figures say more than the
product does.

The names are read from the datasets when they are there (``../shared/data``), else from the
lists below, which are what the dev files hold."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

import skillstream

PACKAGE = Path(skillstream.__file__).resolve().parent
DATA = PACKAGE.parent.parent / "shared" / "data"

LOCOMO_SPEAKERS = {
    "Andrew",
    "Audrey",
    "Caroline",
    "Gina",
    "Joanna",
    "John",
    "Jon",
    "Maria",
    "Melanie",
    "Nate",
    "Tim",
}
STAR_TASKS = {
    "apartment_schedule",
    "apartment_search",
    "bank_balance",
    "bank_fraud_report",
    "doctor_followup",
    "doctor_schedule",
    "hotel_book",
    "hotel_search",
    "hotel_service_request",
    "meeting_schedule",
    "party_plan",
    "party_rsvp",
    "plane_book",
    "plane_search",
    "restaurant_book",
    "restaurant_search",
    "ride_book",
    "ride_change",
    "ride_status",
    "spaceship_access_codes",
    "spaceship_life_support",
    "trip_directions",
    "trivia",
    "weather",
}
EVERYDAY = set(
    """apartment schedule search bank balance fraud report doctor hotel book service request
    meeting party plan plane restaurant ride change status access codes life support trip
    directions weather""".split()
)
"""Words of STAR task names that any assistant's vocabulary holds; the others (rsvp, followup,
spaceship, trivia) come from the benchmark's tasks."""

WORD_LISTS = [
    PACKAGE / "rules",
    PACKAGE / "distill" / "heuristics.py",
    PACKAGE / "distill" / "steps.py",
    PACKAGE / "lifecycle",
    PACKAGE / "text.py",
    PACKAGE / "lang.py",
]
"""Where the offline heuristics keep their word lists and patterns."""


def speakers() -> set[str]:
    path = DATA / "locomo" / "locomo-dev.json"
    if not path.is_file():
        return LOCOMO_SPEAKERS
    names = set()
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conversation = sample["conversation"]
        names |= {conversation["speaker_a"], conversation["speaker_b"]}
    return names


def tasks() -> set[str]:
    folder = DATA / "star" / "tasks"
    if not folder.is_dir():
        return STAR_TASKS
    return {p.name for p in folder.iterdir() if p.is_dir() or p.suffix == ""}


def forbidden() -> tuple[set[str], set[str]]:
    """(names, words): whole words that must not appear."""
    names = speakers()
    task_names = tasks()
    words = {t for t in task_names} | {t.replace("_", " ") for t in task_names}
    words |= {w for t in task_names for w in t.split("_")} - EVERYDAY
    return names, words


def strings_of(path: Path) -> list[tuple[str, int]]:
    """The string constants of a module that are not docstrings, with their lines."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docs.add(id(body[0].value))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            found.append((node.value, node.lineno))
    # attribute docstrings (a string statement right after an assignment) are docs too
    for node in ast.walk(tree):
        for block in ("body", "orelse"):
            stmts = getattr(node, block, None)
            if not isinstance(stmts, list):
                continue
            for before, stmt in zip(stmts, stmts[1:]):
                if (
                    isinstance(before, ast.Assign | ast.AnnAssign)
                    and isinstance(stmt, ast.Expr)
                    and isinstance(stmt.value, ast.Constant)
                ):
                    found = [(s, n) for s, n in found if n != stmt.value.lineno]
    return found


def hits(text: str, names: set[str], words: set[str]) -> list[str]:
    out = [n for n in names if re.search(rf"\b{re.escape(n)}\b", text)]
    low = text.lower()
    out += [w for w in words if re.search(rf"(?<![a-z]){re.escape(w)}(?![a-z])", low)]
    return out


def test_the_lists_know_the_datasets():
    names, words = forbidden()
    assert {"Caroline", "Melanie"} <= names
    assert {"rsvp", "spaceship", "party_rsvp", "hotel book"} <= words


@pytest.mark.parametrize(
    "path", sorted((PACKAGE / "prompts").rglob("*.txt")), ids=lambda p: f"{p.parent.name}/{p.name}"
)
def test_no_prompt_names_the_evaluation_data(path):
    names, words = forbidden()
    assert hits(path.read_text(encoding="utf-8"), names, words) == []


def modules() -> list[Path]:
    out: list[Path] = []
    for place in WORD_LISTS:
        out += sorted(place.rglob("*.py")) if place.is_dir() else [place]
    return out


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_heuristic_word_list_holds_evaluation_words(path):
    names, words = forbidden()
    bad = [
        (line, found)
        for text, line in strings_of(path)
        for found in [hits(text, names, words)]
        if found
    ]
    assert bad == []
