"""Response cache: a validated answer, keyed by the request hash, so re-runs and replays are free.

``SqliteCache`` keeps one table in ``<home>/llm-cache.sqlite``. The file is in WAL mode with a busy
timeout, so several threads (one connection behind a lock) and several processes (each with its own
connection) read and write it at once; a write is one ``INSERT ... ON CONFLICT`` statement, atomic
on its own. ``MemoryCache`` is the same contract in a dict, for tests.

Only what the model wrote is stored (the completion text, the token counts, the model and purpose):
never the request's messages, never a key. The text is redacted (``redact_answer``) before it is
written, whatever the caller passed, since a model may echo a secret it was shown. Entries are
written only after the answer was parsed and validated, so a bad answer is asked again next time
rather than replayed.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol, Self

from skillstream.errors import ConfigError, TransientError
from skillstream.redact import redact_answer
from skillstream.settings import DEFAULT_HOME, LLMSettings, is_remote, local_path

CACHE_FILE = "llm-cache.sqlite"


@dataclass(frozen=True)
class CachedAnswer:
    """One cached completion."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    model: str | None = None
    purpose: str | None = None
    created_at: datetime | None = None


class ResponseCache(Protocol):
    """Get and put answers by request hash."""

    def get(self, key: str) -> CachedAnswer | None: ...

    def put(self, key: str, answer: CachedAnswer) -> None: ...


class MemoryCache:
    """A process-local cache in a dict (tests, one-off runs)."""

    def __init__(self) -> None:
        self._data: dict[str, CachedAnswer] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> CachedAnswer | None:
        with self._lock:
            return self._data.get(key)

    def put(self, key: str, answer: CachedAnswer) -> None:
        with self._lock:
            self._data[key] = dataclasses.replace(answer, text=redact_answer(answer.text) or "")

    def __len__(self) -> int:
        return len(self._data)

    def close(self) -> None:
        pass


_DDL = """
CREATE TABLE IF NOT EXISTS llm_responses (
    request_hash      TEXT PRIMARY KEY,
    model             TEXT,
    purpose           TEXT,
    text              TEXT NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    created_at        TEXT NOT NULL
)
"""

_UPSERT = """
INSERT INTO llm_responses
    (request_hash, model, purpose, text, prompt_tokens, completion_tokens, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (request_hash) DO UPDATE SET
    model = excluded.model, purpose = excluded.purpose, text = excluded.text,
    prompt_tokens = excluded.prompt_tokens, completion_tokens = excluded.completion_tokens,
    created_at = excluded.created_at
"""


class SqliteCache:
    """The response cache in a SQLite file (WAL), shared by threads and processes.

    Args:
        path: The file; its folder is created.
        busy_timeout_s: How long a statement waits for another process's write lock.

    Raises:
        ConfigError: the file cannot be created or is not a SQLite database.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self._busy_timeout_s = busy_timeout_s
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        with self._lock:
            self._connection()

    def _connection(self) -> sqlite3.Connection:
        # A connection must not cross a fork: reopen in a child process.
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout_s,
                isolation_level=None,  # autocommit: every statement is its own transaction
                check_same_thread=False,  # guarded by self._lock
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(_DDL)
        except sqlite3.DatabaseError as e:
            raise ConfigError(
                f"LLM response cache {self.path}: cannot open it as SQLite ({e}); delete the file "
                "or set SKILLSTREAM_LLM_CACHE=false"
            ) from e
        self._conn, self._pid = conn, os.getpid()
        return conn

    def get(self, key: str) -> CachedAnswer | None:
        with self._lock:
            try:
                row = (
                    self._connection()
                    .execute(
                        "SELECT text, prompt_tokens, completion_tokens, model, purpose, created_at "
                        "FROM llm_responses WHERE request_hash = ?",
                        (key,),
                    )
                    .fetchone()
                )
            except sqlite3.OperationalError as e:
                raise TransientError(f"LLM response cache {self.path}: read failed: {e}") from e
        if row is None:
            return None
        return CachedAnswer(
            text=row[0],
            prompt_tokens=int(row[1]),
            completion_tokens=int(row[2]),
            model=row[3],
            purpose=row[4],
            created_at=datetime.fromisoformat(row[5]),
        )

    def put(self, key: str, answer: CachedAnswer) -> None:
        created = answer.created_at or datetime.now(UTC)
        with self._lock:
            try:
                self._connection().execute(
                    _UPSERT,
                    (
                        key,
                        answer.model,
                        answer.purpose,
                        redact_answer(answer.text),
                        answer.prompt_tokens,
                        answer.completion_tokens,
                        created.isoformat(),
                    ),
                )
            except sqlite3.OperationalError as e:
                raise TransientError(f"LLM response cache {self.path}: write failed: {e}") from e

    def __len__(self) -> int:
        with self._lock:
            return int(
                self._connection().execute("SELECT count(*) FROM llm_responses").fetchone()[0]
            )

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqliteCache({str(self.path)!r})"


def cache_path(home: str) -> Path:
    """``<home>/llm-cache.sqlite``; for a remote home (``s3://...``), in the local default home."""
    return (Path(DEFAULT_HOME) if is_remote(home) else local_path(home)) / CACHE_FILE


def open_cache(llm: LLMSettings, home: str) -> SqliteCache | None:
    """The cache of the home ``home`` when ``llm.cache`` is on, else ``None``."""
    if not llm.cache:
        return None
    return SqliteCache(cache_path(home))
