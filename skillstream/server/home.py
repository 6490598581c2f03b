"""The home a server serves: settings, the model held for the process, and how a request reaches
the stores.

A request opens the catalog for its own duration, as the CLI's reads do, so a ``skillstream run``
in another process can take the home between requests; while a run holds a DuckDB catalog file, a
read answers 503 with the reason (a DuckLake catalog serves readers while flows write). Requests
that touch the stores go one at a time: DuckDB allows one writer, and a search records what it
read (the queries table, access times, first activations), which is a write.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from skillstream.errors import InputError, TransientError
from skillstream.server import reads
from skillstream.server.auth import Access, Denied, Tokens
from skillstream.server.recorder import Made, Recorder
from skillstream.settings import Settings


class Busy(TransientError):
    """Another process holds the home's catalog (a run); try again when it is done."""


def jsonable(v: Any) -> Any:
    """A JSON value for what the stores return (times as ISO 8601, arrays as lists)."""
    if isinstance(v, (datetime, date, time)):
        return v.isoformat()
    if isinstance(v, timedelta):
        return v.total_seconds()
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if isinstance(v, UUID):
        return str(v)
    if hasattr(v, "tolist"):
        return v.tolist()
    return str(v)


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, default=jsonable, ensure_ascii=False).encode("utf-8")


