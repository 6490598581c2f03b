"""Relative time expressions rewritten into absolute ones (English and Chinese).

``resolve_dates("I went there yesterday", ref, "en")`` returns ``("I went there on 7 May 2023",
datetime(2023, 5, 7, tzinfo=UTC))`` when ``ref`` is 8 May 2023. The reference is the message's own
time, so a backfill of old logs resolves dates the way a live run would have.

Conventions (each an approximation, written down so callers know what they get):

* Days resolve to a calendar date (``on 7 May 2023`` / ``2023年5月7日``).
* Weeks, weekends, months and years that cannot be pinned to one day are phrased relative to the
  reference date or as a month/year: ``last week`` -> ``in the week before 8 May 2023``,
  ``next month`` -> ``in June 2023``, ``last year`` -> ``in 2022``.
* English weekdays: ``last Friday`` is the most recent Friday strictly before the reference day,
  ``next Friday`` the first one strictly after it, ``this Friday`` the Friday of the reference's
  (Monday-based) week, moved a week on when that day is already past and the sentence is not in the
  past tense. A bare ``Friday`` / ``on Friday`` looks at the tense of the text: past tense gives the
  most recent Friday before the reference day, anything else the next one. Tense is guessed from a
  handful of past-tense verbs; it is a heuristic.
* Chinese weekdays follow calendar weeks: ``上周五`` is the Friday of the previous Monday-based
  week, ``下周三`` the Wednesday of the next one, a bare ``周三`` the Wednesday of the reference's
  week.
* ``N weeks ago`` / ``in N weeks`` give ``around <date>``; ``a few``/``several`` count as three for
  the returned event time and are kept vague in the text.
* Seasons are the meteorological ones, three whole months each (setting ``hemisphere``; in the
  north spring is March to May, summer June to August, autumn September to November, winter
  December to February), written with their months: ``last spring`` said on 14 March 2025 ->
  ``in spring 2024 (March to May 2024)``, ``去年冬天`` -> ``2024年冬天（2024年12月至2025年2月）``.
  ``last``/``past`` is the latest one that ended before the reference day, ``next``/``coming``
  the first that starts after it, ``this`` the one around it (else, by tense, the last or the
  next). A bare ``in the summer`` is resolved only in a past-tense sentence (the latest summer
  begun by then) or a future one (the current or next): "I hike in the summer" is a habit and
  stays as it is. Chinese seasons are resolved when a year names them (``去年夏天``, ``今年秋天``):
  the season that begins in that year.
* The returned event time is the start (00:00, in ``ref``'s time zone) of the first resolved
  expression: the day, the Monday-based week's start shifted, the first of the month, or 1 January.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from datetime import date, datetime, timedelta

from skillstream.text import CJK

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

_NUM_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "fifteen": 15,
    "twenty": 20,
    "thirty": 30,
}
_VAGUE = {"a few": 3, "few": 3, "several": 3, "a couple of": 2, "a couple": 2, "couple of": 2}
FEW = 3

_PREPS = {
    "since",
    "until",
    "till",
    "before",
    "after",
    "by",
    "from",
    "of",
    "on",
    "in",
    "around",
    "to",
    "through",
    "during",
    "for",
    "about",
}

# A small past-tense detector, used only to pick the direction of a bare weekday.
_PAST = re.compile(
    r"\b(?:went|was|were|did|had|got|made|took|saw|came|met|found|gave|told|felt|bought|left|ran|"
    r"spent|sent|brought|thought|wrote|ate|drank|won|lost|began|kept|heard|held|paid|sat|slept|"
    r"spoke|flew|drove|rode|swam|sang|threw|wore|became|broke|chose|knew|forgot|grew|taught|"
    r"caught|built|[a-z]{3,}ed)\b",
    re.IGNORECASE,
)
_FUTURE = re.compile(
    r"\b(?:will|shall|gonna|going to|plan|planning|planned to|hope to|want to|intend|'ll|next|"
    r"tomorrow|coming|upcoming|about to)\b|'ll\b",
    re.IGNORECASE,
)

Resolved = tuple[str, str, date]
"""(text that replaces the expression, its English preposition or "", the event day)."""


def fmt_day(d: date) -> str:
    return f"{d.day} {MONTHS[d.month - 1]} {d.year}"


def fmt_month(year: int, month: int) -> str:
    return f"{MONTHS[month - 1]} {year}"


def fmt_day_zh(d: date) -> str:
    return f"{d.year}年{d.month}月{d.day}日"


def add_months(d: date, months: int) -> date:
    """The first day of the month ``months`` after ``d``'s month (negative goes back)."""
    idx = d.year * 12 + (d.month - 1) + months
    return date(idx // 12, idx % 12 + 1, 1)


def shift_months(d: date, months: int) -> date:
    """``d`` moved by ``months`` calendar months, clamping the day to the month's length."""
    first = add_months(d, months)
    last = calendar.monthrange(first.year, first.month)[1]
    return first.replace(day=min(d.day, last))


def _count(word: str) -> int:
    w = word.lower().strip()
    if w.isdigit():
        return int(w)
    return _VAGUE.get(w) or _NUM_WORDS.get(w, 1)


def _is_vague(word: str) -> bool:
    return word.lower().strip() in _VAGUE and "couple" not in word.lower()


# --------------------------------------------------------------------------------------- English

SEASONS = ("spring", "summer", "autumn", "winter")

HEMISPHERES = ("north", "south")

_SEASON_START = {"north": (3, 6, 9, 12), "south": (9, 12, 3, 6)}
"""First month of each of :data:`SEASONS`, by hemisphere."""


def season_range(season: str, year: int, hemisphere: str = "north") -> tuple[date, date]:
    """First and last day of ``season`` that begins in ``year`` (a December winter ends in
    February of the next year)."""
    month = _SEASON_START[hemisphere][SEASONS.index(season)]
    first = date(year, month, 1)
    last_month = add_months(first, 2)
    return first, date(
        last_month.year,
        last_month.month,
        calendar.monthrange(last_month.year, last_month.month)[1],
    )


def _seasons_around(season: str, ref: date, hemisphere: str) -> list[tuple[date, date]]:
    """The occurrences of ``season`` from two years before ``ref`` to two after, in order."""
    return [season_range(season, y, hemisphere) for y in range(ref.year - 2, ref.year + 3)]


def pick_season(season: str, rel: str, ref: date, hemisphere: str, past: bool) -> tuple[date, date]:
    """The occurrence of ``season`` a relative word means on ``ref`` (see the module's
    conventions; ``rel`` "" is a bare season, resolved by ``past``)."""
    spans = _seasons_around(season, ref, hemisphere)
    ended = [s for s in spans if s[1] < ref]
    begun = [s for s in spans if s[0] <= ref]
    upcoming = [s for s in spans if s[0] > ref]
    around = [s for s in spans if s[0] <= ref <= s[1]]
    if rel in ("last", "past", "this past", "previous"):
        return ended[-1]
    if rel in ("next", "coming", "this coming"):
        return upcoming[0]
    if rel == "this" and around:
        return around[0]
    if past:
        return begun[-1] if rel == "" else ended[-1]
    return around[0] if around else upcoming[0]


def fmt_season(season: str, first: date, last: date) -> str:
    """``spring 2024 (March to May 2024)``; a winter across two years ``winter 2024/25
    (December 2024 to February 2025)``."""
    if first.year == last.year:
        months = f"{MONTHS[first.month - 1]} to {fmt_month(last.year, last.month)}"
        return f"{season} {first.year} ({months})"
    return (
        f"{season} {first.year}/{str(last.year)[-2:]} ({fmt_month(first.year, first.month)} to "
        f"{fmt_month(last.year, last.month)})"
    )


def fmt_season_zh(season: str, first: date, last: date) -> str:
    name = {"spring": "春天", "summer": "夏天", "autumn": "秋天", "winter": "冬天"}[season]
    if first.year == last.year:
        return f"{first.year}年{name}（{first.year}年{first.month}月至{last.month}月）"
    return f"{first.year}年{name}（{first.year}年{first.month}月至{last.year}年{last.month}月）"


_NUM = (
    r"(?:\d{1,3}|a few|a couple of|a couple|couple of|few|several|an?|one|two|three|four|five|"
    r"six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty)"
)
_WD = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_PART = r"(?:morning|afternoon|evening|night)"

_EN_PATTERNS: list[tuple[str, str]] = [
    ("dby", r"the day before yesterday"),
    ("dat", r"the day after tomorrow"),
    ("lastnight", r"last night"),
    ("ypart", rf"yesterday (?P<ypart>{_PART})"),
    ("yesterday", r"yesterday(?!['’]s)"),
    ("tpart", rf"tomorrow (?P<tpart>{_PART})"),
    ("tomorrow", r"tomorrow(?!['’]s)"),
    ("tonight", r"tonight"),
    ("thispart", r"this (?P<thispart>morning|afternoon|evening)"),
    ("today", r"today(?!['’]s)"),
    ("otherday", r"the other day"),
    ("weekend", r"(?P<wkend>this past|this coming|past|last|next|this|coming) weekend"),
    (
        "weekday",
        rf"(?:(?P<wdrel>this past|this coming|last|next|this|coming|on)\s+)?(?P<wd>{_WD})(?!s)",
    ),
    (
        "season",
        r"(?:(?P<searel>this past|this coming|last|next|this|previous|past|coming)\s+"
        r"|(?P<seabare>in (?:the )?))(?P<season>spring|summer|autumn|fall|winter)(?!\w)",
    ),
    ("week", r"(?P<weekrel>this past|last|next|this|previous|coming) week(?!end)"),
    ("month", r"(?P<monthrel>last|next|this|previous|coming) month"),
    ("year", r"(?P<yearrel>last|next|this|previous|coming) year"),
    ("ago", rf"(?P<agon>{_NUM}) (?P<agou>day|week|month|year)s? ago"),
    ("inn", rf"in (?P<innn>{_NUM}) (?P<innu>day|week|month|year)s?(?! ago)"),
]
_EN = re.compile("|".join(rf"(?P<k_{name}>\b{pat}\b)" for name, pat in _EN_PATTERNS), re.IGNORECASE)


def _weekday_index(name: str) -> int:
    return WEEKDAYS.index(name.capitalize())


def _en_resolve(
    m: re.Match[str], ref: date, past_tense: Callable[[], bool], hemisphere: str = "north"
) -> Resolved | None:
    kind = (m.lastgroup or "")[2:]
    g = m.group
    if kind == "season":
        season = g("season").lower().replace("fall", "autumn")
        rel = (g("searel") or "").lower()
        past = past_tense()
        if not rel and not past and not _FUTURE.search(m.string):
            return None  # "I hike in the summer": a habit, not a time
        first, last = pick_season(season, rel, ref, hemisphere, past)
        return fmt_season(season, first, last), "in", first
    if kind == "dby":
        d = ref - timedelta(days=2)
        return fmt_day(d), "on", d
    if kind == "dat":
        d = ref + timedelta(days=2)
        return fmt_day(d), "on", d
    if kind == "lastnight":
        d = ref - timedelta(days=1)
        return f"the night of {fmt_day(d)}", "on", d
    if kind == "ypart":
        d = ref - timedelta(days=1)
        return f"the {g('ypart').lower()} of {fmt_day(d)}", "on", d
    if kind == "yesterday":
        d = ref - timedelta(days=1)
        return fmt_day(d), "on", d
    if kind == "tpart":
        d = ref + timedelta(days=1)
        return f"the {g('tpart').lower()} of {fmt_day(d)}", "on", d
    if kind == "tomorrow":
        d = ref + timedelta(days=1)
        return fmt_day(d), "on", d
    if kind == "tonight":
        return f"the night of {fmt_day(ref)}", "on", ref
    if kind == "thispart":
        return f"the {g('thispart').lower()} of {fmt_day(ref)}", "on", ref
    if kind == "today":
        return fmt_day(ref), "on", ref
    if kind == "otherday":
        return f"a few days before {fmt_day(ref)}", "", ref - timedelta(days=FEW)
    if kind == "weekend":
        rel = g("wkend").lower()
        # The Saturday of this (or the current) weekend.
        sat = ref + timedelta(days=(5 - ref.weekday()) % 7)
        if ref.weekday() == 6:
            sat = ref - timedelta(days=1)
        if rel in ("last", "past", "this past"):
            prev = sat - timedelta(days=7)
            return f"the weekend before {fmt_day(ref)}", "on", prev
        if rel == "next":
            nxt = sat + timedelta(days=7) if ref.weekday() >= 5 else sat
            return f"the weekend after {fmt_day(ref)}", "on", nxt
        return f"the weekend of {fmt_day(sat)}", "on", sat
    if kind == "weekday":
        rel = (g("wdrel") or "").lower()
        wd = _weekday_index(g("wd"))
        name = WEEKDAYS[wd]
        past = past_tense()
        if rel in ("last", "this past"):
            back = (ref.weekday() - wd) % 7 or 7
            d = ref - timedelta(days=back)
        elif rel in ("next", "this coming", "coming"):
            d = ref + timedelta(days=(wd - ref.weekday()) % 7 or 7)
        elif rel == "this":
            d = ref + timedelta(days=wd - ref.weekday())
            if d < ref and not past:
                d += timedelta(days=7)
        else:  # bare or "on": tense decides
            if past:
                d = ref - timedelta(days=(ref.weekday() - wd) % 7 or 7)
            else:
                d = ref + timedelta(days=(wd - ref.weekday()) % 7 or 7)
        return f"{name}, {fmt_day(d)}", "on", d
    if kind == "week":
        rel = g("weekrel").lower()
        monday = ref - timedelta(days=ref.weekday())
        if rel in ("last", "this past", "previous"):
            return f"the week before {fmt_day(ref)}", "in", monday - timedelta(days=7)
        if rel in ("next", "coming"):
            return f"the week after {fmt_day(ref)}", "in", monday + timedelta(days=7)
        return f"the week of {fmt_day(ref)}", "in", monday
    if kind == "month":
        rel = g("monthrel").lower()
        step = -1 if rel in ("last", "previous") else 1 if rel in ("next", "coming") else 0
        first = add_months(ref, step)
        return fmt_month(first.year, first.month), "in", first
    if kind == "year":
        rel = g("yearrel").lower()
        step = -1 if rel in ("last", "previous") else 1 if rel in ("next", "coming") else 0
        return str(ref.year + step), "in", date(ref.year + step, 1, 1)
    if kind in ("ago", "inn"):
        num = g("agon") if kind == "ago" else g("innn")
        unit = (g("agou") if kind == "ago" else g("innu")).lower()
        sign = -1 if kind == "ago" else 1
        n = _count(num)
        if _is_vague(num):
            d = _shift(ref, unit, sign * n)
            word = "before" if sign < 0 else "after"
            return f"{num.lower()} {unit}s {word} {fmt_day(ref)}", "", d
        d = _shift(ref, unit, sign * n)
        if unit == "day":
            return fmt_day(d), "on", d
        if unit == "week":
            return f"around {fmt_day(d)}", "", d
        if unit == "month":
            return fmt_month(d.year, d.month), "in", d.replace(day=1)
        return str(d.year), "in", date(d.year, 1, 1)
    return None


def _shift(ref: date, unit: str, n: int) -> date:
    if unit == "day":
        return ref + timedelta(days=n)
    if unit == "week":
        return ref + timedelta(weeks=n)
    if unit == "month":
        return shift_months(ref, n)
    try:
        return ref.replace(year=ref.year + n)
    except ValueError:  # 29 February
        return ref.replace(year=ref.year + n, day=28)


_SUBJECT_NEXT = re.compile(r"\s+(?:was|is|were|will|has|had|seems|seemed)\b", re.IGNORECASE)


def _preceded_by_prep(text: str, start: int) -> bool:
    before = text[max(0, start - 12) : start].rstrip().lower()
    word = re.findall(r"[a-z]+$", before)
    return bool(word) and word[0] in _PREPS


_EN_TRIGGERS = (
    "spring",
    "summer",
    "autumn",
    "fall",
    "winter",
    "day",
    "tonight",
    "tomorrow",
    "ago",
    "week",
    "month",
    "year",
    "morning",
    "afternoon",
    "evening",
    "night",
)
_ZH_TRIGGERS = re.compile(r"[天日晚早周星礼拜月年季]")


def _sentence_start(text: str, start: int) -> bool:
    """Whether ``start`` begins a sentence: only space lies between it and the text's start or
    an end mark (read back over the space alone, not the whole text before it)."""
    i = start
    while i > 0 and text[i - 1].isspace():
        i -= 1
    return i == 0 or text[i - 1] in ".!?"


def _resolve_en(text: str, ref: date, hemisphere: str = "north") -> tuple[str, date | None]:
    low = text.lower()
    if not any(t in low for t in _EN_TRIGGERS):
        return text, None
    first: list[date] = []
    tense: list[bool] = []

    def past_tense() -> bool:
        # read once per text: a text of many weekdays must not be searched once per weekday
        if not tense:
            tense.append(bool(_PAST.search(text)) and not _FUTURE.search(text))
        return tense[0]

    def sub(m: re.Match[str]) -> str:
        got = _en_resolve(m, ref, past_tense, hemisphere)
        if got is None:
            return m.group(0)
        core, prep, d = got
        if not first:
            first.append(d)
        start = m.start()
        # "in 3 days" carries its own "in"; "on Friday" its own "on": both are replaced whole.
        if prep and not _preceded_by_prep(text, start) and not _SUBJECT_NEXT.match(text, m.end()):
            out = f"{prep} {core}"
        else:
            out = core
        if m.group(0)[:1].isupper() and _sentence_start(text, start):
            out = out[:1].upper() + out[1:]
        return out

    out = _EN.sub(sub, text)
    return out, (first[0] if first else None)


# --------------------------------------------------------------------------------------- Chinese

_ZH_DIGITS = {
    "零": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_ZH_WD = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6, "末": 7}
_ZH_NUM = r"(?:\d{1,3}|[零一二两三四五六七八九十]{1,3}|几)"
_WEEKWORD = r"(?:周|星期|礼拜)"

_ZH_PATTERNS: list[tuple[str, str]] = [
    ("zday", r"(?P<zday>大前天|前天|昨天|昨日|今天|今日|明天|明日|大后天|后天)"),
    ("znight", r"(?P<znight>昨晚|今晚|明晚|今早|昨早)"),
    # 周末 only with 上/下/这/本 in front: a bare 周末 is usually a habit ("我周末喜欢爬山").
    (
        "zwd",
        rf"(?P<zwdrel>上上|上|下下|下|这|本)?个?{_WEEKWORD}(?P<zwd>[一二三四五六日天]|"
        r"(?<=[上下这本个]周)末|(?<=[上下这本个]星期)末|(?<=[上下这本个]礼拜)末)",
    ),
    ("zweek", rf"(?P<zweekrel>上上|上|下下|下|这|本)个?{_WEEKWORD}"),
    ("zmonth", r"(?P<zmonthrel>上上|上|下下|下|这|本)个?月"),
    ("zseason", r"(?P<zseay>前年|去年|今年|明年|后年)的?(?P<zsea>[春夏秋冬])(?:天|季)"),
    ("zyear", r"(?P<zyear>前年|去年|今年|明年|后年)"),
    ("zago", rf"(?P<zagon>{_ZH_NUM})(?P<zagou>天|个?星期|个?礼拜|周|个月|年)(?:以|之)?前"),
    ("zin", rf"(?P<zinn>{_ZH_NUM})(?P<zinu>天|个?星期|个?礼拜|周|个月|年)(?:以|之)?后"),
]
_ZH = re.compile("|".join(rf"(?P<k_{n}>{p})" for n, p in _ZH_PATTERNS))


def _zh_count(s: str) -> int:
    if s.isdigit():
        return int(s)
    if s == "几":
        return FEW
    if "十" in s:
        tens, _, ones = s.partition("十")
        high = _ZH_DIGITS.get(tens, 1) if tens else 1
        return high * 10 + (_ZH_DIGITS.get(ones, 0) if ones else 0)
    return _ZH_DIGITS.get(s, 1)


def _zh_weekend(sat: date) -> str:
    sun = sat + timedelta(days=1)
    if sun.month == sat.month:
        return f"{fmt_day_zh(sat)}至{sun.day}日的周末"
    if sun.year == sat.year:
        return f"{fmt_day_zh(sat)}至{sun.month}月{sun.day}日的周末"
    return f"{fmt_day_zh(sat)}至{fmt_day_zh(sun)}的周末"


_ZH_REL = {"上上": -2, "上": -1, "下下": 2, "下": 1, "这": 0, "本": 0, "": 0}


_ZH_YEARS = {"前年": -2, "去年": -1, "今年": 0, "明年": 1, "后年": 2}
_ZH_SEASONS = {"春": "spring", "夏": "summer", "秋": "autumn", "冬": "winter"}


def _zh_resolve(m: re.Match[str], ref: date, hemisphere: str = "north") -> tuple[str, date] | None:
    kind = (m.lastgroup or "")[2:]
    g = m.group
    if kind == "zseason":
        season = _ZH_SEASONS[g("zsea")]
        first, last = season_range(season, ref.year + _ZH_YEARS[g("zseay")], hemisphere)
        return fmt_season_zh(season, first, last), first
    if kind == "zday":
        off = {
            "大前天": -3,
            "前天": -2,
            "昨天": -1,
            "昨日": -1,
            "今天": 0,
            "今日": 0,
            "明天": 1,
            "明日": 1,
            "后天": 2,
            "大后天": 3,
        }[g("zday")]
        d = ref + timedelta(days=off)
        return fmt_day_zh(d), d
    if kind == "znight":
        w = g("znight")
        off = {"昨": -1, "今": 0, "明": 1}[w[0]]
        d = ref + timedelta(days=off)
        return fmt_day_zh(d) + ("晚上" if w[1] == "晚" else "早上"), d
    if kind == "zwd":
        start = m.start()
        if start > 0 and m.string[start - 1] == "每":
            return None
        rel = _ZH_REL[g("zwdrel") or ""]
        monday = ref - timedelta(days=ref.weekday()) + timedelta(weeks=rel)
        idx = _ZH_WD[g("zwd")]
        if idx == 7:
            return _zh_weekend(monday + timedelta(days=5)), monday + timedelta(days=5)
        d = monday + timedelta(days=idx)
        return fmt_day_zh(d), d
    if kind == "zweek":
        rel = _ZH_REL[g("zweekrel")]
        monday = ref - timedelta(days=ref.weekday()) + timedelta(weeks=rel)
        if rel == 0:
            return f"{fmt_day_zh(ref)}所在的那一周", monday
        if rel == -1:
            return f"{fmt_day_zh(ref)}的前一周", monday
        if rel == 1:
            return f"{fmt_day_zh(ref)}的后一周", monday
        return f"{fmt_day_zh(monday)}开始的那一周", monday
    if kind == "zmonth":
        first = add_months(ref, _ZH_REL[g("zmonthrel")])
        return f"{first.year}年{first.month}月", first
    if kind == "zyear":
        y = ref.year + _ZH_YEARS[g("zyear")]
        return f"{y}年", date(y, 1, 1)
    if kind in ("zago", "zin"):
        num = g("zagon") if kind == "zago" else g("zinn")
        unit = g("zagou") if kind == "zago" else g("zinu")
        sign = -1 if kind == "zago" else 1
        n = _zh_count(num)
        u = (
            "day"
            if unit == "天"
            else "month"
            if unit == "个月"
            else "year"
            if unit == "年"
            else "week"
        )
        d = _shift(ref, u, sign * n)
        if num == "几":
            return f"{fmt_day_zh(ref)}的{m.group(0)}", d
        if u == "day":
            return fmt_day_zh(d), d
        if u == "week":
            return f"约{fmt_day_zh(d)}", d
        if u == "month":
            return f"{d.year}年{d.month}月", d.replace(day=1)
        return f"{d.year}年", date(d.year, 1, 1)
    return None


def _resolve_zh(text: str, ref: date, hemisphere: str = "north") -> tuple[str, date | None]:
    if not _ZH_TRIGGERS.search(text):
        return text, None
    first: list[date] = []

    def sub(m: re.Match[str]) -> str:
        got = _zh_resolve(m, ref, hemisphere)
        if got is None:
            return m.group(0)
        out, d = got
        if not first:
            first.append(d)
        return out

    return _ZH.sub(sub, text), (first[0] if first else None)


# ------------------------------------------------------------------------------------------ API


def resolve_dates(
    text: str, ref: datetime, lang: str, hemisphere: str = "north"
) -> tuple[str, datetime | None]:
    """Rewrite relative time expressions in ``text`` into absolute ones.

    Args:
        text: one statement or message.
        ref: when it was said (timezone-aware); its calendar date is the reference day.
        lang: ``"en"`` or ``"zh"``; Chinese expressions are resolved in any text that holds Chinese
            characters, English ones in every text.
        hemisphere: ``north`` or ``south``: which months a season names.

    Returns:
        The rewritten text and the start of the first resolved expression (midnight in ``ref``'s
        time zone), or ``None`` when nothing was resolved.
    """
    day = ref.date()
    found: list[date] = []
    out = text
    if lang == "zh" or CJK.search(text):
        out, d = _resolve_zh(out, day, hemisphere)
        if d is not None:
            found.append(d)
    if lang != "zh" or re.search(r"[A-Za-z]", out):
        out, d = _resolve_en(out, day, hemisphere)
        if d is not None:
            found.append(d)
    if not found:
        return out, None
    d0 = found[0]
    return out, datetime(d0.year, d0.month, d0.day, tzinfo=ref.tzinfo)
