"""The seeds' lifecycle stages with exact event times: generated -> activated, idle archive,
expiry out of both indexes, the seed's decay rule, escalation, a merged contradiction, and the
reorganizer's topic nodes with search expansion."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from skillstream.apply import ApplyOptions, apply_ops
from skillstream.lifecycle.maintenance import maintain_owner
from skillstream.lifecycle.params import LifecycleParams
from skillstream.lifecycle.reorganizer import MEMBER_OF, cluster
from skillstream.memories import OwnerMemories
from skillstream.model import MaintenanceResult, MemoryOp
from skillstream.services import home_lifecycle as store
from skillstream.services.search import MemorySearch, search_memories
from skillstream.settings import Settings
from skillstream.storage.catalog import Catalog
from skillstream.storage.home import open_stores
from skillstream.storage.writer import write_results
from skillstream.vocab import Op
from tests.lifecycle.conftest import DAY, T0, lifecycle_params, span

HIKE = "Caroline loves hiking in the Alps"
CELLO = "Caroline plays the cello"


def _rows(settings, sql, params=None):
    cat = Catalog(settings.storage.catalog, read_only=True)
    try:
        return cat.sql(sql, params).to_pylist()
    finally:
        cat.close()


def _home(tmp_path, embedder, recorded, texts, **keys):
    """A home with one memory per text, the i-th created at T0 + i days."""
    settings = Settings.load(home=str(tmp_path / "home"), session_summaries=False, **keys)
    options = ApplyOptions.from_settings(
        settings.lifecycle, settings.spans.idle_gap, embed=embedder.encode
    )
    state = OwnerMemories("o1")
    results = []
    for i, text in enumerate(texts):
        r = apply_ops(
            state, span([text], at=T0 + i * DAY), [MemoryOp(Op.INSERT, text)], recorded, options
        )
        results.append(
            MaintenanceResult("o1", T0 + i * DAY, list(r.changed.values()), r.events, r.rows)
        )
    with open_stores(settings, embedder.dim) as stores:
        write_results(stores, results)
        stores.index.optimize()
    return settings


def _maintain(settings, embedder, at):
    from skillstream.lifecycle.params import LifecycleParams

    params = LifecycleParams.from_settings(settings)
    with open_stores(settings, embedder.dim) as stores:
        return store.maintain_home(stores, params, now=at, embed=embedder.encode)


def _status(settings, text):
    return _rows(settings, "SELECT status FROM memory_meta WHERE text = ?", [text])[0]["status"]


def test_a_search_activates_a_generated_memory_at_the_search_time(tmp_path, embedder, recorded):
    home = _home(tmp_path, embedder, recorded, [HIKE, CELLO])
    assert {r["status"] for r in _rows(home, "SELECT status FROM memory_meta")} == {"generated"}
    hits = search_memories(home, "hiking", owner="o1", k=1, strategy="keyword", now=T0 + 10 * DAY)
    assert [(h["text"], h["status"]) for h in hits] == [(HIKE, "generated")]
    assert (_status(home, HIKE), _status(home, CELLO)) == ("activated", "generated")
    events = _rows(
        home,
        "SELECT e.event, e.old_status, e.new_status, e.event_ts, e.actor, e.version "
        "FROM memory_events e JOIN memory_meta m ON m.id = e.memory_id "
        "WHERE m.text = ? ORDER BY e.version",
        [HIKE],
    )
    assert [tuple(e.values()) for e in events] == [
        ("created", None, "generated", T0, "extractor", 1),
        ("activated", "generated", "activated", T0 + 10 * DAY, "search", 2),
    ]
    # LanceDB (the flow reads memories back from there) holds the same status and access time
    with MemorySearch(home, record=False) as s:
        (row,) = s.index.table.scan("status = 'activated'").to_pylist()
    assert (row["text"], row["version"], row["last_accessed_at"]) == (HIKE, 2, T0 + 10 * DAY)
    # a second use is not a second activation
    search_memories(home, "hiking", owner="o1", k=1, strategy="keyword", now=T0 + 11 * DAY)
    n = _rows(home, "SELECT count(*) AS n FROM memory_events WHERE event = 'activated'")[0]["n"]
    assert n == 1


def test_an_extraction_that_retrieved_a_memory_activates_it(recorded):
    state = OwnerMemories("o1")
    apply_ops(state, span(["a"], at=T0), [MemoryOp(Op.INSERT, HIKE)], recorded)
    (m,) = state.items.values()
    r = apply_ops(state, span(["b"], at=T0 + DAY), [], recorded, retrieved=[m.id])
    assert [(e.event, e.memory_id, e.event_ts, e.new_status) for e in r.events] == [
        ("activated", m.id, T0 + DAY, "activated")
    ]
    assert r.events[0].reason.startswith("retrieved for the extraction of span ")
    assert (
        apply_ops(state, span(["c"], at=T0 + 2 * DAY), [], recorded, retrieved=[m.id]).events == []
    )


def test_idle_memories_are_archived_and_left_out_of_default_search(tmp_path, embedder, recorded):
    home = _home(tmp_path, embedder, recorded, [HIKE, CELLO], archive_after_s=30 * 86400)
    # hiking created at T0 is archived at T0 + 30 days; the cello (T0 + 1 day) one day later
    report = _maintain(home, embedder, T0 + 30 * DAY + timedelta(hours=12))
    assert report.events == {"archived": 1}
    ev = _rows(
        home,
        "SELECT event, reason, event_ts, new_status FROM memory_events WHERE event = 'archived'",
    )
    assert ev == [
        {
            "event": "archived",
            "reason": "unused since 2024-01-01",
            "event_ts": T0 + 30 * DAY,
            "new_status": "archived",
        }
    ]
    assert (_status(home, HIKE), _status(home, CELLO)) == ("archived", "generated")
    for strategy in ("keyword", "semantic", "hybrid"):
        default = search_memories(
            home, HIKE, owner="o1", k=5, strategy=strategy, now=T0 + 31 * DAY, record=False
        )
        assert HIKE not in [h["text"] for h in default], strategy
        cold = search_memories(
            home,
            HIKE,
            owner="o1",
            k=5,
            strategy=strategy,
            now=T0 + 31 * DAY,
            record=False,
            archived=True,
        )
        assert cold[0]["text"] == HIKE and cold[0]["status"] == "archived", strategy


def test_expiry_removes_the_memory_from_both_indexes_and_keeps_a_minimal_log(
    tmp_path, embedder, recorded
):
    home = _home(
        tmp_path, embedder, recorded, [HIKE, CELLO], policies={"*": {"default_expiry": "20d"}}
    )
    hits = search_memories(home, HIKE, owner="o1", k=5, strategy="keyword", record=False)
    assert HIKE in [h["text"] for h in hits]  # found before it expires
    (hike,) = _rows(home, "SELECT id FROM memory_meta WHERE text = ?", [HIKE])
    hike_id = hike["id"]
    report = _maintain(home, embedder, T0 + 20 * DAY)  # hiking expires at T0 + 20 days exactly
    assert report.events == {"expired": 1}
    for strategy in ("keyword", "semantic", "hybrid"):
        hits = search_memories(
            home, HIKE, owner="o1", k=5, strategy=strategy, record=False, archived=True
        )
        assert [h["text"] for h in hits] == [CELLO], strategy  # only the other memory is left
    with MemorySearch(home, record=False) as s:
        # the row is gone from LanceDB: neither the vector nor the full-text index holds it
        assert s.index.table.scan(f"id = '{hike_id}'").to_pylist() == []
        assert [r["text"] for r in s.index.table.scan().to_pylist()] == [CELLO]
        everything = s.index.search(HIKE, None, k=5, statuses=None)  # full text, every status
        assert [h["text"] for h in everything] == [CELLO]  # it shares only "Caroline"
        vector = embedder.encode([HIKE])[0]
        nearest = s.index.search(None, vector, k=5, statuses=None)  # vector, every status
        assert [h["id"] for h in nearest] != [] and hike_id not in [h["id"] for h in nearest]
    (log_row,) = _rows(
        home,
        "SELECT id, status, text, tags, key, valid_to, source_message_ids "
        "FROM memory_meta WHERE status = 'expired'",
    )
    assert (log_row["id"], log_row["text"], log_row["tags"], log_row["key"]) == (
        hike_id,
        "",
        [],
        None,
    )
    assert log_row["valid_to"] == T0 + 20 * DAY
    assert log_row["source_message_ids"]  # where it came from stays, what it said does not
    events = _rows(
        home,
        "SELECT event, event_ts, old_value, new_value FROM memory_events WHERE memory_id = ? "
        "ORDER BY version",
        [hike_id],
    )
    assert [(e["event"], e["event_ts"]) for e in events] == [
        ("created", T0),
        ("expired", T0 + 20 * DAY),
    ]
    assert (events[0]["old_value"], events[0]["new_value"]) == (None, None)
    assert json.loads(events[1]["new_value"])["text"] == ""
    assert json.loads(events[1]["old_value"])["text"] == ""
    # the memories view (memory_meta with LanceDB's vectors) lists the minimal row, no vector
    from skillstream.cli.query import open_catalog

    cat = open_catalog(home)
    try:
        rows = cat.sql("SELECT status, text, vector FROM memories WHERE id = ?", [hike_id])
    finally:
        cat.close()
    assert rows.to_pylist() == [{"status": "expired", "text": "", "vector": None}]
    # the state maintenance and the flow read back knows the expired memory from its log row
    with open_stores(home, embedder.dim) as stores:
        known = store.load_owner(stores, "o1").get(hike_id)
    assert known is not None and (known.status, known.text, known.vector) == ("expired", "", None)
    # so a later maintenance at the same time changes nothing, and one at T0 + 21 days expires
    # only the cello (created a day later); the hiking memory is not written back
    assert _maintain(home, embedder, T0 + 20 * DAY).events == {}
    assert _maintain(home, embedder, T0 + 21 * DAY).events == {"expired": 1}
    with MemorySearch(home, record=False) as s:
        assert s.index.table.scan().to_pylist() == []
    assert _rows(home, "SELECT count(*) AS n FROM memory_meta WHERE status = 'expired'") == [
        {"n": 2}
    ]
    # expired -> deleted by hand works on the minimal row, and LanceDB stays without it
    with open_stores(home, embedder.dim) as stores:
        store.set_status(stores, [hike_id], "deleted", at=T0 + 30 * DAY, reason="forget")
        assert stores.index.count() == 0
    assert _rows(home, "SELECT status, text FROM memory_meta WHERE id = ?", [hike_id]) == [
        {"status": "deleted", "text": ""}
    ]


def test_a_replay_or_a_crash_does_not_bring_an_expired_memory_back(tmp_path, embedder, recorded):
    """The writes of a replayed run, and a crash between LanceDB and the catalog commit."""
    from skillstream.flows.runner import Runner
    from skillstream.lifecycle.params import LifecycleParams
    from skillstream.storage.reconcile import reconcile_home

    settings = Settings.load(
        home=str(tmp_path / "home"),
        session_summaries=False,
        policies={"*": {"default_expiry": "20d"}},
    )
    options = ApplyOptions.from_settings(
        settings.lifecycle, settings.spans.idle_gap, embed=embedder.encode
    )
    state = OwnerMemories("o1")
    created = apply_ops(state, span([HIKE], at=T0), [MemoryOp(Op.INSERT, HIKE)], recorded, options)
    (hike,) = created.changed.values()
    first = MaintenanceResult("o1", T0, [hike.copy()], created.events, created.rows)
    params = LifecycleParams.from_settings(settings)
    expiry = maintain_owner(state, T0 + 20 * DAY, params, recorded_at=recorded)
    assert expiry is not None and [e.event for e in expiry.events] == ["expired"]
    with open_stores(settings, embedder.dim) as stores:
        write_results(stores, [first])
        write_results(stores, [expiry])
        assert stores.index.count() == 0
        # a replay (a flow restored from a snapshot) writes the creation again, then the expiry
        write_results(stores, [first])
        assert stores.index.count() == 1  # for a moment the replayed row is back ...
        write_results(stores, [expiry])
        assert stores.index.count() == 0  # ... and the replayed expiry deletes it again
        # a crash after the replayed creation reached LanceDB, before its catalog commit
        stores.index.upsert(first.memories)
        assert stores.index.count() == 1
    fixed = reconcile_home(settings, embedder.dim, embedder.encode)
    assert (fixed["memories"].deleted, fixed["memories"].restored) == (1, 0)
    with open_stores(settings, embedder.dim) as stores:
        assert stores.index.count() == 0
    # a consistent home: nothing to reconcile, the committed minimal row is not restored
    assert reconcile_home(settings, embedder.dim, embedder.encode)["memories"].changed == 0
    # the flow's hydration knows the id (no vector, no text) from the catalog
    hydrated = (
        Runner(settings, embedder=embedder).memory_pipeline().new_state("o1").memories.get(hike.id)
    )
    assert hydrated is not None and (hydrated.status, hydrated.text) == ("expired", "")
    assert _rows(settings, "SELECT status, version FROM memory_meta") == [
        {"status": "expired", "version": 2}
    ]


@pytest.mark.parametrize(
    ("confidence", "expected"),
    [(0.5, (0.5, 0, "generated", [])), (0.25, (0.15, 1, "generated", ["decayed"]))],
)
def test_seed_decay_only_touches_unused_low_confidence_memories(recorded, confidence, expected):
    state = OwnerMemories("o1")
    apply_ops(
        state,
        span(["a"], at=T0),
        [MemoryOp(Op.INSERT, "User likes tea", confidence=confidence)],
        recorded,
        ApplyOptions(params=lifecycle_params(session_summaries=False)),
    )
    (m,) = state.items.values()
    seed = lifecycle_params(session_summaries=False)
    r = maintain_owner(state, T0 + 120 * DAY, seed, recorded_at=recorded)
    events = [e for e in (r.events if r else []) if e.memory_id == m.id]
    assert (m.confidence, m.decay_steps, m.status, [e.event for e in events]) == expected
    if events:  # the first step falls due once unused for more than 90 days
        assert (events[0].event_ts, events[0].reason) == (
            T0 + 90 * DAY,
            "unused since 2024-01-01: confidence -0.1",
        )


def test_seed_decay_steps_on_and_expires_at_zero(recorded):
    state = OwnerMemories("o1")
    seed = lifecycle_params(session_summaries=False)
    apply_ops(
        state,
        span(["a"], at=T0),
        [MemoryOp(Op.INSERT, "User likes tea", confidence=0.25)],
        recorded,
        ApplyOptions(params=seed),
    )
    (m,) = state.items.values()
    assert maintain_owner(state, T0 + 90 * DAY, seed, recorded_at=recorded) is None  # not > 90
    maintain_owner(state, T0 + 150 * DAY, seed, recorded_at=recorded)
    assert (round(m.confidence, 6), m.decay_steps) == (0.05, 2)
    r = maintain_owner(state, T0 + 181 * DAY, seed, recorded_at=recorded)
    assert (m.status, m.valid_to) == ("expired", T0 + 150 * DAY)
    assert [(e.event, e.event_ts) for e in r.events] == [("expired", T0 + 150 * DAY)]


def test_an_unresolved_contradiction_is_escalated_once_after_seven_days(recorded):
    state = OwnerMemories("o1")
    opts = ApplyOptions(params=lifecycle_params(session_summaries=False))
    apply_ops(
        state,
        span(["a"], at=T0),
        [MemoryOp(Op.INSERT, "User likes hiking", key="user|preference|hiking")],
        recorded,
        opts,
    )
    r = apply_ops(
        state,
        span(["b"], at=T0 + DAY),
        [
            MemoryOp(
                Op.INSERT,
                "User does not like hiking",
                key="user|preference|hiking",
                event_ts=T0 - DAY,  # claims an older time: neither side is clearly newer
            )
        ],
        recorded,
        opts,
    )
    (c,) = r.rows.contradictions
    assert c.resolution == "unresolved"
    params = lifecycle_params(session_summaries=False)
    assert (
        maintain_owner(state, T0 + 8 * DAY - timedelta(seconds=1), params, recorded_at=recorded)
        is None
    )
    r = maintain_owner(state, T0 + 9 * DAY, params, recorded_at=recorded)
    assert sorted((e.event, e.memory_id, e.event_ts) for e in r.events) == sorted(
        [("escalated", c.memory_a, T0 + 8 * DAY), ("escalated", c.memory_b, T0 + 8 * DAY)]
    )
    assert r.events[0].reason.startswith(f"contradiction {c.contradiction_id} unresolved since")
    assert maintain_owner(state, T0 + 30 * DAY, params, recorded_at=recorded) is None


def test_a_state_read_back_from_the_store_escalates_like_one_kept_in_memory(
    tmp_path, embedder, recorded
):
    """The flow hydrates an owner (a later run, or a resume) with its open contradictions."""
    from skillstream.flows.runner import Runner

    settings = Settings.load(home=str(tmp_path / "home"), session_summaries=False)
    options = ApplyOptions.from_settings(
        settings.lifecycle, settings.spans.idle_gap, embed=embedder.encode
    )
    state = OwnerMemories("o1")
    results = []
    for i, (text, at) in enumerate([("User likes hiking", T0), ("User does not like hiking", T0)]):
        op = MemoryOp(Op.INSERT, text, key="user|preference|hiking", event_ts=at - i * DAY)
        r = apply_ops(state, span([text], at=T0 + i * DAY), [op], recorded, options)
        results.append(MaintenanceResult("o1", T0, list(r.changed.values()), r.events, r.rows))
    (cid,) = state.open_contradictions
    with open_stores(settings, embedder.dim) as stores:
        write_results(stores, results)
    params = lifecycle_params(session_summaries=False, reorganize=False)

    def hydrated() -> OwnerMemories:
        return Runner(settings, embedder=embedder).memory_pipeline().new_state("o1").memories

    back = hydrated()
    assert back.open_contradictions == state.open_contradictions and back.escalated == set()
    due = maintain_owner(back, T0 + 9 * DAY, params, recorded_at=recorded)
    assert due is not None and [e.event for e in due.events] == ["escalated", "escalated"]
    with open_stores(settings, embedder.dim) as stores:
        write_results(stores, [due])
    again = hydrated()
    assert again.escalated == {cid}  # escalated once: a later state does not do it again
    assert maintain_owner(again, T0 + 30 * DAY, params, recorded_at=recorded) is None


def test_escalation_reaches_the_kafka_event_records(recorded):
    from skillstream.connectors.kafka_events import result_events

    state = OwnerMemories("o1")
    apply_ops(
        state, span(["a"], at=T0), [MemoryOp(Op.INSERT, "User likes hiking", key="k|h")], recorded
    )
    apply_ops(
        state,
        span(["b"], at=T0 + DAY),
        [MemoryOp(Op.INSERT, "User does not like hiking", key="k|h", event_ts=T0 - DAY)],
        recorded,
    )
    r = maintain_owner(
        state, T0 + 9 * DAY, lifecycle_params(session_summaries=False), recorded_at=recorded
    )
    records = [rec for _, rec in result_events(r)]
    assert sorted(rec["event"] for rec in records) == ["escalated", "escalated"]


def test_a_contradiction_settled_by_merge_becomes_a_new_version(tmp_path, embedder, recorded):
    settings = Settings.load(home=str(tmp_path / "home"))
    state = OwnerMemories("o1")
    results = []
    for at, text, ts in [
        (T0, "User likes hiking", None),
        (T0 + DAY, "User does not like hiking", T0 - DAY),
    ]:
        r = apply_ops(
            state,
            span([text], at=at),
            [MemoryOp(Op.INSERT, text, key="user|preference|hiking", event_ts=ts)],
            recorded,
            ApplyOptions(embed=embedder.encode),
        )
        results.append(MaintenanceResult("o1", at, list(r.changed.values()), r.events, r.rows))
    with open_stores(settings, embedder.dim) as stores:
        write_results(stores, results)
        (c,) = stores.catalog.sql("SELECT * FROM contradictions").to_pylist()
        row = store.resolve_contradiction(
            stores,
            c["contradiction_id"],
            "merge",
            at=T0 + 3 * DAY,
            text="User used to like hiking but no longer does",
            embed=embedder.encode,
            params=LifecycleParams.from_settings(settings),
        )
        with pytest.raises(Exception, match="already settled"):
            store.resolve_contradiction(
                stores,
                c["contradiction_id"],
                "keep-a",
                at=T0 + 4 * DAY,
                params=LifecycleParams.from_settings(settings),
            )
    assert (row["resolution"], row["resolved_at"]) == ("merge", T0 + 3 * DAY)
    metas = {
        r["id"]: r for r in _rows(settings, "SELECT id, status, merged_into, text FROM memory_meta")
    }
    new = metas[row["winner_id"]]
    assert (new["status"], new["text"]) == (
        "generated",
        "User used to like hiking but no longer does",
    )
    assert {metas[i]["merged_into"] for i in (c["memory_a"], c["memory_b"])} == {new["id"]}
    rel = _rows(settings, "SELECT source_id, target_id, relation FROM memory_relations")
    assert sorted((r["source_id"], r["relation"]) for r in rel) == sorted(
        [(c["memory_a"], "consolidated_into"), (c["memory_b"], "consolidated_into")]
    )
    hits = search_memories(settings, "used to like hiking", owner="o1", k=1, record=False)
    assert hits[0]["id"] == new["id"]


TRIPS = [
    "Melanie went camping in the mountains with her kids",
    "Melanie took her family camping by the lake last summer",
    "Melanie loves camping trips with her children",
]
MUSIC = [
    "Caroline plays the violin in an orchestra",
    "Caroline practices violin every evening",
    "Caroline performed a violin solo at a concert",
]


def test_the_reorganizer_writes_sentence_nodes_and_search_expands_them(
    tmp_path, embedder, recorded
):
    texts = [*TRIPS, *MUSIC, "Melanie bought a blue car"]
    groups = cluster(
        [
            type("M", (), {"vector": v})()  # only the vectors matter for clustering
            for v in embedder.encode(texts)
        ],
        0.6,
    )
    assert [len(g) for g in groups] == [3, 3, 1]
    home = _home(tmp_path, embedder, recorded, texts)
    report = _maintain(home, embedder, T0 + 10 * DAY)
    assert report.events["created"] == 2
    nodes = _rows(
        home,
        "SELECT id, text, kind, status, source_message_ids FROM memory_meta WHERE kind = 'topic' "
        "ORDER BY text",
    )
    assert len(nodes) == 2
    for node in nodes:
        # a sentence of member statements, not a keyword list
        assert node["text"].endswith(".") and "; and " in node["text"]
        assert node["text"][0].isupper()
    members = _rows(
        home,
        "SELECT target_id, source_id, rank, relation FROM memory_relations "
        "ORDER BY target_id, rank",
    )
    assert {m["relation"] for m in members} == {MEMBER_OF}
    assert sorted(len([m for m in members if m["target_id"] == n["id"]]) for n in nodes) == [3, 3]
    # default search skips nodes; --nodes returns them; --expand turns a node into its members
    default = search_memories(home, "camping", owner="o1", k=3, record=False)
    assert all(h["kind"] != "topic" for h in default)
    with_nodes = search_memories(
        home, "camping with family", owner="o1", k=3, record=False, nodes=True
    )
    assert "topic" in [h["kind"] for h in with_nodes]
    expanded = search_memories(
        home, "camping with family", owner="o1", k=6, record=False, expand=True
    )
    assert all(h["kind"] != "topic" for h in expanded)
    assert set(TRIPS) <= {h["text"] for h in expanded}
    via = [h for h in expanded if h.get("node_id")]
    assert via and {h["text"] for h in via} <= set(TRIPS) | set(MUSIC)
    # the same memories a day later: nothing to refresh
    assert _maintain(home, embedder, T0 + 11 * DAY).events == {}


def test_the_reorganizer_refreshes_only_the_node_that_changed(recorded, embedder):
    opts = ApplyOptions(embed=embedder.encode, params=lifecycle_params(session_summaries=False))
    params = lifecycle_params(session_summaries=False)
    state = OwnerMemories("o1")
    for i, text in enumerate([*TRIPS, *MUSIC]):
        apply_ops(state, span([text], at=T0 + i * DAY), [MemoryOp(Op.INSERT, text)], recorded, opts)
    r = maintain_owner(state, T0 + 10 * DAY, params, embed=embedder.encode, recorded_at=recorded)
    nodes = {m.id: m for m in state.items.values() if m.kind == "topic"}
    assert [(e.event, e.event_ts) for e in r.events] == [("created", T0 + 10 * DAY)] * 2
    assert len(r.rows.memory_relations) == 6 and {x.version for x in r.rows.memory_relations} == {1}
    late = "Melanie went camping again in the forest with her kids"
    apply_ops(state, span([late], at=T0 + 11 * DAY), [MemoryOp(Op.INSERT, late)], recorded, opts)
    r = maintain_owner(state, T0 + 12 * DAY, params, embed=embedder.encode, recorded_at=recorded)
    (ev,) = r.events
    trips = nodes[ev.memory_id]
    assert (ev.event, ev.event_ts, trips.version) == ("updated", T0 + 12 * DAY, 2)
    # the links of version 2 are what changed: the late member joined, the three stayed
    ((link,),) = [r.rows.memory_relations]
    assert (state.get(link.source_id).text, link.change, link.version) == (late, "join", 2)
    assert len(state.topic_members[trips.id]) == 4
    # when the members stop being live, the node is archived
    for m in list(state.items.values()):
        if m.kind != "topic" and "Melanie" in m.text:
            m.status = "deleted"
    r = maintain_owner(state, T0 + 13 * DAY, params, embed=embedder.encode, recorded_at=recorded)
    assert [(e.event, e.memory_id, e.reason) for e in r.events] == [
        ("archived", trips.id, "its cluster fell apart")
    ]
