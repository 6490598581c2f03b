"""``skillstream reembed``: a home built with one model moved to another gives what a home built
with the new model gives; a stopped move goes on where it stopped; a run holding the home refuses
it; catalog rows never change."""

from __future__ import annotations

import json
import shutil
from typing import Any

import numpy as np
import pytest

from skillstream.embed import get_embedder
from skillstream.errors import ConfigError
from skillstream.services import reembed as service
from skillstream.settings import Settings
from skillstream.storage import reembed as storage_reembed
from skillstream.storage.catalog import Catalog
from skillstream.storage.lance import connect
from skillstream.storage.lock import HomeBusyError, run_lock
from skillstream.storage.tombstones import members_by_node
from tests.cli.conftest import invoke

QUERIES = ["where is Maya flying", "which plants does Lin grow", "how does Omar deploy"]


def _vectors(home) -> dict[str, tuple[int, np.ndarray]]:
    table = connect(str(home / "lancedb")).open_table("memories")
    data = table.to_lance().to_table(columns=["id", "version", "vector"])
    vecs = np.asarray(data["vector"].to_pylist(), dtype=np.float32)
    return {i: (v, x) for i, v, x in zip(data["id"].to_pylist(), data["version"].to_pylist(), vecs)}


def _catalog(home, where: str = "true") -> list:
    import duckdb

    con = duckdb.connect(str(home / "catalog.duckdb"), read_only=True)
    try:
        return con.execute(
            f"select id, version, text, status from memory_meta where {where} order by id"
        ).fetchall()
    finally:
        con.close()


EXTRACTED = "kind not in ('summary', 'topic')"
"""What extraction stored: session summaries and topic nodes are built from vectors (which
memories are central), so a home built with another model words them differently."""


def _search(home, query) -> list[str]:
    out = invoke(home, "search", query, "--json", "--k", "8")
    return [h["text"] for h in json.loads(out) if h["kind"] not in ("summary", "topic")][:3]


@pytest.fixture
def home(sample_home, tmp_path):
    copy = tmp_path / "home"
    shutil.copytree(sample_home, copy)
    return copy


def test_a_moved_home_searches_as_a_home_built_with_the_new_model(home, tmp_path, monkeypatch):
    before = _catalog(home)
    old = _vectors(home)
    out = invoke(home, "reembed", "--to", "use-multilingual", "--json")
    report = json.loads(out)
    assert report["model_to"] == "use-multilingual" and report["dim"] == 512
    moved = report["tables"]["memories"]
    assert moved["rows"] == len(old) == moved["embedded"] + moved["derived"]
    # ids, versions, texts and statuses as they were; only the vectors changed
    assert _catalog(home) == before
    new = _vectors(home)
    assert set(new) == set(old) and all(new[i][0] == old[i][0] for i in new)
    # a memory's vector is its text's; a task skill's item has its skill's (topic nodes: see the
    # reorganizer's tests, the sample is too small for one)
    texts = {r[0]: r[2] for r in _catalog(home, "kind not in ('task_skill', 'topic')")}
    use = get_embedder("use-multilingual")
    ids = sorted(texts)
    want = use.encode([texts[i] for i in ids])
    assert np.array_equal(np.stack([new[i][1] for i in ids]), want)
    skills = connect(str(home / "lancedb")).open_table("task_skills").to_lance().to_table()
    items = _catalog(home, "kind = 'task_skill'")
    assert len(items) == skills.num_rows > 0 and report["tables"]["task_skills"]["embedded"] == 1
    skill_vector = np.asarray(skills["vector"].to_pylist()[0], dtype=np.float32)
    assert np.array_equal(new[items[0][0]][1], skill_vector)
    assert np.array_equal(skill_vector, use.encode(skills["search_text"].to_pylist())[0])
    # the home's settings now name the model: searches work without naming it
    assert 'embed_model = "use-multilingual"' in (home / "skillstream.toml").read_text()
    fresh = tmp_path / "fresh"
    (fresh).mkdir()
    (fresh / "skillstream.toml").write_text('embed_model = "use-multilingual"\n')
    invoke(fresh, "run")
    # the rules extract the same memories with either model
    assert _catalog(fresh, EXTRACTED) == _catalog(home, EXTRACTED)
    # ranked by score alone: the spread of repeated hits orders each hit after the hits above it,
    # session summaries among them, which the two homes word differently
    monkeypatch.setenv("SKILLSTREAM_RANK_DIVERSITY", "0")
    for q in QUERIES:
        assert _search(home, q) == _search(fresh, q)
    monkeypatch.delenv("SKILLSTREAM_RANK_DIVERSITY")
    # and back again, also a move
    invoke(home, "reembed", "--to", "minilm")
    back = _vectors(home)
    assert all(np.array_equal(back[i][1], old[i][1]) for i in old)


