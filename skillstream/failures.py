"""Failed spans: what is kept so that a span whose extraction failed can be processed later.

When an executor gives up on a span (for an LLM: no valid answer within the retry budget), the
pipeline records the span as ``failed`` in the ledger and writes a row of the catalog table
``failed_spans`` (:class:`~skillstream.model.FailedSpanRow`) in the same transaction: the span's
fields and its messages as JSON. Messages are redacted when they are parsed
(``skillstream.redact``), so the row holds nothing the other tables could not hold.

``skillstream retry-failed`` reads the rows whose ledger status is still ``failed``, rebuilds the
spans with :func:`span_from_row`, runs them through the pipeline against the owners' current
memories and marks the rows ``resolved`` when they succeed. A later run of the flow over the same
input processes a failed span again too (only ``done`` spans are skipped).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict
from datetime import datetime
from typing import Any

from skillstream.errors import InputError
from skillstream.model import FailedSpanRow, Message, Span

TABLE = "failed_spans"
PENDING = "pending"
RESOLVED = "resolved"
ERROR_CHARS = 2000


def message_to_dict(m: Message) -> dict[str, Any]:
    d = asdict(m)
    d["ts"] = m.ts.isoformat()
    return d


def message_from_dict(d: dict[str, Any]) -> Message:
    try:
        values = dict(d)
        values["ts"] = datetime.fromisoformat(values["ts"])
        return Message(**values)
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(
            f"a stored failed-span message cannot be read back ({e}); expected the fields of "
            f"skillstream.model.Message, got keys {sorted(d)[:12]}"
        ) from e


def failed_span_row(
    span: Span,
    extractor: str,
    error: str | None,
    attempts: int,
    failed_at: datetime,
    retries: int = 0,
) -> FailedSpanRow:
    """The ``failed_spans`` row of a span that just failed (status ``pending``)."""
    return FailedSpanRow(
        span_id=span.span_id,
        owner_id=span.owner_id,
        conversation_id=span.conversation_id,
        session_id=span.session_id,
        seq=span.seq,
        lang=span.lang,
        n_tokens=span.n_tokens,
        messages=json.dumps([message_to_dict(m) for m in span.messages], ensure_ascii=False),
        extractor=extractor,
        error=(error or "")[:ERROR_CHARS] or None,
        attempts=attempts,
        retries=retries,
        status=PENDING,
        failed_at=failed_at,
        resolved_at=None,
    )


def span_from_row(row: FailedSpanRow | dict[str, Any]) -> Span:
    """Rebuild the ``Span`` of a ``failed_spans`` row (same id, seq, messages and language)."""
    if isinstance(row, FailedSpanRow):
        row = asdict(row)
    try:
        raw = json.loads(row["messages"])
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(
            f"failed span {row.get('span_id')!r}: the stored messages are not JSON ({e})"
        ) from e
    messages = tuple(message_from_dict(d) for d in raw)
    if not messages:
        raise InputError(f"failed span {row.get('span_id')!r} has no stored messages")
    return Span(
        span_id=row["span_id"],
        owner_id=row["owner_id"],
        conversation_id=row["conversation_id"],
        session_id=row.get("session_id") or messages[0].session_id,
        seq=int(row.get("seq") or 0),
        messages=messages,
        n_tokens=int(row.get("n_tokens") or 0),
        lang=row.get("lang") or "en",
    )


def resolved_row(
    row: FailedSpanRow | dict[str, Any], resolved_at: datetime, retries: int | None = None
) -> FailedSpanRow:
    """``row`` (typed, or as read from the catalog) marked ``resolved`` (its span is now done)."""
    typed = row if isinstance(row, FailedSpanRow) else FailedSpanRow.from_row(row)
    return dataclasses.replace(
        typed,
        status=RESOLVED,
        resolved_at=resolved_at,
        retries=typed.retries if retries is None else retries,
    )
