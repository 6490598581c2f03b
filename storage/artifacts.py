"""Artifact store: files (task-skill zips, reports) under one fsspec URI.

Any fsspec URI works: a local folder, ``memory://``, ``s3://bucket/prefix`` (``s3fs``, extra
``[s3]``), ``oss://bucket/prefix`` (``ossfs``, extra ``[oss]``). Credentials come from the same
``storage_options`` dict as LanceDB's, translated by
:func:`skillstream.storage.options.fsspec_options`.

Records store the full URL that :meth:`ArtifactStore.put` returns; :meth:`ArtifactStore.get`
accepts it or a path relative to the store. Paths are confined to the store: absolute paths,
``..`` and URLs outside the root are refused. Local writes go to a temporary file first and are
renamed into place, so a reader never sees half a file.

Example:
    >>> store = ArtifactStore("memory://docs")
    >>> url = store.put("skills/a.zip", b"PK")
    >>> url, store.get(url), store.list("skills/")
    ('memory://docs/skills/a.zip', b'PK', ['skills/a.zip'])
"""

from __future__ import annotations

import posixpath
import uuid
from typing import Any

import fsspec

from skillstream.errors import InputError, MissingExtraError
from skillstream.settings import StorageSettings
from skillstream.storage.options import fsspec_options, protocol_of

_EXTRAS = {"s3": ("s3fs", "s3"), "s3a": ("s3fs", "s3"), "oss": ("ossfs", "oss")}
_TMP = ".tmp-"


class ArtifactStore:
    """Files under one URI.

    Args:
        uri: Root of the store (local path or fsspec URL).
        storage_options: One options dict (LanceDB-style keys; fsspec aliases accepted).

    Raises:
        MissingExtraError: when the filesystem for the URI's protocol is not installed.
    """

    def __init__(self, uri: str, storage_options: dict | None = None) -> None:
        self.uri = uri
        proto = protocol_of(uri)
        try:
            fs, root = fsspec.core.url_to_fs(uri, **fsspec_options(uri, storage_options))
        except ImportError as e:
            if proto in _EXTRAS:
                raise MissingExtraError(*_EXTRAS[proto]) from e
            raise
        self.fs: Any = fs
        self.root = root.rstrip("/") or "/"
        self.local = proto in ("", "file", "local")
        self._proto = proto
        self.root_url = self._url(self.root)

    # ------------------------------------------------------------------ paths
    def _rel(self, rel_path: str) -> str:
        rel = rel_path.replace("\\", "/")
        parts = [p for p in rel.split("/") if p not in ("", ".")]
        if rel.startswith("/") or ".." in parts or not parts:
            raise InputError(
                f"artifact path {rel_path!r} must be relative to the store, without '..'"
            )
        return "/".join(parts)

    def _path(self, url_or_rel: str) -> str:
        """The filesystem path for a URL of this store or a relative path."""
        is_url = "://" in url_or_rel
        if is_url or (self.local and posixpath.isabs(url_or_rel.replace("\\", "/"))):
            path = self.fs._strip_protocol(url_or_rel).rstrip("/")
            if is_url and protocol_of(url_or_rel) not in _protocols(self.fs):
                path = ""
            if path != self.root and not path.startswith(self.root.rstrip("/") + "/"):
                raise InputError(
                    f"{url_or_rel!r} is not inside the artifact store {self.root_url!r}"
                )
            self._rel(path[len(self.root) :].lstrip("/"))
            return path
        return self.root.rstrip("/") + "/" + self._rel(url_or_rel)

    def _url(self, path: str) -> str:
        if self.local:
            return self.fs.unstrip_protocol(path)  # file:///abs/path
        return f"{self._proto}://{path.lstrip('/')}"

    def url(self, rel_path: str) -> str:
        """The full URL of a path in the store (what records keep)."""
        return self._url(self._path(rel_path))

    def relative(self, url_or_rel: str) -> str:
        """The path of a file of the store relative to its root (what ``put`` takes).

        Raises:
            InputError: the URL is not inside the store.
        """
        return self._path(url_or_rel)[len(self.root) :].lstrip("/")

    # ------------------------------------------------------------------ operations
    def put(self, rel_path: str, data: bytes) -> str:
        """Write ``data`` at ``rel_path`` (replacing it) and return the file's full URL."""
        path = self._path(rel_path)
        if self.local:
            parent = posixpath.dirname(path)
            self.fs.makedirs(parent, exist_ok=True)
            tmp = f"{parent}/{_TMP}{uuid.uuid4().hex}-{posixpath.basename(path)}"
            self.fs.pipe_file(tmp, data)
            try:
                self.fs.mv(tmp, path)
            finally:
                if self.fs.exists(tmp):
                    self.fs.rm_file(tmp)
        else:
            self.fs.pipe_file(path, data)
        return self._url(path)

    def get(self, url_or_rel: str) -> bytes:
        """Read a file by its URL or relative path.

        Raises:
            FileNotFoundError: when there is no such file.
        """
        return self.fs.cat_file(self._path(url_or_rel))

    def exists(self, url_or_rel: str) -> bool:
        """Whether a file exists."""
        path = self._path(url_or_rel)
        self.fs.invalidate_cache(path)
        return bool(self.fs.isfile(path))

    def list(self, prefix: str = "") -> list[str]:
        """Relative paths of all files whose path starts with ``prefix``, sorted."""
        clean = prefix.replace("\\", "/").lstrip("/")
        if clean and ".." in clean.split("/"):
            raise InputError(f"artifact prefix {prefix!r} must not contain '..'")
        base = self.root.rstrip("/")
        folder = posixpath.dirname(clean)
        start = f"{base}/{folder}" if folder else base
        self.fs.invalidate_cache(start)
        try:
            found = self.fs.find(start)
        except FileNotFoundError:
            return []
        out = []
        for p in found:
            rel = p[len(base) :].lstrip("/")
            if rel.startswith(clean) and not posixpath.basename(rel).startswith(_TMP):
                out.append(rel)
        return sorted(out)

    def delete(self, url_or_rel: str) -> bool:
        """Remove a file; ``False`` when it was not there."""
        path = self._path(url_or_rel)
        self.fs.invalidate_cache(path)
        if not self.fs.isfile(path):
            return False
        self.fs.rm_file(path)
        return True


def skills_options(storage: StorageSettings) -> dict | None:
    """Storage options of the task-skill packages: ``skills_storage_options``, else the home's."""
    own = storage.skills_storage_options or storage.storage_options
    return dict(own) if own else None


def skills_store(storage: StorageSettings) -> ArtifactStore:
    """The store task-skill packages are published in (``skills_uri``, by default
    ``<artifacts>/task-skills``, with :func:`skills_options`)."""
    return ArtifactStore(storage.skills, skills_options(storage))


def _protocols(fs: Any) -> tuple[str, ...]:
    proto = fs.protocol
    return (proto,) if isinstance(proto, str) else tuple(proto)
