"""Memory lifecycle and governance: types, states, confidence, contradictions, expiry, scopes.

Modules:
    states: statuses, allowed transitions, event names, ``ChangeLog`` (the ``memory_events`` rows).
    types: memory types and capacities, archiving what goes over capacity.
    reinforce: confidence, reinforcement, merging near-duplicates.
    contradictions: detection, automatic resolution, the ``contradictions`` table.
    lessons: lessons from outcome records in the stream.
    summaries: one summary per session, the ``session_summaries`` table.
    maintenance: expiry, decay, capacity and summaries at an event time; ``MaintenanceTick``.
    policy: scopes, per-agent policies, read filters.
    ranking: search ranking (relevance, confidence, recency, reinforcement).
    querylog: the ``queries`` table and access times.
    store: the same operations on a home (commands ``maintain``, ``history``, ``contradictions``).
    clock: event-time helpers (durations, ``--now``, tick boundaries).

Importing the package registers its catalog tables (``contradictions``, ``session_summaries``,
``queries``). See docs/lifecycle.md for the model and SQL over these tables.
"""

from __future__ import annotations

from skillstream.lifecycle import contradictions, querylog, summaries  # noqa: F401  (tables)
from skillstream.lifecycle.maintenance import MaintenanceTick, maintain_owner
from skillstream.lifecycle.policy import Policy, PolicySet, Reader, can_read
from skillstream.lifecycle.rules import LifecycleRules
from skillstream.lifecycle.states import EVENTS, STATUSES

__all__ = [
    "EVENTS",
    "STATUSES",
    "LifecycleRules",
    "MaintenanceTick",
    "Policy",
    "PolicySet",
    "Reader",
    "can_read",
    "maintain_owner",
]
