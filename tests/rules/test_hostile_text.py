"""The rules executor's work on one message grows linearly with its length.

A message of 20,000 characters (the message limit) built from one repeated piece, the kind that
makes text rules repeat a scan of the whole text per match (a weekday per ten characters once cost
21 s here, because each one searched the whole text for its tense), is extracted in under
``BOUND`` seconds, the best of three tries. Linear work takes at most 0.4 s for any of them on the
machine that wrote this test; the bound leaves a margin of five for a slower or busier one, while
a quadratic rule takes tens of seconds.
"""

from __future__ import annotations

import time

import pytest

from skillstream.extract import ExtractionInput
from skillstream.memories import OwnerMemories
from skillstream.rules.executor import RulesExecutor
from tests.factories import make_span

LIMIT = 20_000
BOUND = 2.0
PIECES = (
    "on Monday ",
    "last Friday ",
    "next weekend ",
    "yesterday ",
    "in 3 days ",
    "I like ",
    "my sister ",
    "I am a ",
    "Dr. ",
    "e.g. ",
    "3.5 ",
    "... ",
    "Mr. Smith said ",
    "I prefer X over Y ",
    "password\n",
    "key\n",
    "sk-\n",
    "我喜欢",
    "上周一",
    ":) ",
    "token-",
    "\n",
)


def extract_time(text: str) -> float:
    executor = RulesExecutor()
    span = make_span([("user", text)])
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        executor.execute(ExtractionInput(span, text, [], [], OwnerMemories("c1")))
        best = min(best, time.perf_counter() - start)
        if best < BOUND:
            break
    return best


@pytest.mark.parametrize("piece", PIECES)
def test_a_hostile_message_at_the_limit_is_extracted_in_bounded_time(piece):
    text = (piece * (LIMIT // len(piece) + 1))[:LIMIT]
    assert extract_time(text) < BOUND
