"""Publishing task-skill packages through fsspec: a local folder, S3 or Alibaba OSS.

Where: ``skills_uri`` (``SKILLSTREAM_SKILLS_URI``), by default ``<artifacts>/task-skills``,
that is ``<home>/artifacts/task-skills``. Credentials and endpoints: ``skills_storage_options`` when
given, else the home's ``storage_options`` (one dict, LanceDB-style keys; see
:mod:`skillstream.storage.options`). Examples::

    SKILLSTREAM_SKILLS_URI=s3://team-bucket/skills
    SKILLSTREAM_SKILLS_STORAGE_OPTIONS='{"aws_access_key_id": "...", "aws_secret_access_key": "...",
                                         "region": "eu-west-1"}'

    SKILLSTREAM_SKILLS_URI=oss://team-bucket/skills      # needs the [oss] extra (ossfs)
    SKILLSTREAM_SKILLS_STORAGE_OPTIONS='{"oss_endpoint": "https://oss-cn-hangzhou.aliyuncs.com",
        "oss_access_key_id": "...", "oss_secret_access_key": "..."}'

Layout: ``<owner>/<name>/v<version>/<name>.zip``. Every version gets its own path, so publishing a
new version never touches an earlier one (no destructive update), and two owners' task skills of the
same name never collide. An owner id that is not a plain file name (letters, digits, ``.``, ``_``,
``-``) is written as ``~`` plus a hash of it, which no plain name can equal.

The zip bytes depend only on the task skill's content, so publishing the same version twice (a
replay after a crash) rewrites an identical file.
"""

from __future__ import annotations

import re

from skillstream.distill.package import build_zip
from skillstream.distill.record import TaskSkill
from skillstream.ids import stable_id
from skillstream.settings import StorageSettings
from skillstream.storage.artifacts import ArtifactStore, skills_options

_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def skills_uri(storage: StorageSettings) -> str:
    """Where packages are published: ``skills_uri`` or ``<artifacts>/task-skills``."""
    return storage.skills


def owner_dir(owner_id: str) -> str:
    """The folder name of an owner: the id itself when it is a plain name, else ``~<hash>``."""
    if _PLAIN.match(owner_id) and owner_id not in (".", ".."):
        return owner_id
    return "~" + stable_id("owner", owner_id, size=8)


def package_path(owner_id: str, name: str, version: int) -> str:
    """``<owner>/<name>/v<version>/<name>.zip``, relative to the skills URI."""
    return f"{owner_dir(owner_id)}/{name}/v{version}/{name}.zip"


class Publisher:
    """Writes and reads task-skill packages under one URI.

    Args:
        uri: Root URI of the packages.
        storage_options: Options for that URI.

    Raises:
        MissingExtraError: when the URI's filesystem (``s3fs``, ``ossfs``) is not installed.
    """

    def __init__(self, uri: str, storage_options: dict | None = None) -> None:
        self.uri = uri
        self.store = ArtifactStore(uri, storage_options)

    @classmethod
    def from_settings(cls, storage: StorageSettings) -> Publisher:
        """The publisher of the ``storage`` settings group (``skills_uri``, its options)."""
        return cls(skills_uri(storage), skills_options(storage))

    def publish(self, skill: TaskSkill) -> str:
        """Write the task skill's zip at its version's path and return the file's URL."""
        return self.store.put(
            package_path(skill.owner_id, skill.name, skill.version), build_zip(skill)
        )

    def read(self, url_or_path: str) -> bytes:
        """The bytes of a published package (by the URL stored with the skill, or its path)."""
        return self.store.get(url_or_path)

    def exists(self, url_or_path: str) -> bool:
        return self.store.exists(url_or_path)

    def versions(self, owner_id: str, name: str) -> list[str]:
        """Relative paths of every published version of one task skill, oldest first."""
        prefix = f"{owner_dir(owner_id)}/{name}/v"
        found = [p for p in self.store.list(prefix) if p.endswith(f"/{name}.zip")]
        return sorted(found, key=lambda p: int(p[len(prefix) :].split("/", 1)[0] or 0))
