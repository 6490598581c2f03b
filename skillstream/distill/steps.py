"""Text rules for procedural content: steps, pitfalls, preferences, checks, tools, salient terms.

Plain functions over sentences, English and Chinese, used by the offline distiller and by the
gate that decides whether a segment holds anything procedural at all. They are honest heuristics:
an imperative sentence of the assistant is a step, a request for information in a task dialogue
("Could I get your name?") is a step, a user's report of a failure followed by the assistant's
answer is a pitfall with its fix, a user's "I prefer / I always want" is a preference.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from skillstream.model import Message
from skillstream.text import CJK, CJK_RUN, STOPWORDS, is_question, is_small_talk, split_sentences

# ----------------------------------------------------------------------------- step detection
_LEAD_EN = re.compile(
    r"^(?:(?:sure|ok(?:ay)?|alright|right|great|yes|no problem|of course|good)[,.!]\s*)*"
    r"(?:(?:step\s*\d+|\d+|[a-h])\s*[:.)-]\s*|[-*•]\s+)?"
    r"(?:(?:first(?:ly)?|second(?:ly)?|third(?:ly)?|then|next|after that|afterwards|afterward|"
    r"finally|lastly|last|now|also|and then|and|before that|before you start|to start|"
    r"once (?:that|this|it)(?:'s| is) done|when "
    r"(?:that|this|it)(?:'s| is) done|please|kindly)\b[,:]?\s*)*",
    re.IGNORECASE,
)
_ORDINAL_EN = re.compile(
    r"^\s*(?:step\s*\d+|\d+\s*[.)]|first(?:ly)?\b|second(?:ly)?\b|then\b|next\b|after that\b|"
    r"finally\b|lastly\b)",
    re.IGNORECASE,
)
_MODAL_EN = re.compile(
    r"^(?:you(?:'ll| will)? (?:should|need to|have to|must|want to|can|could|may want to)|"
    r"you'?ll need to|it'?s (?:best|better|important) to|remember to|be sure to|make sure to)\s+",
    re.IGNORECASE,
)
IMPERATIVE_VERBS = frozenset(
    """add adjust apply arrange ask attach avoid back bake book boil bring build buy calculate call
    cancel change charge check choose clean clear click clone close collect combine commit compare
    compile compute configure confirm connect consider contact convert copy count cover create cut
    debug decide define delete deploy describe disable download drain draft drink drop edit email
    enable ensure enter estimate export fetch fill filter find fix flag follow format gather
    generate give go grab heat hold identify import inform include insert install keep label launch
    leave let list load locate lock log login look make map mark measure merge migrate mix monitor
    mount move note notify open order organize pack paste pay pick place plan plant plug post pour
    prepare press print provide pull push put read rebuild reboot record reduce refresh register
    reinstall reload remember remove rename repeat replace report request reserve reset resize
    restart restore retry return review rinse run save schedule scroll search see select send set
    share ship sign skip sort specify split start stir stop store submit switch tag take tell test
    tighten track transfer try turn type uninstall unlock unplug update upgrade upload use validate
    verify visit wait walk warm wash water watch wipe wrap write""".split()
)
_ASK_EN = re.compile(
    r"^(?:\w+\s+){0,3}?(?:what|which|when|where|who|how (?:many|much|long|often|soon)|"
    r"would you like|do you (?:want|have|need|know|prefer)|are you|is (?:it|this|that) for|"
    r"(?:could|can|may) i (?:get|have|know|ask|see|confirm|take)|(?:could|can|would) you "
    r"(?:tell|give|provide|confirm|share|let me know|specify|spell|please)|please)\b",
    re.IGNORECASE,
)
_ASK_VERBS = frozenset("provide enter specify give tell confirm state share spell type".split())
_NOT_A_STEP_ASK = re.compile(
    r"anything else|something else|help you (?:with )?(?:today|anything)|how can i help|"
    r"what can i do for you|how may i (?:help|assist)|is that all|can i help|how are you|"
    r"how (?:is|was) your|what'?s up|how'?s it going",
    re.IGNORECASE,
)
_LEAD_ZH = re.compile(
    r"^(?:好的|好|当然|可以|没问题|嗯)?[，,。！!]*"
    r"(?:第[一二三四五六七八九十\d]+步|[（(]?\d+[)）.、]|[一二三四五六七八九十]+、)?[：:，,]?"
    r"(?:首先|先|然后|接着|再|之后|随后|最后|另外|同时|其次)?[，,]?"
)
_ORDINAL_ZH = re.compile(
    r"^(?:第[一二三四五六七八九十\d]+步|\d+[.、)]|首先|先|然后|接着|之后|最后|其次)"
)
_IMPERATIVE_ZH = re.compile(
    r"^(?:请|记得|务必|一定要|要|需要|别|不要|千万别|先|把|用|将|确保|检查|运行|打开|点击|安装|输入)"
)
_ASK_ZH = re.compile(r"(?:请问|请提供|请告诉|您的.{0,6}(?:是|叫)|能告诉|可以告诉).*")


def lead_stripped(sentence: str) -> str:
    """The sentence without list markers and sequence words ("Then, ", "2. ", "首先")."""
    s = sentence.strip()
    if CJK.search(s):
        return _LEAD_ZH.sub("", s, count=1).strip() or s
    out = _LEAD_EN.sub("", s, count=1).strip()
    return out or s


def step_of(sentence: str, role: str) -> str | None:
    """The reusable step a sentence states, or ``None``.

    A step is an imperative ("Run pytest first"), a modal instruction ("you need to log in" ->
    "Log in"), an ordered item ("2. Build the image"), or, from the assistant, a request for
    information that moves a task forward ("Could I get your name?" -> "Ask for: could I get your
    name?"). Users state steps only as imperatives or ordered items ("first back up the data").
    """
    raw = sentence.strip()
    if len(raw) < 3 or is_small_talk(raw):
        return None
    if CJK.search(raw):
        return _step_zh(raw, role)
    ordered = bool(_ORDINAL_EN.match(raw))
    s = lead_stripped(raw)
    s = _MODAL_EN.sub("", s, count=1)
    words = re.findall(r"[A-Za-z][A-Za-z'-]*", s)
    if not words:
        return None
    first = words[0].lower()
    if is_question(raw):
        if role == "assistant" and _ASK_EN.match(s) and not _NOT_A_STEP_ASK.search(s):
            return "Ask: " + _trim(_upper_first(s))
        return None
    if first in ("don't", "do", "never", "always", "avoid") and len(words) > 2:
        return _trim(_upper_first(s))
    if first in IMPERATIVE_VERBS and (len(words) >= 2 or ordered):
        if (
            role == "assistant"
            and first in _ASK_VERBS
            and len(words) > 1
            and words[1].lower() == "your"
        ):
            return "Ask for " + _trim(" ".join(s.split()[1:]))  # "Please provide your rank."
        return _trim(_upper_first(s))
    if ordered and len(words) >= 3 and role == "assistant":
        return _trim(_upper_first(s))
    return None


def _step_zh(s: str, role: str) -> str | None:
    ordered = bool(_ORDINAL_ZH.match(s))
    body = lead_stripped(s)
    if is_question(s):
        if role == "assistant" and _ASK_ZH.search(s):
            return "询问：" + _trim(s)
        return None
    if ordered or _IMPERATIVE_ZH.match(body):
        body = re.sub(r"^(?:请|记得)", "", body) or body
        return _trim(body) if len(CJK.findall(body)) >= 2 else None
    return None


def is_filler(sentence: str) -> bool:
    """Small talk, or a generic offer of help ("How can I help today?", "Anything else?")."""
    return is_small_talk(sentence) or bool(_NOT_A_STEP_ASK.search(sentence)) and len(sentence) < 80


def count_steps(messages: Iterable[Message]) -> int:
    """Procedural sentences in messages: the assistant's steps and anyone's ordered items."""
    n = 0
    for m in messages:
        role, text = m.role, m.text
        for s in sentences(text):
            if step_of(s, role) and (role == "assistant" or is_ordered(s)):
                n += 1
    return n


def is_ordered(sentence: str) -> bool:
    """Whether a sentence starts with a sequence marker ("First", "2.", "然后")."""
    return bool(
        _ORDINAL_ZH.match(sentence) if CJK.search(sentence) else _ORDINAL_EN.match(sentence)
    )


# ----------------------------------------------------------------------------- other material
_FAILURE = re.compile(
    r"\b(?:fail(?:s|ed|ing|ure)?|error|errors|broke(?:n)?|crash(?:ed|es)?|doesn'?t work|didn'?t "
    r"work|not working|won'?t (?:start|work|run)|exception|denied|timed? ?out|stuck|problem|issue|"
    r"wrong|unauthori[sz]ed|refused|not authori[sz]ed)\b|报错|失败|错误|出错|不行|没用|不工作|卡住",
    re.IGNORECASE,
)
_PREFERENCE_EN = [
    (re.compile(r"^(?:i|we) (?:always|usually) (?:want|need|like|prefer) ", re.I), "Always wants "),
    (re.compile(r"^i(?:'d| would) (?:rather|prefer) ", re.I), "Would rather "),
    (re.compile(r"^(?:i|we) prefer ", re.I), "Prefers "),
    (re.compile(r"^(?:i|we) (?:don'?t|do not|never) (?:want|like) ", re.I), "Does not want "),
    (re.compile(r"^(?:i|we) (?:really )?(?:like|love|enjoy) ", re.I), "Likes "),
    (re.compile(r"^(?:i|we) (?:hate|dislike|can'?t stand) ", re.I), "Dislikes "),
    (re.compile(r"^(?:please )?(?:always|never) ", re.I), None),
    (
        re.compile(r"^(?:i|we) (?:want|need) (?:it|them|this|that|you) to (?:always )?", re.I),
        "Wants it to ",
    ),
]
_PREFERENCE_ZH = re.compile(
    r"^(?:我|我们)?(?:喜欢|更喜欢|偏好|希望|总是|一直|习惯|不喜欢|讨厌|不要|不想|宁愿)"
)
_VERIFY = re.compile(
    r"\b(?:check|verify|make sure|ensure|confirm|test|validate|returns? "
    r"\d{3}|health)\b|检查|确认|验证|确保",
    re.IGNORECASE,
)
_COMMAND = re.compile(
    r"`([^`\n]{2,80})`|\b((?:docker|git|kubectl|pytest|pip|npm|yarn|systemctl|curl|wget|"
    r"python3?|terraform|ansible|helm|ssh|scp|rsync|psql|mysql|gcloud|brew|apt(?:-get)?|"
    r"cargo|mvn|gradle|poetry)(?: [^\s,;]+){0,5})",
)
_TOOL_WORDS = frozenset(
    """docker git kubectl pytest pip npm yarn systemctl curl wget python python3 node terraform
    ansible helm ssh scp rsync psql mysql aws gcloud brew apt apt-get cargo mvn gradle poetry
    excel slack jira github gitlab jenkins postman vscode""".split()
)
"""Tool names that are not also everyday English words ("make", "go" are left out)."""


def is_failure(sentence: str) -> bool:
    """Whether a sentence reports something going wrong."""
    return bool(_FAILURE.search(sentence))


def preference_of(sentence: str) -> str | None:
    """The user's standing preference a sentence states, in the third person, or ``None``."""
    s = lead_stripped(sentence.strip())
    if not s or is_question(s):
        return None
    if CJK.search(s):
        return _trim(s) if _PREFERENCE_ZH.match(s) else None
    for rx, repl in _PREFERENCE_EN:
        m = rx.match(s)
        if m:
            rest = s[m.end() :]
            if len(re.findall(r"[A-Za-z]+", rest)) < 2:
                return None
            text = (repl + rest) if repl else _upper_first(s)
            return _trim(_third_person(text))
    return None


def is_verification(step: str) -> bool:
    """Whether a step checks that the task worked."""
    return bool(_VERIFY.search(step))


_PROSE = frozenset(
    "and then with to or first again before after so if when on in for it the a .".split()
)


def commands_in(text: str) -> list[str]:
    """Shell commands named in a text (backticked, or starting with a well-known tool)."""
    out = []
    for m in _COMMAND.finditer(text):
        cmd = (m.group(1) or m.group(2) or "").strip()
        if m.group(2):  # cut a bare command at the first word that goes back to prose
            words: list[str] = []
            for w in cmd.split():
                if w.lower() in _PROSE and words:
                    break
                words.append(w)
            cmd = " ".join(words)
        cmd = cmd.rstrip(" .").strip()
        if cmd and cmd not in out:
            out.append(cmd)
    return out


def tools_in(text: str) -> list[str]:
    """Well-known tools named in a text, lower-cased, in order of appearance."""
    out = []
    for w in re.findall(r"[A-Za-z][A-Za-z0-9-]*", text):
        lw = w.lower()
        if lw in _TOOL_WORDS and lw not in out:
            out.append(lw)
    return out


# ----------------------------------------------------------------------------- salient terms
GENERIC_TERMS = frozenset(
    """need want would like could help please thanks thank know tell ask asked give take good great
    name names sure okay ok yes no hello hi bye goodbye today tomorrow yesterday time day days week
    else anything something everything nothing able right let lets sorry problem fine also maybe
    first then next finally last step steps again new use using used way work works worked working
    try trying really just said says say see look looking find found think told made make makes
    thing things one two three number much many lot little bit well back done going come came
    provide provided information info details detail assist assistance alright anyway actually
    awful awesome dumb happy sad glad okay fantastic wonderful terrible horrible exactly honestly
    basically literally probably definitely certainly absolutely seriously guess wait hey hmm
    perfect lovely excellent nice cool fine thing kind sort pretty quite rather enough sounds
    great good bad best better worse worst currently""".split()
)
_TERM_EN = re.compile(r"[a-z][a-z0-9'-]*[a-z0-9]|[a-z]")
_ZH_FUNCTION = frozenset(
    "的了是在和与到把被就都也还吗呢吧啊很我你他她它们这那个时候后前每次再先请要会能让给从对"
)
"""Function characters: a character bigram holding one is rarely a term."""


def terms(text: str) -> list[str]:
    """Content terms of a text: English words (light stemming) and Chinese character bigrams."""
    out = []
    low = text.lower().replace("’", "'")
    for w in _TERM_EN.findall(low):
        w = w.strip("'-")
        if len(w) < 3 or w in STOPWORDS or w in GENERIC_TERMS or w.isdigit():
            continue
        out.append(stem(w))
    for run in CJK_RUN.findall(text):
        out.extend(
            b
            for b in (run[i : i + 2] for i in range(max(1, len(run) - 1)))
            if not set(b) & _ZH_FUNCTION
        )
    return [t for t in out if t and t not in GENERIC_TERMS]


def stem(word: str) -> str:
    """Singular of an English plural (``hotels`` -> ``hotel``, ``cities`` -> ``city``), and the
    base of a known verb's ``-ing`` / ``-ed`` form (``deploying`` -> ``deploy``).

    Nothing else: terms are shown to people as triggers, so they must stay real words.
    """
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            base = word[: -len(suffix)]
            for cand in (base, base + "e", base[:-1] if base[-1:] == base[-2:-1] else ""):
                if cand in IMPERATIVE_VERBS:
                    return cand  # "deploying" -> "deploy", "booked" -> "book"
    if len(word) < 4 or word.endswith(("ss", "us", "is", "'s")):
        return word[:-2] if word.endswith("'s") else word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "sses", "zes")):
        return word[:-2]
    if word.endswith("s"):
        return word[:-1]
    return word


