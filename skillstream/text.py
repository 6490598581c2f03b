"""Text helpers shared by the extractors and the distillation: Chinese characters, sentence
splitting, questions, fillers and small talk.

English and Chinese. Everything here is a plain function over strings, built from regexes that are
compiled once; nothing knows about speakers beyond the names it is handed to strip as vocatives.
"""

from __future__ import annotations

import re
from functools import lru_cache

# ------------------------------------------------------------------------------ memory text

MEMORY_TEXT_CHARS = 4000
"""Longest memory text, in characters. An executor's longer statement is cut at the last space
before the limit (or at the limit) and ends with an ellipsis; its source messages stay linked."""

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def memory_text(text: str) -> str:
    """``text`` fit to be a memory: no NUL characters nor lone surrogates (an LLM answer can hold
    ``"\\u0000"`` or ``"\\ud800"``), surrounding space stripped, at most ``MEMORY_TEXT_CHARS``."""
    text = _UNSTORABLE.sub("", text).strip()
    if len(text) <= MEMORY_TEXT_CHARS:
        return text
    cut = text[: MEMORY_TEXT_CHARS - 1]
    space = cut.rfind(" ")
    if space > MEMORY_TEXT_CHARS // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"


# ------------------------------------------------------------------------------ Chinese characters

CJK_CLASS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
"""The Chinese characters, as the inside of a regex character class: CJK Unified Ideographs
Extension A, the Unified Ideographs block and the Compatibility Ideographs."""
CJK = re.compile(f"[{CJK_CLASS}]")
"""One Chinese character."""
CJK_RUN = re.compile(f"[{CJK_CLASS}]+")
"""A run of Chinese characters."""


def is_cjk(ch: str) -> bool:
    """True when the one character ``ch`` is a Chinese character."""
    return CJK.fullmatch(ch) is not None


# ------------------------------------------------------------------------------------ splitting

