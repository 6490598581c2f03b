"""LoCoMo scoring: answer normalisation, token F1 by category rules, abstention, evidence recall.

The rules follow the LoCoMo reference scorer (``task_eval/evaluation.py`` of snap-research/locomo):

* **normalise**: lower-case, drop commas, drop ASCII punctuation, drop the words ``a``, ``an``,
  ``the`` and ``and``, split on white space, Porter-stem every token (:mod:`.porter`);
* **token F1**: the harmonic mean of precision and recall of the multiset of stemmed tokens
  (0 when nothing is shared, or when either side is empty);
* **category 1** (multi-hop): gold and prediction are split on commas *before* normalising; each
  gold part scores its best match among the prediction parts and the question's F1 is the mean
  over gold parts;
* **category 3** (open-domain): the gold answer is cut at its first ``;``;
* **categories 2 and 4**: plain token F1;
* **category 5** (adversarial, no gold answer): 1 when the prediction abstains (contains
  "no information available" or "not mentioned", case-insensitive), else 0.

Evidence recall is skillstream's own retrieval measure: the share of a question's evidence turns
(LoCoMo ``dia_id`` values) that appear among the ``source_message_ids`` of the retrieved memories.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence

from skillstream.eval.porter import stem

ABSTENTION_MARKERS = ("no information available", "not mentioned")
"""A category-5 prediction containing one of these (lower-cased) counts as a correct abstention."""

ABSTENTION_ANSWER = "Not mentioned in the conversation"
"""What the answer prompt asks the model to say when the memories do not hold the answer."""

_PUNCT = str.maketrans("", "", string.punctuation)
_STOP = re.compile(r"\b(a|an|the|and)\b")


def normalize_answer(text: str) -> str:
    """Lower-case, drop commas and punctuation, drop a/an/the/and, collapse white space."""
    s = str(text).replace(",", "").lower().translate(_PUNCT)
    return " ".join(_STOP.sub(" ", s).split())


def answer_tokens(text: str) -> list[str]:
    """The normalised, Porter-stemmed tokens of an answer."""
    return [stem(w) for w in normalize_answer(text).split()]


def token_f1(prediction: str, gold: str) -> float:
    """Token F1 between a prediction and a gold answer after normalising and stemming both.

    Example:
        >>> round(token_f1("The hiking trip", "hiking trips in May"), 4)
        0.6667
    """
    pred, ref = answer_tokens(prediction), answer_tokens(gold)
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def multi_answer_f1(prediction: str, gold: str) -> float:
    """Category-1 F1: mean over the comma-separated gold parts of their best prediction part."""
    preds = [p.strip() for p in str(prediction).split(",")]
    golds = [g.strip() for g in str(gold).split(",")]
    return sum(max(token_f1(p, g) for p in preds) for g in golds) / len(golds)


def gold_for_category(gold: str, category: int) -> str:
    """The gold answer as scored: category 3 keeps the part before the first ``;``."""
    gold = str(gold)
    return gold.split(";")[0].strip() if category == 3 else gold


def is_abstention(prediction: str) -> bool:
    """Whether a prediction says that the answer is not available (the category-5 rule)."""
    low = str(prediction).lower()
    return any(marker in low for marker in ABSTENTION_MARKERS)


def score_answer(prediction: str, gold: str | None, category: int) -> float:
    """The F1 of one answer under the LoCoMo category rules.

    Args:
        prediction: The model's answer.
        gold: The gold answer (``None`` for category 5).
        category: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial.

    Returns:
        A score in [0, 1].

    Raises:
        ValueError: for a category outside 1-5, or a missing gold answer in categories 1-4.
    """
    if category == 5:
        return 1.0 if is_abstention(prediction) else 0.0
    if category not in (1, 2, 3, 4):
        raise ValueError(f"LoCoMo category must be 1-5, got {category!r}")
    if gold is None:
        raise ValueError(f"a category-{category} question needs a gold answer, got None")
    if category == 1:
        return multi_answer_f1(prediction, gold)
    return token_f1(prediction, gold_for_category(gold, category))


def evidence_recall(evidence: Sequence[str], retrieved: Iterable[Sequence[str]]) -> float | None:
    """The share of evidence turns covered by the retrieved items' source message ids.

    Args:
        evidence: The question's evidence ``dia_id`` values (already cleaned, see
            :func:`clean_evidence`); repeats count once.
        retrieved: For each retrieved item, its ``source_message_ids``.

    Returns:
        The covered share in [0, 1], or ``None`` when there is no evidence to cover.
    """
    want = set(evidence)
    if not want:
        return None
    covered: set[str] = set()
    for ids in retrieved:
        covered.update(ids or ())
    return len(want & covered) / len(want)


_DIA_ID = re.compile(r"^D\s*:?\s*(\d+)\s*:\s*0*(\d+)$")


def clean_evidence(
    evidence: Iterable[str], known: set[str] | frozenset[str]
) -> tuple[list[str], list[str]]:
    """Keep the evidence ids that name a real turn, repairing the malformed ones that can be.

    The LoCoMo file holds a few malformed entries: two ids in one string (``"D8:6; D9:17"``, already
    split by the loader), a stray colon (``"D:11:26"`` for ``D11:26``), a bare ``"D"``, and ids of
    turns that do not exist (``"D10:19"`` in a session of 18 turns). An id that is not a turn of the
    conversation is rewritten to ``D<session>:<turn>`` (stray colon, spaces and leading zeros
    removed); if that still names no turn it is dropped, and the question is scored on the rest.

    Args:
        evidence: The question's evidence ids.
        known: Every ``dia_id`` of the conversation.

    Returns:
        ``(kept, dropped)``: the usable ids (repeats removed, order kept) and the unusable ones.
    """
    kept: dict[str, None] = {}
    dropped: list[str] = []
    for raw in evidence:
        ev = str(raw).strip()
        if ev not in known:
            m = _DIA_ID.match(ev)
            ev = f"D{int(m.group(1))}:{int(m.group(2))}" if m else ev
        if ev in known:
            kept[ev] = None
        else:
            dropped.append(str(raw))
    return list(kept), dropped


def mean(values: Iterable[float | None]) -> float | None:
    """The mean of the values that are not ``None``, or ``None`` when there are none."""
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None
