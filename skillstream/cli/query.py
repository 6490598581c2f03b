"""``skillstream search``, ``stats`` and ``config``: reading what the flows stored."""

from __future__ import annotations

import click

from skillstream.cli.common import dumps, existing_home, format_text, settings_from


def open_catalog(settings, dim: int | None = None):
    """A read-only catalog connection with the LanceDB tables attached as views."""
    from skillstream.cli.common import existing_home
    from skillstream.storage import catalog as store

    existing_home(settings)
    cat = store.open_catalog(settings.storage, read_only=True)
    cat.attach_lance(settings.storage.lancedb, settings.storage.storage_options)
    return cat


@click.command()
@click.argument("query")
@click.option(
    "--owner", default=None, help="Search as this owner (its private memories, and fleet ones)."
)
@click.option("--agent", default=None, help="Search through this agent's policy (readable scopes).")
@click.option(
    "--session", default=None, help="The reader's session (adds its session-scoped memories)."
)
@click.option("--k", "k", type=int, default=10, show_default=True)
@click.option(
    "--strategy",
    type=click.Choice(["hybrid", "semantic", "keyword"]),
    default="hybrid",
    show_default=True,
)
@click.option(
    "--now", default=None, help="Event time for recency (ISO 8601); default: the store's latest."
)
@click.option("--no-record", is_flag=True, help="Do not log the query or update access times.")
@click.option("--archived", is_flag=True, help="Search archived memories (cold storage) too.")
@click.option("--nodes", is_flag=True, help="Return the reorganizer's topic nodes too.")
@click.option("--expand", is_flag=True, help="Replace each topic node by its member memories.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def search(
    ctx, query, owner, agent, session, k, strategy, now, no_record, archived, nodes, expand, as_json
):
    """Search memories (hybrid by default), ranked by relevance, confidence, recency, reinforcement.

    Without --owner and --agent the search is the operator's and sees every memory.
    """
    from skillstream.lifecycle.clock import parse_time
    from skillstream.services.search import search_memories

    settings = existing_home(settings_from(ctx))
    hits = search_memories(
        settings,
        query,
        owner=owner,
        agent=agent,
        session=session,
        k=k,
        strategy=strategy,
        now=parse_time(now),
        record=not no_record,
        archived=archived,
        nodes=nodes,
        expand=expand,
    )
    keep = [
        "text",
        "score",
        "owner_id",
        "kind",
        "event_ts",
        "source_message_ids",
        "id",
        "status",
        "scope",
        "confidence",
        "reinforcement",
        "relevance",
        "similarity",
        "keyword",
        "node_id",
    ]
    rows = [{c: h.get(c) for c in keep} for h in hits]
    if as_json:
        click.echo(dumps(rows))
    else:
        click.echo(format_text(keep[:6], rows))


STATS_SQL = {
    "memories_by_status": (
        "select status, count(*) as n from memories group by status order by status"
    ),
    "memories_by_type": (
        "select memory_type, kind, count(*) as n from memories group by all order by all"
    ),
    "lifecycle_events": (
        "select event, new_status, count(*) as n from memory_events group by all order by all"
    ),
    "memory_relations": (
        "select relation, count(distinct target_id) as targets, count(*) as n "
        "from memory_relations group by relation order by relation"
    ),
    "spans_by_status": "select status, count(*) as n from spans group by status order by status",
    "dead_letters_by_reason": (
        "select split_part(reason, ':', 1) as reason, count(*) as n from dead_letters "
        "group by 1 order by n desc"
    ),
}


@click.command()
@click.option(
    "--cost",
    is_flag=True,
    help="LLM calls, billed prompt and completion tokens and their cost (setting llm_prices) by "
    "purpose, in all and per 1,000 turns (the messages of the stored spans).",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def stats(ctx, cost, as_json):
    """Row counts per table, memories per status and type, spans, dead letters; with --cost, what
    the LLM cost."""
    settings = settings_from(ctx)
    if cost:
        _cost(settings, as_json)
        return
    cat = open_catalog(settings)
    try:
        tables = [
            r["name"]
            for r in cat.sql(
                "select table_name as name from duckdb_tables() "
                "where database_name = current_database() order by 1"
            ).to_pylist()
        ]
        out = {
            "tables": {
                t: cat.sql(f'select count(*) as n from "{t}"').to_pylist()[0]["n"] for t in tables
            }
        }
        out["memories"] = cat.sql("select count(*) as n from memories").to_pylist()[0]["n"]
        for name, q in STATS_SQL.items():
            out[name] = cat.sql(q).to_pylist()
    finally:
        cat.close()
    if as_json:
        click.echo(dumps(out))
        return
    click.echo(f"memories: {out['memories']}")
    click.echo(
        format_text(["table", "rows"], [{"table": k, "rows": v} for k, v in out["tables"].items()])
    )
    for name in STATS_SQL:
        rows = out[name]
        if rows:
            click.echo(f"\n{name}:")
            click.echo(format_text(list(rows[0]), rows))


def _cost(settings, as_json: bool) -> None:
    from skillstream.storage import catalog as store

    existing_home(settings)
    from skillstream.services.cost import read_cost

    with store.open_catalog(settings.storage, read_only=True) as cat:
        report = read_cost(cat, settings.llm.prices)
    turns = report["turns"]
    if as_json:
        click.echo(dumps(report))
        return
    click.echo(f"turns: {turns}")
    rows = [
        {
            "purpose": p["purpose"],
            "calls": p["calls"],
            "cached": p["cached"],
            "prompt_tokens": p["prompt_tokens"],
            "completion_tokens": p["completion_tokens"],
            "cost": p["cost"],
            "cost_per_1000_turns": p["per_1000_turns"]["cost"],
            "calls_per_1000_turns": p["per_1000_turns"]["calls"],
        }
        for p in report["purposes"]
    ]
    if rows:
        click.echo(format_text(list(rows[0]), rows))
    if report["unpriced_models"]:
        click.echo(
            "no price for " + ", ".join(report["unpriced_models"]) + ": set llm_prices "
            '(e.g. SKILLSTREAM_LLM_PRICES=\'{"MODEL": {"input": 0.15, "output": 0.6}}\')',
            err=True,
        )


@click.command("config")
@click.option(
    "--doc",
    is_flag=True,
    help="Print every setting (key, environment variable, default, what it accepts, what it "
    "does) as Markdown, from the declarations; docs/settings.md is this output.",
)
@click.pass_context
def config_cmd(ctx, doc):
    """Show the effective settings (no secrets are part of them)."""
    if doc:
        from skillstream.settings import settings_markdown

        click.echo(settings_markdown(), nl=False)
        return
    click.echo(dumps(settings_from(ctx).describe()))
