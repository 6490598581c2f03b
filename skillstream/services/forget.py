"""Forgetting an owner: every trace of it gone from every store of a home, nothing else touched.

:func:`forget_owner` is what ``skillstream forget`` and ``Home.forget`` run. Its steps, in this
order so that a run killed at any point can be run again and finishes the job (each step finds
what is left through stores a later step erases, and each is idempotent):

1. **Tombstones and audit**: the home's salt is made on first use; every message id the catalog
   (or a recovery snapshot: open spans) knows for the owner becomes a salted hash in
   ``erased_messages`` (``storage/erasure.py``), and an ``erasures`` row (status ``started``)
   names the owner by a salted hash only.
2. **Recovery snapshots** in the folders given (``storage/forget_files.py``).
3. **The LLM answer cache**: answers to requests made for the owner only.
4. **Artifacts**: every task-skill package version of the owner; training state naming it.
5. **LanceDB**: the owner's rows of every table with an ``owner_id`` column, then compaction,
   new indexes and no older versions (``storage/forget_lance.py``).
6. **Catalog rows**: every table with an ``owner_id`` column, the owner's ``llm_calls`` and dead
   letters, in one transaction (``storage/forget_catalog.py``).
7. **Catalog bytes**: a DuckDB file is written anew; a DuckLake catalog rewrites its data files,
   expires its older snapshots and deletes the files they held.
8. **Audit**: the ``erasures`` row becomes ``done`` with the counts.

Fleet-scoped memories keep the id of the owner whose messages they came from, so step 5 and 6
erase them as well, although other owners could read them.

A DuckDB-file home is erased under its run lock: while a run holds it, ``forget`` is refused
(``HomeBusyError``). A shared catalog has no run lock, but every run holds a lease in it
(``storage.leases``): ``forget`` is refused while a lease is alive, checked before the tombstones
are written and again after (a run that starts later reads the tombstones and drops the owner's
messages).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from skillstream.llm.cache import cache_path
from skillstream.settings import Settings
from skillstream.storage import forget_catalog, forget_files, forget_lance
from skillstream.storage.artifacts import ArtifactStore
from skillstream.storage.catalog import Catalog, catalog_exists, open_catalog
from skillstream.storage.erasure import ensure_salt, message_hash, owner_hash, read_salt
from skillstream.storage.home import storage_options
from skillstream.storage.lance import connect

STARTED, DONE = "started", "done"


@dataclass
class ForgetReport:
    """What a forget erased (or, with ``dry_run``, would erase), per store."""

    dry_run: bool
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    seconds: float = 0.0
    erasure_id: str | None = None

    @property
    def total(self) -> int:
        """Rows, files and entries erased, over every store (versions and snapshots not
        counted)."""
        skip = {"lance_versions_removed", "snapshots_expired", "files_deleted", "bytes_saved"}
        return sum(n for store in self.counts.values() for k, n in store.items() if k not in skip)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "erasure_id": self.erasure_id,
            "seconds": round(self.seconds, 3),
            "total": self.total,
            "counts": self.counts,
        }


def forget_owner(
    settings: Settings,
    owner: str,
    *,
    recovery_dirs: Sequence[str | Path] = (),
    dry_run: bool = False,
) -> ForgetReport:
    """Erase every trace of ``owner`` from the home of ``settings`` (see the module docstring).

    Args:
        settings: The home.
        owner: The owner id, exactly as stored.
        recovery_dirs: Bytewax recovery folders of runs on this home (they live where the runs
            were told to keep them, not in the home).
        dry_run: Count what would go and change nothing.

    Returns:
        The counts per store.

    Raises:
        HomeBusyError: a run holds the home (DuckDB file).
        InputError: an empty owner id.
    """
    from skillstream.errors import InputError

    if not owner:
        raise InputError("forget needs an owner id (got an empty one)")
    storage = settings.storage
    if storage.shared_catalog or dry_run:
        return _forget(settings, owner, recovery_dirs, dry_run)
    from skillstream.storage.lock import run_lock

    Path(storage.catalog).parent.mkdir(parents=True, exist_ok=True)
    with run_lock(storage.catalog, storage.home):
        return _forget(settings, owner, recovery_dirs, dry_run)


def _forget(
    settings: Settings, owner: str, recovery_dirs: Sequence[str | Path], dry_run: bool
) -> ForgetReport:
    t0 = time.perf_counter()
    storage = settings.storage
    report = ForgetReport(dry_run)
    counts = report.counts
    if not catalog_exists(storage):
        cat = None
        traces = forget_catalog.OwnerTraces()
    else:
        cat = open_catalog(storage, read_only=dry_run)
    try:
        if cat is not None:
            traces = forget_catalog.read_traces(cat, owner)
            for folder in recovery_dirs:  # messages of open spans are not in the catalog yet
                traces.message_ids |= forget_files.recovery_message_ids(Path(folder), owner)
            if cat.shared:
                _no_live_runs(cat, storage.home)
            if not dry_run:
                report.erasure_id = _start(cat, owner, traces, counts)
                if cat.shared:  # a run that began before the tombstones: erase after it
                    _no_live_runs(cat, storage.home, started=True)
            else:
                counts["tombstones"] = {"messages": len(traces.message_ids)}
        # 2. recovery snapshots
        snaps = 0
        for folder in recovery_dirs:
            snaps += forget_files.scrub_recovery(
                Path(folder), owner, set(traces.conversation_ids), dry_run=dry_run
            )
        counts["recovery"] = {"snapshots": snaps}
        # 3. the LLM answer cache
        cache = cache_path(storage.home)
        if dry_run:
            answers = forget_files.cache_entries(cache, traces.request_hashes)
        else:
            answers = forget_files.erase_cache(cache, traces.request_hashes)
        counts["llm_cache"] = {"answers": answers}
        # 4. artifacts
        counts["artifacts"] = _artifacts(settings, owner, dry_run)
        # 5. LanceDB
        db = connect(storage.lancedb, storage_options(settings))
        if dry_run:
            counts["lancedb"] = forget_lance.count_rows(db, owner)
        else:
            counts["lancedb"] = forget_lance.erase(db, owner, unverified=not storage.shared_catalog)
        # 6. catalog rows
        if cat is not None:
            if dry_run:
                counts["catalog"] = forget_catalog.count_rows(cat, owner, traces)
            else:
                counts["catalog"] = forget_catalog.erase_rows(cat, owner, traces)
                if cat.shared:  # 7. the bytes (DuckLake)
                    counts["catalog"].update(forget_catalog.purge_lake(cat))
    finally:
        if cat is not None:
            cat.close()
    if cat is not None and not dry_run:
        if not storage.shared_catalog:  # 7. the bytes (a DuckDB file)
            saved = forget_catalog.rewrite_file(storage.catalog)
            counts["catalog"]["bytes_saved"] = max(0, saved)
        report.seconds = time.perf_counter() - t0
        _finish(settings, report)
    report.seconds = time.perf_counter() - t0
    return report


def _no_live_runs(cat: Catalog, home: str, *, started: bool = False) -> None:
    """Refuse while a run writes the shared catalog (its lease is alive)."""
    from skillstream.storage.leases import refuse_live_runs

    again = (
        " The tombstones are written, so those runs store nothing more of the owner; run "
        "forget again once they finish to erase the rest."
        if started
        else ""
    )
    refuse_live_runs(cat, home, "forget erases", again)


def _start(
    cat: Catalog, owner: str, traces: forget_catalog.OwnerTraces, counts: dict[str, Any]
) -> str:
    """Step 1: the salt, the tombstones and the ``started`` audit row; the erasure's id (the
    unfinished one of this owner, when a run was killed)."""
    salt = ensure_salt(cat)
    who = owner_hash(salt, owner)
    open_rows = cat.sql(
        "SELECT erasure_id FROM erasures WHERE owner_hash = ? AND status = ? ORDER BY started_at",
        [who, STARTED],
    )
    erasure = open_rows.column(0)[0].as_py() if open_rows.num_rows else uuid.uuid4().hex
    now = datetime.now(UTC)
    tombs = [
        {"message_hash": message_hash(salt, owner, m), "erasure_id": erasure, "erased_at": now}
        for m in sorted(traces.message_ids)
    ]

    def work(c: Catalog) -> None:
        c.sign("forget an owner: tombstones")
        if not open_rows.num_rows:
            c.upsert(
                "erasures",
                [{"erasure_id": erasure, "owner_hash": who, "status": STARTED, "started_at": now}],
            )
        c.insert_ignore("erased_messages", tombs)

    cat.run_transaction(work)
    counts["tombstones"] = {"messages": len(tombs)}
    return erasure


def _finish(settings: Settings, report: ForgetReport) -> None:
    """Step 8: the audit row says the erasure is done, with its counts."""
    cat = open_catalog(settings.storage)
    try:
        rows = cat.sql("SELECT * FROM erasures WHERE erasure_id = ?", [report.erasure_id])
        row = rows.to_pylist()[0]
        # the tombstones of this erasure, also those a killed earlier run of it wrote
        messages = cat.sql(
            "SELECT count(*) FROM erased_messages WHERE erasure_id = ?", [report.erasure_id]
        )
        row.update(
            status=DONE,
            finished_at=datetime.now(UTC),
            messages=messages.column(0)[0].as_py(),
            counts=json.dumps(report.counts, sort_keys=True),
        )
        cat.run_transaction(lambda c: c.upsert("erasures", [row]))
    finally:
        cat.close()


def _artifacts(settings: Settings, owner: str, dry_run: bool) -> dict[str, int]:
    """Step 4: the owner's package folder in the skills store, and training runs naming it."""
    from skillstream.services.publishing import Publisher, owner_dir

    storage = settings.storage
    packages = Publisher.from_settings(storage).store
    files = forget_files.package_files(packages, owner_dir(owner))
    store = ArtifactStore(storage.artifacts, storage_options(settings))
    training = forget_files.training_files(store, owner)
    if not dry_run:
        forget_files.delete_files(packages, files)
        forget_files.delete_files(store, training)
    return {"packages": len(files), "training_files": len(training)}


def erasures(catalog: Catalog) -> list[dict[str, Any]]:
    """The audit rows, oldest first."""
    if not catalog.has("erasures"):
        return []
    return catalog.sql("SELECT * FROM erasures ORDER BY started_at").to_pylist()


__all__ = ["ForgetReport", "erasures", "forget_owner", "read_salt"]
