"""The lifecycle parameters: the ``lifecycle`` settings group, parsed once.

Every knob is declared once, as a field of :class:`~skillstream.settings.LifecycleSettings` (its
key, default, range and description). :class:`LifecycleParams` *is* that group (a subclass, so each
field is read under its own name, ``params.merge_threshold``) plus what is derived from it when it
is built: durations as ``timedelta`` (``decay_after`` from ``decay_after_s``; ``None`` where 0
means never), the parsed policies, the capacity of each memory type, the full ranking weights, and
the session gap of the ``spans`` group. Build it with :meth:`LifecycleParams.of`; nothing else
declares a lifecycle default.
"""

from __future__ import annotations

from datetime import timedelta
from typing import ClassVar

from pydantic import PrivateAttr

from skillstream.errors import ConfigError
from skillstream.lifecycle.policy import PolicySet
from skillstream.lifecycle.types import capacities
from skillstream.settings import DEFAULT_RANK_WEIGHTS, LifecycleSettings, Settings, SpanSettings

CONFIDENCE_CAP = 0.95
"""No memory is ever more confident than this: leave room for doubt."""
REINFORCE_STEP = 0.05
"""Confidence gained each time a memory is restated or confirmed."""
DEFAULT_WEIGHTS = DEFAULT_RANK_WEIGHTS


class LifecycleParams(LifecycleSettings):
    """The ``lifecycle`` settings with the values derived from them (see the module docstring).

    The fields, their meaning and their defaults are ``LifecycleSettings``'s; the properties below
    are derived from them in :meth:`of` and never set on their own.
    """

    confidence_cap: ClassVar[float] = CONFIDENCE_CAP
    reinforce_step: ClassVar[float] = REINFORCE_STEP

    _idle_gap: timedelta = PrivateAttr()
    _policy_set: PolicySet = PrivateAttr()
    _capacities: tuple[tuple[str, int], ...] = PrivateAttr()
    _weights: tuple[tuple[str, float], ...] = PrivateAttr()
    _escalate_after: timedelta = PrivateAttr()
    _decay_after: timedelta = PrivateAttr()
    _decay_period: timedelta = PrivateAttr()
    _recency_half_life: timedelta = PrivateAttr()
    _maintenance_interval: timedelta | None = PrivateAttr()
    _archive_after: timedelta | None = PrivateAttr()
    _expire_archived_after: timedelta | None = PrivateAttr()

    @classmethod
    def of(cls, lifecycle: LifecycleSettings, idle_gap: timedelta) -> LifecycleParams:
        """The parameters of the ``lifecycle`` group (its numbers were range-checked when read).

        Args:
            lifecycle: The ``lifecycle`` group.
            idle_gap: The gap that closes a session (``spans.idle_gap``).

        Raises:
            ConfigError: for a bad capacity, policy or weight.
        """
        params = cls.model_validate(lifecycle.keys())
        policies = PolicySet.from_config(lifecycle.policies)
        _check_default_scope_writable(policies, lifecycle.default_scope)
        params._idle_gap = idle_gap
        params._policy_set = policies
        params._capacities = capacities(lifecycle.memory_capacities)
        params._weights = rank_weights(lifecycle.rank_weights)
        params._escalate_after = timedelta(seconds=lifecycle.contradiction_escalate_after_s)
        params._decay_after = timedelta(seconds=lifecycle.decay_after_s)
        params._decay_period = timedelta(seconds=lifecycle.decay_period_s)
        params._recency_half_life = timedelta(seconds=lifecycle.recency_half_life_s)
        params._maintenance_interval = _seconds(lifecycle.maintenance_interval_s)
        params._archive_after = _seconds(lifecycle.archive_after_s)
        params._expire_archived_after = _seconds(lifecycle.expire_archived_after_s)
        return params

    @classmethod
    def from_settings(cls, settings: Settings) -> LifecycleParams:
        """The parameters of ``settings`` (its ``lifecycle`` group and the ``spans`` idle gap).

        Raises:
            ConfigError: for a bad capacity, policy or weight.
        """
        return cls.of(settings.lifecycle, settings.spans.idle_gap)

    @classmethod
    def defaults(cls) -> LifecycleParams:
        """The parameters of the default settings (every value from its declaration)."""
        return cls.of(LifecycleSettings(), SpanSettings().idle_gap)

    def with_keys(self, **keys: object) -> LifecycleParams:
        """A copy with lifecycle ``keys`` changed, parsed again (the session gap is kept).

        Raises:
            ConfigError: an unknown key or a bad value.
        """
        values = self.keys()
        values.update(keys)
        settings = Settings.from_keys(**values)
        return LifecycleParams.of(settings.lifecycle, self.idle_gap)

    # ------------------------------------------------------------------ derived values
    @property
    def idle_gap(self) -> timedelta:
        """The gap that closes a session (``idle_gap_s`` of the ``spans`` group)."""
        return self._idle_gap

    @property
    def policy_set(self) -> PolicySet:
        """The ``policies`` setting, parsed (every policy may write its new memories' scope)."""
        return self._policy_set

    @property
    def capacities(self) -> tuple[tuple[str, int], ...]:
        """Capacity per memory type: the defaults with ``memory_capacities`` over them."""
        return self._capacities

    @property
    def weights(self) -> dict[str, float]:
        """The ranking weights: the defaults with ``rank_weights`` over them."""
        return dict(self._weights)

    @property
    def contradiction_escalate_after(self) -> timedelta:
        """``contradiction_escalate_after_s`` as a duration."""
        return self._escalate_after

    @property
    def decay_after(self) -> timedelta:
        """``decay_after_s`` as a duration."""
        return self._decay_after

    @property
    def decay_period(self) -> timedelta:
        """``decay_period_s`` as a duration."""
        return self._decay_period

    @property
    def recency_half_life(self) -> timedelta:
        """``recency_half_life_s`` as a duration."""
        return self._recency_half_life

    @property
    def maintenance_interval(self) -> timedelta | None:
        """``maintenance_interval_s`` as a duration (``None``: in-flow maintenance is off)."""
        return self._maintenance_interval

    @property
    def archive_after(self) -> timedelta | None:
        """``archive_after_s`` as a duration (``None``: never archived for idleness)."""
        return self._archive_after

    @property
    def expire_archived_after(self) -> timedelta | None:
        """``expire_archived_after_s`` as a duration (``None``: archived memories never expire)."""
        return self._expire_archived_after

    def capacity(self, memory_type: str) -> int | None:
        """Most live memories of one owner of this type (``None``: no limit)."""
        for name, cap in self._capacities:
            if name == memory_type:
                return cap or None
        return None


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
