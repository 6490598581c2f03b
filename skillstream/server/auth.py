"""Who may call the server, and for which owners.

A token is a bearer secret. A token either reads and writes every owner of the home, or is
limited to a set of owners; a limited token never reads or writes another owner's data, and a
memory, contradiction or task skill of another owner looks to it as if it did not exist.

Tokens come from ``--token`` (every owner) and from a tokens file (``--tokens FILE``), a TOML file
with one table per token::

    [[token]]
    sha256 = "9f86d08..."          # or value = "the token itself"
    owners = ["ana", "bob"]        # leave out for every owner

Only the SHA-256 of a token is kept in memory; a request's token is compared by its hash in
constant time. No token at all is allowed only on a loopback address.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from skillstream.errors import ConfigError

COOKIE = "skillstream_token"
"""The cookie the pages' sign-in form sets (the browser's way to send a token)."""


class Denied(Exception):
    """A request whose token is missing or unknown (401), or whose owner it may not touch (404)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Access:
    """What one request may touch: every owner (``owners is None``) or only ``owners``."""

    owners: frozenset[str] | None = None

    @property
    def limited(self) -> bool:
        return self.owners is not None

    def allows(self, owner: str | None) -> bool:
        """Whether this access reads and writes ``owner`` (``None``: every owner at once)."""
        if self.owners is None:
            return True
        return owner is not None and owner in self.owners

    def require(self, owner: str | None) -> None:
        """Refuse an owner this access may not touch, as a 404 (its existence is not told).

        Raises:
            Denied: 404 for another owner; 400 for a limited token asking for every owner.
        """
        if self.allows(owner):
            return
        if owner is None:
            raise Denied(400, "this token is limited to some owners: name one with owner=")
        raise Denied(404, f"no owner {owner!r}")

    def default_owner(self, owner: str | None) -> str | None:
        """The owner a request means: the one it names, else a limited token's only owner."""
        if owner:
            return owner
        if self.owners is not None and len(self.owners) == 1:
            return next(iter(self.owners))
        return None

    def visible(self, owners: Iterable[str]) -> list[str]:
        """Those of ``owners`` this access may see, in their order."""
        return [o for o in owners if self.allows(o)]


FULL = Access()


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class Tokens:
    """The tokens a server accepts (none: every request has full access).

    Args:
        entries: ``(sha256 hex digest, owners or None)`` pairs.
    """

    def __init__(self, entries: Sequence[tuple[str, frozenset[str] | None]] = ()) -> None:
        self._entries = [(bytes.fromhex(h), owners) for h, owners in entries]

    @classmethod
    def load(cls, tokens: Sequence[str] = (), file: str | Path | None = None) -> Tokens:
        """Tokens from ``--token`` values (every owner) and a tokens file.

        Raises:
            ConfigError: an unreadable file, a table with neither ``value`` nor ``sha256``, an
                empty token, or ``owners`` that is not a list of names.
        """
        entries: list[tuple[str, frozenset[str] | None]] = []
        for t in tokens:
            if not t.strip():
                raise ConfigError("an empty --token is not a token")
            entries.append((digest(t), None))
        if file is not None:
            entries.extend(_read_file(Path(file)))
        return cls(entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def access(self, token: str | None) -> Access:
        """The access a request's token gives.

        Raises:
            Denied: 401 when tokens are required and ``token`` is missing or unknown.
        """
        if not self._entries:
            return FULL
        if not token:
            raise Denied(401, "this server needs a token: send 'Authorization: Bearer <token>'")
        got = hashlib.sha256(token.encode("utf-8")).digest()
        found: Access | None = None
        for h, owners in self._entries:  # every entry is compared: the time tells nothing
            if hmac.compare_digest(h, got) and found is None:
                found = Access(owners)
        if found is None:
            raise Denied(401, "unknown token")
        return found


def _read_file(path: Path) -> list[tuple[str, frozenset[str] | None]]:
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"cannot read the tokens file {path}: {e}") from e
    out: list[tuple[str, frozenset[str] | None]] = []
    for i, entry in enumerate(doc.get("token") or []):
        where = f"{path}, token {i + 1}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: expected a [[token]] table")
        if "sha256" in entry:
            h = str(entry["sha256"]).strip().lower()
            if len(h) != 64 or any(c not in "0123456789abcdef" for c in h):
                raise ConfigError(f"{where}: sha256 must be 64 hexadecimal digits")
        elif str(entry.get("value") or "").strip():
            h = digest(str(entry["value"]))
        else:
            raise ConfigError(f"{where}: give the token as value = ... or sha256 = ...")
        owners = entry.get("owners")
        if owners is not None and (
            not isinstance(owners, list) or not all(isinstance(o, str) and o for o in owners)
        ):
            raise ConfigError(f"{where}: owners must be a list of owner ids")
        out.append((h, None if owners is None else frozenset(owners)))
    if not out:
        raise ConfigError(f"the tokens file {path} holds no [[token]] table")
    return out


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip() or None
