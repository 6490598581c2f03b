"""Memory types, their capacities, and archiving what goes over capacity.

Types (the ``memory_type`` column):

* ``WorkingMemory``: what only the current session needs (memories in the ``session`` scope);
  small, default 20 live items per owner;
* ``UserMemory``: the owner's profile: preferences and opinions (default 480);
* ``LongTermMemory``: everything else worth keeping: facts, events, plans, lessons, session
  summaries (default 1,500);
* ``SkillMemory``: memories about task skills (default 500), for components that keep them here.

An executor may name the type of a memory (``MemoryOp.memory_type``); otherwise the kind and scope
decide as above. Capacities are per owner and type, configurable (``memory_capacities``); 0 means no
limit. Over capacity, the least valuable live memories are archived, never deleted: lowest
confidence first, then fewest reinforcements, then the longest untouched, then by id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from skillstream.errors import ConfigError
from skillstream.lifecycle.clock import latest
from skillstream.model import Memory
from skillstream.settings import DEFAULT_CAPACITIES
from skillstream.vocab import MemoryKind, MemoryType

MEMORY_TYPES: tuple[MemoryType, ...] = tuple(MemoryType)
USER_KINDS = frozenset({MemoryKind.PREFERENCE, MemoryKind.OPINION})
SKILL_KINDS = frozenset({MemoryKind.SKILL, MemoryKind.TASK_SKILL})


def memory_type_for(kind: str, scope: str, requested: str | None = None) -> str:
    """The type of a new memory (see the module docstring)."""
    if requested in MEMORY_TYPES:
        return requested  # type: ignore[return-value]
    if scope == "session":
        return MemoryType.WORKING
    if kind in USER_KINDS:
        return MemoryType.USER
    if kind in SKILL_KINDS:
        return MemoryType.SKILL
    return MemoryType.LONG_TERM


def capacities(overrides: Mapping[str, int] | None = None) -> tuple[tuple[str, int], ...]:
    """Capacities per type: the defaults with ``overrides`` applied.

    Raises:
        ConfigError: for an unknown type or a capacity that is not a whole number >= 0.
    """
    caps = dict(DEFAULT_CAPACITIES)
    for name, value in (overrides or {}).items():
        if name not in MEMORY_TYPES:
            raise ConfigError(
                f"memory_capacities: unknown memory type {name!r}; known: {MEMORY_TYPES}"
            )
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(
                f"memory_capacities.{name}: expected a whole number >= 0, got {value!r}"
            )
        caps[name] = value
    return tuple(caps.items())


def touched_at(m: Memory) -> datetime | None:
    """When the memory was last created, reinforced or accessed (decay and eviction use it)."""
    return latest(m.created_at, m.last_reinforced_at, m.last_accessed_at)


def eviction_key(m: Memory) -> tuple:
    """Where ``m`` comes in ``eviction_order``: least valuable, then oldest, then id."""
    t = touched_at(m)
    return (round(m.confidence, 6), m.reinforcement, t.timestamp() if t else 0.0, m.id)


def eviction_order(memories: Iterable[Memory]) -> list[Memory]:
    """Memories from the first to archive to the last: least valuable, then oldest, then id."""
    return sorted(memories, key=eviction_key)


def over_capacity(memories: Iterable[Memory], cap: int | None) -> list[Memory]:
    """The memories to archive so that at most ``cap`` stay (none when ``cap`` is 0 or ``None``)."""
    items = list(memories)
    if not cap or len(items) <= cap:
        return []
    return eviction_order(items)[: len(items) - cap]
