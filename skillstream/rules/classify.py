"""What a statement is about: its kind, a key that finds the same thing later, and tags.

``classify("I'm planning a trip to Paris next month", "en")`` gives kind ``plan`` and head
``trip paris``; with the speaker that makes the key ``melanie|plan|trip paris``. A later statement
about the same thing ("I cancelled my trip to Paris") yields the same head, so the executor finds
the earlier memory with ``OwnerMemories.by_key`` (or, for explicit cancellations and corrections,
by overlapping heads of the same speaker).

Kinds: ``preference`` (love/like/prefer/hate, favourites; 喜欢/讨厌), ``plan`` (going to, planning,
will, would love to; 打算/计划/准备), ``event`` (past-tense first-person verbs; 了/过 with a time),
``opinion`` (I think/believe, in my opinion; 我觉得/我认为), ``fact`` (everything else, notably the
*slots* below). When several patterns match, the earliest in the sentence wins; an opinion only wins
when nothing else matched ("I think I'll go" is a plan).

Slots are facts with one current value per person (job, home, origin, name, age, diet, allergy,
relationship, study). Their keys are *strong*: a later statement with the same key replaces the
earlier one. Keys of other facts and of events are weak and never overwrite without an explicit
correction cue ("actually", "I meant", 其实).

The patterns are English and Chinese only, and they look at surface forms: irony, hypotheticals,
reported speech and most paraphrases are beyond them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from skillstream.text import CJK, CJK_CLASS, STOPWORDS, content_words
from skillstream.vocab import MemoryKind

STRONG_MAX_WORDS = 15
"""A slot/preference/plan key is strong only in a statement this short: in a long one the slot
phrase is usually incidental ("a gift from my grandma in my home country")."""


@dataclass(frozen=True)
class Classified:
    """The outcome of ``classify`` for one statement."""

    kind: str
    head: str
    """Normalised head of what the statement is about ("coffee", "trip paris", "job"); may be ""."""
    strong: bool = False
    """The head names a slot or a preference/plan object: same key means same thing."""
    negated: bool = False
    """The statement explicitly cancels or negates something (cancelled, no longer, 不再)."""
    correction: bool = False
    """The statement carries an explicit correction cue (actually, I meant, 其实)."""
    tags: tuple[str, ...] = ()


def subject_key(name: str) -> str:
    """The key form of a speaker's name: ``"Caroline"`` -> ``"caroline"``, ``"the user"`` ->
    ``"user"``."""
    s = name.strip().lower()
    if s.startswith("the "):
        s = s[4:]
    s = {"用户": "user", "助手": "assistant"}.get(s, s)
    return re.sub(r"\s+", "_", s) or "user"


def make_key(subject: str, kind: str, head: str) -> str | None:
    """``subject|kind|head``, or ``None`` when there is no head to key on."""
    return f"{subject}|{kind}|{head}" if head else None


def head_overlap(a: str, b: str) -> bool:
    """Whether two heads share a word (English) or a two-character run (Chinese)."""
    if not a or not b:
        return False
    if CJK.search(a) or CJK.search(b):
        if a in b or b in a:
            return True
        grams = {a[i : i + 2] for i in range(len(a) - 1)}
        return any(b[i : i + 2] in grams for i in range(len(b) - 1))
    return bool(set(a.split()) & set(b.split()))


# ------------------------------------------------------------------------------------- English

_ADV = (
    r"really|just|also|always|never|still|often|usually|sometimes|even|already|actually|recently|"
    r"finally|totally|absolutely|definitely|truly|honestly|seriously|personally|kinda|probably|"
    r"mostly|generally|literally|certainly|genuinely|especially|now|all|both|too|so|very|quite"
)
_ADVS = rf"(?:\s+(?:{_ADV})\b)*"
_S = r"(?:i|we)"

# Patterns about the speaker are tried only where a first-person word stands (``_ANCHOR``), with
# ``match`` at that position instead of a scan of the whole sentence: most of the time is otherwise
# spent trying every alternative at every character. Each branch therefore starts with i/we/my/our.
_ANCHOR = re.compile(r"\b(?:i|we|my|our)\b")
_PROFESSIONS = (
    r"teacher|nurse|doctor|engineer|developer|programmer|designer|lawyer|accountant|chef|cook|"
    r"driver|writer|author|journalist|artist|musician|scientist|researcher|manager|consultant|"
    r"counselor|counsellor|therapist|social worker|firefighter|police officer|officer|pilot|"
    r"dentist|"
    r"pharmacist|architect|photographer|salesperson|cashier|waiter|waitress|barista|mechanic|"
    r"electrician|plumber|farmer|veterinarian|vet|professor|lecturer|tutor|coach|student|"
    r"freelancer|entrepreneur"
)
_SLOT_BRANCHES = {
    "name": r"my name(?:'s| is)\b|i(?:'m| am) called\b|my nickname\b",
    "origin": (
        r"i(?:'m| am) (?:originally )?from\b|i (?:originally )?(?:come|came) from\b|i grew up in\b|"
        r"my (?:hometown|home town|home country)(?: is|'s)\b"
    ),
    "home": (
        rf"{_S}{_ADVS} (?:live|lived|moved|relocated)(?= (?:to|from|into|in|back|out|here|there|"
        r"away|abroad|home|house|with|near|close|downtown|across)\b)|"
        r"i(?:'m| am)(?: \w+ly)? (?:living|"
        r"moving|relocating)\b|my (?:home|house|apartment|flat|neighbou?rhood|address)(?: is|'s)\b|"
        r"i(?:'m| am) based in\b"
    ),
    "job": (
        rf"{_S}{_ADVS} (?:work|worked)(?= (?:as|at|for|in)\b)|i(?:'m| am)(?: \w+ly)? (?:working|"
        r"employed) (?:as|at|for)\b|my (?:job|career|profession|occupation|employer)(?: is|'s)\b|"
        r"i(?:'ve| have)?(?: just| finally)? "
        r"(?:got|landed|started|quit|lost|left|found|took|accepted) "
        r"(?:a |my |the |this |that |an )?(?:new |dream |first )?job\b|"
        r"i (?:got|was|just got) (?:hired|promoted|fired|laid off)\b|"
        rf"i(?:'m| am) (?:a|an) (?:\w+ )?(?:{_PROFESSIONS})\b"
    ),
    "age": (
        r"i(?:'m| am| turned| just turned| will turn| turn) (?:\d{1,3}|[a-z]+(?:-[a-z]+)?) years? "
        r"old\b|i(?:'m| am| turned| just turned| will turn) \d{1,3}\b"
    ),
    "birthday": r"my (?:\d+(?:st|nd|rd|th) )?birthday(?: is|'s)\b",
    "diet": (
        r"(?:i|we)(?:'m| am| are|'re| eat| went| became| turned| have been|'ve been)? ?"
        r"(?:a |fully |"
        r"strictly )?(?:vegetarian|vegan|pescatarian|keto|gluten[- ]free|lactose[- ]intolerant|"
        r"kosher|halal)\b"
    ),
    "allergy": r"i(?:'m| am) (?:\w+ )?allergic to\b|my allerg",
    "relationship": (
        r"i(?:'m| am| got| just got| was| have been|'ve been) (?:single|married|divorced|engaged|"
        r"widowed|separated)\b|i(?:'m| am) (?:dating|seeing someone|in a relationship)\b|"
        r"(?:i|we) broke up\b"
    ),
    "study": (
        rf"{_S}{_ADVS} (?:study|studied|major|majored|graduated)\b|i(?:'m| am) (?:studying|"
        r"majoring|a student|in (?:college|school|university|grad school))\b|my (?:major|degree)"
        r"(?: is|'s)\b"
    ),
}
_SLOT_EN = re.compile("|".join(f"(?P<{k}>{v})" for k, v in _SLOT_BRANCHES.items()))

_PREF = re.compile(
    rf"{_S}(?:'m| am|'re| are)?{_ADVS}\s+(?P<v>love|loves|like|enjoy|adore|prefer|hate|dislike|"
    r"detest|can't stand|cannot stand|don't (?:really )?(?:like|enjoy|love)|do not (?:like|enjoy|"
    r"love)|into|a (?:big |huge )?fan of|passionate about|keen on|crazy about|obsessed with|"
    r"fond of)"
    r"\b(?! to (?:see|hear|know|say|help))"
    r"|my (?:absolute )?favou?rite (?P<fav>[a-z]+(?: [a-z]+)?) (?:is|are|was|would be)\b"
)
_PREF_FAV2 = re.compile(r"\b(?P<fav>[a-z]+(?: [a-z]+)?) (?:is|are) my (?:absolute )?favou?rite\b")
_PREF_START = re.compile(r"(?P<v>love|like|enjoy|adore|hate)\b")
_PLAN = re.compile(
    rf"{_S}(?:'m| am|'re| are){_ADVS}\s+(?P<v>going to|going(?= \w+ing\b)|planning(?: to| on)?|"
    r"thinking (?:of|about)|"
    r"hoping to|about to|looking forward to|heading(?: to| out| off| back)?|off to|"
    r"getting ready to|"
    r"considering|aiming to|preparing to|saving (?:up )?for|signing up for|due to)\b"
    rf"|{_S}{_ADVS}\s+(?P<v3>plan to|plan on|intend to|hope to|want to|aim to|need to|"
    r"would (?:love|"
    r"like) to|will|shall|can't wait to|cannot wait to|look forward to)\b"
    r"|(?:i|we)(?P<v4>'ll|'d (?:love|like) to)\b"
    rf"|{_S}(?:'m| am|'re| are){_ADVS}\s+(?P<v6>[a-z]+ing)\b"
    r"(?=.*\b(?:tomorrow|tonight|next|soon|later|"
    r"upcoming|coming|this (?:weekend|week|month|year|summer|evening|afternoon|morning))\b)"
)
_PLAN_START = re.compile(
    r"(?P<v>gonna|going to|planning to|planning on|thinking (?:of|about)|hoping to|about to|"
    r"looking forward to|heading to|off to|can't wait to)\b"
)
_PAST_VERBS = (
    r"went|was|were|did|had|got|made|took|saw|came|met|found|gave|told|felt|bought|left|ran|spent|"
    r"sent|brought|wrote|ate|drank|won|lost|began|kept|heard|held|paid|sat|slept|spoke|flew|drove|"
    r"rode|swam|sang|threw|wore|became|broke|chose|grew|taught|caught|built|fell|fought|sold|shot|"
    r"stole|woke|drew|hung|read|[a-z]{3,}ed"
)
_EVENT = re.compile(
    rf"{_S}{_ADVS}\s+(?P<v>{_PAST_VERBS})\b"
    rf"|{_S}(?:'ve| have){_ADVS}\s+(?P<v2>just|recently|finally)\s+(?P<v3>[a-z]+)\b"
)
_EVENT_START = re.compile(rf"(?:just |finally |recently )?(?P<v>{_PAST_VERBS})\b")
_PAST_ANY = re.compile(rf"\b(?:{_PAST_VERBS})\b")
_NOT_EVENT_VERB = frozenset("was were had need used".split())
_OPINION = re.compile(
    rf"{_S}{_ADVS}\s+(?P<v>think|believe|guess|reckon|suppose|feel like|feel that|find that|"
    r"consider|am sure|'m sure|am convinced|'m convinced)\b"
)
_OPINION_X = re.compile(r"\bin my (?:opinion|view)\b|\bimo\b|^personally\b|^to me\b")
_MY_IS = re.compile(r"my (?P<np>(?:[a-z'-]+ ){0,2}?[a-z'-]+) (?:is|are|was|were|has|have|had)\b")
_I_AM = re.compile(r"(?:i|we)(?:'m| am|'re| are| have|'ve got| have got| own)\s+")
_TIME_PAST = re.compile(
    r"\b(?:yesterday|ago|last (?:night|week|weekend|month|year|\w+day)|earlier)\b"
)
_CANCEL = re.compile(
    r"(?:i|we)(?:'ve| have)?(?: \w+ly| just)? (?P<v>cancell?ed|called off|scrapped|dropped|"
    r"gave up(?: on)?|quit|stopped|backed out of|pulled out of|decided against|broke off)\b"
)
_NEGATED = re.compile(
    r"\bno longer\b|(?:\bnot|n't)\b.*\b(?:anymore|any more|any longer)\b|"
    r"\b(?:decided not to|not going to .* after all|changed (?:my|our) minds? about)\b"
)
_CORRECTION = re.compile(
    r"^(?:actually|correction|sorry|oops|wait|scratch that)\b|\bi meant\b|\binstead\b|"
    r"\bresched\w*\b|\b(?:changed|moved|pushed|postponed|brought forward) "
    r"(?:it|the \w+|our \w+|my \w+)"
    r"(?: \w+)? to\b|\bturns out\b|\bnot \w+(?: \w+)? but\b"
)

_CORRECTION_HINTS = (
    "actually",
    "correction",
    "sorry",
    "oops",
    "wait",
    "scratch",
    "meant",
    "instead",
    "resched",
    "turns out",
    "changed",
    "moved",
    "pushed",
    "postponed",
    "forward",
    "not ",
)
_NEGATION_HINTS = (
    "cancel",
    "called off",
    "scrapped",
    "dropped",
    "gave up",
    "quit",
    "stopped",
    "backed out",
    "pulled out",
    "decided against",
    "broke off",
    "no longer",
    "anymore",
    "any more",
    "any longer",
    "decided not",
    "after all",
    "changed my mind",
    "changed our mind",
)


def _at(pat: re.Pattern[str], low: str, anchors: list[int]) -> re.Match[str] | None:
    """The first match of ``pat`` at one of the ``anchors`` (positions of i/we/my/our)."""
    for a in anchors:
        m = pat.match(low, a)
        if m:
            return m
    return None


def _anchors(low: str) -> list[int]:
    return [m.start() for m in _ANCHOR.finditer(low)]


_STOP_NP = frozenset(
    """to in at for with about from on of by near during before after since until over into around
    and or but because so when while if that which who where than as like named called - & next
    last this tomorrow today yesterday tonight soon later ago now then again every each someday
    sometime eventually together anyway too either ago day days week weeks month months year years
    hour hours minute minutes night nights morning evening afternoon""".split()
)
_SKIP_LEAD = frozenset(
    """a an the my our your his her their its this that these those some any more new own few
    go going goes visit visiting see seeing do doing have having take taking make making get getting
    try trying start starting continue continuing check out be keep spend spending really just also
    very so too to much many lots lot of one two three four five six seven eight nine ten couple
    bit little actually it them him her us me you everything something anything""".split()
)


_TOKEN = re.compile(r"[a-z0-9][a-z0-9'-]*|[&,.;:!?()-]")
_PUNCT = frozenset("&,.;:!?()-")


def _words(text: str) -> list[str]:
    return _TOKEN.findall(text.lower().replace("’", "'"))


def singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is", "'s")):
        return word[:-1]
    if word.endswith("'s"):
        return word[:-2]
    return word


def np_head(obj: str, n: int = 1, with_pp: bool = False) -> str:
    """The head of the noun phrase that opens ``obj`` (its last ``n`` words), and with ``with_pp``
    the first content word of a following "to/in/at" phrase: ``"a trip to Paris next month"`` ->
    ``"trip paris"``."""
    toks = _words(obj)
    i = 0
    while i < len(toks) and (toks[i] in _SKIP_LEAD or toks[i] in ("to", "in", "at", "on", "for")):
        i += 1
    np: list[str] = []
    stop = None
    while i < len(toks):
        t = toks[i]
        if t in _STOP_NP or t in _PUNCT or (np and t in STOPWORDS):
            stop = t
            break
        np.append(t)
        i += 1
    np = [singular(t) for t in np if t not in STOPWORDS and not t.isdigit()]
    head = np[-n:]
    if with_pp and stop in ("to", "in", "at", "for", "into") and i + 1 < len(toks):
        rest = [singular(t) for t in toks[i + 1 :] if t not in _SKIP_LEAD and t not in STOPWORDS]
        rest = [
            t
            for t in rest
            if t not in _STOP_NP and t not in _MONTH_WORDS and not t.isdigit() and t not in _PUNCT
        ]
        if rest and rest[0] not in head:
            head = head + rest[:1]
    return " ".join(head)


def _positive_en(low: str) -> tuple[str, str | None]:
    """The statement with its negation removed, and the object of a cancel verb if any."""
    m = _at(_CANCEL, low, _anchors(low))
    if m:
        return low[m.end() :].strip(), low[m.end() :].strip()
    s = re.sub(r"\bno longer\s+", "", low)
    s = re.sub(r"\s*\b(?:anymore|any more|any longer|after all)\b", "", s)
    s = re.sub(r"\bdecided not to\b", "am going to", s)
    s = re.sub(r"\b(?:don't|doesn't|didn't|do not|does not|did not)\s+", "", s)
    s = re.sub(r"\b(?:i'm|i am) not\b", "i'm", s)
    s = re.sub(r"\b(isn't|is not)\b", "is", s)
    s = re.sub(r"\b(aren't|are not)\b", "are", s)
    s = re.sub(r"\b(won't|will not)\b", "will", s)
    s = re.sub(r"\b(can't|cannot)\b", "can", s)
    s = re.sub(r"\bnot\s+", "", s)
    return s, None


# What a cancelled/quit object means when it names a slot ("I quit my job").
_SLOT_NOUNS = {
    "job": "job",
    "career": "job",
    "position": "job",
    "apartment": "home",
    "house": "home",
    "flat": "home",
    "lease": "home",
    "engagement": "relationship",
    "marriage": "relationship",
    "relationship": "relationship",
    "studies": "study",
    "study": "study",
    "degree": "study",
    "major": "study",
    "diet": "diet",
}
_SLOT_ZH_NAMES = {
    "name": "名字",
    "origin": "籍贯",
    "home": "住址",
    "job": "工作",
    "age": "年龄",
    "diet": "饮食",
    "allergy": "过敏",
    "relationship": "感情",
    "study": "学业",
}


def _classify_en(text: str) -> tuple[str, str, bool]:
    low = text.lower().replace("’", "'")
    anchors = _anchors(low)
    m = _at(_SLOT_EN, low, anchors)
    if m and m.lastgroup:
        return MemoryKind.FACT, m.lastgroup, True
    found: list[tuple[int, int, MemoryKind, re.Match[str]]] = []
    for order, (kind, pat, start) in enumerate(
        (
            (MemoryKind.PREFERENCE, _PREF, _PREF_START),
            (MemoryKind.PLAN, _PLAN, _PLAN_START),
            (MemoryKind.EVENT, _EVENT, _EVENT_START),
        )
    ):
        m = start.match(low) or _at(pat, low, anchors)
        if m is None and kind == MemoryKind.PREFERENCE and "favo" in low:
            m = _PREF_FAV2.search(low)
        if m is None:
            continue
        if kind == MemoryKind.EVENT:
            gd = m.groupdict()
            v = gd.get("v") or ""
            if v in _NOT_EVENT_VERB and not _TIME_PAST.search(low):
                continue
        found.append((m.start(), order, kind, m))
    if found:
        found.sort(key=lambda f: (f[0], f[1]))
        _, _, kind, m = found[0]
        obj = low[m.end() :]
        if kind == MemoryKind.PREFERENCE:
            fav = m.groupdict().get("fav")
            if fav:
                return kind, singular(fav.split()[-1]), True
            head = np_head(obj)
            return kind, head, bool(head)
        if kind == MemoryKind.PLAN:
            head = np_head(obj, with_pp=True)
            return kind, head, bool(head)
        return kind, np_head(obj, n=2, with_pp=True) or _default_head(low), False
    m = _at(_OPINION, low, anchors) or (
        _OPINION_X.search(low)
        if any(w in low for w in ("opinion", "view", "imo", "personally", "to me"))
        else None
    )
    if m:
        words = [singular(w) for w in content_words(low[m.end() :])]
        return MemoryKind.OPINION, " ".join(words[:2]), False
    m = _at(_MY_IS, low, anchors)
    if m:
        return MemoryKind.FACT, singular(m.group("np").split()[-1]), False
    m = _at(_I_AM, low, anchors)
    if m:
        return MemoryKind.FACT, np_head(low[m.end() :]) or _default_head(low), False
    if _TIME_PAST.search(low) and _PAST_ANY.search(low):
        return MemoryKind.EVENT, _default_head(low), False
    return MemoryKind.FACT, _default_head(low), False


def _default_head(low: str) -> str:
    words = [singular(w) for w in content_words(low) if w not in _MONTH_WORDS]
    return " ".join(words[:2])


def _tags_en(text: str, head: str, exclude: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for w in head.split() + [singular(w) for w in content_words(text)]:
        w = w.strip("'-")
        if len(w) < 3 or w in exclude or w in out or w.isdigit() or w in _MONTH_WORDS:
            continue
        if w in _VERBISH or (w.endswith("ed") and len(w) > 4):
            continue
        out.append(w)
        if len(out) == 6:
            break
    return tuple(out)


_VERBISH = frozenset(
    """went got had made took saw came met found gave told felt love like want need think know make
    take come see feel try said says say tell give keep let put seem seems help helps wish hope
    bought ran spent sent brought wrote ate drank won lost began kept heard held paid sat slept
    spoke flew drove rode swam sang threw wore became broke chose grew taught caught built fell
    read loves likes wants needs thinks knows makes takes comes sees feels tries keen""".split()
)
_MONTH_WORDS = frozenset(
    "january february march april may june july august september october november december monday "
    "tuesday wednesday thursday friday saturday sunday weekend week month year yesterday tomorrow "
    "tonight last next ago anymore longer planning cancelled canceled actually instead meant "
    "going plan plans".split()
)


# ------------------------------------------------------------------------------------- Chinese

_ZH_SLOTS: list[tuple[str, re.Pattern[str]]] = [
    ("name", re.compile(r"我叫|我的名字")),
    ("origin", re.compile(r"我来自|我老家|我是.{1,6}人[。！!.]?$")),
    ("home", re.compile(r"我(?:们)?(?:住在|搬到|搬去|搬家|家在|现在住)")),
    (
        "job",
        re.compile(
            r"我(?:在|于).{1,12}?(?:工作|上班|任职)|我的工作|我(?:换了?|找到了?|辞了?|丢了)(?:新|一份)?工作|"
            r"我(?:被)?(?:录用|录取|升职|裁员|辞职)|我是(?:一名|一个|个)?.{0,6}(?:老师|教师|医生|护士|工程师|"
            r"程序员|设计师|律师|会计|经理|厨师|司机|作家|记者|警察|销售|咨询师)"
        ),
    ),
    ("age", re.compile(r"我(?:今年)?(?:\d{1,3}|[一二三四五六七八九十]{1,3})岁")),
    ("diet", re.compile(r"吃素|素食|纯素|吃肉")),
    ("allergy", re.compile(r"过敏")),
    ("relationship", re.compile(r"我(?:结婚|离婚|订婚|单身|恋爱|分手)")),
    (
        "study",
        re.compile(r"我(?:在)?(?:读|上|念)(?:大学|研究生|硕士|博士|本科)|我的专业|我(?:学|读)的是"),
    ),
]
_SLOT_ZH = re.compile("|".join(f"(?P<{slot}>{pat.pattern})" for slot, pat in _ZH_SLOTS))
_ZH_PREF = re.compile(
    r"我最喜欢的(?P<fav>.{1,6}?)是"
    r"|我.{0,4}?(?P<v>更喜欢|最喜欢|不喜欢|喜欢|讨厌|热爱|偏爱|爱吃|爱喝|爱看|爱玩|受不了|迷上了?)"
)
_ZH_PLAN = re.compile(r"我.{0,8}?(?P<v>打算|计划|准备|想要|将要|要去|会去|想去|即将|预计)")
_ZH_FUTURE = re.compile(r"明天|后天|下周|下个?星期|下个?月|明年|周末|以后|之后")
_ZH_EVENT = re.compile(f"我.{{0,10}}?(?P<v>[{CJK_CLASS}](?:了|过))")
_ZH_PAST = re.compile(r"昨天|前天|上周|上个?星期|上个?月|去年|刚才|刚刚|以前|\d+年\d+月\d+日")
_ZH_OPINION = re.compile(r"我(?:觉得|认为|相信|感觉|看来)|在我看来")
_ZH_CANCEL = re.compile(r"(?P<v>取消了?|放弃了?|退出了?|戒了)")
_ZH_NEGATED = re.compile(r"不再|不.{1,6}了[。！!.]?$|不打算|不准备|不想.{0,6}了")
_ZH_CORRECTION = re.compile(
    r"其实|实际上|更正|改成|改到|改为|换成|换到|推迟到|提前到|我是说|不是.+而是"
)
_ZH_TIME = re.compile(
    r"\d+年(?:\d+月(?:\d+日)?)?|大前天|前天|昨天|今天|明天|后天|大后天|今晚|昨晚|明晚|上个?(?:周|星期|礼拜|月)"
    r"[一二三四五六日天末]?|下个?(?:周|星期|礼拜|月)[一二三四五六日天末]?|这个?(?:周|星期|礼拜|月)[一二三四五六日天末]?|"
    r"去年|今年|明年|前年|后年|周末|刚才|刚刚|现在|已经|马上|最近|一直"
)
_ZH_LEAD_VERB = re.compile(
    r"^(?:去|到|在|看|吃|喝|玩|买|做|参加|参观|学习|学|听|打|跟|和|带|给|把|了|的|一起|一个|一次|个)+"
)
_ZH_STOP = re.compile(
    r"[，,。.！!？?；;、：:\s]|因为|所以|然后|但是|可是|而且|还有|并且|改到|改成|改为|换成|推迟|提前|是"
)


def _zh_head(obj: str) -> str:
    s = _ZH_STOP.split(obj, maxsplit=1)[0]
    s = _ZH_TIME.sub("", s)
    s = _ZH_LEAD_VERB.sub("", s)
    s = re.sub(r"[的了过很非常真太也都还]", "", s)
    s = re.sub(f"[^{CJK_CLASS}A-Za-z0-9]", "", s)
    return s[:4]


def _positive_zh(text: str) -> tuple[str, str | None]:
    m = _ZH_CANCEL.search(text)
    if m:
        return text[m.end() :], text[m.end() :]
    s = text.replace("不再", "")
    s = re.sub(r"不(.{1,6})了([。！!.]?)$", r"\1\2", s)
    s = re.sub(r"不(打算|准备|想)", r"\1", s)
    return s, None


def _classify_zh(text: str) -> tuple[str, str, bool]:
    m0 = _SLOT_ZH.search(text)
    if m0 and m0.lastgroup:
        return MemoryKind.FACT, _SLOT_ZH_NAMES[m0.lastgroup], True
    found: list[tuple[int, int, MemoryKind, re.Match[str]]] = []
    for order, (kind, pat) in enumerate(
        ((MemoryKind.PREFERENCE, _ZH_PREF), (MemoryKind.PLAN, _ZH_PLAN))
    ):
        m = pat.search(text)
        if m:
            found.append((m.start("v") if m.groupdict().get("v") else m.start(), order, kind, m))
    if not found and "我" in text and _ZH_FUTURE.search(text) and not _ZH_PAST.search(text):
        m2 = re.search(r"我(?:们)?", text)
        if m2:
            found.append((m2.start(), 1, MemoryKind.PLAN, m2))
    if found:
        found.sort(key=lambda f: (f[0], f[1]))
        _, _, kind, m = found[0]
        if kind == MemoryKind.PREFERENCE and m.groupdict().get("fav"):
            return kind, _zh_head(m.group("fav")), True
        head = _zh_head(text[m.end() :])
        return kind, head, bool(head)
    m = _ZH_EVENT.search(text)
    if m and (_ZH_PAST.search(text) or m.group("v").endswith(("了", "过"))):
        return MemoryKind.EVENT, _zh_head(text[m.start("v") :]), False
    m = _ZH_OPINION.search(text)
    if m:
        return MemoryKind.OPINION, _zh_head(text[m.end() :]), False
    m = re.search(r"我的(.{1,4}?)(?:是|叫|在|有)", text)
    if m:
        return MemoryKind.FACT, _zh_head(m.group(1)), False
    m = re.search(r"我(?:们)?(?:是|有|在)", text)
    if m:
        return MemoryKind.FACT, _zh_head(text[m.end() :]), False
    return MemoryKind.FACT, _zh_head(re.sub(r"^[我你他她它们这那]+", "", text)), False


_EN_LEAD = re.compile(
    r"^(?:(?:quick|small|minor|little|tiny|short|one more|another|an?)\s+){0,2}"
    r"(?:update|note|news|heads[- ]up|fyi|btw|by the way)\s*[:,;!.-]+\s*",
    re.IGNORECASE,
)
"""A lead-in that announces news ("Quick update:", "FYI,"): not part of the statement; what
follows may still open with a correction cue ("Quick update: actually ...")."""

_EN_CUE = re.compile(
    r"^(?:(?:actually|correction|sorry|oops|wait|scratch that|update|so|well|anyway)\b[\s,:;.!-]*)+"
)
_ZH_CUE = re.compile(r"^(?:其实|实际上|更正|更新|对了|哦|嗯)[，,：:\s]*")


def strip_cue(statement: str) -> str:
    """The statement without an opening correction cue ("Actually, ...", "其实，...")."""
    out = (
        _ZH_CUE.sub("", statement)
        if CJK.search(statement[:3])
        else re.sub(
            r"^(?:actually|correction|oops|scratch that|update)\b[\s,:;.!-]*",
            "",
            _EN_LEAD.sub("", statement.lstrip(), count=1),
            flags=re.IGNORECASE,
        )
    )
    return out or statement


# ------------------------------------------------------------------------------------------ API


def classify(statement: str, lang: str, exclude: tuple[str, ...] = ()) -> Classified:
    """Kind, head, flags and tags of one first-person statement (as said, before attribution).

    Args:
        statement: the statement in the speaker's own words.
        lang: ``"en"`` or ``"zh"``.
        exclude: lower-cased words never used as tags (the speakers' names).
    """
    if lang == "zh" or CJK.search(statement):
        correction = bool(_ZH_CORRECTION.search(statement))
        statement = _ZH_CUE.sub("", statement)
        negated = bool(_ZH_CANCEL.search(statement) or _ZH_NEGATED.search(statement))
        text = statement
        cancel_obj = None
        if negated:
            text, cancel_obj = _positive_zh(statement)
        kind, head, strong = _classify_zh(text)
        strong = strong and len(CJK.findall(text)) <= 2 * STRONG_MAX_WORDS
        if cancel_obj is not None and not strong:
            head = _zh_head(cancel_obj)
            kind = MemoryKind.PLAN if kind == MemoryKind.FACT else kind
        tags = tuple(t for t in (head,) if t)
        return Classified(kind, head, strong, negated, correction, tags)
    low = _EN_LEAD.sub("", statement.lower().replace("’", "'").lstrip(), count=1)
    correction = any(c in low for c in _CORRECTION_HINTS) and bool(_CORRECTION.search(low))
    low = _EN_CUE.sub("", low)
    negated = any(c in low for c in _NEGATION_HINTS) and bool(
        _at(_CANCEL, low, _anchors(low)) or _NEGATED.search(low)
    )
    text = low
    cancel_obj = None
    if negated:
        text, cancel_obj = _positive_en(low)
    kind, head, strong = _classify_en(text)
    if cancel_obj is not None and not strong:
        head = np_head(cancel_obj, with_pp=True)
        kind = MemoryKind.PLAN if kind == MemoryKind.FACT else kind
        slot = _SLOT_NOUNS.get(head)
        if slot:
            kind, head, strong = MemoryKind.FACT, slot, True
    strong = strong and len(low.split()) <= STRONG_MAX_WORDS
    return Classified(kind, head, strong, negated, correction, _tags_en(low, head, exclude))
