"""Memory search used by the CLI, the MCP server and the evaluation.

A search is made for a *reader* (an owner, optionally an agent and a session) and never returns a
memory the reader's policy does not allow (``skillstream.lifecycle.policy``): the policy's filter
runs inside LanceDB and every hit is checked again. Without owner and agent the search is the
operator's and sees every memory.

Strategies: ``keyword`` (BM25 full-text), ``semantic`` (vector) or ``hybrid`` (both, fused with
reciprocal-rank fusion). Candidates (4 x k) are re-ranked by relevance, confidence, recency and
reinforcement, and hits that repeat each other are spread out (``rank_diversity``; see
``skillstream.lifecycle.ranking``). Recorded searches (the default) add a row to
the ``queries`` table and set ``last_accessed_at`` of the hits, when no flow holds the catalog
(``skillstream.lifecycle.querylog``).

Example:
    >>> with MemorySearch(settings) as s:  # doctest: +SKIP
    ...     s.search("hiking", owner="u1", k=5)
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from skillstream.embed import get_embedder
from skillstream.errors import InputError
from skillstream.lifecycle.activation import activate
from skillstream.lifecycle.clock import latest
from skillstream.lifecycle.params import LifecycleParams
from skillstream.lifecycle.policy import Reader, can_read
from skillstream.lifecycle.querylog import STRATEGIES, query_row
from skillstream.lifecycle.ranking import diversify, rank
from skillstream.lifecycle.states import SEARCHABLE, ChangeLog
from skillstream.model import MaintenanceResult
from skillstream.redact import redactor_for
from skillstream.services.nodes import NodeMembers
from skillstream.services.nodes import expand as expand_nodes
from skillstream.settings import Settings
from skillstream.storage import filters
from skillstream.storage.filters import not_skill_item, read_filter
from skillstream.vocab import MemoryKind, MemoryStatus

log = logging.getLogger(__name__)

MAX_K = 10000
"""Most hits one search returns."""
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
        from skillstream.storage.home import open_index

        self.settings = settings
        self.params = LifecycleParams.from_settings(settings)
        self.embedder = get_embedder(settings.embedding)
        # a search creates nothing: a home without a memories table reads as empty
        self.index = index or open_index(settings, self.embedder.dim, create=False)
        self.redactor = redactor_for(settings.lifecycle.policies)
        self.catalog = catalog
        self._own_catalog = False
        if record and catalog is None:
            self.catalog = self._open_catalog()
            self._own_catalog = self.catalog is not None
        self.recording = record and self.catalog is not None
        self._members: NodeMembers | None = None

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
        task_skills: bool = True,
        archived: bool = False,
        nodes: bool = False,
        expand: bool = False,
    ) -> list[dict[str, Any]]:
        """Search for ``reader = (owner, agent, session)``; hits best first.

        Each hit has every memory column except the vector, ``score`` (the combined rank score),
        ``relevance`` and ``recency``. Task skills are hits too (``memory_type`` ``SkillMemory``,
        ``kind`` ``task_skill``, tagged ``task-skill``; see ``distill.memory_item``) unless
        ``task_skills`` is false. ``archived`` adds archived memories (cold storage) to
        ``statuses``; ``nodes`` adds the reorganizer's topic nodes (skipped by default);
        ``expand`` replaces each node by its members (``services.nodes``).

        Raises:
            InputError: for an unknown strategy or a k outside 1..``MAX_K``.
        """
        if strategy not in STRATEGIES:
            raise InputError(f"search strategy {strategy!r} is not one of {', '.join(STRATEGIES)}")
        if not 1 <= k <= MAX_K:
            raise InputError(f"k must be between 1 and {MAX_K}, got {k}")
        reader = Reader(owner, agent, session)
        policy = self.params.policy_set.for_agent(agent)
        text = query if strategy in ("keyword", "hybrid") else None
        vector = self.embedder.encode_query(query) if strategy in ("semantic", "hybrid") else None
        if archived:
            statuses = tuple(dict.fromkeys([*statuses, MemoryStatus.ARCHIVED]))
        skip_nodes = None if nodes or expand else f"NOT ({filters.eq('kind', MemoryKind.TOPIC)})"
        found = self.index.search(
            text,
            vector,
            k=max(CANDIDATES_PER_HIT * k, 20),
            where=filters.where_all(
                read_filter(reader, policy), skip_nodes, None if task_skills else not_skill_item()
            ),
            statuses=statuses,
            with_vector=self.params.rank_diversity > 0,
        )
        allowed = [h for h in found if can_read(reader, policy, h)]
        at = now or self.clock() or latest(*(h.get("updated_at") for h in allowed))
        ranked = rank(allowed, at, self.params, len(allowed))
        vectors = [h.pop("vector", None) for h in ranked]
        if any(v is None for v in vectors):  # no spread asked for (no vectors read)
            hits = ranked[:k]
        else:
            hits = diversify(ranked, vectors, k, self.params.rank_diversity)
        if expand:

            def fetch(ids: list[str]) -> list[dict[str, Any]]:
                where = filters.where_all(
                    filters.is_in("id", ids), filters.is_in("status", statuses)
                )
                rows = self.index.table.scan(where).to_pylist()
                return [r for r in rows if can_read(reader, policy, r)]

            hits = expand_nodes(hits, self._node_members().members, fetch, k)
        if self.recording:
            self.record(reader, query, strategy, k, hits, at)
        return hits

    def record(
        self,
        reader: Reader,
        query: str,
        strategy: str,
        k: int,
        hits: list[dict[str, Any]],
        at: datetime | None,
        recorded_at: datetime | None = None,
    ) -> None:
        """Record a search made earlier (by this or another ``MemorySearch``): its ``queries``
        row, the hits' access times, and the first activation of those still ``generated``.

        Raises:
            ValueError: when this search was opened without a catalog to record into.
        """
        self.record_many([(reader, query, strategy, k, hits, at, recorded_at)])

    def record_many(self, searches: Sequence[tuple[Any, ...]]) -> None:
        """Record several searches made earlier, in their order, in one write: each is
        ``(reader, query, strategy, k, hits, at, recorded_at)`` as :meth:`record` takes them.

        Raises:
            ValueError: when this search was opened without a catalog to record into.
        """
        if not self.recording:
            raise ValueError("this search records nothing: open it with record=True")
        from skillstream.storage.writer import record_queries

        batch = []
        activated: set[str] = set()
        for reader, query, strategy, k, hits, at, recorded_at in searches:
            row = query_row(
                reader,
                query,
                strategy,
                k,
                [h["id"] for h in hits],
                at,
                recorded_at or datetime.now(UTC),
                self.redactor,
            )
            fresh = [h for h in hits if h["id"] not in activated]
            result = self._activations(fresh, row, at)
            if result is not None:
                activated.update(m.id for m in result.memories)
            batch.append((row, at, result))
        record_queries(self.catalog, self.index, batch)

    def _activations(self, hits: list[dict[str, Any]], row: Any, at: datetime | None) -> Any:
        """The ``generated`` hits activated by this search (a ``MaintenanceResult``), if any."""
        ids = [h["id"] for h in hits if h.get("status") == MemoryStatus.GENERATED]
        if not ids or at is None:
            return None
        from skillstream.storage.lance import memory_from_row

        log = ChangeLog(hits[0]["owner_id"], row.query_id, None, "search", row.recorded_at)
        found = self.index.table.scan(filters.is_in("id", ids)).to_pylist()
        activate(log, [memory_from_row(r) for r in found], at, f"search {row.query_id}")
        for m in log.changed.values():
            m.last_accessed_at = latest(m.last_accessed_at, at)
            m.decay_steps = 0
        return MaintenanceResult(
            log.owner_id, at, list(log.changed.values()), log.events, log.rows, actor="search"
        )

    def _node_members(self) -> NodeMembers:
        if self._members is None:
            self._members = NodeMembers(self.catalog, self.settings.storage)
        return self._members

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
    task_skills: bool = True,
    archived: bool = False,
    nodes: bool = False,
    expand: bool = False,
) -> list[dict[str, Any]]:
    """One search (see :class:`MemorySearch`); hits carry text, score and provenance."""
    with MemorySearch(settings, record=record, index=index) as s:
        return s.search(
            query,
            owner=owner,
            agent=agent,
            session=session,
            k=k,
            strategy=strategy,
            now=now,
            task_skills=task_skills,
            archived=archived,
            nodes=nodes,
            expand=expand,
        )
