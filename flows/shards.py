"""Keys and thread fan-out shared by the stateful operators: owner shards and per-owner groups."""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def per_owner(
    pool: ThreadPoolExecutor,
    values: list[T],
    owner_of: Callable[[T], str],
    run: Callable[[str, list[T]], R],
) -> list[tuple[str, R]]:
    """Group ``values`` by owner (keeping their order) and run the groups on ``pool``.

    Different owners run at the same time; one owner's values go to one ``run`` call, in order.
    Returns ``(owner, result)`` in the order owners first appear.
    """
    groups: dict[str, list[T]] = {}
    for v in values:
        groups.setdefault(owner_of(v), []).append(v)
    futures = {owner: pool.submit(run, owner, items) for owner, items in groups.items()}
    return [(owner, futures[owner].result()) for owner in groups]


def shard_of(key: str, shards: int) -> str:
    """A stable shard name for a key (crc32, not ``hash()``, which differs between processes)."""
    return str(zlib.crc32(key.encode("utf-8")) % max(1, shards))


def shard_key(shard: str, workers: int) -> str:
    """The state key a shard is extracted under: one that Bytewax gives to worker
    ``shard % workers``, so the shards of a run are spread evenly over its workers.

    Bytewax places a state key on the worker its hash names, and with plain numbers that can be
    very uneven (with two workers, shards ``"0"`` and ``"1"`` both land on the second one, which
    then does all the extraction). The key is the shard number itself when that already lands
    right, else the number with the first suffix (``"~1"``, ``"~2"``...) that does; the same
    shard and worker count always give the same key, in every process.

    Args:
        shard: A shard name from :func:`shard_of`.
        workers: The run's worker count, over every process.
    """
    return _shard_key(shard, max(1, workers))


@functools.lru_cache(maxsize=4096)
def _shard_key(shard: str, workers: int) -> str:
    target = int(shard) % workers
    key, salt = shard, 0
    while worker_of(key, workers) != target:
        salt += 1
        key = f"{shard}~{salt}"
    return key


def worker_of(key: str, workers: int) -> int:
    """The worker Bytewax routes a state key to: Rust's default hasher (SipHash-1-3 with zero
    keys) over the key's ``Hash`` bytes (UTF-8, then ``0xff``), modulo the worker count."""
    return _siphash13(key.encode("utf-8") + b"\xff") % max(1, workers)


_MASK = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _MASK


def _siphash13(data: bytes) -> int:
    """SipHash-1-3 of ``data`` with the key (0, 0), as a 64-bit integer."""
    v = [0x736F6D6570736575, 0x646F72616E646F6D, 0x6C7967656E657261, 0x7465646279746573]

    def rounds(n: int) -> None:
        for _ in range(n):
            v[0] = (v[0] + v[1]) & _MASK
            v[1] = _rotl(v[1], 13) ^ v[0]
            v[0] = _rotl(v[0], 32)
            v[2] = (v[2] + v[3]) & _MASK
            v[3] = _rotl(v[3], 16) ^ v[2]
            v[0] = (v[0] + v[3]) & _MASK
            v[3] = _rotl(v[3], 21) ^ v[0]
            v[2] = (v[2] + v[1]) & _MASK
            v[1] = _rotl(v[1], 17) ^ v[2]
            v[2] = _rotl(v[2], 32)

    whole = len(data) // 8 * 8
    tail = int.from_bytes(data[whole:], "little") | ((len(data) & 0xFF) << 56)
    for word in [
        *(int.from_bytes(data[i : i + 8], "little") for i in range(0, whole, 8)),
        tail,
    ]:
        v[3] ^= word
        rounds(1)
        v[0] ^= word
    v[2] ^= 0xFF
    rounds(3)
    return v[0] ^ v[1] ^ v[2] ^ v[3]
