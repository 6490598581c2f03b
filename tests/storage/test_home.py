"""open_stores: every store of a home, locally and with LanceDB and artifacts on S3 (moto)."""

from __future__ import annotations

import numpy as np

from skillstream.settings import Settings
from skillstream.storage.home import open_stores
from skillstream.storage.writer import write_results

from .conftest import BUCKET, DIM, make_result, vec


def test_open_creates_the_home(settings):
    with open_stores(settings, DIM) as stores:
        assert stores.index.count() == 0
        assert stores.catalog.count("memories") == 0
        url = stores.artifacts.put("skills/x.zip", b"zip")
    home = settings.storage.home
    assert url.startswith("file://") and url.endswith(f"{home}/artifacts/skills/x.zip")
    assert (settings.storage.catalog, settings.storage.lancedb) == (
        f"{home}/catalog.duckdb",
        f"{home}/lancedb",
    )


def test_read_only_after_writing(settings):
    with open_stores(settings, DIM) as stores:
        write_results(stores, [make_result(1), make_result(2)])
    with open_stores(settings, DIM, read_only=True) as ro:
        assert ro.catalog.count("memories") == ro.index.count() == 4
        hits = ro.index.search("memory number", np.array(vec(10)), owner="u1", k=1)
        assert hits[0]["id"] == "mem_u1_10"


def test_read_only_on_an_empty_home_creates_nothing(tmp_path):
    settings = Settings.from_keys(home=str(tmp_path / "h"))
    with open_stores(settings, DIM):  # catalog only; then drop LanceDB's folder
        pass
    import shutil

    shutil.rmtree(settings.storage.lancedb)
    with open_stores(settings, DIM, read_only=True) as ro:
        assert ro.index.count() == 0
        assert ro.index.search("x", None) == []
    lance_dir = tmp_path / "h" / "lancedb"  # lancedb.connect makes the folder, nothing inside
    assert not lance_dir.exists() or list(lance_dir.iterdir()) == []


def test_lancedb_and_artifacts_on_s3(s3, tmp_path):
    _, options = s3
    settings = Settings.from_keys(
        home=str(tmp_path / "home"),
        lancedb_uri=f"s3://{BUCKET}/home/lancedb",
        artifacts_uri=f"s3://{BUCKET}/home/artifacts",
        storage_options=options,
    )
    with open_stores(settings, DIM) as stores:
        write_results(stores, [make_result(1), make_result(2)])
        write_results(stores, [make_result(1), make_result(2)])
        stores.refresh()
        assert stores.catalog.count("memories") == stores.index.count() == 4
        url = stores.artifacts.put("skills/a.zip", b"PK")
        assert url == f"s3://{BUCKET}/home/artifacts/skills/a.zip"
    with open_stores(settings, DIM, read_only=True) as ro:
        assert ro.artifacts.get(url) == b"PK"
        assert ro.catalog.sql(
            "SELECT count(*) AS n FROM memories WHERE owner_id = ?", ["u1"]
        ).to_pylist() == [{"n": 4}]
