"""The emotional context of a session: the tone its memories speak in (offline, no LLM).

Seed 004's memory-summary has an ``emotionalContext`` field, "the tone of the interaction if
relevant (the client was frustrated, ...)". Offline there is no model to ask, so the tone is read
from words: each tone has a short list of English word stems and Chinese words that say it
("frustrat*" for "frustrated" and "frustrating"; 沮丧). A word right after a negation ("not happy",
"never worried", 不开心 is its own entry) counts for nothing.

:func:`emotional_context` returns the tones found, most frequent first (ties by name), at most
three, each with the words that showed it, e.g. ``"frustrated (annoyed, frustrating); grateful
(thanks)"``. A session without any tone word has no emotional context (``None``): the seed asks
for it only when relevant, and a guess would be noise.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_TONES = 3
MAX_WORDS = 3

TONES: dict[str, tuple[str, ...]] = {
    tone: tuple(words.split("|"))
    for tone, words in {
        "happy": "happy|happiness|glad|joy*|delight*|cheerful|thrilled|love it|wonderful|"
        "great time|fun|开心|高兴|快乐|愉快",
        "excited": "excit*|can't wait|cannot wait|looking forward|eager|兴奋|期待",
        "grateful": "grateful|thankful|thanks|thank you|appreciat*|感谢|谢谢|感激",
        "proud": "proud|accomplish*|achievement*|骄傲|自豪",
        "hopeful": "hope|hopes|hoped|hoping|hopeful|optimis*|希望",
        "calm": "calm|relax*|peaceful|at peace|平静|放松",
        "sad": "sad|sadness|unhappy|upset|heartbroken|grief|griev*|lonely|depress*|tough|"
        "hard time|难过|伤心|悲伤|孤独|不开心",
        "frustrated": "frustrat*|annoy*|angry|anger|furious|irritat*|fed up|unacceptable|"
        "disappoint*|sick of|生气|愤怒|失望|沮丧",
        "anxious": "anxious|anxiety|worr*|nervous|stress*|scared|afraid|overwhelm*|担心|焦虑|"
        "紧张|害怕|压力",
    }.items()
}
"""Tone -> words. English words match whole words, a trailing ``*`` marks a stem that matches the
start of a word (``frustrat*``: frustrated, frustrating); Chinese words match anywhere."""

_NEGATIONS = frozenset({"not", "no", "never", "hardly"})
_NEGATION_SUFFIX = "n't"
_HAN = re.compile(r"[\u4e00-\u9fff]")
_WORD = re.compile(r"[\w']+", re.UNICODE)


def _pattern(word: str) -> re.Pattern[str]:
    if _HAN.search(word):
        return re.compile(re.escape(word))
    stem = word.endswith("*")
    body = re.escape(word.rstrip("*"))
    return re.compile(r"(?<![\w'])" + body + (r"[\w']*" if stem else r"(?![\w'])"))


_PATTERNS = [
    (tone, _pattern(w), w.rstrip("*"))
    for tone, w in sorted(
        ((tone, w) for tone, words in TONES.items() for w in words), key=lambda tw: -len(tw[1])
    )
]
"""Longest words first, so 不开心 is sad before 开心 could be happy; with each pattern the text
every match of it contains (a text without it is not searched)."""


def _negated(text: str, start: int) -> bool:
    before = _WORD.findall(text[:start].lower())[-2:]
    return any(w in _NEGATIONS or w.endswith(_NEGATION_SUFFIX) for w in before)


def emotional_context(texts: Iterable[str]) -> str | None:
    """The tones ``texts`` speak in, with the words that showed them; ``None`` when none.

    Example:
        >>> emotional_context(["Sam is frustrated with the late delivery", "Sam said thanks"])
        'frustrated (frustrated); grateful (thanks)'
    """
    counts: dict[str, int] = {}
    seen: dict[str, dict[str, tuple[int, int]]] = {}  # tone -> word -> where it first appeared
    for i, text in enumerate(texts):
        low = text.lower()
        taken: list[tuple[int, int]] = []  # spans already counted (one word, one tone)
        for tone, pattern, literal in _PATTERNS:
            if literal not in low:
                continue
            for m in pattern.finditer(low):
                if any(m.start() < e and s < m.end() for s, e in taken):
                    continue
                if not _HAN.match(m.group(0)) and _negated(low, m.start()):
                    continue
                taken.append((m.start(), m.end()))
                counts[tone] = counts.get(tone, 0) + 1
                seen.setdefault(tone, {}).setdefault(m.group(0), (i, m.start()))
    if not counts:
        return None
    tones = sorted(counts, key=lambda t: (-counts[t], t))[:MAX_TONES]
    parts = []
    for t in tones:
        words = sorted(seen[t], key=lambda w: seen[t][w])[:MAX_WORDS]
        parts.append(f"{t} ({', '.join(words)})")
    return "; ".join(parts)
