"""Speaker attribution: first and second person rewritten into the third person.

``third_person("I love hiking with my sister", "Caroline")`` gives
``"Caroline loves hiking with Caroline's sister"``: the name replaces every ``I``/``me``/``my``
(repetitive, but every memory then says whom it is about, which is what retrieval needs), and the
verb after ``I`` is put in the third person singular. ``you`` becomes the addressee's name when one
is known. ``we`` becomes ``Caroline and family`` when the message mentions family, else
``Caroline and others``. A statement that names nobody is reported as something the speaker said.

The verb agreement is a rule of thumb (``-s``/``-es``/``-ies`` and a few irregular verbs), and
subject/object ``you`` is told apart from the word before it; both are approximations.
"""

from __future__ import annotations

import re

_ADVERBS = (
    r"really|just|also|always|never|still|often|usually|sometimes|even|already|only|actually|"
    r"recently|finally|totally|absolutely|definitely|truly|honestly|seriously|personally|kinda|"
    r"sort\s+of|kind\s+of|probably|mostly|rarely|seldom|generally|literally|certainly|all|both|too|"
    r"now|then|once|again|ever|barely|hardly|simply|genuinely|no\s+longer|still\s+not"
)
_MODALS = frozenset(
    "can could will would shall should may might must can't couldn't won't wouldn't shouldn't "
    "mightn't mustn't didn't wasn't weren't cannot did was were had used ought".split()
)
_PAST_IRREGULAR = frozenset(
    """went was were did had got made took saw came met found gave told felt bought left ran spent
    sent brought thought wrote ate drank won lost began kept heard held paid sat slept spoke flew
    drove rode swam sang threw wore became broke chose knew forgot grew taught caught built stood
    understood said fell fought led lent meant sold shot shook stole stuck struck swore swept swung
    tore
    woke wound became bent bit blew bred dealt dug drew fed fled froze hid hung laid lay lit mistook
    overcame rang rose sank shone shrank sought spun sprang stank strove stung sunk thrust trod
    withdrew wrung dove snuck""".split()
)
_SAME_FORM = frozenset("read put set cut hit let quit hurt cost spread shut bet burst cast".split())
_IRREGULAR_3RD = {
    "am": "is",
    "are": "is",
    "have": "has",
    "do": "does",
    "go": "goes",
    "don't": "doesn't",
    "haven't": "hasn't",
    "aren't": "isn't",
    "were": "was",
    "weren't": "wasn't",
    "'m": "is",
    "be": "is",
}
_PAST_HINT = re.compile(
    r"\b(?:yesterday|ago|last|earlier|before|already|had|was|were|did|on \d{1,2} [A-Z][a-z]+ \d{4}|"
    r"in \d{4})\b"
)


def conjugate_3rd(verb: str, past: bool = False) -> str:
    """The third person singular of a present-tense ``verb`` (left as it is when not present)."""
    lw = verb.lower()
    if lw in _IRREGULAR_3RD:
        return _IRREGULAR_3RD[lw]
    if lw in _MODALS or lw in _PAST_IRREGULAR or "'" in lw:
        return verb
    if lw in _SAME_FORM and past:
        return verb
    if lw.endswith("ed") and len(lw) > 4:
        return verb
    if lw.endswith("ing") or lw.endswith("s") and not lw.endswith(("ss", "sh", "ch")):
        return verb
    if re.search(r"(?:s|sh|ch|x|z|o)$", lw):
        return verb + "es"
    if re.search(r"[^aeiou]y$", lw):
        return verb[:-1] + "ies"
    return verb + "s"


_FAMILY = re.compile(
    r"\b(?:kids?|family|husband|wife|children|child|son|daughter|partner|parents|mom|dad|mum|"
    r"mother|father|brother|sister|siblings|grandma|grandpa|baby|babies)\b",
    re.IGNORECASE,
)

