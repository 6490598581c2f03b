"""LanceDB tables: memories (and, with the same class, any other table with an id and a vector).

:class:`LanceTable` is the generic part: one table described by an Arrow schema from
``skillstream.tables``, a primary-key column, optional full-text columns, upsert by key,
filtered vector / full-text / hybrid search. :class:`MemoryIndex` wraps it for
:class:`~skillstream.model.Memory`.

Writes are upserts (``merge_insert`` on the key), so replaying a batch changes nothing. Two
processes upserting the same *new* key at the same moment can still write two rows (a LanceDB
limitation); skillstream keeps one writer per key (the store sink's partition of the owner's shard)
and also declares the key as LanceDB's unenforced primary key. A write whose commit meets another
writer's commit (different keys, same table) is run again (:func:`retry_conflicts`).

Connections use ``read_consistency_interval=0``: every read sees the latest committed version,
including versions written by other processes.

Indexes appear when they pay (:class:`IndexPolicy`, applied by :meth:`LanceTable.optimize`): scalar
indexes on the filter columns once a table holds ``scalar_rows`` rows, so an owner's rows are found
without a scan; an approximate vector index once it holds ``vector_rows``: ``IVF_FLAT`` by
default (``IndexPolicy.vector_type``). Measured on two cores, over the 100,000 memories of
``benchmarks/scale.py`` and on clustered vectors like the index test's at 384 dimensions:
IVF_FLAT builds in about 3 s and finds the exact ten nearest (recall@10 1.0); IVF-PQ takes 110
to 180 s (24 to 48 sub-vectors) and finds 0.66 to 0.86 of them even re-ranked by exact
distance; IVF-HNSW-SQ took 14 minutes. IVF_FLAT stores the vectors again (the index is as large
as the vector column); for tables where that matters, ``ivf_pq`` is the small one.

A search whose filter keeps few rows (an owner's, up to ``exact_rows``) stays exact: it ranks
them with a flat scan, which at that size is faster than the index and never misses a neighbour
that the partitions the index visits would not hold. A search over more rows uses the vector
index (a quantised one with a refine step that re-ranks its candidates by exact distance).

Search reads its hits late: the vector and full-text candidates are row ids of one pinned
version, fused by rank, and only the ``k`` rows kept are read in full.

Every read of a process goes through one ``lance.Session`` (:func:`session`), whose caches keep
the opened indexes and file metadata between reads. A dataset opened without one starts cold: at
1,000,000 memories an owner's full-text search then reloads the index and takes about 23 ms
instead of about 3 ms. The caches are bounded (``cache_mb``), so a process's memory does not grow
with the table.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skillstream import tables as declared
from skillstream.errors import ConfigError, InputError
from skillstream.model import Memory
from skillstream.storage import filters
from skillstream.storage.lance_db import Database
from skillstream.storage.options import lance_options
from skillstream.storage.rows import Rows, dedupe, to_table
from skillstream.vocab import MemoryStatus

log = logging.getLogger(__name__)

_CREATE_ATTEMPTS = 5
_ANN_RECHECK_S = 30.0
_RRF_K = 60
CACHE_MB = 512
"""Default memory of a process's Lance caches (see :func:`session`)."""


@dataclass(frozen=True)
class IndexPolicy:
    """When a table's scalar and vector indexes are created (``0``: never).

    Args:
        scalar_rows: Rows from which the ``scalar`` columns get their indexes.
        vector_rows: Rows from which the vector column gets an ANN index.
        scalar: Column -> index type (``BTREE`` for many distinct values, ``BITMAP`` for few).
        vector_type: The ANN index: ``ivf_flat``, ``ivf_pq`` or ``ivf_hnsw_sq``.
        exact_rows: A filtered search whose filter keeps at most this many rows ranks them
            exactly (a flat scan), even when there is an ANN index.
        nprobes: IVF partitions an ANN search visits.
        refine_factor: ANN candidates fetched per hit and re-ranked exactly (quantised indexes).
        refresh_rows: :meth:`LanceTable.optimize` compacts and folds new rows into the
            indexes once an index misses this many rows, or ``refresh_share`` of the table if
            that is fewer, or once the table has ``refresh_fragments`` small files. Until then
            searches read the few unindexed rows directly (a scan of the new files), which is
            cheaper than rewriting the indexes of a large table after every small write.
        refresh_share: See ``refresh_rows``.
        refresh_fragments: See ``refresh_rows``.
    """

    scalar_rows: int = 20_000
    vector_rows: int = 100_000
    scalar: tuple[tuple[str, str], ...] = ()
    vector_type: str = "ivf_flat"
    exact_rows: int = 20_000
    nprobes: int = 24
    refine_factor: int = 10
    refresh_rows: int = 10_000
    refresh_share: float = 0.1
    refresh_fragments: int = 64


