"""``skillstream history``, ``contradictions`` and ``maintain``: the memory lifecycle by hand.

All three work on a home that no flow is running on (DuckDB lets one process write the catalog).
Times are event times: ``--now`` defaults to the latest event time the store knows (the latest
lifecycle event or span end), so maintaining a backfill of old logs behaves as it did back then.
"""

from __future__ import annotations

import json

import click

from skillstream.cli.common import dumps, format_text, settings_from
from skillstream.lifecycle.clock import parse_duration, parse_time
from skillstream.vocab import MemoryStatus


def _reader(owner, agent, session):
    from skillstream.lifecycle.policy import Reader

    if owner is None and agent is None:
        return None
    return Reader(owner, agent, session)


@click.command()
@click.argument("memory_id")
@click.option("--owner", default=None, help="Read as this owner (the policy decides what shows).")
@click.option("--agent", default=None, help="Read through this agent's policy.")
@click.option("--session", default=None, help="The reader's session (for session-scoped memories).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def history(ctx, memory_id, owner, agent, session, as_json):
    """Show a memory and every lifecycle event it went through, oldest first."""
    from skillstream.cli.query import open_catalog
    from skillstream.errors import InputError
    from skillstream.lifecycle.params import LifecycleParams
    from skillstream.services import home_lifecycle as store

    settings = settings_from(ctx)
    params = LifecycleParams.from_settings(settings)
    reader = _reader(owner, agent, session)
    cat = open_catalog(settings)
    try:
        memory = store.get_memory(cat, memory_id, reader, params)
        if memory is None:
            raise InputError(f"no memory {memory_id!r} (or the reader may not see it)")
        events = store.history(cat, memory_id, reader, params)
        contradictions = (
            cat.sql(
                "SELECT contradiction_id, memory_a, memory_b, "
                "resolution, rule, detected_at, description "
                "FROM contradictions WHERE memory_a = ? OR memory_b = ? ORDER BY detected_at",
                [memory_id, memory_id],
            ).to_pylist()
            if "contradictions" in _tables(cat)
            else []
        )
    finally:
        cat.close()
    if as_json:
        click.echo(dumps({"memory": memory, "events": events, "contradictions": contradictions}))
        return
    for name in (
        "id",
        "owner_id",
        "status",
        "scope",
        "memory_type",
        "kind",
        "text",
        "confidence",
        "reinforcement",
        "valid_from",
        "valid_to",
        "expires_at",
        "merged_into",
    ):
        if memory.get(name) is not None:
            click.echo(f"{name}: {memory[name]}")
    rows = [
        {
            **e,
            "status": f"{e['old_status'] or '-'} -> {e['new_status']}",
            "confidence": _confidence(e),
        }
        for e in events
    ]
    click.echo("")
    click.echo(
        format_text(
            ["event_ts", "event", "status", "confidence", "reason", "actor", "version"], rows
        )
    )
    if contradictions:
        click.echo("\ncontradictions:")
        cols = ["contradiction_id", "resolution", "rule", "detected_at", "description"]
        click.echo(format_text(cols, contradictions))


def _confidence(event: dict) -> str:
    new = json.loads(event["new_value"]).get("confidence") if event.get("new_value") else None
    old = json.loads(event["old_value"]).get("confidence") if event.get("old_value") else None
    if old is None or old == new:
        return "" if new is None else f"{new:g}"
    return f"{old:g} -> {new:g}"


def _tables(cat) -> set[str]:
    return {
        r["name"] for r in cat.sql("SELECT table_name AS name FROM duckdb_tables()").to_pylist()
    }


@click.command()
@click.option(
    "--older-than",
    default=None,
    help="Only unresolved ones detected at least this long before --now, e.g. 7d, 12h "
    "(default: contradiction_escalate_after_s, 7 days).",
)
@click.option(
    "--now", default=None, help="Event time (ISO 8601); default: the store's latest event time."
)
@click.option("--owner", default=None, help="Only this owner's contradictions.")
@click.option(
    "--all", "all_", is_flag=True, help="Every contradiction, resolved or not, of any age."
)
@click.option(
    "--resolve", "resolve_id", default=None, metavar="CONTRADICTION_ID", help="Settle this one."
)
@click.option(
    "--as",
    "resolution",
    type=click.Choice(["keep-a", "keep-b", "merge", "discard-both"]),
    default=None,
    help="How to settle --resolve: keep one, merge both into a new version, or discard both.",
)
@click.option("--text", default=None, help="With --as merge: the merged statement.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def contradictions(ctx, older_than, now, owner, all_, resolve_id, resolution, text, as_json):
    """List unresolved contradictions older than a given age (they need a human), or settle one
    with --resolve ID --as keep-a|keep-b|merge|discard-both."""
    from datetime import timedelta

    from skillstream.cli.query import open_catalog
    from skillstream.services import home_lifecycle as store

    settings = settings_from(ctx)
    if resolve_id is not None or resolution is not None:
        _resolve(settings, resolve_id, resolution, text, now, as_json)
        return
    age = (
        parse_duration(older_than)
        if older_than is not None
        else timedelta(seconds=settings.lifecycle.contradiction_escalate_after_s)
    )
    cat = open_catalog(settings)
    try:
        at = parse_time(now) or store.store_clock(cat)
        rows = (
            store.list_contradictions(cat, now=at, older_than=age, owner=owner, all_=all_)
            if "contradictions" in _tables(cat)
            else []
        )
    finally:
        cat.close()
    if as_json:
        click.echo(dumps(rows))
        return
    click.echo(
        format_text(
            ["contradiction_id", "owner_id", "detected_at", "resolution", "text_a", "text_b"],
            rows,
            width=48,
        )
    )


def _resolve(settings, resolve_id, resolution, text, now, as_json) -> None:
    from skillstream.embed import get_embedder
    from skillstream.errors import InputError
    from skillstream.lifecycle.params import LifecycleParams
    from skillstream.services import home_lifecycle as store
    from skillstream.storage.home import open_stores
    from skillstream.storage.reconcile import reconcile_stores

    if resolve_id is None or resolution is None:
        raise InputError("settle a contradiction with both --resolve ID and --as RESOLUTION")
    if text is not None and resolution != "merge":
        raise InputError("--text goes with --as merge only")
    params = LifecycleParams.from_settings(settings)
    embedder = get_embedder(settings.embedding)
    with open_stores(settings, embedder.dim) as stores:
        reconcile_stores(stores, embedder.encode)  # a command killed mid-write left LanceDB ahead
        at = parse_time(now) or store.store_clock(stores.catalog)
        if at is None:
            raise InputError("the store has no events yet; pass --now")
        row = store.resolve_contradiction(
            stores, resolve_id, resolution, at=at, text=text, embed=embedder.encode, params=params
        )
    if as_json:
        click.echo(dumps(row))
    else:
        click.echo(f"{resolve_id}: {row['resolution']} (winner {row['winner_id']})")


@click.command()
@click.option(
    "--now",
    default=None,
    help="Event time to maintain at (ISO 8601); default: the store's latest event time.",
)
@click.option("--owner", "owners", multiple=True, help="Only this owner (repeatable).")
@click.option(
    "--close-sessions",
    is_flag=True,
    help="Treat every open session as closed and summarise it (e.g. after a backfill).",
)
@click.option("--freeze", multiple=True, metavar="MEMORY_ID", help="Lock a memory against changes.")
@click.option("--unfreeze", multiple=True, metavar="MEMORY_ID", help="Unlock a frozen memory.")
@click.option("--forget", multiple=True, metavar="MEMORY_ID", help="Soft-delete a memory.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def maintain(ctx, now, owners, close_sessions, freeze, unfreeze, forget, as_json):
    """Expire, decay, archive over capacity, summarise closed sessions, settle contradictions."""
    from skillstream.embed import get_embedder
    from skillstream.errors import InputError
    from skillstream.lifecycle.params import LifecycleParams
    from skillstream.services import home_lifecycle as store
    from skillstream.storage.home import open_stores
    from skillstream.storage.reconcile import reconcile_stores
    from skillstream.tokens import get_counter

    settings = settings_from(ctx)
    from skillstream.storage.catalog import catalog_exists

    if not catalog_exists(settings.storage):
        raise InputError(
            f"no catalog at {settings.storage.catalog}; "
            f"run 'skillstream --home {settings.storage.home} run' first"
        )
    params = LifecycleParams.from_settings(settings)
    embedder = get_embedder(settings.embedding)
    with open_stores(settings, embedder.dim) as stores:
        reconcile_stores(stores, embedder.encode)  # a command killed mid-write left LanceDB ahead
        at = parse_time(now) or store.store_clock(stores.catalog)
        changed = {}
        by_hand = (
            (freeze, MemoryStatus.FROZEN, "frozen on request"),
            (unfreeze, MemoryStatus.ACTIVATED, "unfrozen on request"),
            (forget, MemoryStatus.DELETED, "forgotten on request"),
        )
        for ids, to, reason in by_hand:
            if ids:
                if at is None:
                    raise InputError("the store has no events yet; pass --now")
                results = store.set_status(stores, ids, to, at=at, reason=reason)
                changed[to] = sum(len(r.memories) for r in results)
        report = store.maintain_home(
            stores,
            params,
            now=at,
            only=owners or None,
            close_sessions=close_sessions,
            embed=embedder.encode,
            token_count=get_counter(settings.embedding.model).count,
        )
        counts = stores.catalog.sql(
            "SELECT status, count(*) AS n FROM memory_meta GROUP BY status ORDER BY status"
        ).to_pylist()
    out = report.as_dict()
    out["status_changes"] = changed
    out["memories_by_status"] = {r["status"]: r["n"] for r in counts}
    if as_json:
        click.echo(dumps(out))
        return
    click.echo(f"maintained {out['owners']} owner(s) at {out['now']}")
    click.echo("events: " + (", ".join(f"{k} {v}" for k, v in out["events"].items()) or "none"))
    if out["contradictions_settled"]:
        settled = out["contradictions_settled"].items()
        click.echo("contradictions settled: " + ", ".join(f"{k} {v}" for k, v in settled))
    click.echo("memories: " + ", ".join(f"{k} {v}" for k, v in out["memories_by_status"].items()))
