"""``skillstream retry-failed``: process the spans whose extraction failed, once the LLM answers.

A span fails when the executor gets no valid answer within its retry budget (the endpoint was down,
rate-limited, or kept answering garbage). The flow then writes the span's ledger row with status
``failed`` and its messages to ``failed_spans`` (``skillstream.failures``). This command

1. reads the ``failed_spans`` rows whose ledger status is still ``failed`` (optionally of one
   owner, at most ``--limit``), ordered by owner, conversation and span sequence;
2. runs each owner's spans through the same pipeline as the flow (memory skill bank, controller,
   executor), against the owner's *current* memories in LanceDB;
3. writes the results with the flow's own write path (``storage.writer.write_results``: LanceDB,
   then one catalog transaction with the ledger last) and marks the rows ``resolved``.

Ids are deterministic and every write is an upsert, so a crash in the middle or a second run loses
nothing and duplicates nothing; a span that fails again stays ``pending`` with ``retries`` counted.
Rows whose span is already ``done`` in the ledger (a later flow run processed it) are marked
``resolved`` without a call. Run it while no flow holds the catalog (DuckDB allows one writer).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import click

from skillstream.cli.common import dumps, settings_from
from skillstream.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class RetrySummary:
    """What one ``retry_failed_spans`` call did."""

    pending: int = 0
    done: int = 0
    failed: int = 0
    already_done: int = 0
    without_payload: int = 0
    llm_calls: int = 0
    span_ids_failed: list[str] = field(default_factory=list)


PENDING_SQL = """
SELECT f.* FROM failed_spans AS f JOIN spans AS s ON s.span_id = f.span_id
WHERE s.status = 'failed' AND f.status = 'pending' {owner}
ORDER BY f.owner_id, f.conversation_id, f.seq, f.span_id
"""


def retry_failed_spans(
    settings: Settings,
    *,
    executor: Any = None,
    owner: str | None = None,
    limit: int | None = None,
    clock: Any = None,
    any_extractor: bool = False,
) -> RetrySummary:
    """Re-process failed spans (see the module docstring).

    Args:
        settings: The home and the LLM configuration to use now.
        executor: The executor (default: the one ``settings.llm`` names, as in the flow).
        owner: Only this owner's spans.
        limit: At most this many spans.
        clock: Time source (tests).
        any_extractor: Allow retrying spans with another executor than the one that failed them
            (for example offline with ``rules`` what an LLM could not do).

    Raises:
        InputError: no catalog; or the spans failed with an LLM executor while the settings name
            the ``rules`` backend (a forgotten ``SKILLSTREAM_LLM``), unless ``any_extractor``.

    Returns:
        Counts; ``failed`` spans stay in ``failed_spans`` for a later retry.
    """

    from skillstream.embed import get_embedder
    from skillstream.errors import InputError
    from skillstream.failures import TABLE, resolved_row, span_from_row
    from skillstream.services.pipeline import build_pipeline, make_executor
    from skillstream.storage.home import open_stores
    from skillstream.storage.tombstones import owner_state
    from skillstream.storage.writer import write_results

    now = clock or (lambda: datetime.now(UTC))
    from skillstream.storage.catalog import catalog_exists

    if not catalog_exists(settings.storage):
        raise InputError(
            f"no catalog at {settings.storage.catalog}; nothing has run in this home yet"
        )
    embedder = get_embedder(settings.embedding)
    summary = RetrySummary()
    with open_stores(settings, embedder.dim) as stores:
        cat = stores.catalog
        stale = cat.sql(
            "SELECT f.* FROM failed_spans AS f JOIN spans AS s ON s.span_id = f.span_id "
            "WHERE s.status = 'done' AND f.status = 'pending'"
        ).to_pylist()
        if stale:
            cat.upsert(TABLE, [resolved_row(r, now()) for r in stale])
        summary.already_done = len(stale)
        summary.without_payload = int(
            cat.sql(
                "SELECT count(*) AS n FROM spans AS s WHERE s.status = 'failed' AND NOT EXISTS "
                "(SELECT 1 FROM failed_spans AS f WHERE f.span_id = s.span_id)"
            ).to_pylist()[0]["n"]
        )
        query = PENDING_SQL.format(owner="AND f.owner_id = ?" if owner else "")
        rows = cat.sql(query, [owner] if owner else None).to_pylist()
        if limit is not None:
            rows = rows[: max(0, limit)]
        summary.pending = len(rows)
        if not rows:
            return summary
        executor = executor or make_executor(settings)
        others = sorted({r["extractor"] for r in rows} - {executor.name, None})
        if others and not any_extractor:
            raise InputError(
                f"the failed spans were extracted with {others}, but the configured executor is "
                f"{executor.name!r} (SKILLSTREAM_LLM={settings.llm.backend!r}); "
                "configure the same backend "
                "(--llm openai --llm-base-url URL --llm-model NAME, or the SKILLSTREAM_LLM_* "
                "variables), or pass --llm explicitly to retry them with another one"
            )

        # The flow's pipeline, without maintenance: the flow maintains the owners on their clock.
        pipeline = build_pipeline(
            settings,
            embedder,
            executor=executor,
            hydrate=lambda owner_id: owner_state(stores.index, cat, owner_id),
            catalog=cat,
            maintenance=False,
        )
        by_owner: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            by_owner.setdefault(r["owner_id"], []).append(r)
        for owner_id, owner_rows in by_owner.items():
            spans = [span_from_row(r) for r in owner_rows]
            state = pipeline.new_state(owner_id)
            results = pipeline.process_owner(state, spans)
            for row, result in zip(owner_rows, results):
                retries = int(row.get("retries") or 0) + 1
                if result.status == "done":
                    result.rows.failed_spans = [resolved_row(row, now(), retries)]
                    summary.done += 1
                else:
                    result.rows.failed_spans = [
                        replace(failed, retries=retries) for failed in result.rows.failed_spans
                    ]
                    summary.failed += 1
                    summary.span_ids_failed.append(row["span_id"])
                summary.llm_calls += sum(1 for c in result.llm_calls if not c.cached)
            write_results(stores, results)
            log.info("retry-failed: owner %s: %d span(s) retried", owner_id, len(results))
    return summary


@click.command("retry-failed")
@click.option("--owner", default=None, help="Only this owner's failed spans.")
@click.option("--limit", type=int, default=None, help="At most this many spans.")
@click.option(
    "--llm",
    type=click.Choice(["rules", "openai"]),
    default=None,
    help="Extraction backend (default: the configured one).",
)
@click.option("--llm-base-url", default=None)
@click.option("--llm-model", default=None)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.pass_context
def retry_failed(
    ctx: click.Context,
    owner: str | None,
    limit: int | None,
    llm: str | None,
    llm_base_url: str | None,
    llm_model: str | None,
    as_json: bool,
) -> None:
    """Process again the spans whose extraction failed (exit code 1 if some fail again)."""
    settings = settings_from(ctx, llm=llm, llm_base_url=llm_base_url, llm_model=llm_model)
    summary = retry_failed_spans(settings, owner=owner, limit=limit, any_extractor=llm is not None)
    if as_json:
        click.echo(dumps(asdict(summary)))
    else:
        click.echo(
            f"failed spans: {summary.pending} retried, {summary.done} now done, "
            f"{summary.failed} failed again, {summary.already_done} already done by a later run; "
            f"{summary.llm_calls} LLM request(s)"
            + (
                f"; {summary.without_payload} failed span(s) have no stored messages (re-run the "
                "flow over their source to retry them)"
                if summary.without_payload
                else ""
            )
        )
    if summary.failed:
        ctx.exit(1)
