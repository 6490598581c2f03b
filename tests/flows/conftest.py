"""Fixtures for flow tests: settings and helpers to read back the stores (the conversation files
come from ``tests.factories``)."""

from __future__ import annotations

import pytest

from skillstream.settings import Settings


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings.load(home=str(tmp_path / "home"), epoch_interval_s=0.0, span_tokens=128)


def memory_ids(settings: Settings, dim: int = 384) -> list[str]:
    from skillstream.storage.lance import MemoryIndex

    idx = MemoryIndex(settings.storage.lancedb, dim, settings.storage.storage_options)
    return sorted(idx.table.to_arrow().column("id").to_pylist())
