"""Token counting for span budgets.

Tokens are counted with the embedding model's own tokenizer (WordPiece for the default MiniLM,
SentencePiece for ``use-multilingual``),
which is local and fast. Counts differ a little from an OpenAI tokenizer's; the span budget is a
size target, not a hard model limit, so that is acceptable and keeps everything offline.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from skillstream.multilingual import UseTokens, is_use

_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


class TokenCounter:
    """Counts tokens with a ``tokenizers`` tokenizer, or a word-and-punctuation rule as fallback."""

    def __init__(self, model: str = "minilm") -> None:
        self._tok = None
        try:
            from tokenizers import Tokenizer

            from skillstream.embed import model_path

            path = Path(model_path(model)) / "tokenizer.json"
            if path.exists():
                tok = Tokenizer.from_file(str(path))
                tok.no_truncation()
                tok.no_padding()
                self._tok = tok
        except Exception:  # noqa: BLE001 - any failure means: use the rule
            self._tok = None

    def count(self, text: str) -> int:
        if self._tok is not None:
            return len(self._tok.encode(text, add_special_tokens=False).ids)
        return len(_WORD.findall(text))


@lru_cache(maxsize=4)
def get_counter(model: str = "minilm") -> TokenCounter | UseTokens:
    """The token counter of ``model``'s own tokenizer."""
    if is_use(model):
        return UseTokens()
    return TokenCounter(model)