MEMORY_INDEXES = (
    ("id", "BTREE"),
    ("owner_id", "BTREE"),
    ("session_id", "BTREE"),
    ("event_ts", "BTREE"),
    ("status", "BITMAP"),
    ("scope", "BITMAP"),
)
"""The key and filter columns of the memories table and their scalar index types. The key's index
serves upserts (``merge_insert`` finds the stored rows of a batch's ids through it instead of
reading every id of the table) and deletes by id."""

EMBEDDING_METADATA = b"skillstream.embedding"
"""Schema metadata key of the memories table: the embedding model its vectors come from."""


FILE_VERSION = "2.1"
"""Lance file format of the tables skillstream creates. Measured on a table of 1,000,000 memories
(``benchmarks/scale.py``): reading 10 scattered rows of every column takes about 4 ms in format
2.1 and about 22 ms in 2.2, whose larger compressed blocks are decoded whole for each row; search
reads its hits that way. Tables made earlier keep the format they were made with."""


def connect(uri: str, storage_options: dict | None = None) -> Database:
    """Open a LanceDB database at ``uri`` that always reads the latest version; tables it
    creates are written in :data:`FILE_VERSION`. Nothing is imported or opened until a table
    is read, and ``lancedb`` only once one is written (``storage.lance_db``)."""
    dataset_options = lance_options(uri, storage_options)
    options = {"new_table_data_storage_version": FILE_VERSION, **(dataset_options or {})}
    return Database(uri, options, dataset_options)


COMMIT_ATTEMPTS = 10
"""How often a LanceDB write that met a concurrent commit is tried in all."""


def is_commit_conflict(error: BaseException) -> bool:
    """Whether a LanceDB error is a commit that lost a race with another writer's commit."""
    text = str(error).lower()
    return "conflict" in text or "retryable" in text or "too many concurrent writers" in text


