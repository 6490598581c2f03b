"""``skillstream reembed``: move a home to another embedding model.

Every vector of a home comes from one model, which the memories table names
(``storage.lance.check_embedding`` refuses a search or a run with another one). Moving a home
embeds again the text of every stored memory (``text``) and every task skill (``search_text``)
with the new model, writes the tables again with the new width and name, builds their indexes,
and records the model in ``<home>/skillstream.toml`` (``embed_model``) so that the home's next
commands use it. The catalog's rows, ids and versions do not change: only vectors do.

It is resumable (``storage.reembed``: a stopped move goes on where it stopped when run again) and
refused while a run holds the home: the run lock of a DuckDB-file home, the live leases of a
shared catalog. What it cannot carry over is said in the report: a trained memory-skill controller
reads vectors of the old width and must be trained again, and a Bytewax recovery folder holds
states with the old vectors (start a new one).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillstream.embed import get_embedder, identity
from skillstream.errors import ConfigError
from skillstream.settings import CONFIG_FILE, Settings, is_remote, local_path


@dataclass
class ReembedReport:
    """What a move did: per table, ``rows``, ``embedded`` and ``resumed`` (see
    ``storage.reembed.move_table``)."""

    model_from: str | None
    model_to: str
    dim: int
    tables: dict[str, dict[str, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "model_from": self.model_from,
            "model_to": self.model_to,
            "dim": self.dim,
            "tables": self.tables,
            "notes": self.notes,
            "seconds": round(self.seconds, 3),
        }


def reembed(
    settings: Settings,
    model: str,
    *,
    batch: int = 512,
    progress: Callable[[str, int, int], None] | None = None,
) -> ReembedReport:
    """Move the home of ``settings`` to the local embedding ``model`` (see the module docstring).

    Raises:
        HomeBusyError: a run holds the home.
        InputError: nothing was stored in the home.
        ConfigError: ``model`` is not a local model skillstream can load.
    """
    from skillstream.storage.home import require_home

    check_model(model)
    require_home(settings, "reembed moves a home that has memories.")
    storage = settings.storage
    if storage.shared_catalog:
        return _reembed(settings, model, batch, progress, shared=True)
    from skillstream.storage.lock import run_lock

    with run_lock(storage.catalog, storage.home):
        return _reembed(settings, model, batch, progress, shared=False)


def _reembed(
    settings: Settings,
    model: str,
    batch: int,
    progress: Callable[[str, int, int], None] | None,
    *,
    shared: bool,
) -> ReembedReport:
    from skillstream.storage.home import storage_options
    from skillstream.storage.lance import MEMORY_INDEXES, IndexPolicy, connect
    from skillstream.storage.reembed import Move, model_of, move_table
    from skillstream.storage.task_skills import TABLE as SKILLS
    from skillstream.storage.task_skills import lance_schema
    from skillstream.tables import memories_lance

    t0 = time.perf_counter()
    if shared:
        _no_live_runs(settings)
    target = settings.with_keys(embed_backend="local", embed_model=model)
    embedder = get_embedder(target.embedding)
    name, dim = identity(target.embedding), int(embedder.dim)
    storage = settings.storage
    db = connect(storage.lancedb, storage_options(settings))
    before = None
    if "memories" in set(db.table_names()):
        before = model_of(db.open_table("memories"))
    report = ReembedReport(before, name, dim)
    indexes = IndexPolicy(
        scalar_rows=storage.index_scalar_rows,
        vector_rows=storage.index_vector_rows,
        vector_type=storage.index_vector_type,
        scalar=MEMORY_INDEXES,
    )
    moves = [
        Move(
            "memories", "text", memories_lance, ("text",), indexes, derive=_node_vectors(settings)
        ),
        Move(SKILLS, "search_text", lance_schema, ("search_text",)),
    ]
    for move in moves:
        report.tables[move.name] = move_table(
            db, move, name, dim, embedder.encode, batch=batch, progress=progress
        )
    if not is_remote(storage.home):
        set_home_key(local_path(storage.home) / CONFIG_FILE, "embed_model", model)
    else:
        report.notes.append(
            f"set embed_model = {model!r} (SKILLSTREAM_EMBED_MODEL) for this home's commands"
        )
    report.notes += _left_behind(settings)
    report.seconds = time.perf_counter() - t0
    return report


def _node_vectors(settings: Settings) -> Callable[..., Any]:
    """A topic node's vector as the reorganizer makes it (``reorganizer.node_vector``): the
    normalised sum of the vectors of the members its text shows, read from its ``member_of``
    rows (``storage.tombstones.node_members``); never its text's embedding."""

    from skillstream.lifecycle.reorganizer import node_vector, shows
    from skillstream.model import Memory
    from skillstream.storage.catalog import open_catalog
    from skillstream.storage.tombstones import members_by_node

    cache: dict[str, Any] = {}

    def skill_texts() -> dict[tuple[str, str], str]:
        """(owner, name) -> the text a task skill's vector embeds (``search_text``)."""
        if "skills" not in cache:
            from skillstream.storage.home import storage_options
            from skillstream.storage.lance import connect
            from skillstream.storage.reembed import STAGING
            from skillstream.storage.task_skills import TABLE

            db = connect(settings.storage.lancedb, storage_options(settings))
            names = set(db.table_names())
            found: dict[tuple[str, str], str] = {}
            for name in (TABLE, TABLE + STAGING):  # mid-swap, only the staged copy is there
                if name in names:
                    rows = (
                        db.open_table(name)
                        .to_lance()
                        .to_table(columns=["owner_id", "name", "search_text"])
                    )
                    found = {(r["owner_id"], r["name"]): r["search_text"] for r in rows.to_pylist()}
                    break
            cache["skills"] = found
        return cache["skills"]

    def load() -> tuple[dict[str, list[str]], dict[str, str]]:
        if "members" not in cache:
            cat = open_catalog(settings.storage, read_only=True)
            try:
                members = members_by_node(cat)
                texts = {
                    r["id"]: r["text"]
                    for r in cat.sql(
                        "SELECT id, text FROM memory_meta WHERE kind <> 'topic'"
                    ).to_pylist()
                }
            finally:
                cat.close()
            cache["members"], cache["texts"] = members, texts
        return cache["members"], cache["texts"]

    def derive(row: dict[str, Any], lookup: Callable[[list[str]], dict[str, Any]]) -> Any:
        if row.get("kind") == "task_skill":  # the item has its task skill's vector
            return skill_texts().get((str(row["owner_id"]), str(row.get("subject") or "")))
        members, texts = load()
        ids = members.get(row["id"], [])
        node = row["text"] or ""
        shown = [
            i
            for i in ids
            if i in texts
            and shows(node, Memory(id=i, owner_id=row["owner_id"], text=texts[i], kind="fact"))
        ]
        vectors = lookup(shown) if shown else {}
        if not shown or any(i not in vectors for i in shown):
            return None
        ranked = [
            (
                Memory(
                    id=i, owner_id=row["owner_id"], text=texts[i], kind="fact", vector=vectors[i]
                ),
                0.0,
            )
            for i in shown
        ]
        return node_vector(ranked)

    return derive


