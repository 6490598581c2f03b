"""Deterministic identifiers.

Every record written by skillstream has an id derived from what it is, never from when or where it
was computed, so that a replay after a crash (Bytewax recovery is at-least-once) or a second run
over the same input produces the same ids and the sinks' upserts collapse the duplicates.
"""

from __future__ import annotations

import hashlib
import json
from json.encoder import encode_basestring as _string
from typing import Any


def stable_id(*parts: Any, size: int = 16) -> str:
    """Hash ``parts`` into a hex id of ``2 * size`` characters.

    Parts are JSON-encoded (sorted keys) and joined with a separator that cannot occur inside a
    JSON text, so ``("a", "bc")`` and ``("ab", "c")`` give different ids.
    """
    h = hashlib.blake2b(digest_size=size)
    for part in parts:
        h.update(_json(part).encode("utf-8"))
        h.update(b"\x1f")
    return h.hexdigest()


def _json(part: Any) -> str:
    """``json.dumps(part, sort_keys=True, ensure_ascii=False, default=str)``, with the strings and
    integers that make up most ids encoded without the general encoder (the same text)."""
    kind = type(part)
    if kind is str:
        return _string(part)
    if kind is int:
        return int.__repr__(part)
    return json.dumps(part, sort_keys=True, ensure_ascii=False, default=str)


def prefixed_id(prefix: str, *parts: Any) -> str:
    """``stable_id`` with a short readable prefix such as ``mem_`` or ``spn_``."""
    return f"{prefix}_{stable_id(prefix, *parts)}"


def conversation_key(owner_id: str, conversation_id: str) -> str:
    """The key of one owner's conversation: the flow's steps keep a conversation's state under
    it, so two owners (or two tenants) that use the same conversation id never share a state."""
    return json.dumps([owner_id, conversation_id], ensure_ascii=False)


def key_owner(key: str) -> str | None:
    """The owner a :func:`conversation_key` names, or ``None`` for any other key."""
    if not key.startswith("["):
        return None
    try:
        parts = json.loads(key)
    except ValueError:
        return None
    if isinstance(parts, list) and len(parts) == 2 and all(isinstance(p, str) for p in parts):
        return str(parts[0])
    return None
