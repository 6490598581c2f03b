"""Memories out of a home into one Parquet file, and back into a home: no extraction, no LLM.

The file holds one row per memory: every ``memory_meta`` column, the ``vector`` from LanceDB and
``events``, the memory's lifecycle log (its ``memory_events`` rows, oldest first, as a list of
structs). A task skill travels in the row of its memory item, with its versions and packages
(``storage.skill_transfer``), so ``skills show`` works on the home it is imported into. Its
Parquet key-value metadata says what it is (``skillstream.export = memories``), the format version,
the embedding model and the vector width. Format 2 added the task-skill columns; an import reads
format 1 files too (their task skills stayed behind).

An import writes the rows as they are, with their ids, versions and events: LanceDB first, then
``memory_meta`` and ``memory_events`` in one catalog transaction (the order of the store sink, so
``storage.reconcile`` can repair a crash between the two). Versions decide as in the flow: a stored
memory is replaced only by a row of an equal or higher version, and an event already logged is
kept. Importing the same file twice changes nothing, and an import counts what was new to the home
(the rest it reports as already stored). A file made with another embedding model, or with vectors
of another width than the home's, is refused: its vectors would not be comparable with the home's.

Rows are written in the order LanceDB holds them, so the imported table has the same layout
(full-text ranking breaks ties by it). Both directions stream in record batches, so a large home
is moved in bounded memory (the export keeps one id per memory in memory to know that order).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from skillstream import tables as declared
from skillstream.errors import InputError
from skillstream.settings import Settings
from skillstream.storage import skill_transfer
from skillstream.storage.artifacts import skills_store
from skillstream.storage.catalog import open_catalog
from skillstream.storage.filters import ident
from skillstream.storage.home import storage_options
from skillstream.storage.lance import MemoryIndex, connect
from skillstream.storage.options import fsspec_options, protocol_of
from skillstream.storage.reconcile import reconcile_memories, reconcile_task_skills
from skillstream.storage.task_skills import TABLE as SKILLS_TABLE
from skillstream.storage.task_skills import VERSIONS as SKILL_VERSIONS_TABLE
from skillstream.storage.task_skills import TaskSkillIndex, catalog_row

KIND = "memories"
FORMAT_VERSION = "2"
READS = ("1", FORMAT_VERSION)
"""Export formats an import reads."""
BATCH_ROWS = 2_000

_MEMORY_COLUMNS = [f.name for f in declared.MEMORY_FIELDS]
_EVENT_COLUMNS = declared.MEMORY_EVENTS.names


@dataclass
class Transfer:
    """What an export or an import moved: an export counts what it wrote, an import what was new
    to the home (a memory or task skill that was missing or had a lower version, an event or a
    task-skill version that was missing)."""

    memories: int = 0
    events: int = 0
    path: str = ""
    task_skills: int = 0
    task_skill_versions: int = 0
    unchanged: int = 0
    """Import: memories of the file that the home already held at their version or a later one."""


def file_schema(dim: int) -> pa.Schema:
    """The schema of an export file for vectors of width ``dim``."""
    # The structs' fields are all nullable: older pyarrow (18.1, the floor) cannot cast a struct
    # whose fields are nullable (what DuckDB returns) to one whose fields are not; the catalog
    # checks the not-null columns when an import writes the events.
    events = pa.list_(pa.struct([f.with_nullable(True) for f in declared.MEMORY_EVENTS]))
    return pa.schema(
        [
            *declared.MEMORY_FIELDS,
            declared.vector_field(dim),
            pa.field("events", events),
            *skill_transfer.file_fields(dim),
        ]
    )


def _open(path: str, mode: str, settings: Settings) -> Any:
    try:
        if not protocol_of(path):
            return open(path, mode)
        import fsspec

        options = fsspec_options(path, storage_options(settings))
        return fsspec.open(path, mode, **options).open()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as e:
        raise InputError(f"cannot open {path!r}: {e.strerror or e}") from e


def lance_dim(settings: Settings) -> int | None:
    """The vector width of the home's LanceDB ``memories`` table, or ``None`` without one."""
    db = connect(settings.storage.lancedb, storage_options(settings))
    try:
        schema = db.open_table("memories").schema
    except ValueError:
        return None
    return int(schema.field("vector").type.list_size)


_EXPORT_SQL = """
SELECT {columns}, l.vector AS vector, e.events AS events
FROM memory_meta AS m
JOIN lance_memories AS l ON l.id = m.id
JOIN __skillstream_order AS o ON o.id = m.id
LEFT JOIN (
    SELECT memory_id, list(ev ORDER BY ev.recorded_at, ev.event_id) AS events
    FROM (SELECT {event_columns} FROM memory_events) AS ev
    GROUP BY memory_id
) AS e ON e.memory_id = m.id
{where}
ORDER BY o.pos
"""


