"""One ``storage_options`` dict, translated for each backend.

Users write a single dict of LanceDB-style keys (``aws_access_key_id``, ``aws_secret_access_key``,
``region``, ``endpoint``, ``allow_http``; ``oss_endpoint``, ``oss_access_key_id``, ...) in
``Settings.storage_options``. LanceDB (Rust ``object_store``) and fsspec filesystems (``s3fs``,
``ossfs``) name the same things differently; the two functions here translate the dict once per
backend. The fsspec spellings (``key``, ``secret``, ``endpoint_url``, ``region_name``) are accepted
as aliases, so a dict written for either side works for both.

Keys a backend does not know are dropped for fsspec (s3fs would pass them to botocore) and passed
through unchanged for LanceDB (which validates them itself).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

# canonical name -> accepted spellings (the canonical one first)
_S3_ALIASES = {
    "access_key_id": ("aws_access_key_id", "access_key_id", "key"),
    "secret_access_key": ("aws_secret_access_key", "secret_access_key", "secret"),
    "session_token": ("aws_session_token", "session_token", "token"),
    "region": ("region", "aws_region", "region_name"),
    "endpoint": ("endpoint", "aws_endpoint", "endpoint_url", "aws_endpoint_url"),
}
_OSS_ALIASES = {
    "access_key_id": ("oss_access_key_id", "access_key_id", "key"),
    "secret_access_key": ("oss_secret_access_key", "secret_access_key", "secret"),
    "session_token": ("oss_security_token", "security_token", "token"),
    "region": ("oss_region", "region"),
    "endpoint": ("oss_endpoint", "endpoint", "endpoint_url"),
}
_LANCE_S3 = {
    "access_key_id": "aws_access_key_id",
    "secret_access_key": "aws_secret_access_key",
    "session_token": "aws_session_token",
    "region": "region",
    "endpoint": "endpoint",
}
_LANCE_OSS = {
    "access_key_id": "oss_access_key_id",
    "secret_access_key": "oss_secret_access_key",
    "session_token": "oss_security_token",
    "region": "oss_region",
    "endpoint": "oss_endpoint",
}
_LOCAL = ("", "file", "local", "memory")


def protocol_of(uri: str) -> str:
    """The scheme of a URI (``s3``, ``oss``, ``memory``); ``""`` for a plain path."""
    head, sep, _ = uri.partition("://")
    return head.lower() if sep else ""


def _as_dict(options: Any) -> dict[str, Any]:
    """A plain dict; anything but a mapping (``None``, the ``dict`` type) counts as empty."""
    return dict(options) if isinstance(options, Mapping) else {}


def _truthy(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _pick(options: Mapping[str, Any], aliases: dict[str, tuple[str, ...]]) -> tuple[dict, dict]:
    """Split options into {canonical: value} for known keys and the rest."""
    known: dict[str, Any] = {}
    used: set[str] = set()
    for canon, names in aliases.items():
        for name in names:
            if name in options and options[name] not in (None, ""):
                known.setdefault(canon, options[name])
                used.add(name)
    rest = {k: v for k, v in options.items() if k not in used}
    return known, rest


def lance_options(uri: str, options: Mapping[str, Any] | None) -> dict[str, str] | None:
    """Storage options for ``lancedb.connect`` on ``uri``.

    Values become strings (LanceDB wants ``"true"``, not ``True``). For S3 with an ``http://``
    endpoint, ``allow_http`` is set unless given. Local and ``memory://`` URIs get ``None``.
    """
    proto = protocol_of(uri)
    options = _as_dict(options)
    if proto in _LOCAL or not options:
        return None
    if proto in ("s3", "s3a"):
        known, rest = _pick(options, _S3_ALIASES)
        out = {_LANCE_S3[k]: v for k, v in known.items()}
        rest.pop("client_kwargs", None)
        if str(known.get("endpoint", "")).startswith("http://"):
            rest.setdefault("allow_http", "true")
    elif proto == "oss":
        known, rest = _pick(options, _OSS_ALIASES)
        out = {_LANCE_OSS[k]: v for k, v in known.items()}
    else:
        out, rest = {}, dict(options)
    out.update(rest)
    return {
        k: (("true" if v else "false") if isinstance(v, bool) else str(v)) for k, v in out.items()
    }


def fsspec_options(uri: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Keyword arguments for the fsspec filesystem that serves ``uri``.

    * local paths and ``memory://``: none;
    * ``s3://`` (s3fs): ``key``, ``secret``, ``token``, ``endpoint_url``,
      ``client_kwargs={"region_name": ...}``, ``anon`` (from ``skip_signature``/``anon``), plus any
      other keyword ``S3FileSystem`` takes;
    * ``oss://`` (ossfs): ``endpoint``, ``key``, ``secret``, ``token``;
    * other protocols: the options unchanged.
    """
    proto = protocol_of(uri)
    options = _as_dict(options)
    if proto in _LOCAL:
        return {}
    if proto in ("s3", "s3a"):
        known, rest = _pick(options, _S3_ALIASES)
        out: dict[str, Any] = {}
        for canon, name in (
            ("access_key_id", "key"),
            ("secret_access_key", "secret"),
            ("session_token", "token"),
            ("endpoint", "endpoint_url"),
        ):
            if canon in known:
                out[name] = known[canon]
        client_kwargs = dict(rest.pop("client_kwargs", None) or {})
        if "region" in known:
            client_kwargs.setdefault("region_name", known["region"])
        if client_kwargs:
            out["client_kwargs"] = client_kwargs
        anon = rest.pop("skip_signature", rest.pop("anon", None))
        if anon is not None:
            out["anon"] = _truthy(anon)
        params = _s3fs_params()
        for k, v in rest.items():
            if k in params:
                out[k] = _truthy(v) if isinstance(params[k], bool) else v
        return out
    if proto == "oss":
        known, _ = _pick(options, _OSS_ALIASES)
        names = {
            "endpoint": "endpoint",
            "access_key_id": "key",
            "secret_access_key": "secret",
            "session_token": "token",
        }
        return {names[k]: v for k, v in known.items() if k in names}
    return options


def _s3fs_params() -> dict[str, Any]:
    """Other keywords of ``S3FileSystem`` with their defaults (to coerce ``"false"`` to bool)."""
    try:
        from s3fs import S3FileSystem
    except ImportError:  # pragma: no cover - only without the s3 extra
        return {}
    handled = {"self", "kwargs", "key", "secret", "token", "endpoint_url", "client_kwargs", "anon"}
    return {
        name: p.default
        for name, p in inspect.signature(S3FileSystem.__init__).parameters.items()
        if name not in handled and p.kind is not inspect.Parameter.VAR_KEYWORD
    }
