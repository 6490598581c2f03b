"""The user's request as a second signal: recall and the update decision match a segment's request
against the requests of the segments a skill came from, so related tasks whose assistant steps are
alike stay apart and a task asked in other words finds its skill."""

from __future__ import annotations

from datetime import UTC, datetime

from skillstream.distill.consolidate import cosine, duplicate_of
from skillstream.distill.distiller import OwnerTaskSkills, TaskSkillDistiller
from skillstream.distill.draft import fold_stats
from skillstream.distill.heuristics import HeuristicDistiller
from skillstream.distill.recall import recall
from skillstream.distill.record import TaskSkill
from skillstream.distill.segment import request_text
from tests.distill.conftest import block

NOW = datetime(2025, 6, 1, tzinfo=UTC)

BOOK_TABLE = [
    ("user", "Hi there!"),
    ("user", "I'd like to reserve a table for dinner at Luigi's tonight."),
    ("assistant", "Could I get your name, please?"),
    ("user", "Sam Porter."),
    ("assistant", "How many people will be dining?"),
    ("user", "Four of us."),
    ("assistant", "What time would you like the table?"),
    ("user", "Eight o'clock."),
    ("assistant", "Your table at Luigi's is booked for four at 8 pm."),
]
FIND_RESTAURANT = [
    ("user", "Hello"),
    ("user", "Can you help me find an Italian restaurant in the north part of town?"),
    ("assistant", "Could I get your name, please?"),
    ("user", "Dana."),
    ("assistant", "What kind of food are you looking for?"),
    ("user", "Italian, like I said."),
    ("assistant", "Which part of town should it be in?"),
    ("user", "North."),
    ("assistant", "I found Roma, an Italian restaurant in the north of town."),
]
BOOK_TABLE_REWORDED = [
    ("user", "Good evening."),
    ("user", "Please book us a dinner table at Roma, there will be six people at 7 pm."),
    ("assistant", "Could I get your name, please?"),
    ("user", "Kim."),
    ("assistant", "How many people will be dining?"),
    ("user", "Six."),
    ("assistant", "What time would you like the table?"),
    ("user", "7 pm."),
    ("assistant", "Your table at Roma is booked."),
]


def test_the_request_is_the_users_opening_turns_without_small_talk():
    msgs = block(BOOK_TABLE).messages
    assert (
        request_text(msgs)
        == "I'd like to reserve a table for dinner at Luigi's tonight. Sam Porter."
    )
    assert (
        request_text(block([("user", "Hello!"), ("assistant", "Hi, how can I help?")]).messages)
        == ""
    )


def _core(embedder) -> TaskSkillDistiller:
    return TaskSkillDistiller(
        HeuristicDistiller(embedder.encode, merge_threshold=0.55),
        embedder.encode,
        consolidate_threshold=0.55,
        clock=lambda: NOW,
    )


def test_a_skill_keeps_its_requests_and_recall_matches_them(embedder):
    core = _core(embedder)
    state = OwnerTaskSkills("ana")
    (book,) = core.distill_block(state, block(BOOK_TABLE, owner_id="ana", conversation_id="c1"))
    (find,) = core.distill_block(
        state, block(FIND_RESTAURANT, owner_id="ana", conversation_id="c2")
    )
    assert (book.action, find.action) == ("created", "created")
    assert len(book.skill.stats["requests"]) == embedder.dim
    # the reworded booking updates the booking skill, whose request sum now holds both requests
    (again,) = core.distill_block(
        state, block(BOOK_TABLE_REWORDED, owner_id="ana", conversation_id="c3")
    )
    assert (again.action, again.skill.id) == ("updated", book.skill.id)
    assert again.skill.source_conversation_ids == ["c1", "c3"]
    assert again.skill.stats["n"] == 2
    # a new booking request recalls the booking skill first, a search request the search skill
    skills = list(state.skills.values())
    for text, want in (
        ("Can I get a table for two at Luigi's on Friday?", book.skill.id),
        ("Where is a good Italian place in the north of town?", find.skill.id),
    ):
        vec = embedder.encode([text])[0]
        assert recall(text, vec, skills, k=1, request=vec)[0].skill.id == want


def _skill(name: str, centroid: list[float], requests: list[float], sources: int) -> TaskSkill:
    steps = ["Ask for the guest name.", "Ask for the arrival date."]
    stats = fold_stats({}, {"n": 1, "steps": [[s, 1, 0.0] for s in steps]})
    stats.update(centroid=centroid, requests=requests)
    return TaskSkill.new(
        "ana",
        name,
        title=name.replace("-", " "),
        procedure=steps,
        vector=centroid,
        stats=stats,
        source_segment_ids=[f"{name}-seg-{i}" for i in range(sources)],
    )


def test_skills_asked_for_different_things_are_not_duplicates():
    old = _skill("book-room", [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], 6)
    same = _skill("reserve-room", [0.98, 0.2, 0.0], [0.0, 0.97, 0.24], 1)
    other = _skill("rate-room", [0.98, 0.2, 0.0], [0.0, 0.0, 1.0], 1)
    assert cosine(old, same) > 0.9 and cosine(old, other) < 0.6
    assert duplicate_of(same, [old, same], threshold=0.55) is old
    assert duplicate_of(other, [old, other], threshold=0.55) is None


def test_two_steps_of_one_procedure_stay_two_steps_however_alike():
    first, second = (
        "Provide the colour of the first cable.",
        "Provide the colour of the second cable.",
    )
    one = {"n": 1, "steps": [[first, 1, 0.25], [second, 1, 0.75]]}
    stats = fold_stats({}, one)
    assert [s[:2] for s in stats["steps"]] == [[first, 1], [second, 1]]
    # a second draft of the same procedure counts once for each, in its own order
    stats = fold_stats(stats, {"n": 1, "steps": [[first, 1, 0.2], [second, 1, 0.8]]})
    assert sorted((s[0], s[1], round(s[2], 2)) for s in stats["steps"]) == [
        (first, 2, 0.45),
        (second, 2, 1.55),
    ]
    # a draft with one of them matches the best known one and leaves the other alone
    stats = fold_stats(stats, {"n": 1, "steps": [["Provide the colour of the top cable.", 1, 0.5]]})
    assert sorted(s[1] for s in stats["steps"]) == [2, 3]
