"""Which messages are already inside a done span (pure logic over the span ledger's message ids).

The span ledger's ``done`` rows list their messages. A run reads them once (for its owners), and
the span step drops a message that is already in a done span when a span closes, so whatever the
cut (a replay after a crash that closes a quiet conversation at another moment, a grown log
re-run), no message is extracted twice. A replay that cuts the same spans meets the same span ids
and skips them whole, as before.

A message is known by its owner, its conversation and its id (:func:`message_key`): two owners,
or two tenants, that use the same conversation and message ids never meet. The ledger also keeps
each message's content digest (:func:`content_digest`, written with the span since the ledger has
a ``message_digests`` column), so admission can refuse a message whose id is already done with
other content: an edited message must come with a new id, or it would stand beside what was
extracted from the first one.

The set is kept compact: one 64-bit key and one 64-bit digest per message in sorted arrays,
16 bytes a message, so a home of millions of messages costs a few tens of megabytes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence

import numpy as np

from skillstream.model import Message

__all__ = ["DoneMessages", "content_digest", "message_key"]

UNKNOWN = 0
"""Digest of a message whose span was written before the ledger kept digests."""


def message_key(owner_id: str, conversation_id: str, message_id: str) -> int:
    """A 64-bit key for one message of one owner's conversation."""
    h = hashlib.blake2b(digest_size=8)
    for part in (owner_id, conversation_id):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    h.update(message_id.encode("utf-8", "surrogatepass"))
    return int.from_bytes(h.digest(), "little")


def content_digest(message: Message) -> str:
    """What a message says (role, speaker, text, timestamp), as 16 hex characters."""
    parts = json.dumps(
        [message.role, message.speaker, message.text, message.ts.isoformat()], ensure_ascii=False
    )
    return hashlib.blake2b(parts.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def _digest_int(digest: str | None) -> int:
    if not digest:
        return UNKNOWN
    try:
        return int(digest, 16) or 1
    except ValueError:
        return UNKNOWN


class DoneMessages:
    """The messages of done spans, as sorted 64-bit keys with their content digests."""

    def __init__(self, rows: Iterable[Sequence[str | None]] = ()) -> None:
        """``rows``: ``(owner_id, conversation_id, message_id[, digest])``; the digest is
        ``None`` for a span written before digests were kept."""
        keys: list[int] = []
        digests: list[int] = []
        for row in rows:
            keys.append(message_key(str(row[0]), str(row[1]), str(row[2])))
            digests.append(_digest_int(row[3] if len(row) > 3 else None))
        key_array = np.fromiter(keys, dtype=np.uint64, count=len(keys))
        digest_array = np.fromiter(digests, dtype=np.uint64, count=len(digests))
        self._keys, first = np.unique(key_array, return_index=True)
        self._digests = digest_array[first]

    def __len__(self) -> int:
        return int(self._keys.size)

    def _find(self, message: Message) -> int:
        """The index of the message's key, or -1."""
        if not self._keys.size:
            return -1
        key = np.uint64(message_key(message.owner_id, message.conversation_id, message.message_id))
        i = int(np.searchsorted(self._keys, key))
        return i if i < self._keys.size and self._keys[i] == key else -1

    def done(self, message: Message) -> bool:
        """Whether the message (by owner, conversation and id) is inside a done span."""
        return self._find(message) >= 0

    def edited(self, message: Message) -> bool:
        """Whether a done message of the same owner, conversation and id said something else."""
        i = self._find(message)
        if i < 0:
            return False
        known = int(self._digests[i])
        return known != UNKNOWN and known != _digest_int(content_digest(message))
