"""Language detection for the languages skillstream has prompts for (English and Chinese)."""

from __future__ import annotations

import re

from skillstream.text import CJK

_LATIN = re.compile(r"[A-Za-z]")


def detect_language(text: str) -> str:
    """Return ``"zh"`` when Chinese characters make up at least 30% of the letters, else ``"en"``.

    A Chinese character carries roughly a word, so each one is weighted as three Latin letters.
    """
    cjk = len(CJK.findall(text))
    latin = len(_LATIN.findall(text))
    if cjk == 0:
        return "en"
    return "zh" if (cjk * 3) >= 0.3 * (cjk * 3 + latin) else "en"
