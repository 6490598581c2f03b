"""Sensitive-data rules applied before anything is stored.

Every message text, metadata string and identifier (and every dead-letter payload and reason)
passes through ``Redactor.apply`` at the edge, right after parsing, so secrets never reach LanceDB,
DuckDB, dead letters or task-skill packages. Three more places redact on their own, because text
reaches them by another way:

* model answers (``redact_answer``), before they are parsed, stored or cached
  (``skillstream.llm``): a model may repeat a secret, and JSON escapes hide quoted ones;
* identifiers (``redact_id``): one holding a secret is replaced whole by a stable hash;
* log records (``LogRedactor``, installed on the CLI's handlers by ``install_log_redaction``).

The default rules (``DEFAULT_PATTERNS``) are our own regular expressions for the formats people
paste into chats: vendor key formats (cloud, repository, chat, payment, mail, AI providers,
package registries), webhook URLs, passwords inside connection URLs and URL signatures, private
keys, JWTs, bearer and basic credentials, passwords and secrets named by the words around them
(quoted phrases included) and card numbers (any separator, Luhn-checked). Offline detectors were
tried: detect-secrets' line scanner, run with its defaults on the LoCoMo chats, flags nearly every
line of prose through its entropy plugins, and it has no card rule; rules for its vendor formats
are among ours. Users add their own rules per policy. A rule's action is ``redact`` (replace the
match with ``[REDACTED:<name>]``) or ``reject`` (the whole record becomes a dead letter without its
payload).

Every built-in rule runs in linear time on any text, which matters because the text is whoever
sent it: a rule that backtracks (``[a-z]*token[a-z]*`` over ``token-token-...``) turns one crafted
message into minutes of work for the whole run. The rules stay in Python's ``re`` and are written
so that each character is read a bounded number of times: a rule starts at a literal or at the
start of a run of key characters, its repetitions are bounded or possessive, and what a regex
would need backtracking for (does the key name a secret, does the value hold letters and digits,
does a card number pass Luhn) is a check in Python on the match (``_CHECKS``). An engine that
guarantees linear time (RE2) was weighed and not taken: it has no lookaround, which the rules use
to leave earlier redactions alone, and its ``\b`` is ASCII-only, which would change the Chinese
rules. ``tests/foundation/test_redact_linear.py`` is the proof: each rule on hostile strings at the
20,000-character message limit, under 0.2 s. Users' own patterns (``sensitive_patterns``) are run
as written; their authors answer for them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, overload

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


_FREE = r"(?!\[REDACTED:)"
"""A value that is already a redaction mark is not a secret again."""
_WORD_START = r"(?<![A-Za-z0-9])"
"""Where a key word may start: not inside a word, but after ``_`` (``POSTGRES_PASSWORD``)."""
_PASSWORD_WORD = rf"(?:{_WORD_START}(?:password|passwd|passphrase|passcode|pwd|pw)|密码|口令)"
_PASSWORD_SAYS = rf"(?i)(?:{_PASSWORD_WORD}\s*(?:is|:|=|：|是)|{_WORD_START}pass\s*[:=])\s*"
_URL_END = r"[^\s\"'<>)\]]"

DEFAULT_PATTERNS: tuple[SensitivePattern, ...] = (
    SensitivePattern(
        "private_key",
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)",
    ),
    # URLs that are credentials in themselves, or carry one
    SensitivePattern(
        "webhook_url",
        r"(?i)https?://(?:hooks\.slack(?:-gov)?\.com/(?:services|workflows|triggers)/"
        r"|(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api/webhooks/"
        r"|(?:[a-z0-9\-]+\.)+(?:webhook\.office\.com|logic\.azure\.com)(?::\d+)?/)"
        rf"{_URL_END}+",
    ),
    SensitivePattern(
        "url_password",
        r"(?i)\b[a-z][a-z0-9+.\-]{1,20}://[^\s:/@\"'<>]*:" + _FREE + r"([^\s@/\"'<>]+)@",
        group=1,
    ),
    SensitivePattern(
        "url_secret",
        r"(?i)[?&](?:sig|signature|x-amz-signature|x-amz-credential|x-amz-security-token|token|"
        r"access_token|api_key|apikey|key|secret|client_secret|password)="
        + _FREE
        + r"([^&#\s\"'<>]{8,})",
        group=1,
    ),
    # vendor key formats
    SensitivePattern(
        "aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA)[0-9A-Z]{16}\b"
    ),
    SensitivePattern(
        "aws_secret_key",
        r"(?i)\b(?:aws[_\- ]?)?secret[_\- ]?(?:access[_\- ]?)?key[\"']?\s*(?:is|:|=|=>)\s*"
        r"[\"']?" + _FREE + r"([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
        group=1,
    ),
    SensitivePattern(
        "azure_key",
        r"(?i)\b(?:AccountKey|SharedAccessKey|SharedAccessSignature)\s*=\s*"
        + _FREE
        + r"([^;\s\"']{16,})",
        group=1,
    ),
    SensitivePattern("openai_key", r"\bsk-(?:proj-|live-|test-|ant-)?[A-Za-z0-9_\-]{16,}"),
    SensitivePattern("payment_key", r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}\b"),
    SensitivePattern("payment_webhook_secret", r"\bwhsec_[A-Za-z0-9+/=]{24,}"),
    SensitivePattern(
        "github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"
    ),
    SensitivePattern("gitlab_token", r"\bgl(?:pat|dt|rt|ptt|cbt)-[A-Za-z0-9_\-]{20,}"),
    SensitivePattern("slack_token", r"\b(?:xox[abposre]|xapp)-[A-Za-z0-9\-]{10,}"),
    SensitivePattern("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}\b"),
    SensitivePattern("google_oauth", r"\b(?:GOCSPX-[A-Za-z0-9_\-]{20,}|ya29\.[A-Za-z0-9_\-]{20,})"),
    SensitivePattern("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}\b"),
    SensitivePattern("npm_token", r"\bnpm_[A-Za-z0-9]{36}\b"),
    SensitivePattern("pypi_token", r"\bpypi-AgE[A-Za-z0-9_\-]{40,}"),
    SensitivePattern("sendgrid_key", r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),
    SensitivePattern("twilio_key", r"\bSK[0-9a-f]{32}\b"),
    SensitivePattern("digitalocean_token", r"\bdo[opr]_v1_[a-f0-9]{64}\b"),
    SensitivePattern("shopify_token", r"\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}\b"),
    SensitivePattern("square_token", r"\bsq0(?:atp|csp)-[A-Za-z0-9_\-]{22,}"),
    SensitivePattern("mailgun_key", r"\bkey-[0-9a-f]{32}\b"),
    SensitivePattern("telegram_bot_token", r"\b\d{8,10}:AA[A-Za-z0-9_\-]{33}\b"),
    SensitivePattern("jwt", r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    # secrets named by the words around them
    SensitivePattern(
        "bearer_token", r"(?i)\bbearer\s+" + _FREE + r"([A-Za-z0-9_\-\.=+/~]{16,})", group=1
    ),
    SensitivePattern(
        "basic_auth", r"(?i)\bauthorization\s*:\s*basic\s+([A-Za-z0-9+/]{8,}={0,2})", group=1
    ),
    SensitivePattern(
        "password_phrase",
        _PASSWORD_SAYS + r"(\"[^\"\n]{1,200}\"|'[^'\n]{1,200}'|“[^”\n]{1,200}”|「[^」\n]{1,200}」)",
        group=1,
    ),
    SensitivePattern(
        "password",
        _PASSWORD_SAYS + r"[\"']?" + _FREE + r"([^\s\"',;，。]{4,})",
        group=1,
    ),
    SensitivePattern(
        "api_key",
        r"(?i)\b(?:api[_\- ]?key|secret[_\- ]?key|access[_\- ]?token|auth[_\- "
        r"]?token|token)[\"']?\s*(?:is|:|=)\s*[\"']?" + _FREE + r"([A-Za-z0-9_\-\.]{12,})",
        group=1,
    ),
    SensitivePattern(
        "credential",
        # a run of key characters (the key words are checked on the match, see _CHECKS), then
        # the value; possessive and bounded, so each character is read a bounded number of times
        r"(?i)(?<![A-Za-z0-9_.\-])([A-Za-z0-9_.\-]{1,128}+)[\"']?\s{0,16}+[:=]\s{0,16}+[\"']?"
        + _FREE
        + r"([^\s\"',;<>()]{8,512})",
        group=2,
    ),
    SensitivePattern("credit_card", r"\b\d(?:[ .\-]?\d){12,18}\b"),
)
"""The built-in rules, applied in this order. Each names a format people paste into chats; one
quoted password (``password_phrase``, spaces allowed) is tried before a one-word one. A rule whose
value would start with a redaction mark leaves it alone, so text is never redacted twice."""


_HINTS: dict[str, tuple[str, ...]] = {
    "private_key": ("private key",),
    "webhook_url": ("://",),
    "url_password": ("://",),
    "url_secret": ("=",),
    "aws_access_key": (
        "akia",
        "asia",
        "abia",
        "acca",
        "agpa",
        "aida",
        "aipa",
        "anpa",
        "anva",
        "aroa",
    ),
    "aws_secret_key": ("secret",),
    "azure_key": ("accountkey", "sharedaccess"),
    "openai_key": ("sk-",),
    "payment_key": ("_live_", "_test_"),
    "payment_webhook_secret": ("whsec_",),
    "github_token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "gitlab_token": ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-"),
    "slack_token": ("xox", "xapp-"),
    "google_api_key": ("aiza",),
    "google_oauth": ("gocspx-", "ya29."),
    "huggingface_token": ("hf_",),
    "npm_token": ("npm_",),
    "pypi_token": ("pypi-age",),
    "sendgrid_key": ("sg.",),
    "twilio_key": ("sk",),
    "digitalocean_token": ("_v1_",),
    "shopify_token": ("shp",),
    "square_token": ("sq0",),
    "mailgun_key": ("key-",),
    "telegram_bot_token": (":aa",),
    "jwt": ("eyj",),
    "bearer_token": ("bearer",),
    "basic_auth": ("authorization",),
    "password_phrase": ("pass", "pw", "密码", "口令"),
    "password": ("pass", "pw", "密码", "口令"),
    "api_key": ("key", "token"),
    "credential": ("secret", "token", "key", "credential"),
}
"""For the built-in rules: lower-case text that every match contains. A rule is only run on text
that holds one of its hints (most chat messages hold none), which keeps the many rules cheap."""
_BUILT_IN = frozenset(DEFAULT_PATTERNS)


_CREDENTIAL_KEY = re.compile(
    r"(?i)secret|token|api[_\-]?key|apikey|access[_\-]?key|private[_\-]?key|credential|auth[_\-]?key"
)
_VALUE_CHARS = re.compile(r"[^\s\"',;<>()]*+")


def _card_ok(m: re.Match[str]) -> bool:
    digits = re.sub(r"\D", "", m.group(0))
    return 13 <= len(digits) <= 19 and _luhn_ok(digits)


def _credential_ok(m: re.Match[str]) -> bool:
    # a key that names a secret, and a value of letters and digits both: secrets are random,
    # settings words are not
    value = m.group(2)
    return (
        _CREDENTIAL_KEY.search(m.group(1)) is not None
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
    )


_CHECKS: dict[str, Callable[[re.Match[str]], bool]] = {
    "credit_card": _card_ok,
    "credential": _credential_ok,
}
"""Built-in rules whose match is a candidate: the check decides whether it is a secret. A rule
keeps its regex simple (and linear) and leaves the rest to a few lines of Python."""


def _substitute(pat: SensitivePattern, rx: re.Pattern[str], text: str, hits: list[str]) -> str:
    """``text`` with every match of ``rx`` that is a secret replaced by ``[REDACTED:<name>]``.

    A candidate refused by the rule's check is searched again from where its secret starts, so a
    secret inside a refused value (``x=token=...``) is still found; the built-in rules bound what
    such a search reads again. A ``credential`` value cut at its bound takes the rest of its run.
    """
    check = _CHECKS.get(pat.name) if pat in _BUILT_IN else None
    out: list[str] = []
    pos = done = 0
    while pos <= len(text):
        m = rx.search(text, pos)
        if m is None:
            break
        if check is not None and not check(m):
            again = m.start(pat.group)
            pos = again if pat.group and again > m.start() else max(m.end(), m.start() + 1)
            continue
        hits.append(pat.name)
        start, end = m.span(pat.group)
        if pat.name == "credential":
            tail = _VALUE_CHARS.match(text, end)
            end = tail.end() if tail else end
        out.append(text[done:start])
        out.append(f"[REDACTED:{pat.name}]")
        done = end
        pos = max(end, m.end(), m.start() + 1) if m.end() == m.start() else max(end, m.end())
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


class Redactor:
    """Applies sensitive patterns to text."""

    def __init__(self, patterns: tuple[SensitivePattern, ...] = DEFAULT_PATTERNS) -> None:
        self.patterns = patterns
        self._compiled = [
            (p, re.compile(p.regex), frozenset(_HINTS.get(p.name, ()) if p in _BUILT_IN else ()))
            for p in patterns
        ]
        self._hints = frozenset(h for _, _, hints in self._compiled for h in hints)
        self._ids: dict[str, tuple[str, list[str]]] = {}
        """``redact_id``'s answers so far (ids repeat in every message of a conversation)."""

    def apply(self, text: str) -> tuple[str, list[str]]:
        """Return the redacted text and the names of the patterns that matched.

        Raises nothing; callers check ``rejects`` to decide whether the record may be kept.
        """
        hits: list[str] = []
        low = text.lower()
        present = {h for h in self._hints if h in low}
        for pat, rx, hints in self._compiled:
            if hints and hints.isdisjoint(present):
                continue
            text = _substitute(pat, rx, text, hits)
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

