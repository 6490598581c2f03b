"""Memory search used by the CLI, the MCP server and the evaluation."""

from __future__ import annotations

from typing import Any

from skillstream.config import Settings
from skillstream.embed import get_embedder


def search_memories(
    settings: Settings, query: str, *, owner: str | None = None, k: int = 10, index: Any = None
) -> list[dict[str, Any]]:
    """Hybrid search over live memories; each hit carries its text, score and provenance."""
    from skillstream.storage.lance import MemoryIndex

    embedder = get_embedder(settings.embed_model, settings.embed_batch)
    idx = index or MemoryIndex(settings.lancedb, embedder.dim, settings.storage_options)
    vec = embedder.encode_one(query)
    return idx.search(query, vec, owner=owner, k=k)