def set_home_key(path: Path, key: str, value: str) -> None:
    """Set the flat ``key`` of a home's ``skillstream.toml`` to the string ``value``, keeping the
    rest of the file as it is (the key's line is replaced, or added at the end)."""
    line = f"{key} = {json.dumps(value)}"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    pattern = re.compile(rf"^{re.escape(key)}\s*=.*$", re.MULTILINE)
    if pattern.search(text):
        text = pattern.sub(line, text, count=1)
    else:
        text = (text if not text or text.endswith("\n") else text + "\n") + line + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _left_behind(settings: Settings) -> list[str]:
    """What the move cannot carry over."""
    notes = []
    scorer = settings.extraction.memory_skill_scorer
    if scorer:
        notes.append(
            f"the memory-skill controller {scorer} was trained on the old model's vectors; train "
            "it again on this one ('memory-skills train') before activating it"
        )
    notes.append(
        "a Bytewax recovery folder of an earlier run holds the old vectors: start the next run "
        "with a new one"
    )
    return notes


def _no_live_runs(settings: Settings) -> None:
    from skillstream.storage.catalog import open_catalog
    from skillstream.storage.leases import refuse_live_runs

    cat = open_catalog(settings.storage, read_only=True)
    try:
        refuse_live_runs(cat, settings.storage.home, "reembed moves a home")
    finally:
        cat.close()


def check_model(model: str) -> None:
    """Refuse a model name that names nothing loadable before the home is touched."""
    from skillstream.embed import MINILM_NAMES
    from skillstream.multilingual import is_use

    if model in MINILM_NAMES or is_use(model) or Path(model).is_dir():
        return
    raise ConfigError(
        f"reembed --to {model!r}: name 'minilm', 'use-multilingual' or a local "
        "sentence-transformers folder (skillstream never downloads models)"
    )
