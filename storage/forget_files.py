"""Forgetting an owner in the home's files: task-skill packages, memory-skill training state, the
LLM answer cache and Bytewax recovery snapshots.

* **Packages**: every version of every task skill of the owner lies under one folder of the skills
  store (``<owner>/``, see ``services.publishing.owner_dir``), local or S3: the folder goes.
* **Training state**: a resumable controller training or evolution keeps its state under
  ``memskill/<kind>/<key>/`` in the artifact store; a run whose files name the owner (its
  conversations were among the training data) is deleted whole, and starts over when run again.
* **LLM answer cache** (SQLite): the answers to requests made for the owner only (their hashes come
  from ``llm_calls``) are deleted and the file is vacuumed, so they leave its free pages too.
* **Recovery snapshots** (Bytewax's SQLite files, one per partition): each state is unpickled;
  a conversation's state that holds the owner, or whose key names the owner
  (``skillstream.ids.conversation_key``), is dropped (its conversation starts afresh), and a
  shard's state (a dict keyed by owner) loses the owner's entries; then the file is vacuumed.
"""

from __future__ import annotations

import contextlib
import io
import json
import pickle
import sqlite3
import zipfile
from collections.abc import Iterable
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from skillstream.ids import key_owner
from skillstream.storage.artifacts import ArtifactStore

TRAINING_PREFIX = "memskill/"


# ---------------------------------------------------------------------- packages
def package_files(store: ArtifactStore, folder: str) -> list[str]:
    """Every file under an owner's package folder."""
    return store.list(folder.rstrip("/") + "/")


def delete_files(store: ArtifactStore, paths: Iterable[str]) -> int:
    """Delete files of a store; the number deleted."""
    return sum(1 for p in paths if store.delete(p))


# ---------------------------------------------------------------------- training state
def training_files(store: ArtifactStore, owner: str) -> list[str]:
    """The files of every training run (``memskill/<kind>/<key>/``) whose files name the owner:
    hold its id as a JSON string (a run's state keeps its options and data as JSON text, inside
    ``torch.save``'s zip), so a short id does not match inside other words."""
    needle = json.dumps(owner, ensure_ascii=False).encode("utf-8")
    runs: dict[str, list[str]] = {}
    for rel in store.list(TRAINING_PREFIX):
        parts = rel.split("/")
        if len(parts) >= 4:
            runs.setdefault("/".join(parts[:3]), []).append(rel)
    doomed: list[str] = []
    for files in runs.values():
        if any(needle in blob for rel in files for blob in _blobs(store.get(rel))):
            doomed.extend(files)
    return doomed


def _blobs(data: bytes) -> list[bytes]:
    """A file's bytes and, for a zip (``torch.save`` writes one), each member's."""
    out = [data]
    if data[:2] == b"PK":
        with contextlib.suppress(zipfile.BadZipFile), zipfile.ZipFile(io.BytesIO(data)) as z:
            out.extend(z.read(n) for n in z.namelist())
    return out


# ---------------------------------------------------------------------- LLM answer cache
def cache_entries(path: Path, hashes: Iterable[str]) -> int:
    """How many of ``hashes`` the cache holds."""
    keys = sorted(set(hashes))
    if not path.exists() or not keys:
        return 0
    con = sqlite3.connect(path)
    try:
        return sum(
            con.execute(
                "SELECT count(*) FROM llm_responses WHERE request_hash = ?", (k,)
            ).fetchone()[0]
            for k in keys
        )
    except sqlite3.OperationalError:  # no table yet
        return 0
    finally:
        con.close()


def erase_cache(path: Path, hashes: Iterable[str]) -> int:
    """Delete the answers of ``hashes`` and vacuum the file (also when none were left, so a
    run after a kill finishes); the number deleted."""
    if not path.exists():
        return 0
    keys = sorted(set(hashes))
    con = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        con.execute("PRAGMA secure_delete = ON")
        n = 0
        with contextlib.suppress(sqlite3.OperationalError):
            for k in keys:
                n += con.execute("DELETE FROM llm_responses WHERE request_hash = ?", (k,)).rowcount
        _vacuum(con)
        return n
    finally:
        con.close()


def _vacuum(con: sqlite3.Connection) -> None:
    con.execute("VACUUM")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")


# ---------------------------------------------------------------------- recovery snapshots
def recovery_files(folder: Path) -> list[Path]:
    """The partition files of a Bytewax recovery folder."""
    return sorted(folder.glob("*.sqlite3")) if folder.is_dir() else []


