"""Relative dates rewritten against the message time (skillstream.rules.dates)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from skillstream.rules.dates import add_months, resolve_dates, shift_months

# Monday, 8 May 2023, 13:56 UTC: the date of the first LoCoMo session.
REF = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


EN_CASES = [
    (
        "I went to a support group yesterday.",
        "I went to a support group on 7 May 2023.",
        day(2023, 5, 7),
    ),
    ("Yesterday I went there.", "On 7 May 2023 I went there.", day(2023, 5, 7)),
    ("I'm busy today", "I'm busy on 8 May 2023", day(2023, 5, 8)),
    ("We meet tomorrow", "We meet on 9 May 2023", day(2023, 5, 9)),
    ("Let's eat out tonight", "Let's eat out on the night of 8 May 2023", day(2023, 5, 8)),
    ("I slept badly last night", "I slept badly on the night of 7 May 2023", day(2023, 5, 7)),
    ("I ran this morning", "I ran on the morning of 8 May 2023", day(2023, 5, 8)),
    ("She called yesterday evening", "She called on the evening of 7 May 2023", day(2023, 5, 7)),
    ("tomorrow morning", "on the morning of 9 May 2023", day(2023, 5, 9)),
    ("the day before yesterday", "on 6 May 2023", day(2023, 5, 6)),
    ("the day after tomorrow", "on 10 May 2023", day(2023, 5, 10)),
    ("I did it last week", "I did it in the week before 8 May 2023", day(2023, 5, 1)),
    ("We fly next week", "We fly in the week after 8 May 2023", day(2023, 5, 15)),
    ("It is busy this week", "It is busy in the week of 8 May 2023", day(2023, 5, 8)),
    ("We go camping next month", "We go camping in June 2023", day(2023, 6, 1)),
    ("I moved last month", "I moved in April 2023", day(2023, 4, 1)),
    ("It ends this month", "It ends in May 2023", day(2023, 5, 1)),
    ("I painted that last year!", "I painted that in 2022!", day(2022, 1, 1)),
    ("I'll retire next year", "I'll retire in 2024", day(2024, 1, 1)),
    ("I started this year", "I started in 2023", day(2023, 1, 1)),
    ("I ran a race last Saturday", "I ran a race on Saturday, 6 May 2023", day(2023, 5, 6)),
    ("I'll call you next Friday", "I'll call you on Friday, 12 May 2023", day(2023, 5, 12)),
    ("this Friday we go", "on Friday, 12 May 2023 we go", day(2023, 5, 12)),
    ("I ran a race on Sunday", "I ran a race on Sunday, 7 May 2023", day(2023, 5, 7)),
    ("I will go on Sunday", "I will go on Sunday, 14 May 2023", day(2023, 5, 14)),
    ("I went there Friday", "I went there on Friday, 5 May 2023", day(2023, 5, 5)),
    ("We hiked last weekend", "We hiked on the weekend before 8 May 2023", day(2023, 5, 6)),
    ("We hike this weekend", "We hike on the weekend of 13 May 2023", day(2023, 5, 13)),
    ("We hike next weekend", "We hike on the weekend after 8 May 2023", day(2023, 5, 13)),
    ("I saw it 3 days ago", "I saw it on 5 May 2023", day(2023, 5, 5)),
    ("I saw it two weeks ago", "I saw it around 24 April 2023", day(2023, 4, 24)),
    ("I quit a month ago", "I quit in April 2023", day(2023, 4, 1)),
    ("I moved five years ago", "I moved in 2018", day(2018, 1, 1)),
    ("I met her a few days ago", "I met her a few days before 8 May 2023", day(2023, 5, 5)),
    ("a couple of days ago", "on 6 May 2023", day(2023, 5, 6)),
    ("I'll know in 3 days", "I'll know on 11 May 2023", day(2023, 5, 11)),
    ("I'll know in two weeks", "I'll know around 22 May 2023", day(2023, 5, 22)),
    ("We marry in 2 years", "We marry in 2025", day(2025, 1, 1)),
    ("I saw her the other day", "I saw her a few days before 8 May 2023", day(2023, 5, 5)),
    ("It has rained since yesterday", "It has rained since 7 May 2023", day(2023, 5, 7)),
    ("Last night was fun", "The night of 7 May 2023 was fun", day(2023, 5, 7)),
    ("yesterday and last week", "on 7 May 2023 and in the week before 8 May 2023", day(2023, 5, 7)),
]


@pytest.mark.parametrize(("text", "expected", "when"), EN_CASES)
def test_english_relative_dates(text: str, expected: str, when: datetime) -> None:
    assert resolve_dates(text, REF, "en") == (expected, when)


ZH_CASES = [
    ("我昨天去了超市", "我2023年5月7日去了超市", day(2023, 5, 7)),
    ("今天很累", "2023年5月8日很累", day(2023, 5, 8)),
    ("明天见", "2023年5月9日见", day(2023, 5, 9)),
    ("前天下雨", "2023年5月6日下雨", day(2023, 5, 6)),
    ("后天出发", "2023年5月10日出发", day(2023, 5, 10)),
    ("今晚吃火锅", "2023年5月8日晚上吃火锅", day(2023, 5, 8)),
    ("上周我很忙", "2023年5月8日的前一周我很忙", day(2023, 5, 1)),
    ("上个星期很忙", "2023年5月8日的前一周很忙", day(2023, 5, 1)),
    ("下周开会", "2023年5月8日的后一周开会", day(2023, 5, 15)),
    ("上周五我们去看电影", "2023年5月5日我们去看电影", day(2023, 5, 5)),
    ("下周三开会", "2023年5月17日开会", day(2023, 5, 17)),
    ("上周末去爬山", "2023年5月6日至7日的周末去爬山", day(2023, 5, 6)),
    ("上个月搬家了", "2023年4月搬家了", day(2023, 4, 1)),
    ("下个月去巴黎", "2023年6月去巴黎", day(2023, 6, 1)),
    ("去年我搬家了", "2022年我搬家了", day(2022, 1, 1)),
    ("今年夏天", "2023年夏天（2023年6月至8月）", day(2023, 6, 1)),
    ("明年毕业", "2024年毕业", day(2024, 1, 1)),
    ("三天前", "2023年5月5日", day(2023, 5, 5)),
    ("两个星期前", "约2023年4月24日", day(2023, 4, 24)),
    ("三个月前", "2023年2月", day(2023, 2, 1)),
    ("十二天后", "2023年5月20日", day(2023, 5, 20)),
    ("几天前", "2023年5月8日的几天前", day(2023, 5, 5)),
]


@pytest.mark.parametrize(("text", "expected", "when"), ZH_CASES)
def test_chinese_relative_dates(text: str, expected: str, when: datetime) -> None:
    assert resolve_dates(text, REF, "zh") == (expected, when)


def test_text_without_relative_dates_is_unchanged() -> None:
    assert resolve_dates("I love hiking in the mountains.", REF, "en") == (
        "I love hiking in the mountains.",
        None,
    )
    habit = "I go swimming on Mondays"
    assert resolve_dates(habit, REF, "en") == (habit, None)
    assert resolve_dates("我周末喜欢爬山", REF, "zh") == ("我周末喜欢爬山", None)
    assert resolve_dates("每周三开会", REF, "zh") == ("每周三开会", None)


def test_event_time_keeps_the_reference_time_zone() -> None:
    tz = timezone(timedelta(hours=8))
    ref = datetime(2023, 5, 8, 23, 30, tzinfo=tz)
    got = resolve_dates("yesterday", ref, "en")
    assert got == ("on 7 May 2023", datetime(2023, 5, 7, tzinfo=tz))


def test_month_arithmetic_clamps_and_wraps() -> None:
    assert shift_months(datetime(2023, 3, 31).date(), -1) == datetime(2023, 2, 28).date()
    assert add_months(datetime(2023, 1, 15).date(), -1) == datetime(2022, 12, 1).date()
    jan = datetime(2024, 1, 10, tzinfo=UTC)
    assert resolve_dates("last month", jan, "en") == ("in December 2023", day(2023, 12, 1))
    assert resolve_dates("上个月", jan, "zh") == ("2023年12月", day(2023, 12, 1))


SEASON_REF = datetime(2025, 3, 14, 9, 0, tzinfo=UTC)
SEASON_CASES = [
    (
        "I moved to Lisbon last spring.",
        "I moved to Lisbon in spring 2024 (March to May 2024).",
        day(2024, 3, 1),
    ),
    (
        "We are going to Japan this summer.",
        "We are going to Japan in summer 2025 (June to August 2025).",
        day(2025, 6, 1),
    ),
    (
        "I went skiing last winter.",
        "I went skiing in winter 2024/25 (December 2024 to February 2025).",
        day(2024, 12, 1),
    ),
    (
        "We met in the autumn.",
        "We met in autumn 2024 (September to November 2024).",
        day(2024, 9, 1),
    ),
    (
        "Next fall I will start college.",
        "In autumn 2025 (September to November 2025) I will start college.",
        day(2025, 9, 1),
    ),
    (
        "I will visit in the winter.",
        "I will visit in winter 2025/26 (December 2025 to February 2026).",
        day(2025, 12, 1),
    ),
    ("我去年春天搬到了上海。", "我2024年春天（2024年3月至5月）搬到了上海。", day(2024, 3, 1)),
    ("我们今年秋天去北京。", "我们2025年秋天（2025年9月至11月）去北京。", day(2025, 9, 1)),
    ("明年冬季去滑雪", "2026年冬天（2026年12月至2027年2月）去滑雪", day(2026, 12, 1)),
]


@pytest.mark.parametrize(("text", "expected", "when"), SEASON_CASES)
def test_seasons_resolve_to_their_months(text: str, expected: str, when: datetime) -> None:
    lang = "zh" if any("\u4e00" <= c <= "\u9fff" for c in text) else "en"
    assert resolve_dates(text, SEASON_REF, lang) == (expected, when)


def test_a_season_said_as_a_habit_stays_and_the_south_turns_the_year() -> None:
    habit = "I hike in the summer."
    assert resolve_dates(habit, SEASON_REF, "en") == (habit, None)
    got = resolve_dates("We are going to Japan this summer.", SEASON_REF, "en", "south")
    assert got == (
        "We are going to Japan in summer 2025/26 (December 2025 to February 2026).",
        day(2025, 12, 1),
    )
    # in the south it is autumn on 14 March: "this autumn" is the one around that day
    assert resolve_dates("this autumn", SEASON_REF, "en", "south") == (
        "in autumn 2025 (March to May 2025)",
        day(2025, 3, 1),
    )
    assert resolve_dates("去年夏天", SEASON_REF, "zh", "south") == (
        "2024年夏天（2024年12月至2025年2月）",
        day(2024, 12, 1),
    )
