"""ArtifactStore on a local folder, memory:// and s3:// (moto), and the oss:// wiring."""

from __future__ import annotations

import uuid

import pytest

from skillstream.errors import InputError
from skillstream.storage.artifacts import ArtifactStore

from .conftest import BUCKET


def _exercise(store: ArtifactStore, url_prefix: str) -> None:
    url = store.put("skills/travel/1.zip", b"PK\x03\x04zip")
    assert url == f"{url_prefix}/skills/travel/1.zip"
    store.put("skills/baking.zip", b"bread")
    store.put("reports/r.json", b"{}")
    assert store.get(url) == b"PK\x03\x04zip"
    assert store.get("skills/baking.zip") == b"bread"
    assert store.exists("skills/baking.zip") and not store.exists("skills/none.zip")
    assert store.list() == ["reports/r.json", "skills/baking.zip", "skills/travel/1.zip"]
    assert store.list("skills/") == ["skills/baking.zip", "skills/travel/1.zip"]
    assert store.list("skills/tr") == ["skills/travel/1.zip"]
    assert store.list("nothing/") == []
    store.put("skills/baking.zip", b"rye")  # overwrite
    assert store.get(store.url("skills/baking.zip")) == b"rye"
    assert store.delete(url) is True
    assert store.delete(url) is False
    assert store.list("skills/") == ["skills/baking.zip"]
    with pytest.raises(FileNotFoundError):
        store.get("skills/none.zip")
    for bad in (
        "../outside",
        "a/../../b",
        "",
        "/etc/passwd",
        "s3://elsewhere/x",
        "memory://elsewhere/x",
    ):
        with pytest.raises(InputError):
            store.get(bad)


def test_local_folder(tmp_path):
    root = tmp_path / "not" / "yet" / "there"
    store = ArtifactStore(str(root))
    _exercise(store, f"file://{root}")
    assert (root / "skills" / "baking.zip").read_bytes() == b"rye"
    assert not [p for p in root.rglob("*") if ".tmp-" in p.name]


def test_memory():
    name = f"art-{uuid.uuid4().hex}"
    _exercise(ArtifactStore(f"memory://{name}"), f"memory://{name}")


def test_s3(s3):
    endpoint, options = s3
    store = ArtifactStore(f"s3://{BUCKET}/artifacts", storage_options=options)
    _exercise(store, f"s3://{BUCKET}/artifacts")
    import s3fs

    fs = s3fs.S3FileSystem(
        key="testing", secret="testing", endpoint_url=endpoint, skip_instance_cache=True
    )
    assert fs.cat(f"{BUCKET}/artifacts/skills/baking.zip") == b"rye"


def test_s3_with_fsspec_style_keys(s3):
    endpoint, _ = s3
    store = ArtifactStore(
        f"s3://{BUCKET}/a", {"key": "testing", "secret": "testing", "endpoint_url": endpoint}
    )
    assert store.get(store.put("x.txt", b"1")) == b"1"


def test_oss_options_reach_ossfs():
    store = ArtifactStore(
        "oss://bucket/prefix",
        {
            "oss_endpoint": "http://127.0.0.1:1",
            "oss_access_key_id": "AK",
            "oss_secret_access_key": "SK",
        },
    )
    assert type(store.fs).__name__ == "OSSFileSystem"
    assert store.root_url == "oss://bucket/prefix"
    assert store.url("a/b.zip") == "oss://bucket/prefix/a/b.zip"
