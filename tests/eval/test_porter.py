"""The Porter stemmer against NLTK's ``PorterStemmer()`` on a sample of the LoCoMo vocabulary.

``porter_sample.tsv`` holds (token, stem) pairs stemmed by NLTK 3.10 in its default
``NLTK_EXTENSIONS`` mode, the stemmer of the LoCoMo reference scorer; it was written by
``benchmarks/porter_vocab.py --sample``, which also compares the whole vocabulary of the data.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from skillstream.eval.porter import stem

SAMPLE = Path(__file__).with_name("porter_sample.tsv")


def _pairs() -> list[tuple[str, str]]:
    rows = SAMPLE.read_text(encoding="utf-8").splitlines()
    return [(w, s) for w, s in (row.split("\t") for row in rows)]


def test_the_sample_is_large_and_exercises_suffix_rewrites() -> None:
    pairs = _pairs()
    assert len(pairs) > 1000
    # the rules that rewrite a suffix (not a plain cut) are where stemmers differ
    assert sum(not w.startswith(s) for w, s in pairs) > 200


def test_every_sampled_token_stems_as_nltk_does() -> None:
    wrong = [(w, stem(w), s) for w, s in _pairs() if stem(w) != s]
    assert wrong == []


@pytest.mark.parametrize(
    ("word", "expected"),
    [("relentlessly", "relentlessli"), ("carelessly", "carelessli"), ("hopefully", "hope")],
)
def test_no_lessli_rule_but_fulli(word: str, expected: str) -> None:
    assert stem(word) == expected