_JSON_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*+(?P<end>")?')
"""A JSON string literal, or (without ``end``) a quote that opens none on its line. Matching the
unclosed ones too is what keeps the scan linear: the quotes inside an unclosed one open none either,
so the search goes on after it instead of reading the rest of the line again from each of them."""


@overload
def redact_answer(text: str, redactor: Redactor = ...) -> str: ...
@overload
def redact_answer(text: None, redactor: Redactor = ...) -> None: ...
def redact_answer(text: str | None, redactor: Redactor = DEFAULT_REDACTOR) -> str | None:
    """A model's answer with the sensitive-data rules applied (``None`` stays ``None``).

    Answers are mostly JSON, where a pasted secret is escaped (``password: \\"two words\\"``)
    and a rule written for chat text would miss it. So each JSON string literal of the answer is
    decoded, redacted and written back first, then the whole text is redacted as usual.

    Example:
        >>> redact_answer('{"text": "Omar said password: \\"blue moon rising\\""}')
        '{"text": "Omar said password: [REDACTED:password_phrase]"}'
    """
    if text is None:
        return None

    def literal(m: re.Match[str]) -> str:
        if m.group("end") is None:
            return m.group(0)
        try:
            value = json.loads(m.group(0))
        except ValueError:
            return m.group(0)
        out, hits = redactor.apply(value)
        return json.dumps(out, ensure_ascii=False) if hits else m.group(0)

    return redactor.apply(_JSON_STRING.sub(literal, text))[0]


REDACTED_ID_PREFIX = "redacted-"
ID_MEMO = 1 << 16
"""Identifiers a redactor remembers ``redact_id``'s answer for (then it starts again)."""


def redact_id(value: str, redactor: Redactor = DEFAULT_REDACTOR) -> tuple[str, list[str]]:
    """An identifier that holds no secret, and the names of the patterns it matched.

    An identifier is not text to be read, it is a key that groups rows: a partly redacted id
    (``conv-[REDACTED:aws_access_key]``) would merge every conversation whose id held some key.
    So an id that holds a secret is replaced whole by ``redacted-`` and a BLAKE2b hash of it (16 hex
    digits): the same id always gives the same hash (replays, the messages of one conversation),
    different ids stay apart, and the hash cannot be turned back into the id.

    Example:
        >>> redact_id("team-standup")
        ('team-standup', [])
        >>> redact_id("conv-AKIA" + "Z7QF3EXAMPLE4KQW")[0]
        'redacted-6767bc14071a413e'
    """
    known = redactor._ids.get(value)
    if known is not None:
        return known[0], list(known[1])
    _, hits = redactor.apply(value)
    if not hits:
        out = value
    else:
        digest = hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
        out = REDACTED_ID_PREFIX + digest
    if len(redactor._ids) >= ID_MEMO:
        redactor._ids.clear()
    redactor._ids[value] = (out, list(hits))
    return out, hits


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


class LogRedactor(logging.Filter):
    """A logging filter that redacts every record before a handler writes it.

    The message (with its arguments filled in) and the text of an attached exception pass through
    the redactor; a record is never dropped. Attach it to handlers (``install_log_redaction``): a
    filter on a handler sees the records of every logger that reaches the handler, a filter on a
    logger only that logger's own.
    """

    def __init__(self, redactor: Redactor = DEFAULT_REDACTOR) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string: keep the template only
            message = str(record.msg)
        text, hits = self.redactor.apply(message)
        if hits or record.args:
            record.msg, record.args = text, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redactor.apply(record.exc_text)[0]
        if record.stack_info:
            record.stack_info = self.redactor.apply(record.stack_info)[0]
        return True


def install_log_redaction(
    logger: logging.Logger | None = None, redactor: Redactor = DEFAULT_REDACTOR
) -> None:
    """Put a ``LogRedactor`` on every handler of ``logger`` (default: the root logger), once."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, LogRedactor) for f in handler.filters):
            handler.addFilter(LogRedactor(redactor))
