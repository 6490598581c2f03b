"""Topic nodes cost no model time and change version only when a reader would see a change.

A node's vector is the normalised sum of the vectors of the members its text shows (never its
text's embedding). A member joining a large
cluster leaves the node as it is; a quarter of its sources changing, or a member its text shows
leaving, gives a new version, whose ``member_of`` rows are the members that joined and left since
the last one. The rule reads only the stored node and the cluster, so a state rebuilt from its
memories and its nodes' members (a restart) decides and writes as the state that ran on."""

from __future__ import annotations

import numpy as np

from skillstream.apply import ApplyOptions, apply_ops
from skillstream.lifecycle.maintenance import maintain_owner
from skillstream.lifecycle.reorganizer import CHURN, sentence, shows
from skillstream.memories import OwnerMemories
from skillstream.model import Memory, MemoryOp
from skillstream.vocab import Op
from tests.lifecycle.conftest import DAY, T0, lifecycle_params, span

CAMPING = [
    "The user went camping in the mountains with her kids",
    "The user took her family camping by the lake last summer",
    "The user loves camping trips with her children",
    "The user packed the tent and sleeping bags for a camping weekend",
    "The user went camping near the river with her two kids",
    "The user and her children roasted marshmallows on a camping trip",
    "The user bought a bigger tent for family camping",
    "The user plans another camping trip with the kids in the forest",
]
MORE = [
    "The user taught her kids to pitch a tent on a camping trip",
    "The user went camping in the desert with her family",
    "The user's children love sleeping in the tent when they go camping",
]


class Recording:
    """The embedder, recording every text it is given."""

    def __init__(self, embedder):
        self.embedder = embedder
        self.texts: list[str] = []

    def __call__(self, texts):
        self.texts += list(texts)
        return self.embedder.encode(texts)


def _state(embedder, recorded, texts, embed=None):
    params = lifecycle_params(session_summaries=False)
    opts = ApplyOptions(embed=embed or embedder.encode, params=params)
    state = OwnerMemories("o1")
    for i, text in enumerate(texts):
        apply_ops(state, span([text], at=T0 + i * DAY), [MemoryOp(Op.INSERT, text)], recorded, opts)
    return state, opts, params


def _node(state: OwnerMemories) -> Memory:
    """The owner's largest topic node (the camping trips; the two about a tent make their own)."""
    nodes = [m for m in state.items.values() if m.kind == "topic"]
    return max(nodes, key=lambda m: (len(m.source_message_ids), m.id))


def _add(state, opts, recorded, text, at):
    apply_ops(state, span([text], at=at), [MemoryOp(Op.INSERT, text)], recorded, opts)


def test_a_nodes_vector_is_of_the_members_it_shows_and_its_text_is_never_embedded(
    embedder, recorded
):
    embed = Recording(embedder)
    state, _, params = _state(embedder, recorded, CAMPING, embed)
    r = maintain_owner(state, T0 + 20 * DAY, params, embed=embed, recorded_at=recorded)
    assert r is not None
    node = _node(state)
    links = sorted(
        (x for x in r.rows.memory_relations if x.target_id == node.id), key=lambda x: x.rank
    )
    members = [state.get(x.source_id) for x in links]
    assert len(members) == 6 and {m.text for m in members} < set(CAMPING)
    shown = [m for m in members if shows(node.text, m)]
    assert shown == members[:3]  # the three closest to the centre
    vector = np.sum([m.vector for m in shown], axis=0)
    vector /= np.linalg.norm(vector)
    assert np.allclose(node.vector, vector, atol=1e-6)
    assert node.text not in embed.texts and all(t in CAMPING for t in embed.texts)


def test_a_new_member_leaves_the_node_alone_until_a_quarter_of_its_sources_changed(
    embedder, recorded
):
    state, opts, params = _state(embedder, recorded, CAMPING)
    maintain_owner(state, T0 + 20 * DAY, params, embed=embedder.encode, recorded_at=recorded)
    node = _node(state)
    first = (node.version, node.text, list(node.source_message_ids))
    _add(state, opts, recorded, MORE[0], T0 + 21 * DAY)
    r = maintain_owner(state, T0 + 22 * DAY, params, embed=embedder.encode, recorded_at=recorded)
    assert r is None  # the cluster has 7 members; 1 of 7 sources is new
    assert (node.version, node.text, node.source_message_ids) == first
    _add(state, opts, recorded, MORE[1], T0 + 23 * DAY)
    r = maintain_owner(state, T0 + 24 * DAY, params, embed=embedder.encode, recorded_at=recorded)
    assert r is not None
    (ev,) = [e for e in r.events if e.memory_id == node.id]
    assert 2 / 8 >= CHURN and (ev.event, ev.event_ts, node.version) == (
        "updated",
        T0 + 24 * DAY,
        2,
    )
    assert ev.reason.endswith(f"({CHURN:.0%} or more of its sources changed)")
    assert len(node.source_message_ids) == 8
    links = [x for x in r.rows.memory_relations if x.target_id == node.id]
    # the two members that joined since version 1, and nothing for the six that stayed
    joined = {m.id for m in state.items.values() if m.text in MORE[:2]}
    assert len(joined) == 2
    assert {(x.source_id, x.change, x.version) for x in links} == {(i, "join", 2) for i in joined}
    assert all(x.rank is not None and x.weight for x in links)
    members = state.topic_members[node.id]
    assert len(members) == 8 and joined < set(members)


