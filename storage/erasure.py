"""Tombstones of forgotten messages: salted hashes that keep a replay from bringing them back.

Forgetting an owner (``services/forget.py``) erases every row of the owner, and then nothing in
the home says which messages it had: a replay of the same source would extract them again. So
before anything is erased, each of the owner's message ids becomes a tombstone in the catalog
table ``erased_messages``: ``blake2b(salt, owner id, message id)``. The salt is random, made once
per home (``erasure_salt``), so a hash cannot be looked up in a table built for another home; the
ids and the text are never kept. A message of that owner with a new id hashes to something no
tombstone holds and is taken as new; another owner's message with the same id is not touched
either, since the owner is part of the hash.

The run checks each message before admission (:meth:`ErasedMessages.admits`, one hash and one set
lookup; ``flows/memory.py``). The audit row of an erasure (``erasures``) names the owner by the
same kind of salted hash only.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

SALT_NAME = "erasure"
"""The ``name`` of the salt's row in ``erasure_salt``."""


def salted_hash(salt: str, *parts: str) -> str:
    """``blake2b`` (32 hex characters) of the parts, keyed with the home's salt."""
    h = hashlib.blake2b(key=bytes.fromhex(salt), digest_size=16)
    for part in parts:
        h.update(part.encode("utf-8"))
        h.update(b"\x1f")
    return h.hexdigest()


def message_hash(salt: str, owner_id: str, message_id: str) -> str:
    """The tombstone of one message of one owner."""
    return salted_hash(salt, "message", owner_id, message_id)


def owner_hash(salt: str, owner_id: str) -> str:
    """How the audit names a forgotten owner."""
    return salted_hash(salt, "owner", owner_id)


@dataclass(frozen=True)
class ErasedMessages:
    """The tombstones a run checks messages against (empty: every message is admitted)."""

    salt: str | None = None
    hashes: frozenset[str] = field(default_factory=frozenset)

    def admits(self, message: Any) -> bool:
        """Whether a message (anything with ``owner_id`` and ``message_id``) was not forgotten;
        other values (dead letters) pass."""
        if not self.hashes or self.salt is None:
            return True
        owner, mid = getattr(message, "owner_id", None), getattr(message, "message_id", None)
        if owner is None or mid is None:
            return True
        return message_hash(self.salt, owner, mid) not in self.hashes

    @classmethod
    def read(cls, catalog: Any) -> ErasedMessages:
        """The home's tombstones, from an open catalog (none in a catalog without the tables)."""
        if not catalog.has("erased_messages") or not catalog.has("erasure_salt"):
            return cls()
        salt = read_salt(catalog)
        if salt is None:
            return cls()
        rows = catalog.sql("SELECT message_hash FROM erased_messages").column(0).to_pylist()
        return cls(salt, frozenset(rows))


def read_salt(catalog: Any) -> str | None:
    """The home's erasure salt, or ``None`` before the first erasure."""
    if not catalog.has("erasure_salt"):
        return None
    got = catalog.sql("SELECT salt FROM erasure_salt WHERE name = ?", [SALT_NAME])
    return got.column(0)[0].as_py() if got.num_rows else None


def ensure_salt(catalog: Any) -> str:
    """The home's erasure salt, made (32 random bytes) and stored on first use; a concurrent
    maker's salt wins (the row is inserted only when missing, then read back)."""
    salt = read_salt(catalog)
    if salt is not None:
        return salt
    row = {"name": SALT_NAME, "salt": secrets.token_hex(32), "created_at": datetime.now(UTC)}
    catalog.run_transaction(lambda cat: cat.insert_ignore("erasure_salt", [row]))
    stored = read_salt(catalog)
    assert stored is not None
    return stored
