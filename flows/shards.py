"""Keys and thread fan-out shared by the stateful operators: owner shards and per-owner groups."""

from __future__ import annotations

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
