"""The Porter stemmer, as the LoCoMo scorer uses it (NLTK's default ``NLTK_EXTENSIONS`` flavour).

The LoCoMo reference scorer stems answer tokens with ``nltk.stem.PorterStemmer()``. nltk is not a
dependency of skillstream, so the algorithm is written out here: M. F. Porter, "An algorithm for
suffix stripping" (1980), steps 1a to 5b, with the small departures NLTK's default mode makes from
the paper (they change a few stems, so scores would otherwise drift from published numbers):

* a short list of irregular forms maps straight to a stem (``dying`` -> ``die``, ``skies`` ->
  ``sky``);
* words of one or two letters are left alone;
* ``-ies`` / ``-ied`` on a four-letter word keep the ``e`` (``ties`` -> ``tie``), and ``-ied`` on
  longer words becomes ``i``;
* a final ``y`` becomes ``i`` after a consonant that is not the word's first letter, whatever comes
  before it (``cry`` -> ``cri``, ``say`` stays ``say``; the paper asks for a vowel anywhere before);
* step 2 tries ``-alli`` -> ``-al`` first and reruns, uses ``-bli`` -> ``-ble`` (Porter's later
  correction of ``-abli``), and adds ``-fulli`` -> ``-ful`` and ``-logi`` -> ``-log``; it has no
  ``-lessli`` rule (``relentlessly`` stems to ``relentlessli``, as in the reference);
* a two-letter stem vowel+consonant counts as ending consonant-vowel-consonant.

Within one rule list the first suffix that matches decides: when its condition fails, the word is
left as it is (no shorter suffix of the list is tried), exactly as in the reference.

Example:
    >>> stem("caresses"), stem("relational"), stem("hopping"), stem("dying")
    ('caress', 'relat', 'hop', 'die')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

_VOWELS = frozenset("aeiou")

_IRREGULAR = {
    "sky": ("sky", "skies"),
    "die": ("dying",),
    "lie": ("lying",),
    "tie": ("tying",),
    "news": ("news",),
    "inning": ("innings", "inning"),
    "outing": ("outings", "outing"),
    "canning": ("cannings", "canning"),
    "howe": ("howe",),
    "proceed": ("proceed",),
    "exceed": ("exceed",),
    "succeed": ("succeed",),
}
_POOL = {form: base for base, forms in _IRREGULAR.items() for form in forms}

Condition = Callable[[str], bool] | None
Rule = tuple[str, str, Condition]


def _consonant(word: str, i: int) -> bool:
    """Whether ``word[i]`` is a consonant: not a vowel, and ``y`` only after a vowel (or first)."""
    ch = word[i]
    if ch in _VOWELS:
        return False
    if ch == "y":
        return i == 0 or not _consonant(word, i - 1)
    return True


def measure(stem: str) -> int:
    """Porter's *m*: the number of vowel-run/consonant-run pairs in ``[C](VC)^m[V]``."""
    m = 0
    prev_vowel = False
    for i in range(len(stem)):
        vowel = not _consonant(stem, i)
        if prev_vowel and not vowel:
            m += 1
        prev_vowel = vowel
    return m


def _has_vowel(stem: str) -> bool:
    return any(not _consonant(stem, i) for i in range(len(stem)))


def _double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _consonant(word, len(word) - 1)


def _cvc(word: str) -> bool:
    if len(word) >= 3:
        return (
            _consonant(word, len(word) - 3)
            and not _consonant(word, len(word) - 2)
            and _consonant(word, len(word) - 1)
            and word[-1] not in "wxy"
        )
    return len(word) == 2 and not _consonant(word, 0) and _consonant(word, 1)


def _m_pos(stem: str) -> bool:
    return measure(stem) > 0


def _m_gt1(stem: str) -> bool:
    return measure(stem) > 1


def _apply(word: str, rules: Sequence[Rule]) -> str:
    """Apply the first rule whose suffix matches (``*d`` means "ends in a double consonant")."""
    for suffix, replacement, condition in rules:
        if suffix == "*d":
            if _double_consonant(word):
                stem = word[:-2]
                return stem + replacement if condition is None or condition(stem) else word
            continue
        if word.endswith(suffix):
            stem = word[: len(word) - len(suffix)]
            return stem + replacement if condition is None or condition(stem) else word
    return word


def _step1a(word: str) -> str:
    if word.endswith("ies") and len(word) == 4:
        return word[:-3] + "ie"
    return _apply(
        word, (("sses", "ss", None), ("ies", "i", None), ("ss", "ss", None), ("s", "", None))
    )


