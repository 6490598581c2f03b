"""Our Porter stemmer against NLTK's ``PorterStemmer()`` on every token of the LoCoMo data.

    python benchmarks/porter_vocab.py --data ../shared/data/locomo \
        --json benchmarks/results/porter_vocab.json [--sample tests/eval/porter_sample.tsv]

The vocabulary is every distinct token that the LoCoMo scorer would stem: each text of the data
files (turns, captions, questions, answers, summaries) goes through ``normalize_answer`` and is
split on white space, as in ``skillstream.eval.scoring.answer_tokens``. Each token is stemmed by
:func:`skillstream.eval.porter.stem` and by NLTK's ``PorterStemmer()`` (its default mode,
``NLTK_EXTENSIONS``, the one the reference scorer builds); every token whose stems differ is
listed. ``--sample`` writes a deterministic sample of (token, NLTK stem) pairs, the fixture of
``tests/eval/test_porter.py``. Needs ``nltk`` (the ``test`` extra).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llm_stub import write_results  # noqa: E402

SAMPLE_EVERY = 7
"""One token of every this many (in sorted order) goes into the sample, plus every token that
the stemmer changes in an unusual way (step 2/3/4 suffixes, irregular forms)."""


def texts(value: Any) -> list[str]:
    """Every string inside a decoded JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in texts(v)]
    return []


def vocabulary(folder: Path) -> set[str]:
    from skillstream.eval.scoring import normalize_answer

    words: set[str] = set()
    files = sorted(folder.glob("*.json")) if folder.is_dir() else [folder]
    for path in files:
        for text in texts(json.loads(path.read_text(encoding="utf-8"))):
            words.update(normalize_answer(text).split())
    return words


def sample(words: list[str], stems: dict[str, str]) -> list[str]:
    """A deterministic sample: every ``SAMPLE_EVERY``-th token, and every token whose stem is
    not a plain prefix cut (the rules that rewrite a suffix are where stemmers differ)."""
    keep = [w for i, w in enumerate(words) if i % SAMPLE_EVERY == 0 or not w.startswith(stems[w])]
    return sorted(set(keep))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="LoCoMo JSON file or a folder of them.")
    ap.add_argument("--json", required=True, help="Where to write the results JSON (and .md).")
    ap.add_argument("--sample", help="Write a (token, NLTK stem) sample TSV here.")
    args = ap.parse_args(argv)

    import nltk
    from nltk.stem import PorterStemmer

    from skillstream.eval.porter import stem

    reference = PorterStemmer()
    words = sorted(vocabulary(Path(args.data)))
    expected = {w: reference.stem(w) for w in words}
    differ = [
        {"token": w, "ours": stem(w), "nltk": expected[w]} for w in words if stem(w) != expected[w]
    ]
    result = {
        "data": str(args.data),
        "tokens": len(words),
        "differ": len(differ),
        "differences": differ[:200],
        "nltk": nltk.__version__,
        "nltk_mode": reference.mode,
        "python": platform.python_version(),
    }
    table = [
        "| tokens | stems that differ from NLTK | NLTK | mode |",
        "| ---: | ---: | --- | --- |",
        f"| {len(words)} | {len(differ)} | {nltk.__version__} | {reference.mode} |",
    ]
    write_results(args.json, result, table)
    if args.sample:
        rows = sample(words, expected)
        out = Path(args.sample)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(f"{w}\t{expected[w]}\n" for w in rows), encoding="utf-8")
    print(json.dumps({k: result[k] for k in ("tokens", "differ", "nltk", "nltk_mode")}))
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