def export_memories(settings: Settings, out: str, *, owner: str | None = None) -> Transfer:
    """Write the memories of a home (or of one owner) with their vectors and events to Parquet.

    Args:
        settings: Where the home is.
        out: The Parquet file to write (a local path or an fsspec URI).
        owner: Only this owner's memories.

    Returns:
        How many memories and events were written.

    Raises:
        InputError: The home has no catalog or no memories table.
    """
    dim = lance_dim(settings)
    if dim is None:
        raise InputError(f"the home {settings.storage.home} holds no memories to export")
    cat = open_catalog(settings.storage, read_only=True)
    try:
        cat.attach_lance(settings.storage.lancedb, storage_options(settings))
        # rows keep LanceDB's order, so an import lays them out (and breaks ranking ties) alike
        ids = MemoryIndex(
            settings.storage.lancedb, dim, storage_options(settings), create=False
        ).table.scan(columns=["id"])
        order = pa.table({"id": ids.column("id"), "pos": pa.array(range(ids.num_rows))})
        cat.con.register("__skillstream_order", order)
        # read before the export's query: a later query on the connection would end its reader
        skills = skill_transfer.SkillExport(settings, cat, owner)
        quoted = ", ".join(f'm."{c}"' for c in _MEMORY_COLUMNS)
        event_columns = ", ".join(f'"{c}"' for c in _EVENT_COLUMNS)
        query = _EXPORT_SQL.format(
            columns=quoted,
            event_columns=event_columns,
            where="WHERE m.owner_id = ?" if owner is not None else "",
        )
        cur = cat.con.execute(query, [owner] if owner is not None else [])
        reader = (
            cur.to_arrow_reader(BATCH_ROWS)
            if hasattr(cur, "to_arrow_reader")
            else cur.fetch_record_batch(BATCH_ROWS)
        )
        schema = file_schema(dim).with_metadata(
            {
                "skillstream.export": KIND,
                "skillstream.format": FORMAT_VERSION,
                "skillstream.embedding_model": settings.embedding.model,
                "skillstream.dim": str(dim),
            }
        )
        done = Transfer(path=out)
        with _open(out, "wb", settings) as fh, pq.ParquetWriter(fh, schema) as writer:
            for batch in reader:
                table = pa.Table.from_batches([batch])
                ids = table.column("id").to_pylist()
                for name, column in zip(
                    skill_transfer.COLUMNS, skills.columns(ids, dim), strict=True
                ):
                    table = table.append_column(name, column)
                table = table.cast(schema)
                writer.write_table(table)
                done.memories += table.num_rows
                done.events += sum(len(e or ()) for e in table.column("events").to_pylist())
                versions = table.column(skill_transfer.SKILL_VERSIONS).to_pylist()
                done.task_skills += table.num_rows - table.column(skill_transfer.SKILL).null_count
                done.task_skill_versions += sum(len(v or ()) for v in versions)
        return done
    finally:
        cat.close()


def read_header(pf: pq.ParquetFile, path: str) -> tuple[str, int]:
    """The embedding model and vector width of an export file (checked)."""
    meta = {k.decode(): v.decode() for k, v in (pf.schema_arrow.metadata or {}).items()}
    if meta.get("skillstream.export") != KIND:
        raise InputError(
            f"{path!r} is not a memories export of skillstream (make one with "
            "'skillstream export memories --out FILE.parquet')"
        )
    version = meta.get("skillstream.format")
    if version not in READS:
        raise InputError(
            f"{path!r} has export format {version!r}; this version reads formats {', '.join(READS)}"
        )
    names = set(pf.schema_arrow.names)
    wanted = [*_MEMORY_COLUMNS, "vector", "events"]
    if version != "1":
        wanted += skill_transfer.COLUMNS
    missing = [c for c in wanted if c not in names]
    if missing:
        raise InputError(f"{path!r} lacks the columns {', '.join(missing)}")
    return meta.get("skillstream.embedding_model", ""), int(meta.get("skillstream.dim", "0"))


