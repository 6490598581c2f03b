"""skillstream.storage: LanceDB tables, the DuckDB catalog, the artifact store, the store sink.

Modules:
    lance: ``MemoryIndex`` and the generic ``LanceTable`` (upsert by key, vector/FTS/hybrid search).
    catalog: ``Catalog``, the DuckDB file (DDL from ``skillstream.tables``, upserts, SQL views).
    artifacts: ``ArtifactStore`` on fsspec (local, ``memory://``, ``s3://``, ``oss://``).
    options: one ``storage_options`` dict translated for LanceDB and fsspec.
    home: ``open_stores`` / ``Stores``, every store of a home at once.
    writer: ``write_results``, the one write path of span results (no Bytewax).
    sinks: ``ResultSink``, the Bytewax sink that runs ``write_results`` (the only Bytewax import).
    task_skills: ``TaskSkillIndex``, the LanceDB ``task_skills`` table and its catalog rows.
    reconcile: rollback of LanceDB rows the catalog never committed.

Names are imported lazily, so ``import skillstream.storage`` loads neither LanceDB nor Bytewax.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "MemoryIndex": "lance",
    "LanceTable": "lance",
    "Catalog": "catalog",
    "CatalogLockedError": "catalog",
    "register_view": "catalog",
    "ArtifactStore": "artifacts",
    "Stores": "home",
    "open_stores": "home",
    "ResultSink": "sinks",
    "write_results": "writer",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
