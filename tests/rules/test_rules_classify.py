"""Kinds, keys and flags of statements (skillstream.rules.classify)."""

from __future__ import annotations

import pytest

from skillstream.rules.classify import classify, head_overlap, make_key, np_head, subject_key


@pytest.mark.parametrize(
    ("statement", "kind", "head", "strong"),
    [
        ("I love hiking in the mountains", "preference", "hiking", True),
        ("I really prefer iced coffee", "preference", "coffee", True),
        ("I can't stand loud music", "preference", "music", True),
        ("My favorite color is blue", "preference", "color", True),
        ("Blue is my favourite color", "preference", "blue", True),
        ("I'm planning a trip to Paris next month", "plan", "trip paris", True),
        ("I'm going to visit my parents this weekend", "plan", "parent", True),
        ("I'd love to visit Japan someday", "plan", "japan", True),
        ("Gonna continue my edu and check out career options", "plan", "edu", True),
        ("I went to a LGBTQ support group yesterday", "event", "support group", False),
        ("We visited the museum last week", "event", "museum", False),
        ("Yesterday I finally finished the marathon", "event", "marathon", False),
        ("I think painting is a great outlet", "opinion", "painting outlet", False),
        ("In my opinion cats are better", "opinion", "cat better", False),
        ("I think I'll go to the party", "plan", "party", True),
        ("I work as a nurse", "fact", "job", True),
        ("I'm a teacher", "fact", "job", True),
        ("I live in Berlin", "fact", "home", True),
        ("I moved from Sweden to Berlin", "fact", "home", True),
        ("I'm from Sweden", "fact", "origin", True),
        ("My name is Caroline", "fact", "name", True),
        ("I'm 32 years old", "fact", "age", True),
        ("I'm vegetarian", "fact", "diet", True),
        ("I'm married", "fact", "relationship", True),
        ("My sister is a doctor", "fact", "sister", False),
        ("I have two dogs", "fact", "dog", False),
        ("The transgender stories were so inspiring", "fact", "transgender story", False),
    ],
)
def test_kind_and_head_en(statement: str, kind: str, head: str, strong: bool) -> None:
    c = classify(statement, "en")
    assert (c.kind, c.head, c.strong) == (kind, head, strong)
    assert not c.negated and not c.correction


@pytest.mark.parametrize(
    ("statement", "kind", "head", "strong"),
    [
        ("我喜欢喝咖啡", "preference", "咖啡", True),
        ("我最喜欢的颜色是蓝色", "preference", "颜色", True),
        ("我讨厌下雨天", "preference", "下雨天", True),
        ("我打算下个月去巴黎旅行", "plan", "巴黎旅行", True),
        ("明天我要去北京", "plan", "北京", True),
        ("我昨天去了超市", "event", "超市", False),
        ("我觉得这部电影很好看", "opinion", "这部电影", False),
        ("我在谷歌工作", "fact", "工作", True),
        ("我住在上海", "fact", "住址", True),
        ("我吃素", "fact", "饮食", True),
    ],
)
def test_kind_and_head_zh(statement: str, kind: str, head: str, strong: bool) -> None:
    c = classify(statement, "zh")
    assert (c.kind, c.head, c.strong) == (kind, head, strong)


@pytest.mark.parametrize(
    ("statement", "kind", "head"),
    [
        ("I cancelled my trip to Paris", "plan", "trip paris"),
        ("I'm not going to Paris anymore", "plan", "paris"),
        ("I'm not vegetarian anymore", "fact", "diet"),
        ("I no longer work at Google", "fact", "job"),
        ("I quit my job", "fact", "job"),
        ("I don't like coffee anymore", "preference", "coffee"),
        ("我取消了巴黎旅行", "plan", "巴黎旅行"),
        ("我不再吃素了", "fact", "饮食"),
        ("我不再喜欢喝咖啡了", "preference", "咖啡"),
    ],
)
def test_negations_carry_the_key_of_what_they_negate(statement: str, kind: str, head: str) -> None:
    c = classify(statement, "en")
    assert c.negated
    assert (c.kind, c.head) == (kind, head)


@pytest.mark.parametrize(
    ("statement", "head"),
    [
        ("Actually, the trip is on Friday", "trip"),
        ("Sorry, I meant the Tuesday class", "class"),
        ("We rescheduled the dinner to Monday", "dinner"),
        ("其实旅行改到周五了", "旅行"),
    ],
)
def test_corrections(statement: str, head: str) -> None:
    c = classify(statement, "en")
    assert c.correction and not c.negated
    assert c.head == head


def test_plain_statements_are_neither_negated_nor_corrections() -> None:
    for s in ("I went to the gym", "I'm not sure yet", "I actually loved it", "我去了北京"):
        c = classify(s, "en")
        assert not c.negated and not c.correction, s


def test_long_statements_do_not_get_strong_keys() -> None:
    c = classify(
        "I moved from Sweden four years ago and since then I've made so many friends here who "
        "support me.",
        "en",
    )
    assert c.head == "home" and not c.strong
    # A slot noun that is only mentioned is no slot statement.
    assert not classify("Losing my job was hard", "en").strong


def test_keys_and_tags() -> None:
    assert subject_key("Caroline") == "caroline"
    assert subject_key("the user") == "user"
    assert subject_key("Mary Ann") == "mary_ann"
    assert make_key("melanie", "plan", "trip paris") == "melanie|plan|trip paris"
    assert make_key("melanie", "fact", "") is None
    c = classify("I went to a pottery workshop with Melanie yesterday", "en", exclude=("melanie",))
    assert c.tags == ("pottery", "workshop")


def test_np_head_and_overlap() -> None:
    assert np_head("a trip to Paris next month", with_pp=True) == "trip paris"
    assert np_head("my new running shoes") == "shoe"
    assert np_head("the LGBTQ support group", n=2) == "support group"
    assert head_overlap("trip paris", "paris")
    assert not head_overlap("trip paris", "job")
    assert head_overlap("巴黎旅行", "巴黎")
    assert not head_overlap("咖啡", "工作")