def test_a_shown_member_that_leaves_gives_a_new_version_without_its_text(embedder, recorded):
    state, _, params = _state(embedder, recorded, CAMPING)
    maintain_owner(state, T0 + 20 * DAY, params, embed=embedder.encode, recorded_at=recorded)
    node = _node(state)
    shown = [m for m in state.items.values() if m.kind != "topic" and shows(node.text, m)]
    assert len(shown) == 3
    # the newest of them (the oldest member anchors the node: without it, it is another node)
    shown.sort(key=lambda m: m.created_at, reverse=True)
    shown[0].status = "deleted"
    state.touch(shown[0])
    r = maintain_owner(state, T0 + 21 * DAY, params, embed=embedder.encode, recorded_at=recorded)
    assert r is not None
    (ev,) = [e for e in r.events if e.memory_id == node.id]
    assert ev.reason.endswith("(a member it shows left or changed)") and node.version == 2
    assert not shows(node.text, shown[0])
    assert shown[0].text.rstrip(".") not in node.text
    links = [x for x in r.rows.memory_relations if x.target_id == node.id]
    assert [(x.source_id, x.change, x.version, x.rank) for x in links] == [
        (shown[0].id, "leave", 2, None)
    ]
    assert shown[0].id not in state.topic_members[node.id]


def test_a_rebuilt_state_decides_as_the_one_that_ran_on(embedder, recorded):
    """A restart (the state read back from its memories and its nodes' members, nothing derived
    kept) versions the node and writes its links exactly as a run that went on; a state that
    does not know a node's members (snapshotted before it kept them) lists them whole."""
    state, opts, params = _state(embedder, recorded, CAMPING)
    maintain_owner(state, T0 + 20 * DAY, params, embed=embedder.encode, recorded_at=recorded)
    rebuilt, unknown = OwnerMemories("o1"), OwnerMemories("o1")
    for m in state.items.values():
        rebuilt.put(m.copy())
        unknown.put(m.copy())
    rebuilt.topic_members = dict(state.topic_members)
    written = {}
    for s in (state, rebuilt, unknown):
        rows = written[id(s)] = []
        for i, text in enumerate(MORE):
            _add(s, opts, recorded, text, T0 + (21 + i) * DAY)
            r = maintain_owner(
                s, T0 + (21 + i) * DAY, params, embed=embedder.encode, recorded_at=recorded
            )
            rows += r.rows.memory_relations if r is not None else []
    a, b = _node(state), _node(rebuilt)
    assert (a.version, a.text, a.source_message_ids) == (b.version, b.text, b.source_message_ids)
    assert np.array_equal(a.vector, b.vector)
    assert written[id(state)] == written[id(rebuilt)]
    assert {x.change for x in written[id(state)]} == {"join"}
    whole = [x for x in written[id(unknown)] if x.target_id == a.id]
    assert {x.change for x in whole} == {None} and len(whole) == len(state.topic_members[a.id])


def test_shows_matches_whole_parts_of_a_nodes_sentence():
    def m(text):
        return Memory(id=text, owner_id="o1", text=text, kind="fact")

    text = sentence(["Likes tea.", "Drinks green tea daily", "Owns a teapot!"], "en")
    assert text == "Likes tea; Drinks green tea daily; and Owns a teapot."
    assert all(shows(text, m(t)) for t in ["Likes tea", "drinks green tea daily.", "Owns a teapot"])
    assert not shows(text, m("tea")) and not shows(text, m("green tea daily"))
    zh = sentence(["我喜欢喝茶。", "我每天喝绿茶"], "zh")
    assert (
        shows(zh, m("我喜欢喝茶")) and shows(zh, m("我每天喝绿茶。")) and not shows(zh, m("绿茶"))
    )
