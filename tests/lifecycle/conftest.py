"""Factories for lifecycle tests: spans with sessions and agents, lifecycle parameters, a written
home."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from skillstream.ids import stable_id
from skillstream.lifecycle.params import LifecycleParams
from skillstream.model import Message, Span
from skillstream.settings import Settings

T0 = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def span(
    texts: list[str],
    *,
    at: datetime = T0,
    owner: str = "o1",
    session: str = "s1",
    conversation: str | None = None,
    agent: str | None = None,
    metadata: list[dict | None] | None = None,
    lang: str = "en",
) -> Span:
    """A span of user messages one minute apart, ending at ``at``; ids derive from the texts."""
    conv = conversation or owner
    n = len(texts)
    msgs = tuple(
        Message(
            message_id=f"{conv}-{session}-{stable_id(t, at.isoformat(), size=4)}-{i}",
            conversation_id=conv,
            owner_id=owner,
            session_id=session,
            role="user",
            speaker="User",
            text=t,
            ts=at - timedelta(minutes=n - 1 - i),
            agent_id=agent,
            metadata=json.dumps(metadata[i]) if metadata and metadata[i] is not None else None,
        )
        for i, t in enumerate(texts)
    )
    from skillstream.ids import prefixed_id

    return Span(
        span_id=prefixed_id("spn", conv, [m.message_id for m in msgs]),
        owner_id=owner,
        conversation_id=conv,
        session_id=session,
        seq=0,
        messages=msgs,
        n_tokens=sum(len(t.split()) for t in texts),
        lang=lang,
    )


def lifecycle_params(**keys) -> LifecycleParams:
    """The lifecycle parameters of the default settings with ``keys`` (flat setting keys, e.g.
    ``session_summaries=False`` or ``idle_gap_s=3600``) over them."""
    return LifecycleParams.from_settings(Settings.from_keys(**keys))


@pytest.fixture
def recorded():
    return datetime(2030, 1, 1, tzinfo=UTC)
