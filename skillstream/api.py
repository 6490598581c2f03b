"""The Python API of skillstream: a home, opened once, and what you do with it.

:func:`open` gives a :class:`Home`; its methods are the commands of the CLI for a program:

* :meth:`Home.run`: a backfill of chat-log files through the memory flow;
* :meth:`Home.add`: extraction and storage of a few messages now, for an application;
* :meth:`Home.search`: memory search (task skills come back as ``SkillMemory`` hits);
* :meth:`Home.sql`: DuckDB SQL over the catalog and the memory tables;
* :meth:`Home.history`: a memory's lifecycle events;
* :attr:`Home.task_skills`: list, show, save, patch, delete and export task skills.

Tables come back as a :class:`Result`: Arrow underneath, ``.pl()`` for a Polars frame.

This module is imported only when one of its names is first used (``import skillstream`` stays
cheap); the flows, the stores and the models load when a method needs them.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillstream.errors import InputError
from skillstream.model import DeadLetter, Message
from skillstream.settings import Settings

if TYPE_CHECKING:
    import polars
    import pyarrow

    from skillstream.distill.record import TaskSkill

__all__ = ["Added", "Home", "Result", "TaskSkills", "open"]


class Result:
    """A table of results: Arrow underneath, rows as dicts, a Polars frame on demand.

    >>> r = Result.from_rows([{"name": "a", "n": 1}, {"name": "b", "n": 2}])
    >>> len(r), r[1]["name"], r.pl().shape
    (2, 'b', (2, 2))
    """

    def __init__(self, table: pyarrow.Table) -> None:
        self.arrow: pyarrow.Table = table
        """The result as a ``pyarrow.Table``."""

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping[str, Any]]) -> Result:
        """A result holding ``rows`` (dicts with the same keys)."""
        import pyarrow as pa

        return cls(pa.Table.from_pylist([dict(r) for r in rows]))

    def to_arrow(self) -> pyarrow.Table:
        """The result as a ``pyarrow.Table``."""
        return self.arrow

    def to_polars(self) -> polars.DataFrame:
        """The result as a Polars ``DataFrame`` (zero-copy where Arrow allows)."""
        import polars as pl

        frame = pl.from_arrow(self.arrow)
        assert isinstance(frame, pl.DataFrame)
        return frame

    def pl(self) -> polars.DataFrame:
        """Short for :meth:`to_polars`."""
        return self.to_polars()

    def to_pylist(self) -> builtins.list[dict[str, Any]]:
        """The rows as dicts."""
        rows: builtins.list[dict[str, Any]] = self.arrow.to_pylist()
        return rows

    @property
    def columns(self) -> builtins.list[str]:
        """Column names."""
        return list(self.arrow.column_names)

    def __len__(self) -> int:
        return int(self.arrow.num_rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.to_pylist())

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.to_pylist()[i]

    def __repr__(self) -> str:
        return f"Result({len(self)} rows: {', '.join(self.columns)})"


class Added:
    """What :meth:`Home.add` stored: counts, the span results and the memory ids they touched."""

    def __init__(
        self,
        messages: int,
        dead: builtins.list[DeadLetter],
        results: builtins.list[Any],
        skills: int,
        held: int = 0,
    ) -> None:
        self.messages = messages
        """Valid messages taken."""
        self.dead_letters = len(dead)
        """Records refused (stored in ``dead_letters`` with their reason)."""
        self.refused = [d.reason for d in dead]
        """Why each refused record was refused."""
        self.results = results
        """One ``SpanResult`` per span, in the order the flow finished them."""
        self.task_skills = skills
        """Task-skill versions written."""
        self.held = held
        """Messages of the conversations the call touched that wait in open spans after it
        (their memories come when the spans close: see :meth:`Home.add`)."""

    @property
    def memory_ids(self) -> builtins.list[str]:
        """Ids of the memories the spans created or changed, first seen first."""
        seen: dict[str, None] = {}
        for r in self.results:
            for m in getattr(r, "memories", []):
                seen.setdefault(m.id, None)
        return list(seen)

    @property
    def failed(self) -> builtins.list[str]:
        """Span ids whose extraction failed (kept in ``failed_spans`` for a retry)."""
        return [r.span.span_id for r in self.results if getattr(r, "status", "") == "failed"]

    def as_dict(self) -> dict[str, Any]:
        """The call's outcome as JSON-ready values (what the server and the MCP tool answer):
        ``messages``, ``refused``, ``spans``, ``memory_ids``, ``task_skills``, ``held``."""
        return {
            "messages": self.messages,
            "refused": self.refused,
            "spans": len(self.results),
            "memory_ids": self.memory_ids,
            "task_skills": self.task_skills,
            "held": self.held,
        }

    def __repr__(self) -> str:
        return (
            f"Added(messages={self.messages}, dead_letters={self.dead_letters}, "
            f"spans={len(self.results)}, memories={len(self.memory_ids)}, "
            f"task_skills={self.task_skills}, held={self.held})"
        )


class TaskSkills:
    """The task skills of a home (``Home.task_skills``); a thin face of the task-skill service.

    Args:
        settings: The home.
        owner: The owner every call defaults to (``None``: any owner for reads, ``default`` for
            writes).
    """

    def __init__(self, settings: Settings, owner: str | None = None) -> None:
        from skillstream.services.task_skills import TaskSkillAPI

        self._settings = settings
        self._api = TaskSkillAPI(settings, owner=owner)

    def _reading(self) -> None:
        """Refuse a read of a home where nothing was stored (see :func:`_require_home`)."""
        _require_home(self._settings)

    def list(
        self,
        owner: str | None = None,
        *,
        include_archived: bool = False,
        states: Sequence[str] | None = None,
    ) -> Result:
        """Owner, name, description, version, state and reliability of each served (``active``)
        task skill; ``include_archived`` adds every state but deleted, ``states`` picks them."""
        self._reading()
        rows = self._api.list(owner, include_archived=include_archived, states=states)
        if not rows:
            import pyarrow as pa

            return Result(
                pa.table(
                    {
                        "owner_id": pa.array([], pa.string()),
                        "name": pa.array([], pa.string()),
                        "description": pa.array([], pa.string()),
                        "version": pa.array([], pa.int64()),
                        "state": pa.array([], pa.string()),
                        "reliability": pa.array([], pa.float64()),
                        "successes": pa.array([], pa.int64()),
                        "failures": pa.array([], pa.int64()),
                        "pinned": pa.array([], pa.bool_()),
                    }
                )
            )
        return Result.from_rows(rows)

    def show(self, name: str, owner: str | None = None) -> TaskSkill:
        """One task skill by name (counts as a use). ``render_skill_md`` gives its SKILL.md."""
        self._reading()
        return self._api.show(name, owner)

    def markdown(self, name: str, owner: str | None = None) -> str:
        """A task skill's ``SKILL.md`` text (does not count as a use)."""
        self._reading()
        from skillstream.distill.package import render_skill_md

        return render_skill_md(self._api.get(name, owner))

    def save(
        self,
        name: str,
        description: str,
        content: str,
        owner: str | None = None,
    ) -> TaskSkill:
        """Create a task skill, or store a new version of the owner's one of that name.

        Args:
            name: Lower-case words joined by hyphens (``deploy-flask-app``).
            description: What it does and when to use it.
            content: The ``SKILL.md`` body: sections such as ``## Procedure`` (numbered steps),
                ``## Pitfalls and experience``, ``## User preferences``, ``## Verification``.
            owner: The owner (default: the home's owner, else ``default``).

        Raises:
            InputError: when the skill would not be valid (the message says why).
        """
        from skillstream.distill.package import skill_from_files, skill_md_text, validate_skill_md
        from skillstream.services.task_skills import DEFAULT_OWNER

        text = skill_md_text(name, description, content)
        problems = validate_skill_md(text, name)
        if problems:
            raise InputError(f"task skill {name!r} is not valid: " + "; ".join(problems))
        who = owner or self._api.owner or DEFAULT_OWNER
        return self._api.save(skill_from_files({"SKILL.md": text.encode("utf-8")}, who))

    def save_path(self, path: str | os.PathLike[str], owner: str | None = None) -> TaskSkill:
        """Save a package folder (or its ``SKILL.md``) as a task skill."""
        return self._api.save_path(Path(path), owner)

    def patch(
        self, name: str, section: str, text: str, owner: str | None = None, *, append: bool = False
    ) -> TaskSkill:
        """Replace (or with ``append``, extend) one section: ``description``, ``triggers``,
        ``procedure``, ``pitfalls``, ``preferences``, ``examples``, ``tools``,
        ``verification``, or a file ``scripts/<name>`` / ``references/<name>``."""
        return self._api.patch(name, section, text, owner, append=append)

    def delete(self, name: str, owner: str | None = None) -> TaskSkill:
        """Soft delete: a new version with status ``deleted``; history and packages stay."""
        return self._api.delete(name, owner)

    def feedback(
        self, name: str, success: bool, note: str = "", owner: str | None = None
    ) -> dict[str, Any]:
        """Record whether using a task skill worked: a new version with the outcome counted in
        its reliability; ``retired`` (no longer served) when it falls below the threshold.

        Returns:
            ``name``, ``version``, ``state``, ``reliability``, ``successes``, ``failures``,
            ``pinned`` and ``change`` (the change of state, or None).
        """
        return self._api.feedback(name, success, note, owner)

    def pin(self, name: str, owner: str | None = None, *, pinned: bool = True) -> dict[str, Any]:
        """Pin a task skill (active and served whatever its outcomes and age), or unpin it."""
        return self._api.pin(name, owner, pinned=pinned)

    def maintain(self, owner: str | None = None) -> builtins.list[dict[str, Any]]:
        """Move unused task skills to ``stale`` and ``archived`` by usage age; one row per
        change (``owner_id``, ``name``, ``old``, ``new``, ``reason``, ``at``)."""
        return self._api.maintain(owner)

    def export(
        self, folder: str | os.PathLike[str], owner: str | None = None
    ) -> builtins.list[Path]:
        """Write each published task skill as a package folder ``<folder>/<name>/``."""
        self._reading()
        return self._api.export(Path(folder), owner)

    def search(
        self,
        query: str,
        owner: str | None = None,
        k: int = 5,
        *,
        states: Sequence[str] | None = None,
    ) -> Result:
        """Task skills by name, description and triggers (hybrid), served ones unless
        ``states`` asks for more, best first by relevance times reliability."""
        self._reading()
        return Result.from_rows(self._api.search(query, owner, k, states=states))


