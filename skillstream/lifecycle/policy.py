"""Scopes and per-agent memory policies, enforced on every write and every read.

Scopes of a memory:

* ``private``: only its owner (``owner_id``) reads it;
* ``fleet``: every agent whose policy may read the fleet scope reads it, whoever the owner;
* ``session``: only its owner, and only within the session that created it (``session_id``).

A policy (one per agent id, ``*`` is the default for agents without one) says which scopes the
agent may read and write, the scope of its new memories, the most live memories per scope, the
default expiry of its memories and its own sensitive patterns. Configure them in
``skillstream.toml``::

    [policies."*"]
    readable_scopes = ["private", "fleet"]
    writable_scopes = ["private"]

    [policies.support-bot]
    readable_scopes = ["private", "fleet", "session"]
    writable_scopes = ["private", "session"]
    default_scope = "session"
    max_items_per_scope = { session = 50 }
    default_expiry = "30d"
    sensitive_patterns = [{ name = "ticket", regex = "TCK-\\\\d{6}", action = "reject" }]

A reader is an owner, optionally with an agent and a session. Search applies the filter of
``storage.filters.read_filter`` inside LanceDB and checks :func:`can_read` again on every hit, so no
owner ever sees another owner's private or session memories. A reader with neither owner nor agent
is the operator (the CLI without ``--owner``/``--agent``) and sees everything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from functools import lru_cache
from typing import Any

from skillstream.errors import ConfigError, InputError
from skillstream.lifecycle.clock import parse_duration
from skillstream.redact import Redactor, SensitivePattern, patterns_from_config

SCOPES = ("private", "fleet", "session")
DEFAULT_AGENT = "*"
_KEYS = {
    "readable_scopes",
    "writable_scopes",
    "default_scope",
    "max_items_per_scope",
    "default_expiry",
    "sensitive_patterns",
}


@dataclass(frozen=True)
class Policy:
    """What one agent may do with memories."""

    agent: str = DEFAULT_AGENT
    readable: tuple[str, ...] = SCOPES
    writable: tuple[str, ...] = SCOPES
    default_scope: str | None = None
    """Scope of a new memory when the executor names none (``None``: setting ``default_scope``)."""
    max_items: tuple[tuple[str, int], ...] = ()
    """(scope, most live memories of one owner in it) pairs."""
    default_expiry: timedelta | None = None
    patterns: tuple[SensitivePattern, ...] = ()

    def max_items_for(self, scope: str) -> int | None:
        for s, n in self.max_items:
            if s == scope:
                return n
        return None

    def scope_for(self, requested: str | None, fallback: str) -> str:
        """The scope a new memory gets: the requested one, else the policy's, else ``fallback``."""
        return requested or self.default_scope or fallback

    def can_write(self, scope: str) -> bool:
        return scope in self.writable

    @property
    def redactor(self) -> Redactor | None:
        return _redactor(self.patterns) if self.patterns else None

    @classmethod
    def from_config(cls, agent: str, data: Mapping[str, Any]) -> Policy:
        """Build a policy from a config table; unknown keys and bad values raise ``ConfigError``."""
        where = f"policies.{agent}"
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: expected a table, got {data!r}")
        unknown = set(data) - _KEYS
        if unknown:
            raise ConfigError(f"{where}: unknown keys {sorted(unknown)}; known: {sorted(_KEYS)}")
        readable = _scopes(data.get("readable_scopes", SCOPES), f"{where}.readable_scopes")
        writable = _scopes(data.get("writable_scopes", SCOPES), f"{where}.writable_scopes")
        default_scope = data.get("default_scope")
        if default_scope is not None and default_scope not in SCOPES:
            raise ConfigError(f"{where}.default_scope: {default_scope!r} is not one of {SCOPES}")
        max_items = data.get("max_items_per_scope") or {}
        if not isinstance(max_items, Mapping):
            raise ConfigError(f"{where}.max_items_per_scope: expected a table scope -> number")
        pairs = []
        for scope, n in sorted(max_items.items()):
            if scope not in SCOPES or not isinstance(n, int) or isinstance(n, bool) or n < 0:
                raise ConfigError(
                    f"{where}.max_items_per_scope: {scope!r} = {n!r}; expected a scope of "
                    f"{SCOPES} and a whole number >= 0"
                )
            pairs.append((scope, n))
        try:
            expiry = parse_duration(data.get("default_expiry"))
        except InputError as e:
            raise ConfigError(f"{where}.default_expiry: {e}") from None
        patterns = patterns_from_config(
            data.get("sensitive_patterns"), f"{where}.sensitive_patterns"
        )
        return cls(agent, readable, writable, default_scope, tuple(pairs), expiry, patterns)


def _scopes(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or any(v not in SCOPES for v in value):
        raise ConfigError(f"{where}: expected a list of scopes out of {SCOPES}, got {value!r}")
    return tuple(dict.fromkeys(value))


@lru_cache(maxsize=64)
def _redactor(patterns: tuple[SensitivePattern, ...]) -> Redactor:
    return Redactor(patterns)


@dataclass(frozen=True)
class PolicySet:
    """The policies of all agents; agents without their own get the default (``*``)."""

    policies: tuple[tuple[str, Policy], ...] = ()
    default: Policy = field(default_factory=Policy)

    def for_agent(self, agent_id: str | None) -> Policy:
        if agent_id is not None:
            for name, policy in self.policies:
                if name == agent_id:
                    return policy
        return self.default

    @classmethod
    def from_config(cls, data: Mapping[str, Any] | None) -> PolicySet:
        """Build from ``Settings.policies`` (agent id -> table)."""
        return _policy_set(json.dumps(data or {}, sort_keys=True, default=str))


@lru_cache(maxsize=16)
def _policy_set(data_json: str) -> PolicySet:
    data = json.loads(data_json)
    if not isinstance(data, Mapping):
        raise ConfigError(f"policies: expected a table of agent policies, got {data!r}")
    default = (
        Policy.from_config(DEFAULT_AGENT, data[DEFAULT_AGENT])
        if DEFAULT_AGENT in data
        else Policy()
    )
    named = tuple(
        (agent, Policy.from_config(agent, table))
        for agent, table in sorted(data.items())
        if agent != DEFAULT_AGENT
    )
    return PolicySet(named, default)


@dataclass(frozen=True)
class Reader:
    """Who is reading: an owner, optionally through an agent and within a session."""

    owner_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None

    @property
    def is_operator(self) -> bool:
        """Neither owner nor agent: the operator's view (everything)."""
        return self.owner_id is None and self.agent_id is None


def can_read(reader: Reader, policy: Policy, memory: Any) -> bool:
    """Whether ``reader`` under ``policy`` may see ``memory`` (a ``Memory`` or a row dict)."""
    if reader.is_operator:
        return True
    get = memory.get if isinstance(memory, Mapping) else lambda k: getattr(memory, k, None)
    scope = get("scope")
    if scope not in policy.readable:
        return False
    if scope == "fleet":
        return True
    if reader.owner_id is None or get("owner_id") != reader.owner_id:
        return False
    if scope == "private":
        return True
    if scope == "session":
        return reader.session_id is not None and get("session_id") == reader.session_id
    return False
