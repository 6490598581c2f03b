"""Publishing packages: local layout, versions kept, owners apart, S3 on moto, OSS by config."""

from __future__ import annotations

import io
import zipfile

from skillstream.distill.package import validate_zip
from skillstream.distill.record import TaskSkill
from skillstream.services.publishing import (
    Publisher,
    owner_dir,
    package_path,
    skills_options,
    skills_uri,
)
from skillstream.settings import Settings
from tests.distill.conftest import BUCKET


def skill(owner: str, version: int = 1, step: str = "Run the tests.") -> TaskSkill:
    return TaskSkill.new(
        owner,
        "deploy-app",
        title="Deploy app",
        description="Deploy the app to staging.",
        procedure=[step, "Restart the service."],
        version=version,
    )


def test_default_uri_is_under_the_home_and_paths_keep_owners_and_versions_apart(tmp_path):
    s = Settings.from_keys(home=str(tmp_path / "h"))
    assert skills_uri(s.storage) == str(tmp_path / "h" / "artifacts" / "task-skills")
    assert (
        skills_uri(Settings.from_keys(home="s3://b/home").storage)
        == "s3://b/home/artifacts/task-skills"
    )
    assert (
        skills_uri(Settings.from_keys(home=str(tmp_path), skills_uri="s3://b/skills").storage)
        == "s3://b/skills"
    )
    assert package_path("omar", "deploy-app", 3) == "omar/deploy-app/v3/deploy-app.zip"
    assert owner_dir("a/b") != owner_dir("a_b") and owner_dir("a/b").startswith("~")
    assert owner_dir("..").startswith("~") and owner_dir("u1") == "u1"

    pub = Publisher.from_settings(s.storage)
    u1 = pub.publish(skill("omar", 1))
    u2 = pub.publish(skill("omar", 2, "Run pytest."))
    other = pub.publish(skill("lin", 1, "Run the linter."))
    assert u1 == (tmp_path / "h/artifacts/task-skills/omar/deploy-app/v1/deploy-app.zip").as_uri()
    assert len({u1, u2, other}) == 3
    assert pub.read(u1) != pub.read(u2)  # version 1 is untouched by version 2
    assert b"Run the tests." in zipfile.ZipFile(io.BytesIO(pub.read(u1))).read(
        "deploy-app/SKILL.md"
    )
    assert pub.versions("omar", "deploy-app") == [
        "omar/deploy-app/v1/deploy-app.zip",
        "omar/deploy-app/v2/deploy-app.zip",
    ]
    assert pub.publish(skill("omar", 1)) == u1  # a replay rewrites the same bytes


def test_publish_to_s3_on_moto_and_read_back_through_the_stored_url(tmp_path, s3):
    endpoint, options = s3
    s = Settings.from_keys(
        home=str(tmp_path / "h"), skills_uri=f"s3://{BUCKET}/skills", skills_storage_options=options
    )
    pub = Publisher.from_settings(s.storage)
    url = pub.publish(skill("omar", 1))
    assert url == f"s3://{BUCKET}/skills/omar/deploy-app/v1/deploy-app.zip"
    fresh = Publisher(f"s3://{BUCKET}/skills", options)  # another process, same settings
    data = fresh.read(url)
    assert validate_zip(data) == []
    assert fresh.exists(url) and not fresh.exists(url.replace("v1", "v2"))
    import s3fs

    raw = s3fs.S3FileSystem(
        key="testing", secret="testing", endpoint_url=endpoint, skip_instance_cache=True
    )
    assert raw.cat_file(url) == data


def test_oss_is_configured_from_settings_and_environment(tmp_path, monkeypatch):
    import ossfs

    monkeypatch.setenv("SKILLSTREAM_SKILLS_URI", "oss://team-bucket/skills")
    monkeypatch.setenv(
        "SKILLSTREAM_SKILLS_STORAGE_OPTIONS",
        '{"oss_endpoint": "http://127.0.0.1:9", "oss_access_key_id": '
        '"ak-test", "oss_secret_access_key": "sk-test"}',
    )
    s = Settings.load(home=str(tmp_path / "h"))
    assert s.storage.skills_uri == "oss://team-bucket/skills"
    assert skills_options(s.storage) == {
        "oss_endpoint": "http://127.0.0.1:9",
        "oss_access_key_id": "ak-test",
        "oss_secret_access_key": "sk-test",
    }
    assert "sk-test" not in repr(s)
    pub = Publisher.from_settings(s.storage)
    fs = pub.store.fs
    assert isinstance(fs, ossfs.OSSFileSystem)
    assert fs.storage_options == {
        "endpoint": "http://127.0.0.1:9",
        "key": "ak-test",
        "secret": "sk-test",
    }
    assert (
        pub.store.url(package_path("omar", "deploy-app", 2))
        == "oss://team-bucket/skills/omar/deploy-app/v2/deploy-app.zip"
    )
    # without own options the home's storage options are used
    monkeypatch.delenv("SKILLSTREAM_SKILLS_STORAGE_OPTIONS")
    monkeypatch.setenv("SKILLSTREAM_STORAGE_OPTIONS", '{"oss_endpoint": "http://127.0.0.1:8"}')
    assert skills_options(Settings.load(home=str(tmp_path / "h")).storage) == {
        "oss_endpoint": "http://127.0.0.1:8"
    }