class ServedHome:
    """One home behind a server.

    Args:
        settings: The home's settings.
    """

    def __init__(self, settings: Settings, tokens: Tokens | None = None) -> None:
        self.settings = settings
        self.tokens = tokens or Tokens()
        """The tokens the server accepts (none: every request has full access)."""
        self.lock = threading.RLock()
        self._skills: Any = None
        self._clock: tuple[Any, datetime | None] = (None, None)
        self.recorder = Recorder(self._recording_search, self.lock, after=self._recorded)

    # ------------------------------------------------------------------ plumbing
    def warm(self) -> None:
        """Load the embedding model now, so the first request does not wait for it."""
        from skillstream.embed import get_embedder

        embedder = get_embedder(self.settings.embedding)
        embedder.encode(["warm up"])  # the model itself: a loaded model embeds queries fastest
        embedder.encode_query("warm up")

    @property
    def exists(self) -> bool:
        from skillstream.storage.catalog import catalog_exists

        return catalog_exists(self.settings.storage)

    @contextlib.contextmanager
    def catalog(self, write: bool = False) -> Iterator[Any]:
        """The catalog, open for one request (``None`` when nothing was stored yet).

        Raises:
            Busy: another process holds the catalog.
        """
        from skillstream.storage.catalog import CatalogLockedError, open_catalog

        if not self.exists:
            yield None
            return
        try:
            cat = open_catalog(self.settings.storage, read_only=not write)
        except CatalogLockedError as e:
            raise Busy(f"the home is busy: {e}") from e
        except Exception as e:  # DuckDB's lock error names the process that holds the file
            if "lock" in str(e).lower():
                raise Busy(
                    "the home's catalog is held by another process (a run); try again when it "
                    "is done, or serve a shared catalog"
                ) from e
            raise
        try:
            yield cat
        finally:
            cat.close()

    @property
    def task_skills(self) -> Any:
        if self._skills is None:
            from skillstream.services.task_skills import TaskSkillAPI

            self._skills = TaskSkillAPI(self.settings)
        return self._skills

    # ------------------------------------------------------------------ reads
    def read(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fn(catalog, *args, **kwargs)`` under the lock; an empty answer for an empty home."""
        with self.lock, self.catalog() as cat:
            if cat is None:
                return None
            return fn(cat, *args, **kwargs)

    def search(
        self,
        access: Access,
        query: str,
        *,
        owner: str | None,
        k: int,
        strategy: str = "hybrid",
        agent: str | None = None,
        session: str | None = None,
    ) -> list[dict[str, Any]]:
        """Memory search as ``skillstream search`` does it (ranking, policies, recording)."""
        owner = access.default_owner(owner)
        access.require(owner)
        if not query.strip():
            raise InputError("search needs a query: q=...")
        if not self.exists:
            return []
        from skillstream.lifecycle.clock import latest
        from skillstream.lifecycle.policy import Reader
        from skillstream.services.search import MemorySearch

        made_at = datetime.now(UTC)
        at = self.clock()
        # LanceDB reads need no lock: a search runs beside the recorder's and the API's writes
        with MemorySearch(self.settings, record=False) as s:
            hits = s.search(
                query, owner=owner, k=k, strategy=strategy, agent=agent, session=session, now=at
            )
        at = at or latest(*(h.get("updated_at") for h in hits))
        reader = Reader(owner, agent, session)
        self.recorder.add(Made(reader, query, strategy, k, hits, at, made_at))
        return [{k: v for k, v in h.items() if k != "vector"} for h in hits]

    def clock(self) -> datetime | None:
        """The store's clock (its latest event time), read again only when the catalog file
        changed; while another process holds the catalog, the last one read."""
        from skillstream.services.home_lifecycle import store_clock

        key = self._catalog_stamp()
        if key is not None and key == self._clock[0]:
            return self._clock[1]
        with self.lock:
            try:
                with self.catalog() as cat:
                    value = store_clock(cat) if cat is not None else None
            except Busy:
                return self._clock[1]
            self._clock = (key, value)
        return value

    def _recorded(self) -> None:
        """After the recorder wrote a batch (under the lock): a search's records leave the
        store's clock where it was (their events carry the clock's time), so the clock read
        before stays good for the catalog as it is now."""
        if self._clock[0] is not None:
            self._clock = (self._catalog_stamp(), self._clock[1])

    def _catalog_stamp(self) -> Any:
        """What changes when a DuckDB catalog file is written (``None`` for DuckLake)."""
        from pathlib import Path

        if self.settings.storage.shared_catalog:
            return None
        stamp: list[tuple[int, int, int] | None] = []
        for path in (
            Path(self.settings.storage.catalog),
            Path(self.settings.storage.catalog + ".wal"),
        ):
            try:
                st = path.stat()
            except OSError:
                stamp.append(None)
                continue
            stamp.append((st.st_mtime_ns, st.st_size, st.st_ino))
        return tuple(stamp)

    def _recording_search(self) -> Any:
        """A ``MemorySearch`` that records into the catalog, open for the recorder's batch.

        Raises:
            Busy: another process holds the catalog.
        """
        from skillstream.services.search import MemorySearch
        from skillstream.storage.catalog import open_catalog

        try:
            cat = open_catalog(self.settings.storage)
        except Exception as e:
            raise Busy(f"the catalog is not available for recording: {e}") from e
        search = MemorySearch(self.settings, record=True, catalog=cat)
        closing = search.close

        def close() -> None:
            closing()
            cat.close()

        search.close = close  # type: ignore[method-assign]
        return search

    def controller(self) -> tuple[dict[str, Any] | None, list[dict[str, float]]]:
        """The trained controller the settings select memory skills with (the one
        ``memory-skills activate`` recorded, or ``memory_skill_scorer``) and the training curve
        its checkpoint carries; ``(None, [])`` when none is set."""
        x = self.settings.extraction
        if not x.memory_skill_scorer:
            return None, []
        from skillstream.memskill.controller import checkpoint_meta, checkpoint_version

        record: dict[str, Any] = {
            "checkpoint": x.memory_skill_scorer,
            "k": x.memory_skill_k,
            "selection": x.memory_skill_selection,
        }
        try:
            record["version"] = checkpoint_version(x.memory_skill_scorer)
            meta = checkpoint_meta(x.memory_skill_scorer)
        except (OSError, RuntimeError):
            record["version"] = "unreadable"
            return record, []
        return record, curve_points(meta)

    def cost(self, row: Mapping[str, Any]) -> float | None:
        """The cost of a row's tokens (``model``, ``prompt_tokens``, ``completion_tokens``) at
        the configured prices; ``None`` when no price is set for its model."""
        from skillstream.llm.cost import token_cost

        return token_cost(
            self.settings.llm.prices,
            str(row.get("model")),
            int(row.get("prompt_tokens") or 0),
            int(row.get("completion_tokens") or 0),
        )

    # ------------------------------------------------------------------ writes
    def add(
        self, access: Access, messages: Sequence[Any], *, flush: bool = False
    ) -> dict[str, Any]:
        """Add messages as ``Home.add`` does; every message's owner must be allowed.

        A message without ``user_id`` belongs to a limited token's only owner; a full token's
        message without one is the conversation's, as in a chat log.
        """
        from skillstream.api import Home

        if not isinstance(messages, list) or not messages:
            raise InputError("send a JSON list of messages, each with 'role' and 'content'")
        now = datetime.now(UTC).isoformat()
        records = []
        for i, m in enumerate(messages):
            if not isinstance(m, Mapping):
                raise InputError(f"message {i} is not an object with 'role' and 'content'")
            record = dict(m)
            owner = record.get("user_id") or access.default_owner(None)
            if access.limited:
                if not owner:
                    raise Denied(400, f"message {i}: name its owner in 'user_id'")
                access.require(str(owner))
            if owner:
                record["user_id"] = owner
            record.setdefault("timestamp", now)
            records.append(record)
        # the server serves the process's metrics itself: a run it makes opens no port of its own
        settings = self.settings.with_keys(metrics_addr="")
        with self.lock:
            added = Home(settings).add(records, flush=flush)
        return added.as_dict()

    # ------------------------------------------------------------------ task skills
    def skills(self, access: Access, owner: str | None, every: bool) -> list[dict[str, Any]]:
        """Task skills (served ones unless ``every``) of ``owner`` or of every visible owner."""
        if owner is not None:
            access.require(owner)
        if not self.exists:
            return []
        with self.lock:
            found: list[dict[str, Any]] = self.task_skills.list(owner, include_archived=every)
        return [s for s in found if access.allows(s["owner_id"])]

    def skill(self, access: Access, owner: str, name: str, *, use: bool) -> dict[str, Any]:
        """One task skill with its ``SKILL.md`` and versions; ``use`` counts it as a use."""
        from skillstream.distill.package import render_skill_md

        access.require(owner)
        if not self.exists:
            raise InputError(f"no task skill named {name!r} of owner {owner!r}")
        with self.lock:
            api = self.task_skills
            skill = api.show(name, owner) if use else api.get(name, owner)
            trust = api.trust_of(skill)
            with self.catalog() as cat:
                versions = reads.skill_versions(cat, access, owner, name) if cat else []
        return {
            "owner_id": skill.owner_id,
            "name": skill.name,
            "description": skill.description,
            "version": skill.version,
            **trust,
            "times_used": skill.times_used,
            "skill_md": render_skill_md(skill),
            "package_url": skill.package_url,
            "versions": versions,
        }

    def feedback(
        self, access: Access, owner: str, name: str, success: bool, note: str
    ) -> dict[str, Any]:
        access.require(owner)
        with self.lock:
            got: dict[str, Any] = self.task_skills.feedback(name, success, note, owner)
        return got


def curve_points(meta: dict[str, Any]) -> list[dict[str, float]]:
    """The training curve a controller checkpoint carries (``curve``, JSON), if any."""
    raw = meta.get("curve")
    if not raw:
        return []
    try:
        points = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return []
    return [p for p in points if isinstance(p, dict)]
