"""``export memories`` then ``import memories`` into an empty home: the same memory_meta, the same
memory_events, the same vectors and the same search results; a second import changes nothing."""

from __future__ import annotations

import json

import duckdb
import lancedb
import pyarrow.parquet as pq
from click.testing import CliRunner

from skillstream.cli import cli
from skillstream.errors import InputError
from tests.cli.conftest import invoke

QUERIES = [("Lisbon trip", "maya"), ("push failed authentication", None), ("coffee", None)]


def table(home, name: str) -> list[dict]:
    con = duckdb.connect(str(home / "catalog.duckdb"), read_only=True)
    try:
        key = "event_id" if name == "memory_events" else "id"
        return con.execute(f"select * from {name} order by {key}").fetch_arrow_table().to_pylist()
    finally:
        con.close()


def vectors(home) -> dict[str, list[float]]:
    t = lancedb.connect(str(home / "lancedb")).open_table("memories").to_arrow()
    return dict(zip(t.column("id").to_pylist(), t.column("vector").to_pylist(), strict=True))


def clock(home) -> str:
    """The original home's clock (its latest event or span end): searches on both homes run at
    this time, because the restored home has the memories' events but not the span ledger."""
    con = duckdb.connect(str(home / "catalog.duckdb"), read_only=True)
    try:
        [row] = (
            con.execute(
                "select greatest((select max(event_ts) from memory_events), "
                "(select max(end_ts) from spans)) as t"
            )
            .fetch_arrow_table()
            .to_pylist()
        )
    finally:
        con.close()
    return str(row["t"].isoformat())


def searches(home, now: str) -> list[list[dict]]:
    out = []
    for query, owner in QUERIES:
        for strategy in ("hybrid", "keyword", "semantic"):
            args = ["search", query, "--strategy", strategy, "--no-record", "--json"]
            args += ["--k", "5", "--now", now]
            if owner:
                args += ["--owner", owner]
            out.append(json.loads(invoke(home, *args)))
    return out


def test_export_then_import_gives_the_same_home(sample_home, tmp_path):
    out = tmp_path / "backup" / "memories.parquet"
    out.parent.mkdir()
    counts = json.loads(invoke(sample_home, "export", "memories", "--out", str(out), "--json"))
    meta, events = table(sample_home, "memory_meta"), table(sample_home, "memory_events")
    assert counts["memories"] == len(meta) > 10 and counts["events"] == len(events) > 0
    assert pq.ParquetFile(out).schema_arrow.metadata[b"skillstream.export"] == b"memories"

    home = tmp_path / "restored"
    done = json.loads(invoke(home, "import", "memories", str(out), "--json"))
    assert (done["memories"], done["events"]) == (len(meta), len(events))
    assert table(home, "memory_meta") == meta
    assert table(home, "memory_events") == events
    assert vectors(home) == vectors(sample_home)
    now = clock(sample_home)
    before = searches(sample_home, now)
    assert sum(len(hits) > 0 for hits in before) >= 6 and searches(home, now) == before

    # again: nothing changes (ids, versions and events are kept, not duplicated), and it says so
    again = json.loads(invoke(home, "import", "memories", str(out), "--json"))
    assert again["unchanged"] == len(meta)
    assert [again[k] for k in ("memories", "events", "task_skills", "task_skill_versions")] == [
        0
    ] * 4
    assert invoke(home, "import", "memories", str(out)).startswith("nothing new in")
    assert table(home, "memory_meta") == meta and table(home, "memory_events") == events
    assert lancedb.connect(str(home / "lancedb")).open_table("memories").count_rows() == len(meta)


def skill_rows(home) -> tuple[list[dict], list[dict]]:
    """The catalog's task skills and their versions, without the package URLs (which name the
    home they are in)."""
    con = duckdb.connect(str(home / "catalog.duckdb"), read_only=True)
    try:
        skills = con.execute("select * exclude (package_url) from task_skills order by id")
        current = skills.fetch_arrow_table().to_pylist()
        versions = con.execute(
            "select * exclude (package_url, record), json(record)::json->>'name' as name_in_record "
            "from task_skill_versions order by version_id"
        )
        return current, versions.fetch_arrow_table().to_pylist()
    finally:
        con.close()