class Home:
    """One skillstream home: its LanceDB folder, DuckDB catalog and artifacts.

    Made by :func:`open`. Reads open the stores for the call and close them again, so a home can
    be read while a flow writes it; writes (``run``, ``add``, task-skill changes) need the catalog
    and fail with a clear error while another process's flow holds it.

    Args:
        settings: The home's settings.
        owner: The owner that searches and task-skill calls default to.
    """

    def __init__(self, settings: Settings, owner: str | None = None) -> None:
        self.settings = settings
        """The home's settings (``home.settings.storage.home`` is where it lives)."""
        self.owner = owner
        """The owner that searches and task-skill calls default to."""
        self._task_skills: TaskSkills | None = None

    def __repr__(self) -> str:
        return f"Home({self.settings.storage.home!r})"

    def __enter__(self) -> Home:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release what the home holds (nothing stays open between calls; kept for ``with``)."""
        self._task_skills = None

    # ------------------------------------------------------------------ writing
    def run(
        self,
        source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        format: str = "auto",
        mapping: Mapping[str, str] | None = None,
        workers: int = 1,
        owner: str | None = None,
    ) -> dict[str, Any]:
        """Backfill chat-log files through the memory flow, as ``skillstream run`` does.

        The same runner as the command: the same source options, admission, run lock, flow and
        finish; spans already in the ledger are skipped, so running a source twice stores
        nothing twice.

        Args:
            source: A file, a folder of files, a glob or fsspec URI, or a list of them.
            format: ``auto`` (by ending: ``.jsonl`` and ``.ndjson``, gzipped or not,
                ``.parquet``, ``.csv``, and ``.json`` told by its content), ``jsonl``,
                ``parquet``, ``csv``, ``locomo`` (a LoCoMo JSON file), ``star`` (STAR dialogues,
                ``.jsonl`` or ``.jsonl.gz``), ``chatgpt`` or ``claude`` (their data exports'
                ``conversations.json``), or ``json`` (any of the three JSON shapes, by content).
            mapping: Canonical field -> the input's column (``{"content": "text"}``).
            workers: Bytewax worker threads.
            owner: The owner of every message, in place of its ``user_id`` (default:
                ``user_id``, else the conversation): for chat exports whose owner is the account.

        Returns:
            Counts: ``messages``, ``dead_letters``, ``spans_processed``,
            ``spans_already_processed``, ``spans_failed``, ``memory_changes`` (and ``seconds``,
            ``home``).

        Raises:
            HomeBusyError: another run holds the home.
            InputError: a bad source, format or mapping (a field that is not canonical).
        """
        from skillstream.flows.runner import Cluster, Runner

        paths: str | builtins.list[str | Path] = (
            [os.fspath(p) for p in source]
            if isinstance(source, Sequence) and not isinstance(source, str)
            else os.fspath(source)
        )
        runner = Runner(
            self.settings, cluster=Cluster(workers_per_process=workers), flow_id="skillstream-api"
        )
        src = runner.source(paths, format=format, mapping=mapping, owner=owner)
        return runner.run(src).as_dict()

    def add(self, messages: Iterable[Message | Mapping[str, Any]], *, flush: bool = False) -> Added:
        """Add messages to the home's memory, one or many at a time, and return what they closed.

        The messages go through the same runner and flow as ``skillstream run`` (admission,
        spans, extraction, task skills, the store sink, under the home's run lock), and spans
        close by the same rules: the token budget, a session change, an idle gap between two
        messages. A conversation's open span is **held in the home** between calls (durably: a
        process that dies between two calls loses nothing), so adding messages one at a time
        gives the spans, memories and ids of one run over the same messages.

        When memories become visible: when their span closes, that is in the call whose message
        closes it, in a call of the same owner once the conversation has been quiet for the idle
        gap (wall clock), at the end of a call with ``flush=True``, or at :meth:`flush`. Only
        the messages' owners are read and reconciled, and of their held spans only those that
        may close are woken, so a call costs what its messages cost.

        Args:
            messages: ``Message`` values, or records with the fields of a JSONL chat log
                (``conversation_id``, ``user_id``, ``role``, ``content``, ``timestamp``, ...).
            flush: Close the open spans of the messages' conversations at the end of the call
                (a whole exchange or session at once: its memories are stored when the call
                returns), instead of holding them for the next call.

        Returns:
            What the call stored (see :class:`Added`): the spans it closed, their memories, and
            how many messages stay held in open spans. Invalid records, and messages a
            conversation does not admit (outside the time window, a duplicate id with other
            content), become dead letters with their reason.

        Raises:
            HomeBusyError: another run holds the home.
        """
        from bytewax.testing import TestingSource

        from skillstream.connectors.records import parse_record
        from skillstream.redact import redactor_for

        redactor = redactor_for(self.settings.lifecycle.policies)
        items: builtins.list[Message | DeadLetter] = []
        for i, m in enumerate(messages):
            if isinstance(m, Message):
                items.append(m)
            elif isinstance(m, Mapping):
                items.append(
                    parse_record(
                        dict(m),
                        source="api",
                        position=i,
                        max_chars=self.settings.spans.max_message_chars,
                        redactor=redactor,
                    )
                )
            else:
                raise InputError(
                    f"add() takes Message values or dicts, not {type(m).__name__} (item {i})"
                )
        valid = [m for m in items if isinstance(m, Message)]
        owners = [m.owner_id for m in valid]
        return self._add(TestingSource(items), owners, items, hold=not flush)

    def flush(self, owner: str | None = None) -> Added:
        """Close the open spans (and task segments) held in the home now, and store what they
        give: of ``owner``, or of every owner.

        Returns:
            What was stored, as :meth:`add` returns it.
        """
        from bytewax.testing import TestingSource

        owners = self._held_owners()
        if owner is not None:
            owners = [o for o in owners if o == owner]
        if not owners:
            return Added(0, [], [], 0)
        return self._add(TestingSource([]), owners, [], hold=False)

    def held(self) -> builtins.list[dict[str, Any]]:
        """The open spans held in the home: one row per conversation (``owner_id``,
        ``conversation_id``, ``messages``, ``last_seen`` in seconds since the epoch)."""
        _require_home(self.settings)
        return self._open_rows(
            "SELECT owner_id, conversation_id, count(DISTINCT message_id) AS messages, "
            "epoch(max(last_seen)) AS last_seen FROM open_messages WHERE stage = 'spans' "
            "GROUP BY ALL ORDER BY owner_id, conversation_id"
        )

    def _held_owners(self) -> builtins.list[str]:
        """Owners with an open span or task segment held in the home."""
        rows = self._open_rows("SELECT DISTINCT owner_id FROM open_messages ORDER BY 1")
        return [r["owner_id"] for r in rows]

    def _open_rows(self, sql: str) -> builtins.list[dict[str, Any]]:
        from skillstream.storage.catalog import catalog_exists, open_catalog

        if not catalog_exists(self.settings.storage):
            return []
        with open_catalog(self.settings.storage, read_only=True) as cat:
            if not cat.has("open_messages"):
                return []
            cur = cat.con.execute(sql)
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def _add(
        self,
        source: Any,
        owners: builtins.list[str],
        items: builtins.list[Message | DeadLetter],
        *,
        hold: bool,
    ) -> Added:
        from skillstream.flows.runner import Runner
        from skillstream.held import SPANS, Held

        results: builtins.list[Any] = []
        runner = Runner(
            self.settings, owners=owners, flow_id="skillstream-add", live=False, hold=hold
        )
        runner.collect = results.append
        runner.run(source)
        refused = [r for r in results if isinstance(r, DeadLetter)]
        spans = [r for r in results if hasattr(r, "span")]
        skills = [r for r in results if hasattr(r, "action")]
        held = [r for r in results if isinstance(r, Held) and r.stage == SPANS]
        dead = [d for d in items if isinstance(d, DeadLetter)] + refused
        valid = sum(1 for m in items if isinstance(m, Message))
        return Added(
            valid - len(refused),
            dead,
            spans,
            sum(1 for r in skills if r.changed),
            held=sum(len(h.state.messages) for h in held),
        )

    # ------------------------------------------------------------------ reading
    def forget(
        self,
        owner: str,
        *,
        recovery_dirs: Sequence[str | os.PathLike[str]] = (),
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Erase every trace of ``owner`` from every store of the home (its memories, fleet
        ones included, events, ledger, LLM calls and cached answers, dead letters, task skills
        and every package version, recovery snapshots in ``recovery_dirs``), keep tombstones so
        a replay does not bring its messages back, and record the erasure; see docs/forget.md.

        Args:
            owner: The owner id, as stored.
            recovery_dirs: Bytewax recovery folders of runs on this home.
            dry_run: Count what would go; change nothing.

        Returns:
            ``counts`` per store, ``total``, ``seconds`` and the audit row's ``erasure_id``.

        Raises:
            HomeBusyError: while a run holds the home.
        """
        from skillstream.services.forget import forget_owner

        report = forget_owner(
            self.settings, owner, recovery_dirs=[str(d) for d in recovery_dirs], dry_run=dry_run
        )
        return report.to_dict()

    def search(
        self,
        query: str,
        *,
        owner: str | None = None,
        k: int = 10,
        agent: str | None = None,
        session: str | None = None,
        strategy: str = "hybrid",
        task_skills: bool = True,
        record: bool = True,
    ) -> Result:
        """Search memories for a reader; hits best first.

        Args:
            query: What to look for.
            owner: The reader (default: the home's owner; ``None``: every memory).
            k: Hits wanted.
            agent: The reading agent (its policy decides which scopes it sees).
            session: The reader's session (adds session-scoped memories).
            strategy: ``hybrid`` (keyword and vector), ``semantic`` or ``keyword``.
            task_skills: Include task skills (hits with ``memory_type`` ``SkillMemory``).
            record: Log the query and update the hits' access times.

        Returns:
            One row per hit: ``id``, ``text``, ``score``, ``kind``, ``memory_type``, ``event_ts``
            and every other memory column except the vector.
        """
        from skillstream.services.search import search_memories

        _require_home(self.settings)
        hits = search_memories(
            self.settings,
            query,
            owner=owner if owner is not None else self.owner,
            agent=agent,
            session=session,
            k=k,
            strategy=strategy,
            record=record,
            task_skills=task_skills,
        )
        return Result.from_rows(hits)

    def sql(self, query: str, params: Sequence[Any] | None = None) -> Result:
        """Run DuckDB SQL (read-only) over the catalog tables and the ``memories`` view.

        Only statements that read the home run, as in ``skillstream sql``
        (``storage.sandbox.check_allowed``): a statement that writes or names a file raises
        ``InputError`` before it runs.

        >>> home.sql("select count(*) as n from spans").pl().columns  # doctest: +SKIP
        ['n']
        """
        from skillstream.storage.sandbox import check_allowed

        cat = self._catalog().for_user_sql()
        try:
            check_allowed(cat.con, query)
            return Result(cat.sql(query, params))
        finally:
            cat.close()

    def history(self, memory_id: str) -> Result:
        """Every lifecycle event of a memory, oldest first (``event``, ``event_ts``, ...).

        Raises:
            InputError: when there is no such memory.
        """
        from skillstream.services import home_lifecycle

        cat = self._catalog()
        try:
            if home_lifecycle.get_memory(cat, memory_id) is None:
                raise InputError(f"no memory {memory_id!r} in {self.settings.storage.home}")
            return Result.from_rows(home_lifecycle.history(cat, memory_id))
        finally:
            cat.close()

    def _catalog(self) -> Any:
        from skillstream.storage.catalog import open_catalog

        _require_home(self.settings)
        cat = open_catalog(self.settings.storage, read_only=True)
        cat.attach_lance(self.settings.storage.lancedb, self.settings.storage.storage_options)
        return cat

    @property
    def task_skills(self) -> TaskSkills:
        """The home's task skills: list, show, save, patch, delete, export, search."""
        if self._task_skills is None:
            self._task_skills = TaskSkills(self.settings, self.owner)
        return self._task_skills


