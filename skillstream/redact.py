"""Sensitive-data rules applied before anything is stored.

Every message text (and every dead-letter payload) passes through ``Redactor.apply`` at the edge,
right after parsing, so secrets never reach LanceDB, DuckDB, logs, dead letters or task-skill
packages. The default patterns cover API keys and tokens, passwords, credit-card numbers and private
keys; users add their own. A pattern's action is ``redact`` (replace the match with
``[REDACTED:<name>]``) or ``reject`` (the whole record becomes a dead letter without its payload).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class SensitivePattern:
    name: str
    regex: str
    action: str = "redact"
    group: int = 0
    """Which regex group is the secret (0: the whole match)."""


def _luhn_ok(digits: str) -> bool:
    total, alt = 0, False
    for ch in reversed(digits):
        d = ord(ch) - 48
        if alt:
            d *= 2
            if d > 9:
                d -= 9
        total += d
        alt = not alt
    return total % 10 == 0


DEFAULT_PATTERNS: tuple[SensitivePattern, ...] = (
    SensitivePattern(
        "private_key",
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)",
    ),
    SensitivePattern("aws_access_key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    SensitivePattern("openai_key", r"\bsk-(?:proj-|live-|test-)?[A-Za-z0-9_\-]{16,}\b"),
    SensitivePattern("github_token", r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"),
    SensitivePattern("slack_token", r"\bxox[abprs]-[A-Za-z0-9\-]{10,}\b"),
    SensitivePattern("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}\b"),
    SensitivePattern("jwt", r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\b"),
    SensitivePattern("bearer_token", r"(?i)\bbearer\s+([A-Za-z0-9_\-\.=]{16,})", group=1),
    SensitivePattern(
        "password",
        r"(?i)\b(?:password|passwd|pwd|passcode|密码)\s*(?:is|:|=|：|是)\s*[\"']?([^\s\"',;，。]{4,})",
        group=1,
    ),
    SensitivePattern(
        "api_key",
        r"(?i)\b(?:api[_\- ]?key|secret[_\- ]?key|access[_\- ]?token|auth[_\- ]?token|token)\s*(?:is|:|=)\s*[\"']?([A-Za-z0-9_\-\.]{12,})",
        group=1,
    ),
    SensitivePattern("credit_card", r"\b\d(?:[ \-]?\d){12,18}\b"),
)


class Redactor:
    """Applies sensitive patterns to text."""

    def __init__(self, patterns: tuple[SensitivePattern, ...] = DEFAULT_PATTERNS) -> None:
        self.patterns = patterns
        self._compiled = [(p, re.compile(p.regex)) for p in patterns]

    def apply(self, text: str) -> tuple[str, list[str]]:
        """Return the redacted text and the names of the patterns that matched.

        Raises nothing; callers check ``rejects`` to decide whether the record may be kept.
        """
        hits: list[str] = []
        for pat, rx in self._compiled:
            def repl(m: re.Match[str], pat: SensitivePattern = pat) -> str:
                secret = m.group(pat.group)
                if pat.name == "credit_card":
                    digits = re.sub(r"\D", "", secret)
                    if not (13 <= len(digits) <= 19 and _luhn_ok(digits)):
                        return m.group(0)
                hits.append(pat.name)
                whole = m.group(0)
                if pat.group == 0:
                    return f"[REDACTED:{pat.name}]"
                start = m.start(pat.group) - m.start(0)
                end = m.end(pat.group) - m.start(0)
                return whole[:start] + f"[REDACTED:{pat.name}]" + whole[end:]

            text = rx.sub(repl, text)
        return text, hits

    def rejects(self, hits: list[str]) -> list[str]:
        actions = {p.name: p.action for p in self.patterns}
        return [h for h in hits if actions.get(h) == "reject"]


DEFAULT_REDACTOR = Redactor()
