"""Every built-in redaction rule runs in linear time: adversarial strings at the message limit.

A hostile message is built for each rule from what makes a regular expression backtrack: one of
the rule's hints (the words that wake it up) or one of the characters its value takes, repeated
with each separator the rules read, up to the 20,000-character limit of a message. Each is
redacted under ``BOUND`` seconds, the product's goal for one message; the time taken is the best
of three tries, so a busy machine does not fail the test while a super-linear rule (seconds to
minutes at this length) always does.
"""

from __future__ import annotations

import time

import pytest

from skillstream.redact import _HINTS, DEFAULT_PATTERNS, DEFAULT_REDACTOR, Redactor

LIMIT = 20_000
BOUND = 0.2
SEPARATORS = ("", "-", "_", ".", " ", "=", ":", ": ", "=a1", "a", "1", "/", "@", "\n", '"', "'")
EXTRA = (
    "1 ",
    "1-",
    "a1",
    "://a",
    "a://a:",
    "https://a.",
    "?token=",
    "&key=a",
    "password is ",
    "bearer ",
    "-----BEGIN PRIVATE KEY-----",
    "eyJaaaaaaaa.",
    "AKIA",
    "[REDACTED:x]",
    "密码是",
    "x=token=",
    "secret-",
    "token-",
)


def hostile_units() -> list[str]:
    units = {h + sep for hints in _HINTS.values() for h in hints for sep in SEPARATORS}
    return sorted(units | set(EXTRA))


def redact_time(redactor: Redactor, text: str) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        redactor.apply(text)
        best = min(best, time.perf_counter() - start)
        if best < BOUND:
            break
    return best


@pytest.mark.parametrize("pattern", DEFAULT_PATTERNS, ids=lambda p: p.name)
def test_each_rule_redacts_a_hostile_message_at_the_limit_in_bounded_time(pattern):
    only = Redactor((pattern,))
    slow = {}
    for unit in hostile_units():
        text = (unit * (LIMIT // len(unit) + 1))[:LIMIT]
        took = redact_time(only, text)
        if took >= BOUND:
            slow[unit] = round(took, 3)
    assert slow == {}


def test_all_rules_together_on_the_worst_known_strings():
    for unit in ("token-", "secret-", "x=token=", "1 ", "password is "):
        text = (unit * (LIMIT // len(unit) + 1))[:LIMIT]
        assert redact_time(DEFAULT_REDACTOR, text) < BOUND, unit


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("POSTGRES_PASSWORD=Xk9fjw2LmQ", "Xk9fjw2LmQ"),
        ("MYSQL_ROOT_PASSWORD: hunter2hunter", "hunter2hunter"),
        ("ADMIN_PASS=s3cr3tAdmin", "s3cr3tAdmin"),
        ("DB_PWD=Zq81nVb0a", "Zq81nVb0a"),
        ("export GITHUB_TOKEN=abcdef123456xyz", "abcdef123456xyz"),
        ("x=token=abc123456789", "abc123456789"),
        ("my.service.secret_key = q8Hn2kLp0ZrT", "q8Hn2kLp0ZrT"),
    ],
)
def test_environment_style_secrets_are_redacted(text, secret):
    out, hits = DEFAULT_REDACTOR.apply(text)
    assert secret not in out and hits, out


def test_a_credential_longer_than_its_bound_is_redacted_whole():
    value = "a1" * 600
    out, hits = DEFAULT_REDACTOR.apply(f"api_secret={value} done")
    assert out == "api_secret=[REDACTED:credential] done" and hits == ["credential"]


@pytest.mark.parametrize(
    "text",
    ["bypass = 3", "the token: nothing", "secret_level = high", "passport: X", "compass=north"],
)
def test_words_around_secrets_that_are_not_secrets_stay(text):
    assert DEFAULT_REDACTOR.apply(text) == (text, [])


@pytest.mark.parametrize("unit", ['"\\', '\\"', '"a', '"', '"token-', '{"text": "password: \\"'])
def test_model_answers_are_redacted_in_bounded_time(unit):
    from skillstream.redact import redact_answer

    text = (unit * (LIMIT // len(unit) + 1))[:LIMIT]
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        redact_answer(text)
        best = min(best, time.perf_counter() - start)
    assert best < BOUND


def test_json_string_literals_are_still_found():
    from skillstream.redact import redact_answer

    assert redact_answer('["x", "password: \\"two words\\"", "\\"", "open') == (
        '["x", "password: [REDACTED:password_phrase]", "\\"", "open'
    )