_ABBREV = frozenset(
    "mr mrs ms dr prof st jr sr vs etc eg ie e.g i.e a.m p.m am pm u.s u.k no fig approx inc "
    "ltd co mt ave apt dept est min max sgt capt col gen gov sen rep rev hon lt cf al jan feb mar "
    "apr jun "
    "jul aug sep sept oct nov dec".split()
)
# A sentence ends at ., ! or ? (and their runs, with closing quotes/brackets) followed by space,
# or at Chinese full stops, which need no space. Newlines always end a sentence.
_BOUNDARY = re.compile(
    r"(?P<en>[.!?…]+[\"'”’)\]]*)(?=\s)|(?P<zh>[。！？!?；;…]+[”’」』）)]*)(?=\S)|(?P<nl>\s*\n\s*)"
)
_LAST_WORD = re.compile(r"([A-Za-z][A-Za-z.]*)\.$")
_SPACES = re.compile(r"\s+")


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences, keeping their end punctuation.

    Abbreviations (``Dr.``, ``e.g.``, ``p.m.``), initials (``J. K.``) and decimals are not
    boundaries; an ellipsis followed by a lower-case word is not one either.
    """
    return list(_split(text))


@lru_cache(maxsize=1024)
def _split(text: str) -> tuple[str, ...]:
    # a line break is "\n" or "\r\n"; a bare "\r" inside a message is no sentence boundary
    text = text.replace("\r\n", "\n").replace("\r", " ").strip()
    if not text:
        return ()
    out: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        end = m.end()
        if m.group("en"):
            punct = m.group("en")
            piece = text[start:end]
            if punct.startswith(".") and not punct.startswith("..."):
                w = _LAST_WORD.search(piece.rstrip("\"'”’)]"))
                if w:
                    word = w.group(1).lower()
                    if (
                        word in _ABBREV
                        or len(word) == 1
                        or ("." in word and len(word.replace(".", "")) <= 3)
                    ):
                        continue
            nxt = text[end:].lstrip()[:1]
            if punct.startswith("…") or punct.startswith("..."):
                if nxt.islower():
                    continue
        elif m.group("zh"):
            # "3.5" or "e.g.x" have no space, but the zh branch only fires on CJK/full-width
            # marks or on !/? directly followed by text, which only makes sense in Chinese.
            if text[m.start()] in "!?" and not is_cjk(text[max(0, m.start() - 1)]):
                continue
        piece = text[start:end].strip()
        if piece:
            out.append(_SPACES.sub(" ", piece))
        start = end
    tail = text[start:].strip()
    if tail:
        out.append(_SPACES.sub(" ", tail))
    return tuple(out)


# ------------------------------------------------------------------------------------ questions

_Q_END = re.compile(r"[?？][\s\"'”’)\]!.…]*$")
_ZH_Q_END = re.compile(r"(?:吗|呢|么|嘛)[\s。.!！~～]*$")
_EMOJI = re.compile(
    "[\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\ufe0f\u200d]+|(?<!\\w)[:;xX]-?[)(DPp]+(?!\\w)"
)


def strip_emoji(text: str) -> str:
    if text.isascii() and ":" not in text and ";" not in text:
        return text.strip()
    return _SPACES.sub(" ", _EMOJI.sub("", text)).strip()


def is_question(sentence: str) -> bool:
    """True for a sentence that asks something (ends with a question mark, or 吗/呢 in Chinese)."""
    if sentence.isascii():
        s = sentence.rstrip(" \"')]!.")
        if s.endswith("?"):
            return True
        if ":" not in sentence and ";" not in sentence:
            return False
    s = strip_emoji(sentence)
    return bool(_Q_END.search(s) or _ZH_Q_END.search(s))


# ------------------------------------------------------------------------ fillers and small talk

# Interjections that may open a statement without adding to it. Those in the first group are
# stripped even without punctuation after them ("oh I love it"); the second group only before
# a comma or exclamation mark ("Great, I'll go" but not "Great news: ...").
_LOOSE = (
    r"oh+|wow+|well|so|yeah+|yea|yep|yup|hey+|haha\w*|hah|lol|lmao|omg|aw+|ah+|um+|uh+|hmm+|"
    r"btw|by the way|anyway|anyways|oh my god|oh my gosh|oh man|ooh+|gosh|whoa"
)
_TIGHT = (
    r"yes|no|nope|okay|ok|sure|great|cool|nice|awesome|totally|absolutely|definitely|right|"
    r"honestly|man|dude|wait|thanks|thank you|of course|true|exactly|indeed|ha|aww|amazing|"
    r"wonderful|fantastic|lovely|sweet|perfect|congrats|congratulations|hi|hello|haha|sounds good"
)
_EXCLAIM = (
    r"(?:so |how |that's (?:so )?|it's (?:so )?)?"
    r"(?:cool|nice|great|awesome|amazing|wonderful|sweet|"
    r"lovely|fantastic|impressive|exciting|glad|good)(?: that| to hear(?: that)?)?"
    r"(?=\s+(?:you|your|u|she|he|they|we|i|it)\b)"
)
_LEAD = re.compile(
    rf"^(?:(?:(?:{_LOOSE})(?:[\s,!.…~-]+|$))|(?:(?:{_TIGHT})(?:\s*[,!.…~-]+\s*|$))"
    rf"|(?:{_EXCLAIM}\s+))+",
    re.IGNORECASE,
)
_TRAIL = re.compile(r"(?:[\s,]+(?:haha\w*|lol|lmao|hehe\w*|xd))+(?=[\s.!?]*$)", re.IGNORECASE)
_ANSWER = re.compile(
    r"^(?P<yes>yes|yeah|yea|yep|yup|sure|definitely|absolutely|of course|totally|indeed|right|"
    r"exactly|correct|true)\b|^(?P<no>no|nope|not really|nah|not yet)\b",
    re.IGNORECASE,
)
_ZH_ANSWER = re.compile(r"^(?P<yes>是的|是啊|对|对啊|对的|嗯|没错|当然|好的)|^(?P<no>不是|没有|不)")
_ZH_LEAD = re.compile(
    r"^(?:哈哈+|呵呵+|嘿嘿+|哇+|啊+|哦+|噢+|嗯+|唉|诶|嘿|好的|好吧|对了|是啊|是的|对啊|没错)[，,！!。~～\s]*"
)


def leading_answer(sentence: str) -> str | None:
    """``"yes"`` or ``"no"`` when the sentence opens with an answer word, else ``None``."""
    s = sentence.strip()
    m = _ANSWER.match(s) or _ZH_ANSWER.match(s)
    if not m:
        return None
    return "yes" if m.group("yes") else "no"


def strip_fillers(sentence: str, names: tuple[str, ...] = ()) -> str:
    """Remove opening interjections, trailing laughter, emoji and vocatives (``..., Caroline!``)."""
    s = strip_emoji(sentence)
    cjk = bool(CJK.search(s))
    prev = None
    while prev != s:
        prev = s
        s = _LEAD.sub("", s).strip()
        if cjk:
            s = _ZH_LEAD.sub("", s).strip()
        s = _strip_vocative(s, names)
    tail = s[-16:].lower()
    if "ha" in tail or "lol" in tail or "lmao" in tail or "he" in tail or "xd" in tail:
        s = _TRAIL.sub("", s).strip()
    return s


def _name_like(word: str, names: tuple[str, ...]) -> bool:
    w = word.lower()
    return any(w == n or (len(w) >= 3 and n.startswith(w)) for n in names)


_VOC_END = re.compile(r"[,\s]+([A-Z][a-z]+)\s*([.!?…]*)$")
_VOC_START = re.compile(r"^(?:(?:hey|hi|hello|dear)\s+)?([A-Z][a-z]+)\s*[,!]+\s*", re.IGNORECASE)


def _strip_vocative(s: str, names: tuple[str, ...]) -> str:
    if not names or not s:
        return s
    m = _VOC_END.search(s)
    if m and _name_like(m.group(1), names) and m.start() > 0:
        s = s[: m.start()] + (m.group(2) or "")
    m = _VOC_START.match(s)
    if m and _name_like(m.group(1), names):
        s = s[m.end() :]
    return s.strip()


STOPWORDS = frozenset(
    """a an the and or but so if then than that this these those there here it its it's i me my mine
    myself we us our ours ourselves you your yours yourself he him his she her hers they them their
    theirs what which who whom whose when where why how all any both each few more most other some
    such no nor not only own same too very can will just don't should now is am are was were be been
    being have has had having do does did doing would could might must shall may of at by for with
    about against between into through during before after above below to from up down in out on
    off over under again further once also really much many lot lots get got gets getting go going
    goes went gone make made thing things stuff something anything everything nothing im i'm i've
    i'll i'd you're you've you'll you'd we're we've we'll that's what's it'll isn't aren't wasn't
    weren't doesn't didn't won't can't couldn't wouldn't shouldn't haven't hasn't hadn't let's
    still even always never ever yet already quite pretty kinda sorta like well way one ones bit
    as because while until since though although via per im ive id ill youre yeah yes yep no nope
    ok okay oh wow um uh hmm hey hi hello thanks thank please sure totally definitely absolutely
    gonna wanna gotta lol haha omg btw tho""".split()
)
# Words that carry feeling but no lasting information: a statement made only of these is small talk.
FILLER_WORDS = frozenset(
    """great awesome cool nice amazing wonderful lovely fantastic sweet good glad happy fun funny
    interesting exciting excited impressive incredible inspiring beautiful perfect true right
    agree agreed totally exactly congrats congratulations luck welcome sorry hear hearing see seeing
    soon later talk chat care bye goodbye morning night evening afternoon day today tonight hope
    hopefully guess think know mean sounds sound seems looks look feel cute adorable brilliant
    proud love loved lol haha yay woo awesome super neat wild crazy cheers thx ty np worries problem
    deal fair enough same too also meet met nice-to-meet thrilled stoked keep doing done
    best wishes hugs miss missed share sharing glad delighted happy-for wish sweet kind thoughtful
    appreciate appreciated means lot tough hard rough bummer shame wow really sure news""".split()
)
_SMALL_TALK = re.compile(
    r"^(?:how (?:are|have) you(?: been| doing)?|how's it going|what's up|good to (?:see|hear from) "
    r"you|nice to (?:meet|see) you|talk (?:to you )?(?:soon|later)|see you(?: soon| later| then)?|"
    r"take care|have a (?:good|great|nice) (?:one|day|night|time|weekend)|sounds good|sounds great|"
    r"got it|will do|no worries|me too|same here|you too|you got this|keep it up|well done|"
    r"good job|good luck|i agree|totally agree|i see|i know right|fair enough|bless you|"
    r"(?:take|have) a look(?: at (?:this|that|it|these))?|check (?:this|it|that) out|"
    r"look at (?:this|that)|"
    r"long time no (?:see|talk|chat)|no doubts?|(?:i )?(?:100%|completely|fully) agree|"
    r"that's (?:so |really |very |pretty |super )*(?:\w+)|what an? (?:\w+ ){0,2}\w+)[\s.!?…~]*$",
    re.IGNORECASE,
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d+")
_ZH_FILLERS = re.compile(
    r"你好|您好|大家好|谢谢|多谢|感谢|哈哈+|呵呵+|嘿嘿+|嗯+|好的|好吧|好啊|没问题|不客气|再见|拜拜|"
    r"晚安|早上好|早安|下午好|晚上好|收到|明白了?|知道了|是的|没错|太棒了|真棒|真好|厉害|加油|"
    r"辛苦了|哇+|哦+|噢+|啊+|呀|吧|呢|了|对|好|行|可以|嗯嗯|ok|OK|Ok|真的|确实|当然|一定|好久不见|"
    r"最近怎么样|怎么样|你呢|我也是|同意"
)


def content_words(sentence: str) -> list[str]:
    """Lower-cased words of an English sentence that are neither stopwords nor fillers."""
    return list(_content(sentence))


_NONCONTENT = STOPWORDS | FILLER_WORDS


@lru_cache(maxsize=1024)
def _content(sentence: str) -> tuple[str, ...]:
    out = []
    for w in _WORD.findall(sentence.lower().replace("’", "'")):
        if w in _NONCONTENT or (w.endswith("'s") and w[:-2] in _NONCONTENT):
            continue
        out.append(w)
    return tuple(out)


def is_small_talk(sentence: str, names: tuple[str, ...] = (), cleaned: str | None = None) -> bool:
    """True for greetings, thanks, laughter, agreement and other statements with no content.

    ``names`` are the lower-cased names of the people in the conversation; they do not count as
    content (``"Thanks, Mel!"`` is small talk). ``cleaned`` is ``strip_fillers(sentence, names)``
    when the caller already has it.
    """
    s = strip_fillers(sentence, names) if cleaned is None else cleaned
    if not s:
        return True
    if CJK.search(s):
        rest = _ZH_FILLERS.sub("", s)
        rest = re.sub(r"[\W_]+", "", rest)
        for n in names:
            rest = rest.replace(n, "")
        return len(CJK.findall(rest)) + len(_WORD.findall(rest)) < 2
    if _SMALL_TALK.match(s):
        return True
    words = [w for w in content_words(s) if not _name_like(w, names)]
    if words and _POLITE_LEAD.match(s):
        words = [w for w in words if w not in _GENERIC_NOUNS]
    return not words


# "Thanks for the support", "Appreciate your help", "Nice idea": politeness about generic things.
_POLITE_LEAD = re.compile(
    r"^(?:thanks|thank you|thank|appreciate|appreciated|nice|great|cool|good|awesome|always|"
    r"really|so|such|what)\b",
    re.IGNORECASE,
)
_GENERIC_NOUNS = frozenset(
    """support help advice words word encouragement tips tip idea ideas system kindness info
    sharing asking askin askin' listening chat talk reminder suggestion suggestions feedback
    understanding compliment compliments offer input thought thoughts everything""".split()
)