def _require_home(settings: Settings) -> None:
    """Refuse a read of a home where nothing was stored: a read never creates a home, so a
    mistyped path is an error, not an empty result.

    Raises:
        InputError: the home has no catalog.
    """
    from skillstream.storage.home import require_home

    require_home(settings, "Check the path given to skillstream.open(), or run() or add() first")


def open(
    home: str | os.PathLike[str] = ".skillstream", *, owner: str | None = None, **settings: Any
) -> Home:
    """Open a skillstream home; the first write (``run``, ``add``, a task-skill save) creates it.

    Reads (``search``, ``sql``, ``history``, ``held``, task-skill reads) of a home where nothing
    was stored raise ``InputError`` and create nothing.

    Settings come as for the CLI: the keyword arguments, then ``SKILLSTREAM_<KEY>`` environment
    variables, then ``<home>/skillstream.toml``, then the defaults (the offline ``rules`` backend
    and the bundled embedding model).

    Args:
        home: A folder, or an ``s3://`` URI.
        owner: The owner searches and task-skill calls default to.
        **settings: Flat setting keys, e.g. ``llm="openai"``, ``span_tokens=256``.

    Raises:
        ConfigError: for an unknown key or a bad value (the message names the setting), or a
            home that is a file.

    >>> import skillstream
    >>> skillstream.open("/tmp/nowhere-yet", span_tokens=256).settings.spans.span_tokens
    256
    """
    return Home(Settings.load(home=os.fspath(home), **settings), owner)
