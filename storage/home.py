"""Opening every store of a skillstream home at once.

A home is the set of stores one :class:`~skillstream.settings.Settings` points at: the LanceDB
database (``settings.lancedb``), the DuckDB catalog file (``settings.catalog``) and the artifact
store (``settings.artifacts``), all sharing ``settings.storage_options``.

Example:
    >>> with open_stores(Settings.load(home=str(tmp)), dim=384) as stores:  # doctest: +SKIP
    ...     stores.catalog.sql("SELECT count(*) FROM memories")
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from skillstream.embed import identity
from skillstream.errors import InputError
from skillstream.settings import Settings
from skillstream.storage.artifacts import ArtifactStore
from skillstream.storage.catalog import Catalog, catalog_exists, open_catalog
from skillstream.storage.lance import MEMORY_INDEXES, IndexPolicy, MemoryIndex


@dataclass
class Stores:
    """The open stores of one home."""

    settings: Settings
    index: MemoryIndex
    catalog: Catalog
    artifacts: ArtifactStore

    def refresh(self) -> None:
        """Let SQL see the latest LanceDB versions (views are pinned to the version at attach)."""
        self.catalog.refresh_lance()

    def close(self, *, checkpoint: bool = True) -> None:
        """Close the catalog connection (LanceDB and fsspec hold nothing that needs closing);
        ``checkpoint``: see ``Catalog.close``."""
        self.catalog.close(checkpoint=checkpoint)

    def __enter__(self) -> Stores:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def require_home(settings: Settings, then: str) -> Settings:
    """``settings``, once it is sure that their home holds a catalog (something was stored there).

    Whatever only reads a home calls it first, so that a mistyped home is reported and nothing is
    created there: only the commands that write (run, add, import) create a home.

    Args:
        settings: The home.
        then: What to do instead, for the message (``"run 'skillstream run' first"``).

    Raises:
        InputError: the home has no catalog; the message names the home and ``then``.
    """
    if not catalog_exists(settings.storage):
        raise InputError(
            f"no skillstream home at {settings.storage.home} (no catalog at "
            f"{settings.storage.catalog}): nothing was stored in this home yet and nothing was "
            f"created. {then}"
        )
    return settings


def open_index(settings: Settings, dim: int, *, create: bool = True) -> MemoryIndex:
    """The home's LanceDB memories table, checked against the configured embedding model.

    Args:
        settings: Where the table is and which model embeds its texts.
        dim: Embedding width of the configured model.
        create: Create the table when missing (``False``: a missing table reads as empty).

    Raises:
        ConfigError: when the table's vectors come from another model (see ``MemoryIndex``).
    """
    indexes = IndexPolicy(
        scalar_rows=settings.storage.index_scalar_rows,
        vector_rows=settings.storage.index_vector_rows,
        vector_type=settings.storage.index_vector_type,
        scalar=MEMORY_INDEXES,
    )
    return MemoryIndex(
        settings.storage.lancedb,
        dim,
        storage_options(settings),
        create=create,
        embedding=identity(settings.embedding),
        indexes=indexes,
        cache_mb=settings.storage.lance_cache_mb,
    )


def storage_options(settings: Settings) -> dict | None:
    """The settings' storage options as a dict, or ``None`` when there are none."""
    options = settings.storage.storage_options
    # A Settings default of the ``dict`` type itself (not an instance) counts as no options.
    return dict(options) if isinstance(options, Mapping) and options else None


def open_stores(settings: Settings, dim: int, read_only: bool = False) -> Stores:
    """Open (and, unless read-only, create) the stores of a home.

    Args:
        settings: Where the stores are.
        dim: Embedding width of the memories table.
        read_only: Open the catalog read-only and create nothing; a missing LanceDB table
            reads as empty. Fails with ``CatalogLockedError`` while a writer holds the catalog.

    Returns:
        The stores, with the LanceDB tables attached to the catalog's SQL views.
    """
    options = storage_options(settings)
    index = open_index(settings, dim, create=not read_only)
    catalog = open_catalog(settings.storage, read_only=read_only)
    try:
        if not read_only:
            catalog.publish_memories_view(settings.storage.lancedb)
        catalog.attach_lance(settings.storage.lancedb, options, db=index.db)
        artifacts = ArtifactStore(settings.storage.artifacts, options)
    except BaseException:
        catalog.close()
        raise
    return Stores(settings, index, catalog, artifacts)
