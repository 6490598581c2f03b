"""File helpers shared by the file source and the dataset adapters: local paths and fsspec URIs.

An :class:`InputFile` is one file to read, on the local disk or anywhere fsspec reaches
(``s3://bucket/logs/a.jsonl.gz``, ``oss://...``, ``memory://...``); :func:`open_binary` opens a
path or an ``InputFile`` for reading bytes and decompresses gzip on the fly (told by the first
bytes, not the name).
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class InputFile:
    """One input file: a local path (``fs`` is ``None``) or a path on an fsspec filesystem."""

    key: str
    """How the file is named in positions, dead letters and partitions: the local path as given,
    or the full URI (``s3://bucket/logs/a.jsonl``)."""
    path: str
    """The path on ``fs`` (or the local path)."""
    fs: Any = None

    @classmethod
    def local(cls, path: str | Path) -> InputFile:
        return cls(key=str(path), path=str(path))

    @property
    def local_path(self) -> Path | None:
        """The local path, or ``None`` for a remote file."""
        return Path(self.path) if self.fs is None else None

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    def exists(self) -> bool:
        return Path(self.path).exists() if self.fs is None else bool(self.fs.exists(self.path))

    def size(self) -> int:
        return Path(self.path).stat().st_size if self.fs is None else int(self.fs.size(self.path))

    def open_raw(self) -> BinaryIO:
        """The file's bytes as stored (no decompression), seekable."""
        if self.fs is None:
            return open(self.path, "rb")
        return self.fs.open(self.path, "rb")  # type: ignore[no-any-return]

    def __str__(self) -> str:
        return self.key


def is_gzip(path: str | Path | InputFile) -> bool:
    """Whether the file starts with the gzip magic bytes (the suffix is not trusted)."""
    with _as_input(path).open_raw() as fh:
        return fh.read(2) == GZIP_MAGIC


def open_binary(path: str | Path | InputFile) -> BinaryIO:
    """Open a file for reading bytes, decompressing it on the fly when it is gzip."""
    fh = _as_input(path).open_raw()
    try:
        head = fh.read(2)
        fh.seek(0)
    except BaseException:
        fh.close()
        raise
    if head == GZIP_MAGIC:
        return _GzipReader(fh)  # type: ignore[return-value]
    return fh


class _GzipReader(gzip.GzipFile):
    """A gzip reader that closes the file it reads from when it is closed."""

    def __init__(self, raw: BinaryIO) -> None:
        super().__init__(fileobj=raw, mode="rb")
        self._raw = raw

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def _as_input(path: str | Path | InputFile) -> InputFile:
    return path if isinstance(path, InputFile) else InputFile.local(path)
