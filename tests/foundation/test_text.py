"""Sentence splitting, questions and small talk (skillstream.text)."""

from __future__ import annotations

import pytest

from skillstream.text import (
    is_question,
    is_small_talk,
    leading_answer,
    split_sentences,
    strip_fillers,
)

NAMES = ("caroline", "melanie")


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        (
            "Hey Caroline! Good to see you! I'm swamped with the kids & work. What's up with you?",
            [
                "Hey Caroline!",
                "Good to see you!",
                "I'm swamped with the kids & work.",
                "What's up with you?",
            ],
        ),
        (
            "I met Dr. Smith at 3 p.m. today. It was great... really great! Then e.g. we left.",
            [
                "I met Dr. Smith at 3 p.m. today.",
                "It was great... really great!",
                "Then e.g. we left.",
            ],
        ),
        ("Version 3.5 is out. Yes!", ["Version 3.5 is out.", "Yes!"]),
        ("I love J. K. Rowling. She rocks.", ["I love J. K. Rowling.", "She rocks."]),
        ('He said "wow." Then he left.', ['He said "wow."', "Then he left."]),
        ("first line\nsecond line", ["first line", "second line"]),
        (
            "我昨天去了超市。买了很多东西！你呢？好的",
            ["我昨天去了超市。", "买了很多东西！", "你呢？", "好的"],
        ),
        ("我喜欢咖啡!你呢?", ["我喜欢咖啡!", "你呢?"]),
        ("", []),
    ],
)
def test_split_sentences(text: str, sentences: list[str]) -> None:
    assert split_sentences(text) == sentences


@pytest.mark.parametrize(
    ("sentence", "question"),
    [
        ("How have you been?", True),
        ("Did you hear any inspiring stories? 😊", True),
        ("你去过巴黎吗", True),
        ("你呢？", True),
        ("I went there yesterday.", False),
        ("我去过巴黎。", False),
    ],
)
def test_is_question(sentence: str, question: bool) -> None:
    assert is_question(sentence) is question


@pytest.mark.parametrize(
    "sentence",
    [
        "Hey Mel!",
        "Good to see you!",
        "Thanks, Melanie!",
        "That's really sweet.",
        "haha ok",
        "Totally agree, Mel.",
        "Talk to you soon!",
        "Love it!",
        "Sounds good, see you then.",
        "Yes",
        "That's amazing news!",
        "Take a look at this.",
        "Long time no see!",
        "You too!",
        "ok 👍",
        "你好！",
        "哈哈，太好了",
        "谢谢你！",
        "好的，没问题",
        "",
    ],
)
def test_small_talk(sentence: str) -> None:
    assert is_small_talk(sentence, NAMES)


@pytest.mark.parametrize(
    "sentence",
    [
        "I'm vegetarian.",
        "Wow, love that painting!",
        "The transgender stories were so inspiring!",
        "I went to a LGBTQ support group yesterday and it was so powerful.",
        "Congrats on the new job!",
        "我去了北京",
        "我喜欢喝咖啡",
    ],
)
def test_not_small_talk(sentence: str) -> None:
    assert not is_small_talk(sentence, NAMES)


@pytest.mark.parametrize(
    ("sentence", "clean"),
    [
        ("Wow, love that painting!", "love that painting!"),
        ("Oh well, I went there yesterday lol", "I went there yesterday"),
        ("Yep, it was amazing", "it was amazing"),
        ("That's cool, Caroline!", "That's cool!"),
        ("Hey Caroline, I got the job!", "I got the job!"),
        ("So cool you found such a helpful group.", "you found such a helpful group."),
        ("Great news: I got the job", "Great news: I got the job"),
        ("哈哈，我去了北京", "我去了北京"),
    ],
)
def test_strip_fillers(sentence: str, clean: str) -> None:
    assert strip_fillers(sentence, NAMES) == clean


@pytest.mark.parametrize(
    ("sentence", "answer"),
    [
        ("Yes, last week", "yes"),
        ("Yep, it was amazing", "yes"),
        ("No, not yet", "no"),
        ("Nope.", "no"),
        ("Nothing much", None),
        ("I went there", None),
        ("是的，上周去的", "yes"),
        ("没有，还没去", "no"),
    ],
)
def test_leading_answer(sentence: str, answer: str | None) -> None:
    assert leading_answer(sentence) == answer