def _step1b(word: str) -> str:
    if word.endswith("ied"):
        return word[:-3] + ("ie" if len(word) == 4 else "i")
    if word.endswith("eed"):
        stem = word[:-3]
        return stem + "ee" if measure(stem) > 0 else word
    for suffix in ("ed", "ing"):
        if word.endswith(suffix) and _has_vowel(word[: -len(suffix)]):
            base = word[: -len(suffix)]
            break
    else:
        return word
    return _apply(
        base,
        (
            ("at", "ate", None),
            ("bl", "ble", None),
            ("iz", "ize", None),
            ("*d", base[-1], lambda stem: base[-1] not in "lsz"),
            ("", "e", lambda stem: measure(stem) == 1 and _cvc(stem)),
        ),
    )


def _step1c(word: str) -> str:
    return _apply(word, (("y", "i", lambda s: len(s) > 1 and _consonant(s, len(s) - 1)),))


_STEP2: tuple[Rule, ...] = (
    ("ational", "ate", _m_pos),
    ("tional", "tion", _m_pos),
    ("enci", "ence", _m_pos),
    ("anci", "ance", _m_pos),
    ("izer", "ize", _m_pos),
    ("bli", "ble", _m_pos),
    ("alli", "al", _m_pos),
    ("entli", "ent", _m_pos),
    ("eli", "e", _m_pos),
    ("ousli", "ous", _m_pos),
    ("ization", "ize", _m_pos),
    ("ation", "ate", _m_pos),
    ("ator", "ate", _m_pos),
    ("alism", "al", _m_pos),
    ("iveness", "ive", _m_pos),
    ("fulness", "ful", _m_pos),
    ("ousness", "ous", _m_pos),
    ("aliti", "al", _m_pos),
    ("iviti", "ive", _m_pos),
    ("biliti", "ble", _m_pos),
    ("fulli", "ful", _m_pos),
)


def _step2(word: str) -> str:
    if word.endswith("alli") and _m_pos(word[:-4]):
        return _step2(word[:-4] + "al")
    # "-logi" needs m > 0 of the word minus "ogi" (so the "l" counts), as in the reference.
    return _apply(word, _STEP2 + (("logi", "log", lambda stem: _m_pos(word[:-3])),))


_STEP3: tuple[Rule, ...] = (
    ("icate", "ic", _m_pos),
    ("ative", "", _m_pos),
    ("alize", "al", _m_pos),
    ("iciti", "ic", _m_pos),
    ("ical", "ic", _m_pos),
    ("ful", "", _m_pos),
    ("ness", "", _m_pos),
)

_STEP4: tuple[Rule, ...] = (
    ("al", "", _m_gt1),
    ("ance", "", _m_gt1),
    ("ence", "", _m_gt1),
    ("er", "", _m_gt1),
    ("ic", "", _m_gt1),
    ("able", "", _m_gt1),
    ("ible", "", _m_gt1),
    ("ant", "", _m_gt1),
    ("ement", "", _m_gt1),
    ("ment", "", _m_gt1),
    ("ent", "", _m_gt1),
    ("ion", "", lambda stem: measure(stem) > 1 and stem[-1:] in ("s", "t")),
    ("ou", "", _m_gt1),
    ("ism", "", _m_gt1),
    ("ate", "", _m_gt1),
    ("iti", "", _m_gt1),
    ("ous", "", _m_gt1),
    ("ive", "", _m_gt1),
    ("ize", "", _m_gt1),
)


def _step5a(word: str) -> str:
    if word.endswith("e"):
        stem = word[:-1]
        m = measure(stem)
        if m > 1 or (m == 1 and not _cvc(stem)):
            return stem
    return word


def _step5b(word: str) -> str:
    return _apply(word, (("ll", "l", lambda stem: measure(word[:-1]) > 1),))


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The Porter stem of one word (lower-cased first).

    Args:
        word: One token, typically already stripped of punctuation.

    Returns:
        The stem; words of one or two letters come back lower-cased and otherwise unchanged.
    """
    w = word.lower()
    if w in _POOL:
        return _POOL[w]
    if len(w) <= 2:
        return w
    for step in (_step1a, _step1b, _step1c, _step2):
        w = step(w)
    w = _apply(w, _STEP3)
    w = _apply(w, _STEP4)
    return _step5b(_step5a(w))
