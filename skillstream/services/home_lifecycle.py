"""Lifecycle operations on a home's stores: maintenance, status changes, history, contradictions.

These run when no flow holds the catalog (the CLI's ``maintain``, ``history``, ``contradictions``).
Changes go through ``storage.writer.write_results``, the same write path as the flow's, as
``MaintenanceResult`` items: LanceDB first, then one DuckDB transaction.

``maintain_home`` runs ``maintain_owner`` for every owner at ``now`` (default: the store's latest
event time), then re-examines unresolved contradictions: one whose side is no longer live is
settled for the other side (rule ``lifecycle``), and the automatic rules are tried again with the
memories' current confidence and reinforcement.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from skillstream.errors import InputError
from skillstream.lifecycle import contradictions as ctr
from skillstream.lifecycle.maintenance import maintain_owner
from skillstream.lifecycle.params import LifecycleParams
from skillstream.lifecycle.policy import Reader, can_read
from skillstream.lifecycle.reinforce import merge_versions
from skillstream.lifecycle.states import (
    STATUSES,
    UNINDEXED_SQL,
    ChangeLog,
)
from skillstream.memories import LIVE, OwnerMemories
from skillstream.model import ContradictionRow, MaintenanceResult
from skillstream.vocab import LifecycleEvent, MemoryStatus


def store_clock(catalog: Any) -> datetime | None:
    """The latest event time the store knows: of a lifecycle event, or the end of a span."""
    row = catalog.sql(
        "SELECT greatest((SELECT max(event_ts) FROM "
        "memory_events), (SELECT max(end_ts) FROM spans)) AS t"
    ).to_pylist()
    t = row[0]["t"] if row else None
    return t.astimezone(UTC) if t is not None else None


def owners(stores: Any) -> list[str]:
    """Every owner with memories in LanceDB."""
    table = stores.index.table.scan(columns=["owner_id"])
    return sorted(set(table.column("owner_id").to_pylist()))


def load_owner(stores: Any, owner_id: str) -> OwnerMemories:
    """One owner's memories (every status, with vectors) from LanceDB, with the minimal rows of
    its expired memories, its unresolved contradictions, the ones already escalated and its topic
    nodes' members from the catalog."""
    from skillstream.storage.tombstones import owner_state

    return owner_state(stores.index, stores.catalog, owner_id)


def resolve_contradiction(
    stores: Any,
    contradiction_id: str,
    resolution: str,
    *,
    at: datetime,
    text: str | None = None,
    embed: Any = None,
    params: LifecycleParams,
    actor: str = "cli",
) -> dict[str, Any]:
    """Settle a contradiction by hand: ``keep-a``, ``keep-b``, ``discard-both`` or ``merge``.

    ``keep-*`` archives the other memory with its validity ending (``invalidated``),
    ``discard-both`` deletes both, ``merge`` merges both into a new consolidated version with
    ``text`` (default: both statements joined). Returns the updated ``contradictions`` row.

    Raises:
        InputError: for an unknown id or resolution, a settled contradiction, a memory that is no
            longer live, or a frozen one.
    """
    from skillstream.storage.writer import write_results

    manual = (ctr.KEEP_A, ctr.KEEP_B, ctr.DISCARD_BOTH, ctr.MERGE)
    if resolution not in manual:
        raise InputError(f"resolution {resolution!r} is not one of {', '.join(manual)}")
    rows = stores.catalog.sql(
        f"SELECT * FROM {ctr.TABLE} WHERE contradiction_id = ?", [contradiction_id]
    ).to_pylist()
    if not rows:
        raise InputError(f"no contradiction with id {contradiction_id!r}")
    row = rows[0]
    if row["resolution"] != ctr.UNRESOLVED:
        raise InputError(
            f"contradiction {contradiction_id} is already settled ({row['resolution']})"
        )
    a, b = _get(stores, row["memory_a"]), _get(stores, row["memory_b"])
    for side, m in (("a", a), ("b", b)):
        if m is None or m.status not in LIVE:
            status = m.status if m is not None else "missing"
            raise InputError(
                f"memory {side} of {contradiction_id} is {status}; run `skillstream maintain` to "
                "settle contradictions whose memories are no longer live"
            )
    assert a is not None and b is not None
    recorded = datetime.now(UTC)
    log = ChangeLog(a.owner_id, f"resolve-{contradiction_id}", None, actor, recorded)
    why = f"contradiction {contradiction_id} settled by hand ({resolution})"
    winner = None
    if resolution == ctr.KEEP_A:
        ctr.invalidate(log, b, a, "by hand", at)
        winner = a.id
    elif resolution == ctr.KEEP_B:
        ctr.invalidate(log, a, b, "by hand", at)
        winner = b.id
    elif resolution == ctr.DISCARD_BOTH:
        for m in (a, b):
            log.transition(m, MemoryStatus.DELETED, MemoryStatus.DELETED, why, at, valid_to=at)
    else:
        olds = sorted([a, b], key=lambda m: (m.created_at or at, m.id))
        joined = text or merged_text([m.text for m in olds])
        new = merge_versions(log, olds, olds[-1], at, params, text=joined, reason=why)
        if embed is not None:
            new.vector = embed([new.text])[0]
        winner = new.id
    row.update(resolution=resolution, rule="by hand", resolved_at=at, recorded_at=recorded)
    row["winner_id"] = winner
    log.rows.contradictions.append(ContradictionRow.from_row(row))
    write_results(
        stores,
        [
            MaintenanceResult(
                a.owner_id, at, list(log.changed.values()), log.events, log.rows, actor
            )
        ],
    )
    return row


