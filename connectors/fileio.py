"""Small file helpers shared by the file source and the dataset adapters."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import BinaryIO

GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(path: str | Path) -> bool:
    """Whether the file starts with the gzip magic bytes (the suffix is not trusted)."""
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def open_binary(path: str | Path) -> BinaryIO:
    """Open a file for reading bytes, decompressing it on the fly when it is gzip."""
    if is_gzip(path):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")