def packages(home) -> dict[str, bytes]:
    root = home / "artifacts" / "task-skills"
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*.zip")}


def test_task_skills_travel_with_their_versions_and_packages(sample_home, tmp_path):
    out = tmp_path / "memories.parquet"
    exported = json.loads(invoke(sample_home, "export", "memories", "--out", str(out), "--json"))
    skills, versions = skill_rows(sample_home)
    assert skills and exported["task_skills"] == len(skills)
    assert exported["task_skill_versions"] == len(versions)

    home = tmp_path / "restored"
    done = json.loads(invoke(home, "import", "memories", str(out), "--json"))
    assert (done["task_skills"], done["task_skill_versions"]) == (len(skills), len(versions))
    assert skill_rows(home) == (skills, versions)
    assert packages(home) == packages(sample_home) != {}
    con = duckdb.connect(str(home / "catalog.duckdb"), read_only=True)
    try:
        urls = [r[0] for r in con.execute("select package_url from task_skill_versions").fetchall()]
    finally:
        con.close()
    published = [u for u in urls if u is not None]  # a candidate's version has no package
    assert published and all(u.startswith((home / "artifacts").as_uri()) for u in published), urls

    name, owner = skills[0]["name"], skills[0]["owner_id"]
    shown = invoke(home, "skills", "show", name, "--owner", owner)
    assert f"name: {name}" in shown
    zipped = tmp_path / "pkg"
    invoke(home, "skills", "export", str(zipped), "--owner", owner)
    assert (zipped / name / "SKILL.md").exists()


def test_export_of_one_owner(sample_home, tmp_path):
    out = tmp_path / "maya.parquet"
    invoke(sample_home, "export", "memories", "--out", str(out), "--owner", "maya")
    owners = set(pq.read_table(out, columns=["owner_id"]).column("owner_id").to_pylist())
    assert owners == {"maya"}


def test_import_refuses_what_does_not_fit(sample_home, tmp_path, monkeypatch):
    out = tmp_path / "m.parquet"
    invoke(sample_home, "export", "memories", "--out", str(out))
    runner = CliRunner()
    monkeypatch.setenv("SKILLSTREAM_EMBED_MODEL", "some-other-model")
    res = runner.invoke(cli, ["--home", str(tmp_path / "h"), "import", "memories", str(out)])
    assert isinstance(res.exception, InputError) and "embedding model" in str(res.exception)
    monkeypatch.delenv("SKILLSTREAM_EMBED_MODEL")
    for name, data, says in [
        ("cut.parquet", pq.read_table(out).drop_columns(["events"]), "lacks the columns events"),
        ("plain.parquet", pq.read_table(out).replace_schema_metadata(None), "not a memories"),
    ]:
        pq.write_table(data, tmp_path / name)
        res = runner.invoke(
            cli, ["--home", str(tmp_path / "h"), "import", "memories", str(tmp_path / name)]
        )
        assert isinstance(res.exception, InputError) and says in str(res.exception)


def test_a_file_of_format_1_still_imports(sample_home, tmp_path):
    out = tmp_path / "m.parquet"
    invoke(sample_home, "export", "memories", "--out", str(out))
    data = pq.read_table(out).drop_columns(
        ["task_skill", "task_skill_versions", "task_skill_packages"]
    )
    meta = {**data.schema.metadata, b"skillstream.format": b"1"}
    pq.write_table(data.replace_schema_metadata(meta), tmp_path / "v1.parquet")
    done = json.loads(
        invoke(tmp_path / "h", "import", "memories", str(tmp_path / "v1.parquet"), "--json")
    )
    assert done["memories"] == data.num_rows and done["task_skill_versions"] == 0