def merged_text(texts: list[str]) -> str:
    """Two statements joined into one: ``A; and B.``"""
    parts = [t.strip().rstrip(".;,!? ") for t in texts if t.strip()]
    return "; and ".join(parts) + "."


@dataclass
class MaintainReport:
    """What ``maintain_home`` did."""

    now: datetime | None
    owners: int = 0
    events: Counter = field(default_factory=Counter)
    contradictions: Counter = field(default_factory=Counter)
    catalog_files: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out = {
            "now": self.now.isoformat() if self.now else None,
            "owners": self.owners,
            "events": dict(sorted(self.events.items())),
            "contradictions_settled": dict(sorted(self.contradictions.items())),
        }
        if self.catalog_files:  # a shared catalog was compacted
            out["catalog_files"] = self.catalog_files
        return out


def maintain_home(
    stores: Any,
    params: LifecycleParams,
    *,
    now: datetime | None = None,
    only: Iterable[str] | None = None,
    close_sessions: bool = False,
    embed: Any = None,
    token_count: Any = None,
    actor: str = "maintenance",
) -> MaintainReport:
    """Maintain every owner (or ``only`` these) at ``now`` and write the changes."""
    from skillstream.storage.writer import write_results

    at = now or store_clock(stores.catalog)
    report = MaintainReport(at)
    if at is None:
        return report
    recorded = datetime.now(UTC)
    wanted = set(only) if only is not None else None
    results: list[MaintenanceResult] = []
    states: dict[str, OwnerMemories] = {}
    for owner in owners(stores):
        if wanted is not None and owner not in wanted:
            continue
        state = states[owner] = load_owner(stores, owner)
        r = maintain_owner(
            state,
            at,
            params,
            embed=embed,
            close_sessions=close_sessions,
            actor=actor,
            recorded_at=recorded,
            token_count=token_count,
        )
        if r is not None:
            results.append(r)
    report.owners = len(states)
    results.extend(_recheck_contradictions(stores, states, at, params, actor, recorded, report))
    for r in results:
        report.events.update(e.event for e in r.events)
    if results:
        write_results(stores, results)
        stores.index.optimize()
    report.catalog_files = stores.catalog.compact()
    return report


def _recheck_contradictions(
    stores: Any,
    states: dict[str, OwnerMemories],
    at: datetime,
    params: LifecycleParams,
    actor: str,
    recorded: datetime,
    report: MaintainReport,
) -> list[MaintenanceResult]:
    rows = stores.catalog.sql(
        f"SELECT * FROM {ctr.TABLE} WHERE resolution = ? ORDER BY detected_at, contradiction_id",
        [ctr.UNRESOLVED],
    ).to_pylist()
    logs: dict[str, ChangeLog] = {}
    for row in rows:
        state = states.get(row["owner_id"])
        if state is None:
            continue
        a, b = state.get(row["memory_a"]), state.get(row["memory_b"])
        if a is None or b is None:
            continue
        log = logs.setdefault(
            state.owner_id, ChangeLog(state.owner_id, "contradictions", None, actor, recorded)
        )
        live_a, live_b = (
            a.status in (*LIVE, MemoryStatus.FROZEN),
            b.status in (*LIVE, MemoryStatus.FROZEN),
        )
        if live_a and live_b:
            resolution, rule = ctr.resolve(a, b, params)
            if resolution == ctr.UNRESOLVED:
                continue
            loser, winner = (a, b) if resolution == ctr.KEEP_B else (b, a)
            if loser.status == MemoryStatus.FROZEN:
                why = f"contradiction {row['contradiction_id']} lost, but the memory is frozen"
                log.refuse(loser, why, at)
                continue
            ctr.invalidate(log, loser, winner, rule or "", at)
        else:
            resolution = ctr.KEEP_A if live_a else ctr.KEEP_B if live_b else ctr.DISCARD_BOTH
            rule = "lifecycle"
        row.update(
            resolution=resolution,
            rule=rule,
            resolved_at=at,
            recorded_at=recorded,
            winner_id={ctr.KEEP_A: a.id, ctr.KEEP_B: b.id}.get(resolution),
        )
        log.rows.contradictions.append(ContradictionRow.from_row(row))
        report.contradictions[resolution] += 1
    return [
        MaintenanceResult(owner, at, list(log.changed.values()), log.events, log.rows, actor=actor)
        for owner, log in sorted(logs.items())
        if log.events or log.rows
    ]