def salient_terms(
    texts: Iterable[tuple[str, float]], k: int = 8, exclude: Iterable[str] = ()
) -> list[tuple[str, float]]:
    """The ``k`` heaviest terms over ``(text, weight)`` pairs; a term counts once per text.

    Proper names (words only ever written capitalised inside a sentence, such as a person's name)
    are left out: they identify one conversation, not a kind of task.
    """
    items = list(texts)
    names = proper_names(t for t, _ in items) | set(exclude)
    score: dict[str, float] = {}
    for text, weight in items:
        for t in set(terms(text)):
            if t not in names:
                score[t] = score.get(t, 0.0) + weight
    return sorted(score.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


_WORD_AT = re.compile(r"[A-Za-z][A-Za-z'-]*")


_SELF_NAME = re.compile(
    r"\b(?:my name is|my name's|name is|i am|i'm|this is|it's|call "
    r"me|name:)\s+([A-Za-z][a-z'-]+(?:\s+[A-Za-z][a-z'-]+)?)",
    re.IGNORECASE,
)
_ASKS_NAME = re.compile(r"\bname\b|\bwho (?:is|are)\b|姓名|名字", re.IGNORECASE)


def names_given(turns: Iterable[tuple[str, str]]) -> set[str]:
    """Person names a dialogue states: "my name is X", and short answers to "your name?".

    Args:
        turns: ``(role, text)`` pairs in order.
    """
    out: set[str] = set()
    asked = False
    for role, text in turns:
        if role == "user":
            for m in _SELF_NAME.finditer(text):
                words = m.group(1).split()
                out.update(stem(w.lower()) for w in words if w[0].isupper() or len(words) == 1)
            if asked and len(text.split()) <= 4:
                out.update(stem(w.lower()) for w in re.findall(r"[A-Za-z][A-Za-z'-]+", text))
        asked = role == "assistant" and bool(_ASKS_NAME.search(text))
    return out - {"the", "a", "not", "sure", "here", "looking", "trying", "going", "calling"}


def proper_names(texts: Iterable[str]) -> set[str]:
    """Terms that appear only capitalised and never at the start of a sentence."""
    upper: set[str] = set()
    lower: set[str] = set()
    for text in texts:
        for m in _WORD_AT.finditer(text):
            word = m.group(0)
            key = stem(word.lower())
            before = text[: m.start()].rstrip()
            starts = not before or before[-1] in ".!?:;\"'(\n"
            if word[0].isupper() and not starts and not word.isupper():
                upper.add(key)
            else:
                lower.add(key)
    return upper - lower


# ----------------------------------------------------------------------------- small helpers
def sentences(text: str) -> list[str]:
    """Sentences of a message (newlines and list items split too)."""
    out: list[str] = []
    for line in re.split(r"\n+", text):
        marker = ""
        for piece in split_sentences(line):
            if not piece.strip():
                continue
            if re.fullmatch(r"\s*(?:\d{1,2}|[a-hA-H])[.)]\s*", piece):  # "2." of "2. Restart"
                marker = piece.strip() + " "
                continue
            out.append(marker + piece)
            marker = ""
    return out


def _trim(s: str, limit: int = 240) -> str:
    s = re.sub(r"\s+", " ", s).strip()
    return s if len(s) <= limit else s[: limit - 1].rstrip() + "…"


def _upper_first(s: str) -> str:
    return s[:1].upper() + s[1:] if s else s


def _lower_first(s: str) -> str:
    return s[:1].lower() + s[1:] if s and not s[:2].isupper() else s


_PRONOUNS = [
    (re.compile(r"\bI'm\b"), "the user is"),
    (re.compile(r"\bI am\b"), "the user is"),
    (re.compile(r"\bmy\b", re.I), "their"),
    (re.compile(r"\bme\b"), "them"),
    (re.compile(r"\bI\b"), "the user"),
]


def _third_person(text: str) -> str:
    for rx, repl in _PRONOUNS:
        text = rx.sub(repl, text)
    return text
