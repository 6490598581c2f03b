"""Sensitive-data rules applied before anything is stored.

Every message text (and every dead-letter payload) passes through ``Redactor.apply`` at the edge,
right after parsing, so secrets never reach LanceDB, DuckDB, logs, dead letters or task-skill
packages. The default patterns cover API keys and tokens, passwords, credit-card numbers and private
keys; users add their own. A pattern's action is ``redact`` (replace the match with
``[REDACTED:<name>]``) or ``reject`` (the whole record becomes a dead letter without its payload).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from skillstream.errors import ConfigError

ACTIONS = ("redact", "reject")


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
        r"(?i)\b(?:api[_\- ]?key|secret[_\- ]?key|access[_\- ]?token|auth[_\- "
        r"]?token|token)\s*(?:is|:|=)\s*[\"']?([A-Za-z0-9_\-\.]{12,})",
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

    def check(self, text: str) -> tuple[str, list[str], list[str]]:
        """Redact ``text``; return it, the names of the patterns that matched, those that reject."""
        out, hits = self.apply(text)
        return out, hits, self.rejects(hits)

    def with_patterns(self, extra: Iterable[SensitivePattern]) -> Redactor:
        """This redactor plus ``extra`` (same name: the later pattern replaces the earlier)."""
        return Redactor(merge_patterns(self.patterns, tuple(extra)))


DEFAULT_REDACTOR = Redactor()


def merge_patterns(*groups: tuple[SensitivePattern, ...]) -> tuple[SensitivePattern, ...]:
    """Patterns of every group, one per name; a later group replaces a name's regex, and when two
    groups give a name different actions, ``reject`` wins (the stricter rule)."""
    by_name: dict[str, SensitivePattern] = {}
    for group in groups:
        for p in group:
            prev = by_name.get(p.name)
            if prev is not None and "reject" in (prev.action, p.action) and p.action != "reject":
                p = SensitivePattern(p.name, p.regex, "reject", p.group)
            by_name[p.name] = p
    return tuple(by_name.values())


def patterns_from_config(
    items: Any, where: str = "sensitive_patterns"
) -> tuple[SensitivePattern, ...]:
    """Read user patterns: a list of ``{"name", "regex", "action": "redact"|"reject", "group"}``.

    Raises:
        ConfigError: naming the entry and what was expected, for a bad entry or regex.
    """
    if items is None:
        return ()
    if isinstance(items, str):
        try:
            items = json.loads(items)
        except ValueError:
            raise ConfigError(f"{where}: expected a JSON list of patterns, got {items!r}") from None
    if not isinstance(items, (list, tuple)):
        raise ConfigError(f"{where}: expected a list of patterns, got {type(items).__name__}")
    out = []
    for i, item in enumerate(items):
        here = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise ConfigError(f"{here}: expected a table with name, regex and action, got {item!r}")
        name, regex = item.get("name"), item.get("regex")
        action = str(item.get("action", "redact")).lower()
        group = item.get("group", 0)
        if not isinstance(name, str) or not name or not isinstance(regex, str) or not regex:
            raise ConfigError(f"{here}: 'name' and 'regex' must be non-empty text")
        if action not in ACTIONS:
            raise ConfigError(f"{here}: action {action!r} is not one of {', '.join(ACTIONS)}")
        try:
            compiled = re.compile(regex)
        except re.error as e:
            raise ConfigError(f"{here}: regex {regex!r} does not compile: {e}") from None
        if not isinstance(group, int) or not 0 <= group <= compiled.groups:
            raise ConfigError(f"{here}: group {group!r} is not a group of the regex")
        out.append(SensitivePattern(name, regex, action, group))
    return tuple(out)


def redactor_for(policies: Mapping[str, Any] | None) -> Redactor:
    """The redactor for incoming records: the defaults plus the patterns of every policy.

    ``policies`` is the ``lifecycle.policies`` setting (agent id -> policy table).

    Patterns of all agents' policies are applied to every message at parse time (a connector does
    not know every message's agent before parsing it); each agent's own patterns are applied again
    to that agent's memories before they are stored (``skillstream.lifecycle.policy``).
    """
    return _redactor_for(json.dumps(dict(policies or {}), sort_keys=True, default=str))


@lru_cache(maxsize=16)
def _redactor_for(policies_json: str) -> Redactor:
    policies = json.loads(policies_json)
    if not isinstance(policies, Mapping):
        raise ConfigError(f"policies: expected a table of agent policies, got {policies!r}")
    groups = [DEFAULT_PATTERNS]
    for agent, policy in sorted(policies.items()):
        if isinstance(policy, Mapping):
            groups.append(
                patterns_from_config(
                    policy.get("sensitive_patterns"), f"policies.{agent}.sensitive_patterns"
                )
            )
    if len(groups) == 1:
        return DEFAULT_REDACTOR
    return Redactor(merge_patterns(*groups))
