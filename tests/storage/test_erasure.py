"""Tombstones, the catalog's owner tables found from its schema, a DuckDB file written anew, and
the owner taken out of real Bytewax recovery files."""

from __future__ import annotations

import json
import pickle
import sqlite3
from dataclasses import dataclass

from bytewax.recovery import init_db_dir

from skillstream.storage.catalog import Catalog
from skillstream.storage.erasure import (
    ErasedMessages,
    ensure_salt,
    message_hash,
    owner_hash,
    read_salt,
)
from skillstream.storage.forget_catalog import (
    OwnerTraces,
    erase_rows,
    owner_tables,
    read_traces,
    rewrite_file,
)
from skillstream.storage.forget_files import recovery_message_ids, scrub_recovery
from skillstream.storage.home import open_stores
from skillstream.storage.writer import write_results
from tests.storage.conftest import DIM, make_result

SALT = "ab" * 32


@dataclass(frozen=True)
class Msg:
    owner_id: str
    message_id: str


def test_a_tombstone_is_per_home_per_owner_and_per_message():
    h = message_hash(SALT, "u1", "m1")
    assert len(h) == 32 and "u1" not in h and "m1" not in h
    assert h == message_hash(SALT, "u1", "m1")
    assert h != message_hash("cd" * 32, "u1", "m1")
    assert h != message_hash(SALT, "u2", "m1") != message_hash(SALT, "u1", "m2")
    assert owner_hash(SALT, "u1") != message_hash(SALT, "u1", "")


def test_erased_messages_admit_all_but_the_forgotten_ones():
    erased = ErasedMessages(SALT, frozenset({message_hash(SALT, "u1", "m1")}))
    assert not erased.admits(Msg("u1", "m1"))
    assert erased.admits(Msg("u1", "m2"))  # a new message of the owner
    assert erased.admits(Msg("u2", "m1"))  # the same id of another owner
    assert erased.admits(object())  # a dead letter
    assert ErasedMessages().admits(Msg("u1", "m1"))


def test_the_salt_is_made_once_and_read_back(tmp_path):
    with Catalog(str(tmp_path / "c.duckdb")) as cat:
        assert read_salt(cat) is None and ErasedMessages.read(cat) == ErasedMessages()
        salt = ensure_salt(cat)
        assert ensure_salt(cat) == salt == read_salt(cat) and len(salt) == 64
        row = {"message_hash": message_hash(salt, "u1", "m1"), "erasure_id": "e"}
        cat.insert_ignore("erased_messages", [row])
        assert not ErasedMessages.read(cat).admits(Msg("u1", "m1"))


def test_every_table_with_an_owner_column_is_erased_a_new_one_too(settings):
    with open_stores(settings, DIM) as stores:
        write_results(stores, [make_result(n, owner) for n in range(2) for owner in ("u1", "u2")])
        cat = stores.catalog
        assert {"memory_meta", "spans", "queries", "llm_calls"} <= set(owner_tables(cat))
        assert not {"erasures", "erased_messages", "dead_letters"} & set(owner_tables(cat))
        cat.con.execute(
            "CREATE TABLE open_spans (span_id VARCHAR, owner_id VARCHAR, message_id VARCHAR)"
        )
        cat.con.execute("INSERT INTO open_spans VALUES ('a', 'u1', 'held'), ('b', 'u2', 'x')")
        traces = read_traces(cat, "u1")
        ids = {f"u1-s{n}-m{j}" for n in range(2) for j in range(2)}
        assert traces.message_ids == ids | {"held"}
        assert traces.conversation_ids == {"c-u1"}
        erased = erase_rows(cat, "u1", traces)
        assert erased["open_spans"] == 1 and erased["spans"] == 2
        assert cat.sql("SELECT owner_id FROM open_spans").column(0).to_pylist() == ["u2"]
        left = cat.sql("SELECT DISTINCT owner_id FROM spans").column(0).to_pylist()
        assert left == ["u2"]
        assert erase_rows(cat, "u1", OwnerTraces()) == {}


