"""A search that expands topic nodes puts each node's members in its place, most central first:
by cosine to the centre of the members the reader may see, whatever order they were linked in."""

from __future__ import annotations

import numpy as np

from skillstream.services.nodes import central_first, expand


def _row(i, vector):
    v = np.asarray(vector, dtype=np.float32)
    return {"id": i, "kind": "fact", "vector": (v / np.linalg.norm(v)).tolist()}


ROWS = {
    "far": _row("far", [0.0, 1.0, 0.2]),
    "near": _row("near", [1.0, 0.1, 0.0]),
    "mid": _row("mid", [1.0, 0.6, 0.0]),
}


def test_members_come_most_central_first():
    ordered = central_first([ROWS["far"], ROWS["near"], ROWS["mid"]])
    assert [r["id"] for r in ordered] == ["mid", "near", "far"]
    # equal cosines go by id; rows without vectors keep the order given
    twins = [_row("b", [1.0, 0.0]), _row("a", [1.0, 0.0])]
    assert [r["id"] for r in central_first(twins)] == ["a", "b"]
    bare = [{"id": "y"}, {"id": "x"}]
    assert central_first(bare) == bare


def test_expand_replaces_a_node_by_its_visible_members_in_place():
    hits = [
        {"id": "n1", "kind": "topic", "score": 0.9, "relevance": 0.8, "recency": 0.5},
        {"id": "other", "kind": "fact", "score": 0.7},
        {"id": "mid", "kind": "fact", "score": 0.6},
    ]
    members = {"n1": ["far", "near", "mid", "hidden"]}

    def fetch(ids):
        return [dict(ROWS[i]) for i in ids if i in ROWS]  # "hidden" is not the reader's

    out = expand(hits, lambda n: members.get(n, []), fetch, k=10)
    assert [h["id"] for h in out] == ["mid", "near", "far", "other"]
    assert all("vector" not in h for h in out)
    assert {(h["node_id"], h["score"]) for h in out[:3]} == {("n1", 0.9)}
    assert [h["id"] for h in expand(hits, lambda n: members.get(n, []), fetch, k=2)] == [
        "mid",
        "near",
    ]