def test_a_stopped_move_goes_on_where_it_stopped(home):
    settings = Settings.load(home=str(home))
    calls = []
    real = get_embedder("use-multilingual")

    def failing(texts):
        calls.append(len(texts))
        if len(calls) == 3:
            raise RuntimeError("the machine went down")
        return real.encode(texts)

    class Stops:
        dim = 512
        encode = staticmethod(failing)

    def stops(_: Any) -> Any:
        return Stops()

    original = service.get_embedder
    service.get_embedder = stops  # type: ignore[assignment]
    try:
        with pytest.raises(RuntimeError, match="went down"):
            service.reembed(settings, "use-multilingual", batch=4)
    finally:
        service.get_embedder = original
    db = connect(str(home / "lancedb"))
    assert "memories" + storage_reembed.STAGING in db.table_names()
    report = service.reembed(Settings.load(home=str(home)), "use-multilingual", batch=4)
    counts = report.tables["memories"]
    assert counts["resumed"] == 8 and counts["embedded"] == counts["rows"] - 8
    assert "memories" + storage_reembed.STAGING not in connect(str(home / "lancedb")).table_names()
    assert len(_vectors(home)) == counts["rows"]
    # a second call finds the home on the model already
    again = service.reembed(Settings.load(home=str(home)), "use-multilingual")
    assert again.tables["memories"]["embedded"] == 0


def test_refused_while_a_run_holds_the_home_and_for_a_model_it_cannot_load(home):
    settings = Settings.load(home=str(home))
    with run_lock(settings.storage.catalog, settings.storage.home):
        with pytest.raises(HomeBusyError):
            service.reembed(settings, "use-multilingual")
    with pytest.raises(ConfigError, match="never downloads"):
        service.reembed(settings, "intfloat/multilingual-e5-small")
    assert _vectors(home)  # untouched


def test_a_topic_nodes_vector_is_made_from_its_members_new_vectors(tmp_path):
    import skillstream
    from skillstream.lifecycle.clusters import unit
    from skillstream.lifecycle.reorganizer import shows
    from skillstream.model import Memory
    from tests.lifecycle.test_topic_versions import CAMPING

    home = tmp_path / "home"
    api = skillstream.open(home, owner="u1")
    api.add(
        [
            {
                "conversation_id": f"c{i}",
                "user_id": "u1",
                "role": "user",
                "content": text.replace("The user", "I").replace("her ", "my "),
                "timestamp": f"2025-03-{i + 1:02d}T09:00:00Z",
            }
            for i, text in enumerate(CAMPING)
        ],
        flush=True,
    )
    invoke(home, "maintain", "--now", "2025-04-01T00:00:00Z")
    invoke(home, "reembed", "--to", "use-multilingual")
    rows = _catalog(home, "kind = 'topic'")
    assert rows, "the camping memories make a topic node"
    vectors = _vectors(home)
    texts = dict((r[0], r[2]) for r in _catalog(home, "kind <> 'topic'"))
    cat = Catalog(str(home / "catalog.duckdb"), read_only=True)
    try:
        current = members_by_node(cat)
    finally:
        cat.close()
    for node_id, _, node_text, _ in rows:
        members = current[node_id]
        shown = [
            m
            for m in members
            if shows(node_text, Memory(id=m, owner_id="u1", text=texts[m], kind="fact"))
        ]
        assert len(shown) == 3
        want = unit(np.sum([vectors[m][1] for m in shown], axis=0))
        assert np.array_equal(vectors[node_id][1], want)
