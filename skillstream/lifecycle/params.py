"""The lifecycle's knobs in one frozen object, read from the ``lifecycle`` settings once."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from skillstream.errors import ConfigError
from skillstream.lifecycle.policy import PolicySet
from skillstream.lifecycle.types import capacities
from skillstream.settings import LifecycleSettings

CONFIDENCE_CAP = 0.95
"""No memory is ever more confident than this: leave room for doubt."""
REINFORCE_STEP = 0.05
"""Confidence gained each time a memory is restated or confirmed."""
DEFAULT_WEIGHTS = {"relevance": 0.6, "confidence": 0.2, "recency": 0.1, "reinforcement": 0.1}


@dataclass(frozen=True)
class LifecycleParams:
    """Every rule of the lifecycle (see ``LifecycleSettings`` for the meaning and the defaults)."""

    capacities: tuple[tuple[str, int], ...] = field(default_factory=capacities)
    merge_threshold: float = 0.92
    reinforce_step: float = REINFORCE_STEP
    confidence_cap: float = CONFIDENCE_CAP
    contradiction_gap: float = 0.3
    escalate_after: timedelta = timedelta(days=7)
    decay_after: timedelta = timedelta(days=90)
    decay_period: timedelta = timedelta(days=30)
    decay_step: float = 0.1
    maintenance_interval: timedelta | None = timedelta(days=1)
    lesson_confidence: float = 0.6
    summaries: bool = True
    idle_gap: timedelta = timedelta(minutes=30)
    policies: PolicySet = field(default_factory=PolicySet)
    default_scope: str = "private"
    default_confidence: float = 0.7
    rank_weights: tuple[tuple[str, float], ...] = tuple(DEFAULT_WEIGHTS.items())
    recency_half_life: timedelta = timedelta(days=30)
    decay_rule: str = "seed"
    """``seed``: decay only memories unused for ``decay_after`` and below ``decay_below``;
    ``idle``: decay every memory unused for ``decay_after``."""
    decay_below: float = 0.3
    rank_rule: str = "product"
    """``product`` (relevance x confidence x recency x reinforcement) or ``weighted``."""
    archive_after: timedelta | None = None
    """Idle time after which a live memory is archived (``None``: never)."""
    expire_archived_after: timedelta | None = None
    """Time in the archive after which a memory expires (``None``: never)."""
    reorganize: bool = True
    reorganize_threshold: float = 0.6
    reorganize_min_members: int = 3

    def capacity(self, memory_type: str) -> int | None:
        """Most live memories of one owner of this type (``None``: no limit)."""
        for name, cap in self.capacities:
            if name == memory_type:
                return cap or None
        return None

    @property
    def weights(self) -> dict[str, float]:
        return dict(self.rank_weights)

    @classmethod
    def from_settings(cls, lifecycle: LifecycleSettings, idle_gap: timedelta) -> LifecycleParams:
        """Read the ``lifecycle`` settings group (its numbers were range-checked when read).

        Args:
            lifecycle: The ``lifecycle`` group.
            idle_gap: The gap that closes a session (``spans.idle_gap``).

        Raises:
            ConfigError: for a bad capacity, policy or weight.
        """
        interval = lifecycle.maintenance_interval_s
        policies = PolicySet.from_config(lifecycle.policies)
        _check_default_scope_writable(policies, lifecycle.default_scope)
        return cls(
            capacities=capacities(lifecycle.memory_capacities),
            merge_threshold=float(lifecycle.merge_threshold),
            contradiction_gap=float(lifecycle.contradiction_confidence_gap),
            escalate_after=timedelta(seconds=lifecycle.contradiction_escalate_after_s),
            decay_after=timedelta(seconds=lifecycle.decay_after_s),
            decay_period=timedelta(seconds=lifecycle.decay_period_s),
            decay_step=float(lifecycle.decay_step),
            maintenance_interval=timedelta(seconds=interval) if interval > 0 else None,
            lesson_confidence=float(lifecycle.lesson_confidence),
            summaries=bool(lifecycle.session_summaries),
            idle_gap=idle_gap,
            policies=policies,
            default_scope=lifecycle.default_scope,
            default_confidence=float(lifecycle.default_confidence),
            rank_weights=rank_weights(lifecycle.rank_weights),
            recency_half_life=timedelta(seconds=lifecycle.recency_half_life_s),
            decay_rule=lifecycle.decay_rule,
            decay_below=float(lifecycle.decay_below),
            rank_rule=lifecycle.rank_rule,
            archive_after=_seconds(lifecycle.archive_after_s),
            expire_archived_after=_seconds(lifecycle.expire_archived_after_s),
            reorganize=bool(lifecycle.reorganize),
            reorganize_threshold=float(lifecycle.reorganize_threshold),
            reorganize_min_members=int(lifecycle.reorganize_min_members),
        )


def _check_default_scope_writable(policies: PolicySet, default_scope: str) -> None:
    """Every policy may write the scope its new memories get; otherwise every memory of its
    agents would be refused while their spans count as processed, and nothing would be stored."""
    for policy in (policies.default, *(p for _, p in policies.policies)):
        scope = policy.scope_for(None, default_scope)
        if not policy.can_write(scope):
            source = "default_scope" if policy.default_scope is None else "its default_scope"
            raise ConfigError(
                f"policies.{policy.agent}: new memories get scope {scope!r} ({source}), but "
                f"writable_scopes is {list(policy.writable)}; nothing could be stored. Add "
                f"{scope!r} to writable_scopes or set a default_scope out of "
                f"{list(policy.writable) or ['private', 'fleet', 'session']}"
            )


def _seconds(value: float) -> timedelta | None:
    return timedelta(seconds=value) if value > 0 else None


def rank_weights(overrides: dict[str, float] | None) -> tuple[tuple[str, float], ...]:
    """The ranking weights: defaults with ``overrides``; unknown names or negatives raise."""
    weights = dict(DEFAULT_WEIGHTS)
    for name, value in (overrides or {}).items():
        if name not in DEFAULT_WEIGHTS:
            raise ConfigError(
                f"rank_weights: unknown weight {name!r}; known: {sorted(DEFAULT_WEIGHTS)}"
            )
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"rank_weights.{name}: expected a number, got {value!r}") from None
        if v < 0:
            raise ConfigError(f"rank_weights.{name}: must be >= 0, got {v}")
        weights[name] = v
    return tuple(weights.items())
