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
