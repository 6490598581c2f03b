"""Memory search used by the CLI, the MCP server and the evaluation.

A search is made for a *reader* (an owner, optionally an agent and a session) and never returns a
memory the reader's policy does not allow (``skillstream.lifecycle.policy``): the policy's filter
runs inside LanceDB and every hit is checked again. Without owner and agent the search is the
operator's and sees every memory.

Strategies: ``keyword`` (BM25 full-text), ``semantic`` (vector) or ``hybrid`` (both, fused with
reciprocal-rank fusion). Candidates (4 x k) are re-ranked by relevance, confidence, recency and
reinforcement (``skillstream.lifecycle.ranking``). Recorded searches (the default) add a row to
the ``queries`` table and set ``last_accessed_at`` of the hits, when no flow holds the catalog
(``skillstream.lifecycle.querylog``).

Example:
    >>> with MemorySearch(settings) as s:  # doctest: +SKIP
    ...     s.search("hiking", owner="u1", k=5)
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from skillstream.embed import get_embedder
from skillstream.errors import InputError
from skillstream.lifecycle.clock import latest
from skillstream.lifecycle.params import LifecycleParams
from skillstream.lifecycle.policy import Reader, can_read
from skillstream.lifecycle.querylog import STRATEGIES, query_row
from skillstream.lifecycle.ranking import rank
from skillstream.lifecycle.states import SEARCHABLE
from skillstream.redact import redactor_for
from skillstream.settings import Settings
from skillstream.storage.filters import read_filter

log = logging.getLogger(__name__)

CANDIDATES_PER_HIT = 4


class MemorySearch:
    """Repeated searches over one home (keeps the index, the embedder and the catalog open).

    Args:
        settings: The home.
        record: Log queries and access times (only possible while no flow holds the catalog).
        index: An open ``MemoryIndex`` to use instead of opening one.
        catalog: An open, writable ``Catalog`` to record into instead of opening one.
    """

    def __init__(
        self, settings: Settings, *, record: bool = True, index: Any = None, catalog: Any = None
    ) -> None:
        from skillstream.storage.lance import MemoryIndex

        self.settings = settings
        self.rules = LifecycleParams.from_settings(settings.lifecycle, settings.spans.idle_gap)
        self.embedder = get_embedder(settings.embedding)
        self.index = index or MemoryIndex(
            settings.storage.lancedb, self.embedder.dim, settings.storage.storage_options
        )
        self.redactor = redactor_for(settings.lifecycle.policies)
        self.catalog = catalog
        self._own_catalog = False
        if record and catalog is None:
            self.catalog = self._open_catalog()
            self._own_catalog = self.catalog is not None
        self.recording = record and self.catalog is not None

    def _open_catalog(self) -> Any:
        from skillstream.storage.catalog import CatalogLockedError, catalog_exists, open_catalog

        if not catalog_exists(self.settings.storage):
            return None
        try:
            return open_catalog(self.settings.storage)
        except CatalogLockedError:
            log.warning(
                "the catalog is held by a running flow: this search is not recorded in the "
                "queries table and does not update access times"
            )
            return None

    def clock(self) -> datetime | None:
        """The store's latest event time (latest lifecycle event or span end), if known."""
        if self.catalog is None:
            return None
        from skillstream.services.home_lifecycle import store_clock

        return store_clock(self.catalog)

    def search(
        self,
        query: str,
        *,
        owner: str | None = None,
        agent: str | None = None,
        session: str | None = None,
        k: int = 10,
        strategy: str = "hybrid",
        now: datetime | None = None,
        statuses: tuple[str, ...] = SEARCHABLE,
    ) -> list[dict[str, Any]]:
        """Search for ``reader = (owner, agent, session)``; hits best first.

        Each hit has every memory column except the vector, ``score`` (the combined rank score),
        ``relevance`` and ``recency``.

        Raises:
            InputError: for an unknown strategy or k < 1.
        """
        if strategy not in STRATEGIES:
            raise InputError(f"search strategy {strategy!r} is not one of {', '.join(STRATEGIES)}")
        if k < 1:
            raise InputError(f"k must be at least 1, got {k}")
        reader = Reader(owner, agent, session)
        policy = self.rules.policies.for_agent(agent)
        text = query if strategy in ("keyword", "hybrid") else None
        vector = self.embedder.encode_one(query) if strategy in ("semantic", "hybrid") else None
        found = self.index.search(
            text,
            vector,
            k=max(CANDIDATES_PER_HIT * k, 20),
            where=read_filter(reader, policy),
            statuses=statuses,
        )
        allowed = [h for h in found if can_read(reader, policy, h)]
        at = now or self.clock() or latest(*(h.get("updated_at") for h in allowed))
        hits = rank(allowed, at, self.rules, k)
        if self.recording:
            row = query_row(
                reader,
                query,
                strategy,
                k,
                [h["id"] for h in hits],
                at,
                datetime.now(UTC),
                self.redactor,
            )
            from skillstream.storage.writer import record_query

            record_query(self.catalog, self.index, row, at)
        return hits

    def close(self) -> None:
        if self._own_catalog and self.catalog is not None:
            self.catalog.close()
        self.catalog = None
        self.recording = False

    def __enter__(self) -> MemorySearch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def search_memories(
    settings: Settings,
    query: str,
    *,
    owner: str | None = None,
    k: int = 10,
    index: Any = None,
    agent: str | None = None,
    session: str | None = None,
    strategy: str = "hybrid",
    now: datetime | None = None,
    record: bool = True,
) -> list[dict[str, Any]]:
    """One search (see :class:`MemorySearch`); hits carry text, score and provenance."""
    with MemorySearch(settings, record=record, index=index) as s:
        return s.search(
            query, owner=owner, agent=agent, session=session, k=k, strategy=strategy, now=now
        )