_PRONOUNS = r"(?:i|me|my|mine|myself|we|us|our|ours|ourselves|you|your|yours|yourself)\b"
# One pass over every first/second person form. Longer forms first.
_EN = re.compile(
    rf"""
    (?=[imwuoyIMWUOY])  # cheap first-character test before the alternatives
    (?:\b(?P<i>I)(?P<ic>'m|'ve|'d|'ll)?\b(?!\.\w)(?P<adv>(?:\s+(?:{_ADVERBS})\b)*)
       (?:\s+(?!{_PRONOUNS})(?P<verb>[A-Za-z']+))?
    | \b(?P<me>me|myself|mine|my)\b
    | \b(?P<we>we)(?P<wc>'re|'ve|'d|'ll)?\b
    | \b(?P<us>us|ourselves|ours|our)\b
    | \b(?P<you>you)(?P<yc>'re|'ve|'d|'ll)?\b(?P<yadv>(?:\s+(?:{_ADVERBS})\b)*)
       (?:\s+(?!{_PRONOUNS})(?P<yverb>[A-Za-z']+))?
    | \b(?P<your>yourself|yours|your)\b)
    """,
    re.VERBOSE | re.IGNORECASE,
)
_GONNA = re.compile(r"\b(?:gonna|wanna)\b", re.IGNORECASE)
_YOU_KNOW = re.compile(r"^(?:you know|you see|I mean),?\s+", re.IGNORECASE)
_YOU_KNOW_END = re.compile(r",\s*(?:you know|I mean)\s*,", re.IGNORECASE)
_SUBJECT_BEFORE = re.compile(
    r"(?:^|[,;:.!?(\-–—]|\b(?:and|but|or|so|that|if|when|because|since|as|than|while|where|how|"
    r"what|why|who|though|although|unless|until|whether|cause|then|sure|think|know|hope|bet|guess|"
    r"believe|glad|proud|happy|wish|bet|seems|hear|heard))\s*$",
    re.IGNORECASE,
)
_WE_AUX = {"'re": " are", "'ve": " have", "'d": " would", "'ll": " will", "": ""}
_HAD_NEXT = frozenset("been had gone done seen got forgotten heard made never already".split())
_NOT_VERB = frozenset(
    "a an the to and or but so if in on at for of with my your his her their our its this that "
    "these those there here not no".split()
)


class Person:
    """How to name the speaker (and the addressee) in rewritten text."""

    __slots__ = ("name", "possessive", "addressee", "addr_possessive", "group")

    def __init__(self, name: str, addressee: str | None = None, family: bool = False) -> None:
        self.name = name
        self.possessive = possessive(name)
        self.addressee = addressee
        self.addr_possessive = possessive(addressee) if addressee else None
        self.group = f"{name} and {'family' if family else 'others'}"


def possessive(name: str) -> str:
    return name + ("'" if name.endswith("s") and not name.endswith("ss") else "'s")


def third_person_en(text: str, speaker: str, addressee: str | None = None) -> str:
    """Rewrite an English statement by ``speaker`` into the third person (see module docstring)."""
    text = text.replace("’", "'").replace("‘", "'")
    low = text.lower()
    if "nna" in low:
        text = _GONNA.sub(
            lambda m: "going to" if m.group(0).lower() == "gonna" else "want to", text
        )
    if "know" in low or "mean" in low or "see" in low:
        text = _YOU_KNOW_END.sub(",", _YOU_KNOW.sub("", text))
    p = Person(speaker, addressee, family=bool(_FAMILY.search(text)))
    past = bool(_PAST_HINT.search(text))

    def sub(m: re.Match[str]) -> str:
        if m.group("i"):
            return _first_singular(m, p, past)
        if m.group("me"):
            w = m.group("me").lower()
            if w in ("my", "mine"):
                return p.possessive
            return "themself" if w == "myself" else p.name
        if m.group("we"):
            c = (m.group("wc") or "").lower()
            return p.group + _WE_AUX[c]
        if m.group("us"):
            w = m.group("us").lower()
            if w == "our" or w == "ours":
                return p.possessive
            return "themselves" if w == "ourselves" else p.group
        if m.group("you"):
            return _second(m, p, past)
        if m.group("your"):
            if p.addressee is None:
                return m.group(0)
            w = m.group("your").lower()
            return "themself" if w == "yourself" else (p.addr_possessive or "")
        return m.group(0)

    return _EN.sub(sub, text)


def _first_singular(m: re.Match[str], p: Person, past: bool) -> str:
    c = (m.group("ic") or "").lower()
    adv = m.group("adv") or ""
    verb = m.group("verb")
    tail = f" {verb}" if verb else ""
    if c == "'m":
        return f"{p.name} is{adv}{tail}"
    if c == "'ve":
        return f"{p.name} has{adv}{tail}"
    if c == "'ll":
        return f"{p.name} will{adv}{tail}"
    if c == "'d":
        aux = "had" if verb and verb.lower() in _HAD_NEXT else "would"
        return f"{p.name} {aux}{adv}{tail}"
    if verb is None:
        return p.name
    if verb.lower() in _NOT_VERB:
        return f"{p.name}{adv} {verb}"
    return f"{p.name}{adv} {conjugate_3rd(verb, past)}"


def _second(m: re.Match[str], p: Person, past: bool) -> str:
    if p.addressee is None:
        return m.group(0)
    c = (m.group("yc") or "").lower()
    adv = m.group("yadv") or ""
    verb = m.group("yverb")
    tail = f" {verb}" if verb else ""
    name = p.addressee
    if c:
        aux = {"'re": "is", "'ve": "has", "'ll": "will", "'d": "would"}[c]
        if c == "'d" and verb and verb.lower() in _HAD_NEXT:
            aux = "had"
        return f"{name} {aux}{adv}{tail}"
    before = m.string[: m.start()]
    if verb is None or not _SUBJECT_BEFORE.search(before) or verb.lower() in _NOT_VERB:
        return f"{name}{adv}{tail}"
    return f"{name}{adv} {conjugate_3rd(verb, past)}"