def retry_conflicts(write: Any, table: str, attempts: int = COMMIT_ATTEMPTS) -> Any:
    """Run a LanceDB write, again (after a short random back-off) when its commit conflicted
    with another writer's; every write here is an upsert or a delete by filter, so a rerun is
    safe. Other errors, and the last conflict, are raised."""
    for attempt in range(attempts):
        try:
            return write()
        except Exception as e:  # noqa: BLE001 - LanceDB raises plain errors; only conflicts retry
            if not is_commit_conflict(e) or attempt == attempts - 1:
                raise
            log.info("LanceDB %s: commit conflict, writing again: %s", table, e)
            time.sleep(min(2.0, 0.02 * 2**attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")  # pragma: no cover


class LanceTable:
    """One LanceDB table with a key column, created from an Arrow schema on first use.

    Args:
        db: A LanceDB connection (see :func:`connect`).
        name: Table name.
        schema: The table's Arrow schema.
        key: Primary-key column; defaults to the schema's ``primary_key`` metadata.
        fts_columns: String columns that get a native full-text index.
        version_column: When set, versions decide which row wins: in a batch with a repeated
            key the highest version (then the last row) is kept, and an upsert never replaces a
            stored row with one of a lower version (equal versions do replace).
        vector_column: Name of the fixed-size-list vector column, if any.
        create: Create the table (and its indices) when missing. With ``False`` a missing table
            reads as empty and writes raise.
        indexes: When scalar and vector indexes appear (default: none beyond full-text).
        cache_mb: Memory of the process's Lance caches its reads share (see :func:`session`).
    """

    def __init__(
        self,
        db: Any,
        name: str,
        schema: pa.Schema,
        *,
        key: str | None = None,
        fts_columns: Sequence[str] = (),
        version_column: str | None = None,
        vector_column: str | None = "vector",
        create: bool = True,
        indexes: IndexPolicy | None = None,
        cache_mb: int = CACHE_MB,
    ) -> None:
        self.db = db
        self.name = name
        self.cache_mb = cache_mb
        self.schema = schema
        key = key or declared.primary_key(schema)
        if not key or key not in schema.names:
            raise ValueError(f"LanceDB table {name!r}: the schema names no key column")
        self.key: str = key
        self.fts_columns = tuple(fts_columns)
        self.version_column = version_column
        self.vector_column = vector_column if vector_column in schema.names else None
        self.create = create
        self.indexes = indexes or IndexPolicy(scalar_rows=0, vector_rows=0)
        self._ann = False
        self._ann_checked = -_ANN_RECHECK_S
        self._tbl: Any = self._open() if create else None

    # ------------------------------------------------------------------ opening
    @property
    def table(self) -> Any:
        """The LanceDB table, or ``None`` when it does not exist and ``create`` is off."""
        if self._tbl is None:
            self._tbl = self._open()
        return self._tbl

    def _open(self) -> Any:
        try:
            tbl = self.db.open_table(self.name)
        except ValueError:  # LanceDB's "Table ... was not found"
            if not self.create:
                return None
            tbl = self._create()
        if self.create:
            self._ensure_fts(tbl)
        return tbl

    def _create(self) -> Any:
        try:
            tbl = self.db.create_table(self.name, schema=self.schema)
        except Exception as e:  # noqa: BLE001 - another opener may have created it meanwhile
            try:
                return self.db.open_table(self.name)
            except ValueError:
                raise e from None
        self._declare_key(tbl)
        return tbl

    def _declare_key(self, tbl: Any) -> None:
        if self.schema.field(self.key).nullable:
            return
        for attempt in range(_CREATE_ATTEMPTS):
            try:
                tbl.set_unenforced_primary_key(self.key)
                return
            except Exception as e:  # noqa: BLE001 - an optional safeguard, not a requirement
                log.debug("declaring %s.%s as primary key: %s", self.name, self.key, e)
                time.sleep(0.05 * (attempt + 1))

    @staticmethod
    def _fts_indexed(tbl: Any) -> set[str]:
        return {ix.columns[0] for ix in tbl.list_indices() if ix.index_type == "FTS"}

    def _ensure_fts(self, tbl: Any) -> None:
        """Create the missing full-text indices once, also when other openers race to do it."""
        for col in self.fts_columns:
            for attempt in range(_CREATE_ATTEMPTS):
                if col in self._fts_indexed(tbl):
                    break
                try:
                    import lancedb

                    tbl.create_index(col, config=lancedb.index.FTS(), replace=False)
                    break
                except RuntimeError as e:
                    # another opener made it first ("already exists") or at the same moment
                    # ("commit conflict ... preempted by concurrent transaction CreateIndex")
                    if attempt == _CREATE_ATTEMPTS - 1:
                        raise
                    log.debug("creating the FTS index on %s.%s: %s", self.name, col, e)
                    time.sleep(0.05 * (attempt + 1))

    def _require(self) -> Any:
        tbl = self.table
        if tbl is None:
            raise InputError(f"LanceDB table {self.name!r} does not exist (opened read-only)")
        return tbl

    @property
    def exists(self) -> bool:
        return self.table is not None

    # ------------------------------------------------------------------ writing
    def upsert(self, rows: Rows) -> int:
        """Insert new keys and replace existing ones; returns the number of rows offered.

        Rows with a repeated key in the batch collapse first, and stale versions are not
        written (see ``version_column``).
        """
        data = to_table(rows, self.schema, table=self.name)
        if data.num_rows == 0:
            return 0
        data = dedupe(data, self.key, self.version_column)
        guard = None
        if self.version_column:
            v = filters.lance_column(self.version_column)
            guard = f"target.{v} IS NULL OR source.{v} >= target.{v}"
        tbl = self._require()

        def write() -> Any:
            return (
                tbl.merge_insert(self.key)
                .when_matched_update_all(where=guard)
                .when_not_matched_insert_all()
                .execute(data)
            )

        retry_conflicts(write, self.name)
        return data.num_rows

    def update(self, where: str, values: dict[str, Any]) -> None:
        """Set columns of the rows matching a filter to values (Python values, written as SQL
        literals by :func:`filters.literal`)."""
        tbl = self._require()
        literals = {column: filters.literal(v) for column, v in values.items()}
        retry_conflicts(lambda: tbl.update(where=where, values_sql=literals), self.name)

    def delete(self, where: str) -> None:
        """Delete the rows matching a filter (build it with :mod:`skillstream.storage.filters`)."""
        tbl = self._require()
        retry_conflicts(lambda: tbl.delete(where), self.name)

    def optimize(self, *, force: bool = False) -> list[str]:
        """Compact files and fold rows written since the last refresh into every index when
        enough have gathered (``IndexPolicy.refresh_rows``; always with ``force``), then create
        the indexes the table's size now calls for. Compacting first means a new index is built
        over the compacted files, not remapped onto them afterwards.

        Returns:
            The columns that got a new index.
        """
        tbl = self.table
        if tbl is None:
            return []
        if force or self.needs_refresh():
            retry_conflicts(tbl.optimize, self.name)
        return self.ensure_indexes()

    def needs_refresh(self) -> bool:
        """Whether compacting and folding new rows into the indexes pays now (see
        ``IndexPolicy.refresh_rows``); read from the table's statistics, without a scan."""
        tbl = self.table
        if tbl is None:
            return False
        policy = self.indexes
        stats = tbl.stats()
        if stats["fragment_stats"]["num_small_fragments"] >= policy.refresh_fragments:
            return True
        rows = int(stats["num_rows"])
        behind = max(
            (int(tbl.index_stats(ix.name).num_unindexed_rows) for ix in tbl.list_indices()),
            default=0,
        )
        return behind > 0 and behind >= min(policy.refresh_rows, policy.refresh_share * rows)

    def indexed_columns(self) -> dict[str, str]:
        """Indexed column -> index type (``BTree``, ``Bitmap``, ``FTS``, ``IvfPq``, ...)."""
        tbl = self.table
        if tbl is None:
            return {}
        return {ix.columns[0]: str(ix.index_type) for ix in tbl.list_indices()}

    def ensure_indexes(self) -> list[str]:
        """Create the scalar and vector indexes the policy asks for at the table's current size.

        Another process creating the same index at the same moment is not an error.

        Returns:
            The columns that got a new index.
        """
        tbl = self.table
        policy = self.indexes
        if tbl is None or not (policy.scalar_rows or policy.vector_rows):
            return []
        rows = tbl.count_rows()
        have = self.indexed_columns()
        made: list[str] = []
        if policy.scalar_rows and rows >= policy.scalar_rows:
            for column, kind in policy.scalar:
                if column in self.schema.names and column not in have:
                    import lancedb

                    config = lancedb.index.Bitmap() if kind == "BITMAP" else lancedb.index.BTree()
                    if self._create_index(tbl, column, config):
                        made.append(column)
        vector = self.vector_column
        if vector and policy.vector_rows and rows >= policy.vector_rows and vector not in have:
            dim = self.schema.field(vector).type.list_size
            if self._create_index(tbl, vector, vector_index(policy.vector_type, dim)):
                made.append(vector)
                self._ann_checked = -_ANN_RECHECK_S
        if made:
            log.info("%s: indexed %s at %d rows", self.name, ", ".join(made), rows)
        return made

    def _has_ann(self) -> bool:
        """Whether the vector column has an ANN index (a ``True`` is kept; a ``False`` is looked
        up again after ``_ANN_RECHECK_S``, so a search does not list the indexes every time)."""
        now = time.monotonic()
        if not self._ann and now - self._ann_checked > _ANN_RECHECK_S:
            self._ann = self.vector_column in self.indexed_columns()
            self._ann_checked = now
        return self._ann

    def _create_index(self, tbl: Any, column: str, config: Any) -> bool:
        try:
            tbl.create_index(column, config=config, replace=False)
            return True
        except (RuntimeError, ValueError) as e:
            if column in self.indexed_columns():  # another writer made it first
                return False
            raise InputError(f"could not index {self.name}.{column}: {e}") from e

    # ------------------------------------------------------------------ reading
    def count(self, where: str | None = None) -> int:
        """Rows matching ``where`` (a trusted filter string), or all rows."""
        tbl = self.table
        return 0 if tbl is None else tbl.count_rows(where)

    def scan(self, where: str | None = None, columns: Sequence[str] | None = None) -> pa.Table:
        """All rows matching ``where`` as an Arrow table (no limit)."""
        tbl = self.table
        if tbl is None:
            empty = self.schema.empty_table()
            return empty.select(list(columns)) if columns else empty
        return self._dataset(tbl).to_table(filter=where, columns=list(columns) if columns else None)

    def scan_plan(self, where: str | None = None) -> str:
        """Lance's plan for :meth:`scan` with ``where`` (shows ``ScalarIndexQuery`` when a
        scalar index narrows the rows before they are read)."""
        tbl = self.table
        if tbl is None:
            return ""
        return str(self._dataset(tbl).scanner(filter=where).explain_plan(True))

    def to_arrow(self) -> pa.Table:
        """Every row as an Arrow table (like LanceDB's ``Table.to_arrow``)."""
        return self.scan()

    def to_lance(self) -> Any:
        """The table as a ``lance`` dataset pinned to the current version (``None`` if missing),
        reading through the process's caches."""
        tbl = self.table
        return None if tbl is None else self._dataset(tbl)

    def _dataset(self, tbl: Any) -> Any:
        """``tbl`` as a ``lance`` dataset pinned to its current version, reading through the
        process's caches (:func:`session`)."""
        return tbl.to_lance(session=session(self.cache_mb))

    def search(
        self,
        text: str | None = None,
        vector: Any = None,
        *,
        where: str | None = None,
        k: int = 10,
        with_vector: bool = False,
    ) -> pa.Table:
        """Filtered search; hybrid when both ``text`` and ``vector`` are given.

        * both: vector and full-text results fused with reciprocal-rank fusion (``RRFReranker``);
          ``score`` is the fused relevance;
        * ``vector`` only: nearest neighbours (L2); ``score = 1 / (1 + distance)``;
        * ``text`` only: BM25 full-text search over ``fts_columns``; ``score`` is BM25.

        Higher ``score`` is better in every mode. Every hit also carries two absolute measures,
        comparable across queries and tables: ``similarity``, the cosine similarity of its vector
        to the query vector (null without one), and ``keyword``, its BM25 score for the query
        text (0 when the full-text search did not return it; null without text).

        ``where`` is applied before ranking (prefilter), so up to ``k`` matching rows come back.
        Vector ranking is exact (a flat scan) unless the table has an ANN index and the filter
        keeps more than ``IndexPolicy.exact_rows`` rows.

        Args:
            text: Query text (not SQL: it is tokenized by the full-text index).
            vector: Query vector of the table's width.
            where: Trusted filter string (build it with :mod:`skillstream.storage.filters`).
            k: Number of hits.
            with_vector: Keep the vector column in the result.

        Returns:
            The hits as an Arrow table: the table's columns plus ``score``, ``similarity`` and
            ``keyword``, best first.
        """
        text = text if text and text.strip() else None
        tbl = self.table
        keep = [n for n in self.schema.names if with_vector or n != self.vector_column]
        if tbl is None or (text is None and vector is None):
            empty = pa.array([], pa.float64())
            return (
                self.schema.empty_table()
                .select(keep)
                .append_column("score", empty)
                .append_column("similarity", empty)
                .append_column("keyword", empty)
            )
        if vector is not None:
            vector = self._query_vector(vector)
        if text is not None and not self.fts_columns:
            raise InputError(f"LanceDB table {self.name!r} has no full-text index")
        # Every step reads one pinned version, so the row ids of the candidates are the rows
        # taken at the end even when another process writes or compacts meanwhile.
        ds = self._dataset(tbl)
        near = words = None
        # The full-text search of a hybrid query runs in a second thread beside the vector one
        # (both wait in Lance, not in Python).
        pending = (
            _pool().submit(self._words, ds, text, where, k) if text and vector is not None else None
        )
        if vector is not None:
            exact = not self._has_ann() or (
                bool(where) and ds.count_rows(where) <= self.indexes.exact_rows
            )
            near = self._near(ds, vector, where, k, exact)
        if pending is not None:
            words = pending.result()
        elif text is not None:
            words = self._words(ds, text, where, k)
        if near is not None and words is not None:
            rowids, score = _fuse(near[0], words[0], k)
        elif near is not None:
            rowids, score = near[0], _distance_to_score(near[1])
        else:
            assert words is not None
            rowids, score = words[0], pa.array(words[1], pa.float64())
        read = keep if vector is None or self.vector_column in keep else [*keep, self.vector_column]
        hits = ds._take_rows(rowids, columns=read) if rowids else self.schema.empty_table()
        n = hits.num_rows
        if vector is not None and self.vector_column:
            similarity = pa.array(_cosine(hits.column(self.vector_column), vector), pa.float64())
        else:
            similarity = pa.nulls(n, pa.float64())
        if words is not None:
            bm25 = dict(zip(words[0], (float(x) for x in words[1])))
            keyword = pa.array([bm25.get(r, 0.0) for r in rowids], pa.float64())
        else:
            keyword = pa.nulls(n, pa.float64())
        return (
            hits.select(keep)
            .append_column("score", score)
            .append_column("similarity", similarity)
            .append_column("keyword", keyword)
        )

    def _near(
        self, ds: Any, vector: np.ndarray, where: str | None, k: int, exact: bool
    ) -> tuple[list[int], np.ndarray]:
        """Row ids and L2 distances of the ``k`` nearest rows (ties: lower row id first), by a
        flat scan of the filtered rows when ``exact``, else through the ANN index (with a refine
        step for a quantised one)."""
        nearest: dict[str, Any] = {"column": self.vector_column, "q": vector, "k": k}
        if exact:
            nearest["use_index"] = False
        else:
            nearest["nprobes"] = self.indexes.nprobes
            if self.indexes.vector_type != "ivf_flat":  # its distances are exact already
                nearest["refine_factor"] = self.indexes.refine_factor
        got = ds.scanner(
            nearest=nearest,
            filter=where,
            prefilter=bool(where),
            columns=["_distance"],
            with_row_id=True,
        ).to_table()
        got = got.filter(pc.is_valid(got.column("_distance")))
        return got.column("_rowid").to_pylist(), got.column("_distance").to_numpy()

    def _words(self, ds: Any, text: str, where: str | None, k: int) -> tuple[list[int], np.ndarray]:
        """Row ids and BM25 scores of the ``k`` best full-text matches, best first."""
        got = ds.scanner(
            full_text_query={"query": text, "columns": list(self.fts_columns)},
            filter=where,
            prefilter=bool(where),
            columns=["_score"],
            with_row_id=True,
            limit=k,
        ).to_table()
        return got.column("_rowid").to_pylist(), got.column("_score").to_numpy()

    def _query_vector(self, vector: Any) -> np.ndarray:
        arr = np.asarray(vector, dtype=np.float32).reshape(-1)
        want = self.schema.field(self.vector_column).type.list_size if self.vector_column else None
        if want is not None and arr.shape[0] != want:
            raise InputError(
                f"query vector has {arr.shape[0]} dimensions; table {self.name!r} holds {want}"
            )
        return arr


def _fuse(near: list[int], words: list[int], k: int) -> tuple[list[int], pa.Array]:
    """Reciprocal-rank fusion of a vector and a full-text result (row ids, each best first): a
    row scores ``1 / (rank + 60)`` summed over the lists it is in (rank from 1); rows are kept in
    their first appearance (vector hits, then the text hits not among them) and stably sorted by
    that score, the top ``k`` returned with their scores.

    This is what LanceDB's hybrid query with ``RRFReranker()`` computes, done here in one thread
    on row ids, so only the ``k`` rows kept are read in full.
    """
    scores: dict[int, float] = {}
    for ids in (near, words):
        for rank, row in enumerate(ids, 1):
            scores[row] = scores.get(row, 0.0) + 1.0 / (rank + _RRF_K)
    rows = list(scores)  # insertion order: first appearance
    relevance = pa.array([scores[r] for r in rows], pa.float32())
    order = pc.array_sort_indices(relevance, order="descending")[:k].to_pylist()
    return [rows[i] for i in order], relevance.take(pa.array(order, pa.int64())).cast(pa.float64())


@lru_cache(maxsize=4)
def session(cache_mb: int = CACHE_MB) -> Any:
    """The process's ``lance.Session`` for caches of ``cache_mb`` megabytes: four fifths for
    opened indexes (scalar, full-text and vector partitions), one fifth for file metadata.

    Shared by every table the process reads (the caches are keyed by dataset and index), so the
    memory they take is bounded once per process, whatever the number of tables or owners.
    """
    total = max(1, cache_mb) * 1024 * 1024
    return lance.Session(
        index_cache_size_bytes=total * 4 // 5, metadata_cache_size_bytes=total // 5
    )


@lru_cache(maxsize=1)
def _pool() -> ThreadPoolExecutor:
    """Threads, kept for the process, for the full-text half of hybrid searches (one per core, so
    searches made at once from several threads do not queue behind one another)."""
    return ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="skillstream-fts")


def vector_index(kind: str, dim: int) -> Any:
    """The LanceDB index config of ``IndexPolicy.vector_type`` for vectors of width ``dim``."""
    import lancedb

    if kind == "ivf_flat":
        return lancedb.index.IvfFlat(distance_type="l2")
    if kind == "ivf_pq":
        # Sub-vectors of about eight dimensions (LanceDB's default is sixteen).
        subs = next(n for n in range(max(1, dim // 8), 0, -1) if dim % n == 0)
        return lancedb.index.IvfPq(distance_type="l2", num_sub_vectors=subs)
    if kind == "ivf_hnsw_sq":
        return lancedb.index.IvfHnswSq(distance_type="l2")
    raise ConfigError(f"unknown vector index {kind!r}: ivf_flat, ivf_pq or ivf_hnsw_sq")


def _cosine(vectors: Any, query: np.ndarray) -> np.ndarray:
    """Cosine similarity of each row of a fixed-size-list column to ``query``."""
    if len(vectors) == 0:
        return np.zeros(0)
    values = pa.concat_arrays(vectors.chunks) if isinstance(vectors, pa.ChunkedArray) else vectors
    rows = values.flatten().to_numpy(zero_copy_only=False).astype(np.float64)
    rows = rows.reshape(len(values), -1)
    q = np.asarray(query, dtype=np.float64)
    norms = np.linalg.norm(rows, axis=1) * max(float(np.linalg.norm(q)), 1e-12)
    return np.clip(rows @ q / np.maximum(norms, 1e-12), -1.0, 1.0)


def _distance_to_score(distance: np.ndarray) -> pa.Array:
    d = np.asarray(distance, dtype=np.float64)
    return pa.array(1.0 / (1.0 + d), pa.float64())


class MemoryIndex:
    """The LanceDB ``memories`` table: what search needs, with the vector.

    Args:
        uri: LanceDB URI (local folder, ``s3://bucket/prefix``, ``memory://``).
        dim: Width of the embedding vectors.
        storage_options: One options dict (see :mod:`skillstream.storage.options`).
        table: Table name.
        create: Create the table and its full-text index on ``text`` when missing.
        embedding: The embedding model's identity (``skillstream.embed.identity``). A new table
            records it; an existing table made with another model, or with vectors of another
            width, is refused with ``ConfigError`` (vectors of two models are not comparable).
        indexes: When the filter columns and the vectors get their indexes (default: the
            ``IndexPolicy`` defaults on ``MEMORY_INDEXES``).
        cache_mb: Memory of the process's Lance caches (see :func:`session`).

    Example:
        >>> index = MemoryIndex("./.skillstream/lancedb", dim=384)  # doctest: +SKIP
        >>> index.search("hiking", query_vec, owner="u1", k=5)  # doctest: +SKIP
    """

    def __init__(
        self,
        uri: str,
        dim: int,
        storage_options: dict | None = None,
        table: str = "memories",
        *,
        create: bool = True,
        embedding: str | None = None,
        indexes: IndexPolicy | None = None,
        cache_mb: int = CACHE_MB,
    ) -> None:
        self.uri = uri
        self.dim = dim
        self.db = connect(uri, storage_options)
        schema = declared.memories_lance(dim)
        if embedding:
            schema = schema.with_metadata(
                {**(schema.metadata or {}), EMBEDDING_METADATA: embedding.encode()}
            )
        self.table = LanceTable(
            self.db,
            table,
            schema,
            key="id",
            fts_columns=("text",),
            version_column="version",
            create=create,
            indexes=indexes or IndexPolicy(scalar=MEMORY_INDEXES),
            cache_mb=cache_mb,
        )
        if self.table.table is not None:
            check_embedding(self.table.table.schema, dim, embedding)

    # ------------------------------------------------------------------ writing
    def upsert(self, memories: Iterable[Memory]) -> int:
        """Write memories by id; the highest ``version`` wins, in the batch and over stored rows.

        Raises:
            InputError: when a memory has no vector or one of the wrong width.
        """
        items = list(memories)
        if not items:
            return 0
        return self.table.upsert(self._to_arrow(items))

    def delete(self, ids: Iterable[str]) -> int:
        """Delete memories by id (rows that are not there are no error); returns how many ids."""
        todo = sorted(set(ids))
        if todo and self.table.exists:
            for i in range(0, len(todo), 1000):
                self.table.delete(filters.is_in("id", todo[i : i + 1000]))
        return len(todo)

    def _to_arrow(self, items: list[Memory]) -> pa.Table:
        schema = self.table.schema
        rows = []
        vectors: np.ndarray = np.empty((len(items), self.dim), dtype=np.float32)
        for i, m in enumerate(items):
            if m.vector is None:
                raise InputError(f"memory {m.id!r} has no vector; embed it before writing")
            v = np.asarray(m.vector, dtype=np.float32).reshape(-1)
            if v.shape[0] != self.dim:
                raise InputError(
                    f"memory {m.id!r} has a vector of {v.shape[0]} dimensions; expected {self.dim}"
                )
            vectors[i] = v
            row = m.row()
            row.pop("vector", None)
            rows.append(row)
        meta = pa.schema([f for f in schema if f.name != "vector"], metadata=schema.metadata)
        base = to_table(rows, meta, table=self.table.name)
        flat = pa.array(vectors.reshape(-1), pa.float32())
        return base.append_column(
            schema.field("vector"), pa.FixedSizeListArray.from_arrays(flat, self.dim)
        )

    def optimize(self, *, force: bool = False) -> list[str]:
        """Fold new rows into the indexes when enough have gathered (always with ``force``) and
        create the indexes the table's size calls for (see ``LanceTable.optimize``); returns the
        newly indexed columns."""
        return self.table.optimize(force=force)

    # ------------------------------------------------------------------ reading
    def count(self, where: str | None = None) -> int:
        """Number of memories matching a trusted filter string, or all."""
        return self.table.count(where)

    def owner_memories(self, owner_id: str, statuses: Iterable[str] | None = None) -> list[Memory]:
        """Every memory of one owner (any status unless ``statuses`` is given), with vectors.

        Task skills' ``SkillMemory`` items are left out: the extraction state and maintenance
        work on the memories extraction made (see ``distill.memory_item``).
        """
        return memories_from_arrow(self.table.scan(owner_filter(owner_id, statuses)))

    def search(
        self,
        text: str | None = None,
        vector: np.ndarray | None = None,
        *,
        owner: str | None = None,
        k: int = 10,
        where: str | None = None,
        statuses: Iterable[str] | None = (MemoryStatus.GENERATED, MemoryStatus.ACTIVATED),
        with_vector: bool = False,
    ) -> list[dict[str, Any]]:
        """Find memories by text, vector or both (hybrid, RRF-fused).

        Args:
            text: Query text for full-text search.
            vector: Query embedding.
            owner: Only this owner's memories (quoted safely here).
            k: Number of hits.
            where: Extra trusted filter string (use :mod:`skillstream.storage.filters`).
            statuses: Allowed ``status`` values; ``None`` for any.
            with_vector: Keep each hit's ``vector``.

        Returns:
            Hits best first: every memory column (``vector`` only ``with_vector``), plus ``score``
            (higher is better; see :meth:`LanceTable.search`).
        """
        clause = filters.where_all(
            filters.eq("owner_id", owner) if owner is not None else None,
            filters.is_in("status", statuses) if statuses is not None else None,
            where,
        )
        return self.table.search(
            text, vector, where=clause, k=k, with_vector=with_vector
        ).to_pylist()

    def to_lance(self) -> Any:
        """The memories as a pinned ``lance`` dataset (for DuckDB), or ``None`` if missing."""
        return self.table.to_lance()


def owner_filter(owner_id: str, statuses: Iterable[str] | None = None) -> str:
    """The filter of :meth:`MemoryIndex.owner_memories`: its ``owner_id`` equality is what the
    owner index answers; the other clauses refine the rows it finds."""
    where = filters.where_all(
        filters.eq("owner_id", owner_id),
        filters.is_in("status", statuses) if statuses is not None else None,
        filters.not_skill_item(),
    )
    assert where is not None
    return where


def check_embedding(schema: pa.Schema, dim: int, embedding: str | None) -> None:
    """Refuse a memories table whose vectors come from another model than the configured one.

    A table made before homes recorded their model carries no name: only its width is checked.
    """
    width = schema.field("vector").type.list_size
    stored = (schema.metadata or {}).get(EMBEDDING_METADATA, b"").decode() or None
    if embedding and stored and stored != embedding:
        raise ConfigError(
            f"this home's memories were embedded with {stored!r}, and the embedding settings "
            f"now name {embedding!r}: vectors of two models cannot be searched together. Use "
            "the home's model (SKILLSTREAM_EMBED_BACKEND / SKILLSTREAM_EMBED_MODEL) or a new home"
        )
    if width != dim:
        raise ConfigError(
            f"this home's memories have {width}-dimensional vectors"
            + (f" (model {stored!r})" if stored else "")
            + f", and the configured embedding model gives {dim}: use the home's model or a "
            "new home"
        )


def memories_from_arrow(rows: pa.Table) -> list[Memory]:
    """:func:`memory_from_row` of every row, vectors as ``float32`` arrays.

    The vectors are read as one matrix rather than as Python lists of floats: reading an owner's
    memories back (a run's first batch, a maintenance pass) would otherwise spend most of its
    time building float objects, a cost that grows with the home.
    """
    if "vector" not in rows.column_names or rows.num_rows == 0:
        return [memory_from_row(r) for r in rows.to_pylist()]
    column = rows.column("vector").combine_chunks()
    records = to_records(rows.drop_columns(["vector"]))
    if column.null_count == 0:
        flat = column.flatten().to_numpy(zero_copy_only=False)
        matrix = np.array(flat, dtype=np.float32).reshape(len(records), -1)
        for r, v in zip(records, matrix):
            r["vector"] = v
    else:
        for r, v in zip(records, column.to_pylist()):
            r["vector"] = None if v is None else np.asarray(v, dtype=np.float32)
    return [memory_from_row(r) for r in records]


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_records(rows: pa.Table) -> list[dict[str, Any]]:
    """``rows.to_pylist()``, with the UTC microsecond timestamps built directly from their integer
    values: ``to_pylist`` looks the time zone up for every value, which made up most of the time
    of reading an owner's memories back (eight timestamp columns)."""
    columns = [_datetimes(c) if _utc_micros(c.type) else c.to_pylist() for c in rows.itercolumns()]
    names = rows.column_names
    return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]


def _utc_micros(kind: pa.DataType) -> bool:
    return pa.types.is_timestamp(kind) and kind.unit == "us" and kind.tz in ("UTC", "+00:00")


def _datetimes(column: pa.ChunkedArray) -> list[datetime | None]:
    """A UTC microsecond timestamp column as aware ``datetime`` values (``None`` for nulls)."""
    micros = pc.fill_null(column.cast(pa.int64()), 0).to_numpy().tolist()
    if column.null_count == 0:
        return [_EPOCH + timedelta(microseconds=m) for m in micros]
    valid = pc.is_valid(column).to_numpy(zero_copy_only=False).tolist()
    return [_EPOCH + timedelta(microseconds=m) if ok else None for m, ok in zip(micros, valid)]


def memory_from_row(row: dict[str, Any]) -> Memory:
    """A :class:`Memory` from a ``memories`` or ``memory_meta`` row (missing lists become empty)."""
    for name in ("tags", "source_message_ids"):
        if row.get(name) is None:
            row[name] = []
    return Memory(**row)
