"""LoCoMo scoring rules against hand-computed cases, and the Porter stemmer."""

from __future__ import annotations

import pytest

from skillstream.eval.porter import measure, stem
from skillstream.eval.scoring import (
    answer_tokens,
    clean_evidence,
    evidence_recall,
    gold_for_category,
    is_abstention,
    mean,
    multi_answer_f1,
    normalize_answer,
    score_answer,
    token_f1,
)

# Porter's paper examples and NLTK-default outputs (the stemmer the LoCoMo scorer uses).
STEMS = {
    "caresses": "caress",
    "ponies": "poni",
    "ties": "tie",
    "caress": "caress",
    "cats": "cat",
    "feed": "feed",
    "agreed": "agre",
    "plastered": "plaster",
    "bled": "bled",
    "motoring": "motor",
    "sing": "sing",
    "conflated": "conflat",
    "troubled": "troubl",
    "sized": "size",
    "hopping": "hop",
    "tanned": "tan",
    "falling": "fall",
    "hissing": "hiss",
    "fizzed": "fizz",
    "failing": "fail",
    "filing": "file",
    "happy": "happi",
    "sky": "sky",
    "skies": "sky",
    "relational": "relat",
    "conditional": "condit",
    "rational": "ration",
    "valenci": "valenc",
    "digitizer": "digit",
    "conformabli": "conform",
    "radicalli": "radic",
    "differentli": "differ",
    "vileli": "vile",
    "analogousli": "analog",
    "vietnamization": "vietnam",
    "predication": "predic",
    "operator": "oper",
    "feudalism": "feudal",
    "decisiveness": "decis",
    "hopefulness": "hope",
    "callousness": "callous",
    "formaliti": "formal",
    "sensitiviti": "sensit",
    "sensibiliti": "sensibl",
    "triplicate": "triplic",
    "formative": "form",
    "formalize": "formal",
    "electriciti": "electr",
    "electrical": "electr",
    "hopeful": "hope",
    "goodness": "good",
    "revival": "reviv",
    "allowance": "allow",
    "inference": "infer",
    "airliner": "airlin",
    "gyroscopic": "gyroscop",
    "adjustable": "adjust",
    "defensible": "defens",
    "irritant": "irrit",
    "replacement": "replac",
    "adjustment": "adjust",
    "dependent": "depend",
    "adoption": "adopt",
    "homologous": "homolog",
    "communism": "commun",
    "activate": "activ",
    "angulariti": "angular",
    "effective": "effect",
    "bowdlerize": "bowdler",
    "probate": "probat",
    "rate": "rate",
    "cease": "ceas",
    "controll": "control",
    "roll": "roll",
    "generalizations": "gener",
    "oscillators": "oscil",
    "running": "run",
    "dying": "die",
    "lying": "lie",
    "cry": "cri",
    "say": "say",
    "died": "die",
    "cried": "cri",
    "yes": "ye",
    "hopefully": "hope",
    "carelessly": "carelessli",  # NLTK has no -lessli rule
    "analogies": "analog",
    "is": "is",
    "Painting": "paint",
    "news": "news",
}