def scrub_recovery(folder: Path, owner: str, conversations: set[str], *, dry_run: bool) -> int:
    """Remove the owner from every snapshot in a recovery folder (see the module docstring);
    the number of snapshots dropped or rewritten. Conversations whose state holds the owner are
    added to ``conversations`` first, so each of their steps' states goes."""
    files = recovery_files(folder)
    for file in files:  # first pass: which conversations are the owner's
        con = sqlite3.connect(file)
        try:
            for key, blob in con.execute("SELECT state_key, ser_change FROM snaps"):
                state = None if blob is None else _load(blob)
                if not isinstance(state, dict) and _holds(state, owner):
                    conversations.add(key)
        finally:
            con.close()
    changed = 0
    for file in files:
        con = sqlite3.connect(file, isolation_level=None, timeout=30)
        try:
            con.execute("PRAGMA secure_delete = ON")
            con.execute("BEGIN IMMEDIATE")
            rows = con.execute("SELECT step_id, state_key, snap_epoch, ser_change FROM snaps")
            for step, key, epoch, blob in rows.fetchall():
                action = _decide(key, blob, owner, conversations)
                if action is None:
                    continue
                changed += 1
                if dry_run:
                    continue
                if action is _DROP:
                    con.execute(
                        "DELETE FROM snaps WHERE step_id = ? AND state_key = ? AND snap_epoch = ?",
                        (step, key, epoch),
                    )
                else:
                    con.execute(
                        "UPDATE snaps SET ser_change = ? "
                        "WHERE step_id = ? AND state_key = ? AND snap_epoch = ?",
                        (action, step, key, epoch),
                    )
            con.execute("COMMIT")
            if not dry_run:
                _vacuum(con)
        finally:
            con.close()
    return changed


def recovery_message_ids(folder: Path, owner: str) -> set[str]:
    """Ids of the owner's messages that snapshots hold (open spans and task-skill blocks, not
    yet in the catalog), so they get tombstones too."""
    found: set[str] = set()
    for file in recovery_files(folder):
        con = sqlite3.connect(file)
        try:
            for (blob,) in con.execute("SELECT ser_change FROM snaps"):
                if blob is not None:
                    _collect_ids(_load(blob), owner, found)
        finally:
            con.close()
    return found


def _collect_ids(obj: Any, owner: str, found: set[str], depth: int = 0) -> None:
    if depth > 12 or isinstance(obj, str | bytes | int | float | bool) or obj is None:
        return
    if getattr(obj, "owner_id", None) == owner and isinstance(
        getattr(obj, "message_id", None), str
    ):
        found.add(obj.message_id)
        return
    if isinstance(obj, dict):
        items: Iterable[Any] = obj.values()
    elif isinstance(obj, list | tuple | set | frozenset):
        items = obj
    elif is_dataclass(obj) and not isinstance(obj, type):
        items = [getattr(obj, f.name, None) for f in fields(obj)]
    elif isinstance(getattr(obj, "__dict__", None), dict):
        items = obj.__dict__.values()
    else:
        items = [getattr(obj, s, None) for s in getattr(type(obj), "__slots__", ())]
    for x in items:
        _collect_ids(x, owner, found, depth + 1)


_DROP = object()


def _load(blob: bytes) -> Any:
    return pickle.loads(blob)  # noqa: S301 - the home's own snapshots, written by this program


def _decide(key: str, blob: bytes | None, owner: str, conversations: set[str]) -> Any:
    """``None`` (keep), ``_DROP``, or the new pickled state."""
    if key in conversations or key == owner or key_owner(key) == owner:
        return _DROP
    if blob is None:
        return None
    state = _load(blob)
    if not _holds(state, owner):
        return None
    if isinstance(state, dict):
        kept = _without(state, owner)
        if not _holds(kept, owner):
            return pickle.dumps(kept)
    return _DROP


def _without(state: dict[Any, Any], owner: str) -> dict[Any, Any]:
    """A dict keyed by owner (nested dicts too) without the owner's entries."""
    out: dict[Any, Any] = {}
    for k, v in state.items():
        if k == owner:
            continue
        if isinstance(v, dict):
            out[k] = _without(v, owner)
        elif not _holds(v, owner):
            out[k] = v
    return out


def _holds(obj: Any, owner: str, depth: int = 0) -> bool:
    """Whether an object graph holds the owner id (as a string value, a key, or an
    ``owner_id`` attribute)."""
    if depth > 12:
        return False
    if isinstance(obj, str):
        return obj == owner
    if isinstance(obj, bytes | int | float | bool) or obj is None:
        return False
    if isinstance(obj, dict):
        return any(
            _holds(k, owner, depth + 1) or _holds(v, owner, depth + 1) for k, v in obj.items()
        )
    if isinstance(obj, list | tuple | set | frozenset):
        return any(_holds(x, owner, depth + 1) for x in obj)
    if is_dataclass(obj) and not isinstance(obj, type):
        return any(_holds(getattr(obj, f.name, None), owner, depth + 1) for f in fields(obj))
    attrs = getattr(obj, "__dict__", None)
    if isinstance(attrs, dict):
        return _holds(attrs, owner, depth + 1)
    slots = getattr(type(obj), "__slots__", ())
    return any(_holds(getattr(obj, s, None), owner, depth + 1) for s in slots)