def import_memories(settings: Settings, path: str) -> Transfer:
    """Write the memories of an export file into a home (created when missing).

    Args:
        settings: The home to write (its embedding model must be the file's).
        path: A file written by :func:`export_memories` (local path or fsspec URI).

    Returns:
        How many memories, events, task skills and task-skill versions were new to the home, and
        how many memories it already held.

    Raises:
        InputError: The file is not an export, or its model or vector width is not the home's.
    """
    with _open(path, "rb", settings) as fh:
        try:
            pf = pq.ParquetFile(fh)
        except (pa.ArrowInvalid, OSError) as e:
            raise InputError(f"{path!r} is not a readable Parquet file: {e}") from e
        model, dim = read_header(pf, path)
        if model and model != settings.embedding.model:
            raise InputError(
                f"{path!r} holds vectors of the embedding model {model!r}, the home uses "
                f"{settings.embedding.model!r}; import into a home with embed_model = "
                f"{model!r} (SKILLSTREAM_EMBED_MODEL)"
            )
        have = lance_dim(settings)
        if have is not None and have != dim:
            raise InputError(
                f"{path!r} holds vectors of {dim} dimensions, the home's memories have {have}"
            )
        index = MemoryIndex(settings.storage.lancedb, dim, storage_options(settings))
        store = skills_store(settings.storage)
        cat = open_catalog(settings.storage)
        done = Transfer(path=path)
        try:
            # an earlier command killed between its two writes left LanceDB ahead: roll it back
            # first, or a row it never committed would outrank the file's by its version
            embed = _lazy_embed(settings)
            reconcile_memories(cat, index, embed)
            reconcile_task_skills(cat, index.db, embed)
            for batch in pf.iter_batches(batch_size=BATCH_ROWS):
                table = pa.Table.from_batches([batch])
                events = _events(table)
                skills, versions = skill_transfer.skills_of(table, store)
                index.table.upsert(table.select([*_MEMORY_COLUMNS, "vector"]))
                if skills:
                    TaskSkillIndex(index.db, len(skills[0].vector or ())).upsert(skills)

                def commit(
                    cat: Any,
                    table: pa.Table = table,
                    events: pa.Table = events,
                    skills: list = skills,
                    versions: list = versions,
                ) -> Transfer:
                    new = Transfer(
                        memories=_newer(cat, "memory_meta", "id", table.select(["id", "version"])),
                        events=events.num_rows - _held(cat, "memory_events", "event_id", events),
                        task_skills=_newer(cat, SKILLS_TABLE, "id", _versions(skills)),
                        task_skill_versions=len(versions)
                        - _held(cat, SKILL_VERSIONS_TABLE, "version_id", versions),
                    )
                    cat.upsert("memory_meta", table.select(_MEMORY_COLUMNS), version="version")
                    if events.num_rows:
                        cat.insert_ignore("memory_events", events)
                    if skills:
                        rows = [catalog_row(s) for s in skills]
                        cat.upsert(SKILLS_TABLE, rows, version="version")
                    if versions:
                        cat.insert_ignore(SKILL_VERSIONS_TABLE, versions)
                    return new

                new = cat.run_transaction(commit)
                done.memories += new.memories
                done.unchanged += table.num_rows - new.memories
                done.events += new.events
                done.task_skills += new.task_skills
                done.task_skill_versions += new.task_skill_versions
        finally:
            cat.close()
        index.optimize()
        return done


def _versions(skills: list) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([s.id for s in skills], pa.string()),
            "version": pa.array([s.version for s in skills], pa.int64()),
        }
    )


def _newer(cat: Any, table: str, key: str, rows: pa.Table) -> int:
    """How many of ``rows`` (``key``, ``version``) ``table`` lacks or holds at a lower version."""
    if rows.num_rows == 0:
        return 0
    if not cat.has(table):
        return rows.num_rows
    stored = dict(
        cat.con.execute(
            f"SELECT {ident(key)}, version FROM {ident(table)} WHERE {ident(key)} IN "
            "(SELECT unnest(?::VARCHAR[]))",
            [rows.column(key).to_pylist()],
        ).fetchall()
    )
    return sum(
        1
        for k, v in zip(rows.column(key).to_pylist(), rows.column("version").to_pylist())
        if k not in stored or stored[k] is None or stored[k] < v
    )


def _held(cat: Any, table: str, key: str, rows: Any) -> int:
    """How many of the keys of ``rows`` (an Arrow table or dicts) ``table`` already holds."""
    keys = rows.column(key).to_pylist() if isinstance(rows, pa.Table) else [r[key] for r in rows]
    if not keys or not cat.has(table):
        return 0
    [(n,)] = cat.con.execute(
        f"SELECT count(*) FROM {ident(table)} WHERE {ident(key)} IN (SELECT unnest(?::VARCHAR[]))",
        [list(set(keys))],
    ).fetchall()
    return int(n)


def _lazy_embed(settings: Settings) -> Any:
    """The home's embedder, loaded only if a reconcile must restore a row."""

    def embed(texts: list[str]) -> Any:
        from skillstream.embed import get_embedder

        return get_embedder(settings.embedding).encode(texts)

    return embed


def _events(table: pa.Table) -> pa.Table:
    """The ``events`` lists of a batch as ``memory_events`` rows."""
    column = table.column("events").combine_chunks()
    structs = column.flatten()  # the structs of every list, in order
    if len(structs) == 0:
        return declared.MEMORY_EVENTS.empty_table()
    return pa.Table.from_struct_array(structs)
