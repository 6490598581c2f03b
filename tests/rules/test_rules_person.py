"""Speaker attribution: first and second person into the third (skillstream.rules.person)."""

from __future__ import annotations

import pytest

from skillstream.rules.person import (
    add_subject,
    conjugate_3rd,
    said,
    third_person_en,
    third_person_zh,
)


@pytest.mark.parametrize(
    ("text", "addressee", "expected"),
    [
        ("I love hiking with my sister", None, "Caroline loves hiking with Caroline's sister"),
        ("I'm swamped with work.", None, "Caroline is swamped with work."),
        ("I've been there", None, "Caroline has been there"),
        ("I'd been there before", None, "Caroline had been there before"),
        ("I'd love to go", None, "Caroline would love to go"),
        ("I'll call you tomorrow", "Melanie", "Caroline will call Melanie tomorrow"),
        ("I really really love to paint", None, "Caroline really really loves to paint"),
        ("I do yoga and I go running", None, "Caroline does yoga and Caroline goes running"),
        ("I don't like coffee anymore", None, "Caroline doesn't like coffee anymore"),
        ("I no longer work at Google", None, "Caroline no longer works at Google"),
        ("I haven't seen it", None, "Caroline hasn't seen it"),
        ("I went there and I loved it", None, "Caroline went there and Caroline loved it"),
        ("I read that book last week", None, "Caroline read that book last week"),
        ("I study every day", None, "Caroline studies every day"),
        ("It made me feel accepted", None, "It made Caroline feel accepted"),
        ("We went camping with the kids", None, "Caroline and family went camping with the kids"),
        ("We're meeting friends", None, "Caroline and others are meeting friends"),
        ("Our dog is cute", None, "Caroline's dog is cute"),
        ("You'd be a great counselor!", "Melanie", "Melanie would be a great counselor!"),
        (
            "If you like painting, join us",
            "Melanie",
            "If Melanie likes painting, join Caroline and others",
        ),
        ("I'll send you your photos", "Melanie", "Caroline will send Melanie Melanie's photos"),
        ("You know, I gonna be fine", None, "Caroline going to be fine"),
        ("Thank you", None, "Thank you"),
        ("i.e. nothing", None, "i.e. nothing"),
    ],
)
def test_third_person_en(text: str, addressee: str | None, expected: str) -> None:
    assert third_person_en(text, "Caroline", addressee) == expected


def test_generic_user_name() -> None:
    assert third_person_en("I prefer window seats", "the user") == "the user prefers window seats"
    assert third_person_en("my flight is at 9", "the user") == "the user's flight is at 9"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("我们和孩子去了公园，我很开心，你呢", "小王和家人和孩子去了公园，小王很开心，小李呢"),
        ("我的猫叫咪咪", "小王的猫叫咪咪"),
        ("我们明天见", "小王等人明天见"),
        ("自我介绍一下", "自我介绍一下"),
    ],
)
def test_third_person_zh(text: str, expected: str) -> None:
    assert third_person_zh(text, "小王", "小李") == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Gonna continue my edu", "Mel is going to continue my edu"),
        ("Been painting a lot lately", "Mel has been painting a lot lately"),
        ("Love that painting!", "Mel loves that painting!"),
        ("Just got back from the beach", "Mel just got back from the beach"),
        ("Excited for this new chapter", "Mel is excited for this new chapter"),
        ("Need to buy shoes", "Mel needs to buy shoes"),
        ("Painting is fun", None),
        ("Going to the party?", None),
    ],
)
def test_add_subject(text: str, expected: str | None) -> None:
    assert add_subject(text, "Mel") == expected


def test_said() -> None:
    assert said("The stories were inspiring.", "Mel", "en") == (
        "Mel said the stories were inspiring."
    )
    assert said("Painting's a fun way to relax", "Mel", "en") == (
        "Mel said painting's a fun way to relax"
    )
    assert said("Caroline found a great group", "Mel", "en", ("caroline",)) == (
        "Mel said Caroline found a great group"
    )
    assert said("LGBTQ groups help", "Mel", "en") == "Mel said LGBTQ groups help"
    assert said("这家店很好吃", "小王", "zh") == "小王说：这家店很好吃"


@pytest.mark.parametrize(
    ("verb", "third"),
    [
        ("love", "loves"),
        ("go", "goes"),
        ("watch", "watches"),
        ("try", "tries"),
        ("play", "plays"),
        ("have", "has"),
        ("am", "is"),
        ("went", "went"),
        ("visited", "visited"),
        ("can", "can"),
        ("don't", "doesn't"),
        ("hiking", "hiking"),
    ],
)
def test_conjugate_3rd(verb: str, third: str) -> None:
    assert conjugate_3rd(verb) == third