def set_status(
    stores: Any,
    memory_ids: Iterable[str],
    to: str,
    *,
    at: datetime,
    reason: str,
    actor: str = "cli",
) -> list[MaintenanceResult]:
    """Freeze (``frozen``), unfreeze (``activated``) or forget (``deleted``) memories and write it.

    Raises:
        InputError: for an unknown id, or a change the lifecycle does not allow.
    """
    from skillstream.storage.writer import write_results

    if to not in STATUSES:
        raise InputError(f"status {to!r} is not one of {', '.join(STATUSES)}")
    recorded = datetime.now(UTC)
    logs: dict[str, ChangeLog] = {}
    for memory_id in memory_ids:
        m = _get(stores, memory_id)
        if m is None:
            raise InputError(f"no memory with id {memory_id!r}")
        log = logs.setdefault(m.owner_id, ChangeLog(m.owner_id, "cli", None, actor, recorded))
        if to == MemoryStatus.ACTIVATED:
            event: str = (
                LifecycleEvent.UNFROZEN
                if m.status == MemoryStatus.FROZEN
                else LifecycleEvent.REACTIVATED
            )
        else:
            event = to  # frozen, deleted, archived, expired: the event is named after the status
        if to == MemoryStatus.DELETED:
            log.transition(m, to, event, reason, at, valid_to=m.valid_to or at)
        else:
            log.transition(m, to, event, reason, at)
    results = [
        MaintenanceResult(owner, at, list(log.changed.values()), log.events, log.rows, actor=actor)
        for owner, log in sorted(logs.items())
    ]
    if results:
        write_results(stores, results)
    return results


def _get(stores: Any, memory_id: str) -> Any:
    """A memory from LanceDB, or the minimal catalog row of an expired one (no vector)."""
    from skillstream.storage import filters
    from skillstream.storage.lance import memory_from_row

    rows = stores.index.table.scan(filters.eq("id", memory_id)).to_pylist()
    if not rows:
        rows = stores.catalog.sql(
            f"SELECT * FROM memory_meta WHERE id = ? AND ({UNINDEXED_SQL})", [memory_id]
        ).to_pylist()
    return memory_from_row(rows[0]) if rows else None


def get_memory(
    catalog: Any,
    memory_id: str,
    reader: Reader | None = None,
    params: LifecycleParams | None = None,
) -> dict[str, Any] | None:
    """One memory row (without vector) as ``reader`` may see it; ``None`` if missing or hidden."""
    rows = catalog.sql("SELECT * FROM memory_meta WHERE id = ?", [memory_id]).to_pylist()
    if not rows:
        return None
    if reader is not None:
        if params is None:
            raise ValueError("a reader's policy comes from the lifecycle parameters: pass params")
        policy = params.policy_set.for_agent(reader.agent_id)
        if not can_read(reader, policy, rows[0]):
            return None
    return rows[0]


def history(
    catalog: Any,
    memory_id: str,
    reader: Reader | None = None,
    params: LifecycleParams | None = None,
) -> list[dict[str, Any]]:
    """The lifecycle events of a memory in order (empty when ``reader`` may not see it)."""
    if reader is not None and get_memory(catalog, memory_id, reader, params) is None:
        return []
    return catalog.sql(
        "SELECT event_ts, event, old_status, new_status, reason, actor, span_id, version, "
        "old_value, new_value, event_id FROM memory_events WHERE memory_id = ? "
        "ORDER BY version NULLS FIRST, event_ts, recorded_at, event_id",
        [memory_id],
    ).to_pylist()


def list_contradictions(
    catalog: Any,
    *,
    now: datetime | None,
    older_than: Any,
    owner: str | None = None,
    all_: bool = False,
) -> list[dict[str, Any]]:
    """Contradictions, oldest first: unresolved ones detected at least ``older_than`` before
    ``now`` (every one with ``all_``)."""
    sql = (
        f"SELECT c.contradiction_id, c.owner_id, c.detected_at, c.resolution, c.rule, c.key, "
        f"c.description, c.memory_a, a.text AS text_a, c.memory_b, b.text AS text_b, c.resolved_at "
        f"FROM {ctr.TABLE} c LEFT JOIN memory_meta a ON a.id = c.memory_a "
        f"LEFT JOIN memory_meta b ON b.id = c.memory_b WHERE 1 = 1"
    )
    params: list[Any] = []
    if not all_:
        sql += " AND c.resolution = ?"
        params.append(ctr.UNRESOLVED)
        if now is not None and older_than is not None:
            sql += " AND c.detected_at <= ?"
            params.append(now - older_than)
    if owner is not None:
        sql += " AND c.owner_id = ?"
        params.append(owner)
    sql += " ORDER BY c.detected_at, c.contradiction_id"
    return catalog.sql(sql, params).to_pylist()
