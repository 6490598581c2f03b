"""Which messages are already inside a done span (pure logic over the span ledger's message ids).

The span ledger's ``done`` rows list their messages. A run reads them once (for its owners), and
the span step drops a message that is already in a done span when a span closes, so whatever the
cut (a replay after a crash that closes a quiet conversation at another moment, a grown log
re-run), no message is extracted twice. A replay that cuts the same spans meets the same span ids
and skips them whole, as before.

The set is kept compact: one 64-bit hash per message (conversation id and message id) in a
sorted array, about 8 bytes a message, so a home of millions of messages costs a few megabytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np

__all__ = ["DoneMessages", "message_key"]


def message_key(conversation_id: str, message_id: str) -> int:
    """A 64-bit key for one message of one conversation."""
    h = hashlib.blake2b(digest_size=8)
    h.update(conversation_id.encode("utf-8", "surrogatepass"))
    h.update(b"\x00")
    h.update(message_id.encode("utf-8", "surrogatepass"))
    return int.from_bytes(h.digest(), "little")


class DoneMessages:
    """The messages of done spans, as sorted 64-bit keys."""

    def __init__(self, pairs: Iterable[tuple[str, str]] = ()) -> None:
        keys = np.fromiter((message_key(c, m) for c, m in pairs), dtype=np.uint64)
        self._keys = np.unique(keys)

    def __len__(self) -> int:
        return int(self._keys.size)

    def __contains__(self, pair: object) -> bool:
        if not isinstance(pair, tuple) or len(pair) != 2 or not self._keys.size:
            return False
        key = np.uint64(message_key(str(pair[0]), str(pair[1])))
        i = int(np.searchsorted(self._keys, key))
        return i < self._keys.size and self._keys[i] == key

    def done(self, conversation_id: str, message_id: str) -> bool:
        """Whether the message is inside a done span."""
        return (conversation_id, message_id) in self
