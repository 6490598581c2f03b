"""Moving a LanceDB table's vectors to another embedding model, resumably.

A table is moved in two phases, each safe to interrupt and run again:

1. **Fill** a staging table (``<table>__reembed``) with every row of the table and the vector of
   its text under the new model, a batch at a time. Rows already staged at their version are
   skipped, so a run that was stopped goes on where it stopped.
2. **Swap**: drop the table, create it again with the new width and the new model's name in its
   schema, copy the staged rows into it, build its indexes, and drop the staging table.

Which phase a table is in is read from the tables themselves: the table carrying the old model's
name (or none) with a staging table beside it is in phase 1; a staging table with the table
missing, or carrying the new model's name, is in phase 2 (the swap is done again from the start).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from skillstream.storage import filters
from skillstream.storage.lance import EMBEDDING_METADATA, IndexPolicy, LanceTable

log = logging.getLogger(__name__)

STAGING = "__reembed"
"""Suffix of a table's staging table while it is moved."""


@dataclass(frozen=True)
class Move:
    """One table to move: where its text is, how it is keyed and indexed."""

    name: str
    text_column: str
    schema: Callable[[int], pa.Schema]
    """The table's schema for vectors of a width."""
    fts_columns: tuple[str, ...] = ()
    indexes: IndexPolicy | None = None
    key: str = "id"
    version_column: str = "version"
    derive: Callable[[dict[str, Any], Callable[[list[str]], dict[str, np.ndarray]]], Any] | None = (
        None
    )
    """For rows whose vector is not their text's (``derived_kinds``: a topic node's is made from
    its members' vectors, a task skill's item has its skill's): given the row and a lookup of
    staged vectors by key, the vector, or the text to embed instead (``None``: the row's text).
    Such rows are moved after all the others."""
    derived_kinds: tuple[str, ...] = ("topic", "task_skill")


def model_of(table: Any) -> str | None:
    """The embedding model a table's schema names, if any."""
    meta = table.schema.metadata or {}
    got = meta.get(EMBEDDING_METADATA)
    return got.decode() if got else None


def move_table(
    db: Any,
    move: Move,
    model: str,
    dim: int,
    embed: Callable[[Sequence[str]], np.ndarray],
    *,
    batch: int = 512,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, int]:
    """Move ``move``'s table to ``model`` (vectors of width ``dim`` from ``embed``).

    Returns:
        ``rows`` (the table's rows), ``embedded`` (texts embedded by this call), ``derived``
        (vectors made from other rows' by ``Move.derive``) and ``resumed`` (rows a stopped
        earlier call had staged).
    """
    staging = move.name + STAGING
    names = set(db.table_names())
    schema = move.schema(dim).with_metadata(
        {**(move.schema(dim).metadata or {}), EMBEDDING_METADATA: model.encode()}
    )
    out = {"rows": 0, "embedded": 0, "resumed": 0, "derived": 0}
    current = db.open_table(move.name) if move.name in names else None
    if current is None and staging not in names:
        return out  # nothing stored in this table
    swapping = staging in names and (current is None or model_of(current) == model)
    if (
        current is not None
        and not swapping
        and model_of(current) == model
        and (current.schema.field("vector").type.list_size == dim)
    ):
        out["rows"] = current.count_rows()
        return out  # already on this model
    stage = LanceTable(
        db, staging, schema, key=move.key, version_column=move.version_column, create=True
    )
    if not swapping:
        assert current is not None
        out.update(_fill(current, stage, move, embed, batch, progress))
    _swap(db, move, schema, stage, progress)
    out["rows"] = db.open_table(move.name).count_rows()
    return out


def _fill(
    current: Any,
    stage: LanceTable,
    move: Move,
    embed: Callable[[Sequence[str]], np.ndarray],
    batch: int,
    progress: Callable[[str, int, int], None] | None,
) -> dict[str, int]:
    columns = [n for n in current.schema.names if n != "vector"]
    rows = current.to_lance().to_table(columns=columns)
    staged = stage.scan(columns=[move.key, move.version_column])
    done = set(
        zip(staged.column(move.key).to_pylist(), staged.column(move.version_column).to_pylist())
    )
    keys = rows.column(move.key).to_pylist()
    versions = rows.column(move.version_column).to_pylist()
    todo = [i for i, kv in enumerate(zip(keys, versions)) if kv not in done]
    resumed = len(keys) - len(todo)
    size = stage.schema.field("vector").type.list_size
    derived: list[int] = []
    if move.derive is not None:
        kinds = rows.column("kind").to_pylist() if "kind" in rows.column_names else []
        derived = [i for i in todo if kinds and kinds[i] in move.derived_kinds]
        todo = [i for i in todo if not (kinds and kinds[i] in move.derived_kinds)]
    embedded = 0
    missing: list[int] = []
    for start in range(0, len(todo), batch):
        part = rows.take(pa.array(todo[start : start + batch], pa.int64()))
        texts = [t or "" for t in part.column(move.text_column).to_pylist()]
        vectors = np.asarray(embed(texts), dtype=np.float32)
        stage.upsert(_with_vectors(part, vectors, size))
        embedded += len(texts)
        if progress is not None:
            progress(move.name, resumed + embedded, len(keys))
    if derived:
        assert move.derive is not None

        def lookup(ids: list[str]) -> dict[str, np.ndarray]:
            got = stage.scan(filters.is_in(move.key, ids), columns=[move.key, "vector"])
            return {
                k: np.asarray(v, dtype=np.float32)
                for k, v in zip(got.column(move.key).to_pylist(), got.column("vector").to_pylist())
            }

        part = rows.take(pa.array(derived, pa.int64()))
        made = [move.derive(row, lookup) for row in part.to_pylist()]
        missing = [i for i, v in enumerate(made) if v is None or isinstance(v, str)]
        if missing:
            own = part.column(move.text_column)
            texts = [made[i] if isinstance(made[i], str) else own[i].as_py() or "" for i in missing]
            for i, v in zip(missing, embed(texts)):
                made[i] = v
            embedded += len(missing)
        stage.upsert(_with_vectors(part, np.asarray(made, dtype=np.float32), size))
    return {"embedded": embedded, "resumed": resumed, "derived": len(derived) - len(missing)}


def _with_vectors(part: pa.Table, vectors: np.ndarray, size: int) -> pa.Table:
    flat = pa.array(vectors.reshape(-1))
    return part.append_column("vector", pa.FixedSizeListArray.from_arrays(flat, size))


def _swap(
    db: Any,
    move: Move,
    schema: pa.Schema,
    stage: LanceTable,
    progress: Callable[[str, int, int], None] | None,
) -> None:
    if move.name in set(db.table_names()):
        db.lancedb.drop_table(move.name)
    final = LanceTable(
        db,
        move.name,
        schema,
        key=move.key,
        fts_columns=move.fts_columns,
        version_column=move.version_column,
        create=True,
        indexes=move.indexes,
    )
    for part in stage.to_lance().to_batches(batch_size=4096):
        final.upsert(pa.Table.from_batches([part]))
    final.optimize(force=True)
    db.lancedb.drop_table(move.name + STAGING)
    if progress is not None:
        progress(move.name, final.count(), final.count())