@pytest.mark.parametrize(("word", "expected"), sorted(STEMS.items()))
def test_porter_stem(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_porter_measure() -> None:
    # Porter's examples:
    # m=0 tr, ee, tree, y, by; m=1 trouble, oats, trees, ivy; m=2 troubles, private
    assert [measure(w) for w in ("tr", "ee", "tree", "y", "by")] == [0, 0, 0, 0, 0]
    assert [measure(w) for w in ("trouble", "oats", "trees", "ivy")] == [1, 1, 1, 1]
    assert [measure(w) for w in ("troubles", "private", "oaten", "orrery")] == [2, 2, 2, 2]


def test_normalize_drops_punctuation_articles_and_commas() -> None:
    assert normalize_answer("The cat's toy, and A ball!") == "cats toy ball"
    assert normalize_answer("An apple; the end.") == "apple end"
    # "and" is a whole word only: "Andes" and "sand" keep it
    assert normalize_answer("sand and the Andes") == "sand andes"
    assert answer_tokens("Hiking trips, in May") == ["hike", "trip", "in", "may"]


def test_token_f1_hand_computed() -> None:
    # pred [hike, trip]; gold [hike, trip, in, may]: P=1, R=1/2 -> F1 = 2/3
    assert token_f1("The hiking trip", "hiking trips in May") == pytest.approx(2 / 3)
    # dates in another order and punctuation: identical token bags
    assert token_f1("May 7, 2023", "7 May 2023") == 1.0
    # repeated tokens count as a multiset: common = 1 dog + 1 cat; P = R = 2/3
    assert token_f1("dog dog cat", "dog cat cat") == pytest.approx(2 / 3)
    # pred [paint, sunset, by, lake] vs gold [paint, of, sunris]: common 1, P=1/4, R=1/3 -> 2/7
    assert token_f1("painting a sunset by the lake", "Paintings of sunrise") == pytest.approx(2 / 7)
    assert token_f1("", "anything") == 0.0
    assert token_f1("the a an", "the") == 0.0  # nothing left on either side
    assert token_f1("Paris", "Rome") == 0.0


def test_category_1_splits_on_commas_and_averages_best_matches() -> None:
    # gold parts: "Rome" best 1.0 (vs "Rome"), "Berlin" best 0.0 -> 0.5
    assert multi_answer_f1("Paris, Rome", "Rome, Berlin") == 0.5
    assert score_answer("Paris, Rome", "Rome, Berlin", 1) == 0.5
    # one prediction, two gold parts: "pottery" 1.0, "painting classes" vs "pottery" 0 -> 0.5
    assert score_answer("pottery", "pottery, painting classes", 1) == 0.5
    # gold part "camping trips" vs pred part "went camping": [went, camp] vs [camp, trip]: 0.5
    assert score_answer("went camping, swimming", "camping trips, swimming", 1) == pytest.approx(
        0.75
    )
    # without the category rule the commas vanish in normalisation and it is one token bag
    assert score_answer("Paris, Rome", "Rome, Berlin", 4) == 0.5


def test_category_3_cuts_gold_at_first_semicolon() -> None:
    gold = "Likely yes; she talks about her kids a lot"
    assert gold_for_category(gold, 3) == "Likely yes"
    assert gold_for_category(gold, 4) == gold
    # [ye] vs [like, ye] -> P=1, R=1/2 -> 2/3; against the full gold it would be far lower
    assert score_answer("yes", gold, 3) == pytest.approx(2 / 3)
    assert score_answer("yes", gold, 4) == pytest.approx(2 / 9)  # 8 gold tokens: 2(1/8)/(9/8)


def test_categories_2_and_4_are_plain_f1() -> None:
    assert score_answer("7 May 2023", "7 May 2023", 2) == 1.0
    assert score_answer("in May 2023", "7 May 2023", 2) == pytest.approx(2 / 3)
    assert score_answer("a golden retriever", "retriever", 4) == pytest.approx(2 / 3)


def test_category_5_abstention_rule() -> None:
    assert score_answer("Not mentioned in the conversation", None, 5) == 1.0
    assert score_answer("No information available.", None, 5) == 1.0
    assert score_answer("It is NOT MENTIONED.", "whatever", 5) == 1.0
    assert score_answer("Paris", None, 5) == 0.0
    assert is_abstention("not mentioned") and not is_abstention("mentioned")


def test_bad_category_or_missing_gold_is_an_error() -> None:
    with pytest.raises(ValueError, match="1-5"):
        score_answer("x", "x", 6)
    with pytest.raises(ValueError, match="gold answer"):
        score_answer("x", None, 2)


def test_clean_evidence_repairs_and_drops() -> None:
    known = {"D1:3", "D2:1", "D11:26"}
    kept, dropped = clean_evidence(
        ["D1:3", "D:11:26", "D", "D9:9", "D1:3", "D01:03", " D2:1 "], known
    )
    assert kept == ["D1:3", "D11:26", "D2:1"]
    assert dropped == ["D", "D9:9"]
    assert clean_evidence([], known) == ([], [])


def test_evidence_recall() -> None:
    ev = ["D1:3", "D2:1"]
    assert evidence_recall(ev, [["D1:3"], ["D5:5"]]) == 0.5
    assert evidence_recall(ev, [["D5:5", "D2:1"], ["D1:3"]]) == 1.0
    assert evidence_recall(ev, []) == 0.0
    assert evidence_recall(ev + ["D1:3"], [["D1:3"]]) == 0.5  # repeats count once
    assert evidence_recall([], [["D1:3"]]) is None
    assert evidence_recall(ev, [None, ["D2:1"]]) == 0.5  # type: ignore[list-item]  # a hit with no evidence ids


def test_mean_skips_none() -> None:
    assert mean([1.0, None, 0.0]) == 0.5
    assert mean([None]) is None
