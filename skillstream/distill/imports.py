"""Reading a task-skill zip safely (``skills import ZIP``).

Everything is checked before anything is written, and the archive is read into memory, never
extracted to disk. An archive is refused, with an error naming the member and the rule, when

* a member path is absolute (``/etc/x``, ``C:\\x``) or climbs out with ``..``;
* a member is a symbolic link (or any other non-regular file);
* a member is larger than ``max_member_bytes`` uncompressed, the members together are larger than
  ``max_total_bytes``, or there are more than ``max_members`` (zip bombs);
* the archive does not hold exactly one top folder, or that folder's name is not a valid task-skill
  name, or its ``SKILL.md`` breaks the Agent Skills rules (``package.validate_files``).
"""

from __future__ import annotations

import io
import stat
import zipfile
import zlib
from pathlib import Path

from skillstream.distill.package import validate_files
from skillstream.distill.record import name_problem
from skillstream.errors import InputError

MAX_MEMBER_BYTES = 1_000_000
MAX_TOTAL_BYTES = 10_000_000
MAX_MEMBERS = 500


def read_zip(
    source: str | Path | bytes,
    *,
    max_member_bytes: int = MAX_MEMBER_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
    max_members: int = MAX_MEMBERS,
) -> tuple[str, dict[str, bytes]]:
    """The folder name and files (``{path inside the folder: bytes}``) of a task-skill zip.

    Args:
        source: A path to the zip, or its bytes.
        max_member_bytes: Largest allowed uncompressed member.
        max_total_bytes: Largest allowed uncompressed total.
        max_members: Most members allowed.

    Raises:
        InputError: for every rule in the module docstring; nothing has been written then.
    """
    label = "the archive" if isinstance(source, bytes) else str(source)
    try:
        data = source if isinstance(source, bytes) else Path(source).read_bytes()
    except OSError as e:
        raise InputError(f"cannot read {label}: {e}") from None
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as e:
        raise InputError(
            f"{label} is not a zip archive ({e}); expected <name>.zip holding <name>/SKILL.md"
        ) from None
    infos = zf.infolist()
    if len(infos) > max_members:
        raise InputError(f"{label} holds {len(infos)} members; at most {max_members} are accepted")
    total = 0
    tops: set[str] = set()
    members: list[zipfile.ZipInfo] = []
    for info in infos:
        name = info.filename
        _check_path(name, label)
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise InputError(
                f"{label}: member {name!r} is a symbolic link; "
                f"links are not accepted in a task-skill package"
            )
        if mode and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise InputError(f"{label}: member {name!r} is not a regular file")
        if info.file_size > max_member_bytes:
            raise InputError(
                f"{label}: member {name!r} is {info.file_size} bytes uncompressed; at most "
                f"{max_member_bytes} are accepted per file"
            )
        total += info.file_size
        if total > max_total_bytes:
            raise InputError(
                f"{label}: members add up to more than {max_total_bytes} bytes uncompressed"
            )
        tops.add(name.split("/", 1)[0])
        if not info.is_dir():
            members.append(info)
    if len(tops) != 1:
        raise InputError(
            f"{label} must hold exactly one top folder named "
            f"after the task skill; found {sorted(tops) or 'none'}"
        )
    folder = tops.pop()
    problem = name_problem(folder)
    if problem:
        raise InputError(
            f"{label}: the folder {folder!r} is not a valid task-skill name: {problem}"
        )
    files: dict[str, bytes] = {}
    for info in members:
        if "/" not in info.filename:
            raise InputError(f"{label}: file {info.filename!r} lies outside the folder {folder!r}")
        rel = info.filename.split("/", 1)[1]
        try:
            with zf.open(info) as fh:
                content = fh.read(max_member_bytes + 1)
        except (zipfile.BadZipFile, zlib.error, EOFError) as e:  # a bad checksum, cut data
            raise InputError(f"{label}: member {info.filename!r} cannot be read ({e})") from None
        if len(content) > max_member_bytes:  # the header lied about the size
            raise InputError(
                f"{label}: member {info.filename!r} is larger than {max_member_bytes} bytes"
            )
        files[rel] = content
    problems = validate_files(folder, files)
    if problems:
        raise InputError(f"{label} is not a valid task-skill package: " + "; ".join(problems))
    return folder, files


def _check_path(name: str, label: str) -> None:
    clean = name.replace("\\", "/")
    parts = clean.split("/")
    if clean.startswith("/") or (len(clean) > 1 and clean[1] == ":"):
        raise InputError(
            f"{label}: member {name!r} has an absolute path; members must be relative paths"
        )
    if ".." in parts:
        raise InputError(f"{label}: member {name!r} climbs out of the folder with '..'")
    if "\\" in name:
        raise InputError(f"{label}: member {name!r} uses backslashes; zip paths use '/'")
    if "\x00" in name:
        raise InputError(f"{label}: member {name!r} has a NUL character in its name")