# ------------------------------------------------------------------------------------- Chinese

_ZH_FAMILY = re.compile(r"孩子|家人|老公|老婆|丈夫|妻子|爸妈|父母|爸爸|妈妈|儿子|女儿|全家|家里")


def third_person_zh(text: str, speaker: str, addressee: str | None = None) -> str:
    """Rewrite a Chinese statement: 我 -> speaker, 我们 -> speaker和家人/等人, 你 -> addressee."""
    group = f"{speaker}和家人" if _ZH_FAMILY.search(text) else f"{speaker}等人"
    out = re.sub(r"我们|咱们", group, text)
    out = re.sub(r"(?<!自)我", speaker, out)
    if addressee:
        out = re.sub(r"(?<!你)(?:你|您)(?!们)", addressee, out)
    return out


# ------------------------------------------------------------------------------------- helpers

_COMMON_START = frozenset(
    """the a an this that these those it it's its there here they them their he she his her we
    what which who when where why how some many most all every each any no not one two my your our
    being having doing going getting taking making painting so and but or if as at in on for with
    to from of by about after before just really also still even then now today tomorrow yesterday
    such lots plenty nothing something everything anything everyone someone nobody life family
    kids work people""".split()
)


_KEEP_CASE = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday january february march april may "
    "june july august september october november december".split()
)


def said(text: str, speaker: str, lang: str, names: tuple[str, ...] = ()) -> str:
    """``Caroline said the stories were inspiring.`` for a statement that names nobody.

    The first word is lower-cased unless it looks like a name: one of ``names`` (lower-case), a
    month or weekday, or an acronym.
    """
    if lang == "zh":
        return f"{speaker}说：{text}"
    first = text.split(" ", 1)[0]
    core = re.sub(r"'.*$", "", re.sub(r"[^A-Za-z']", "", first))
    low = core.lower()
    if not (core.isupper() and len(core) > 1) and low not in _KEEP_CASE and low not in names:
        text = text[:1].lower() + text[1:]
    return f"{speaker} said {text}"


_SUBJECTLESS = re.compile(
    r"^(?P<prog>going to|planning to|planning on|thinking about|thinking of|hoping to|trying to|"
    r"looking forward to|heading to|heading out|off to|working on|getting ready|feeling|about to)\b"
    r"|^(?P<perf>been)\b"
    r"|^(?P<can>can't wait|cannot wait|wish|hope|need to|want to|have to|got to)\b"
    r"|^(?P<just>just|finally|recently)\s+"
    r"(?P<jv>[a-z]+ed|went|got|had|made|took|saw|came|met|found|"
    r"bought|finished|started|ran|won|did)\b"
    r"|^(?P<pastv>went|got|had|made|took|saw|came|met|found|bought|finished|started|ran|won|did|"
    r"visited|tried|joined|signed|attended|painted|watched|learned|adopted|volunteered)\b"
    r"|^(?P<likev>love|loved|like|liked|enjoy|enjoyed|hate|hated|adore|adored)\b"
    r"(?!\s+(?:it|that|this)\W*$)"
    r"|^(?P<adj>excited|happy|glad|thrilled|proud|grateful|thankful|stoked|nervous|scared|sad|"
    r"tired|"
    r"busy|ready|eager|lucky|blessed|pumped|worried|stressed|sorry)\b",
    re.IGNORECASE,
)


def add_subject(text: str, speaker: str) -> str | None:
    """Give a subjectless English statement its subject (``Gonna visit Paris`` -> ``X is going to
    visit Paris``), or ``None`` when the statement is not one of the recognised forms (questions
    are never completed)."""
    if text.rstrip().endswith("?"):
        return None
    t = re.sub(r"^gonna\b", "going to", text, flags=re.IGNORECASE)
    m = _SUBJECTLESS.match(t)
    if not m:
        return None
    lower = t[:1].lower() + t[1:]
    if m.group("prog") or m.group("adj"):
        return f"{speaker} is {lower}"
    if m.group("perf"):
        return f"{speaker} has {lower}"
    if m.group("can"):
        first = m.group("can").lower()
        if first in ("wish", "hope"):
            return f"{speaker} {first}es{lower[len(first) :]}"
        if first in ("need to", "want to"):
            return f"{speaker} {first.split()[0]}s{lower[len(first.split()[0]) :]}"
        if first == "have to":
            return f"{speaker} has{lower[4:]}"
        return f"{speaker} {lower}"
    if m.group("likev"):
        v = m.group("likev").lower()
        if v.endswith("d"):
            return f"{speaker} {lower}"
        return f"{speaker} {conjugate_3rd(v)}{lower[len(v) :]}"
    return f"{speaker} {lower}"