def test_a_rewritten_file_no_longer_holds_deleted_rows(tmp_path):
    path = tmp_path / "c.duckdb"
    marker = "Qzdeleted-" + "x9" * 40
    with Catalog(str(path)) as cat:
        cat.upsert(
            "dead_letters",
            [
                {
                    "id": f"d{i}",
                    "source": "s",
                    "position": str(i),
                    "stage": "parse",
                    "reason": "r",
                    "payload": f"{marker}-{i}" if i == 0 else f"kept {i}",
                }
                for i in range(50)
            ],
        )
    with Catalog(str(path)) as cat:
        cat.con.execute("DELETE FROM dead_letters WHERE id = 'd0'")
    assert marker.encode() in path.read_bytes()  # DuckDB keeps the deleted row in its blocks
    assert rewrite_file(path) >= 0
    assert marker.encode() not in path.read_bytes()
    assert not list(tmp_path.glob("c.duckdb.*"))
    with Catalog(str(path), read_only=True) as cat:
        assert cat.count("dead_letters") == 49
        assert cat.sql("SELECT payload FROM dead_letters WHERE id = 'd1'").to_pylist() == [
            {"payload": "kept 1"}
        ]


def test_recovery_snapshots_lose_the_owner_and_keep_the_rest(tmp_path):
    init_db_dir(tmp_path, 1)
    (part,) = tmp_path.glob("*.sqlite3")
    conv_u1 = (Msg("u1", "m1"),)
    shard = {"u1": ["u1 state"], "u2": ["u2 state"], "\x00evicted": {"u1": 1, "u2": 2}}
    rows = [
        ("flow.spans", "c-u1", 1, pickle.dumps(conv_u1)),
        ("flow.admit", "c-u1", 1, pickle.dumps({"m1": "digest"})),  # no owner in it: by its key
        ("flow.spans", "c-u2", 1, pickle.dumps((Msg("u2", "m1"),))),
        ("flow.extract", "0", 1, pickle.dumps(shard)),
        ("flow.read", "file.jsonl", 1, pickle.dumps(42)),
    ]
    con = sqlite3.connect(part)
    con.executemany(
        "INSERT INTO snaps (step_id, state_key, snap_epoch, ser_change) VALUES (?, ?, ?, ?)", rows
    )
    con.commit()
    con.close()
    assert recovery_message_ids(tmp_path, "u1") == {"m1"}
    assert scrub_recovery(tmp_path, "u1", set(), dry_run=True) == 3
    assert scrub_recovery(tmp_path, "u1", set(), dry_run=False) == 3
    con = sqlite3.connect(part)
    left = {
        (s, k): pickle.loads(b)
        for s, k, b in con.execute("SELECT step_id, state_key, ser_change FROM snaps")
    }
    con.close()
    assert left == {
        ("flow.spans", "c-u2"): (Msg("u2", "m1"),),
        ("flow.extract", "0"): {"u2": ["u2 state"], "\x00evicted": {"u2": 2}},
        ("flow.read", "file.jsonl"): 42,
    }
    assert b"u1" not in part.read_bytes()
    assert scrub_recovery(tmp_path, "u1", set(), dry_run=False) == 0


def test_training_runs_that_name_the_owner_are_found_whole(tmp_path):
    import io

    import torch

    from skillstream.storage.artifacts import ArtifactStore
    from skillstream.storage.forget_files import training_files

    store = ArtifactStore(str(tmp_path / "artifacts"))

    def state(meta: dict) -> bytes:
        buf = io.BytesIO()
        torch.save({"net": {"w": torch.zeros(2)}, "meta": json.dumps(meta)}, buf)
        return buf.getvalue()

    store.put("memskill/train/k1/trainer.pt", state({"conversations": ["conv-of-u1"], "who": "u1"}))
    store.put("memskill/train/k1/curve.json", b"[]")
    store.put("memskill/train/k2/trainer.pt", state({"who": "u2"}))
    store.put("controllers/abc.pt", state({"who": "u1"}))  # weights, not a run's state: kept
    assert training_files(store, "u1") == [
        "memskill/train/k1/curve.json",
        "memskill/train/k1/trainer.pt",
    ]
    assert training_files(store, "u3") == [] and training_files(store, "u") == []
