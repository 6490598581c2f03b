"""The reorganizer: abstract topic nodes over an owner's long-term memories.

The seed's structure optimisation: long-term and user memories are clustered periodically and
each cluster gets a higher-level abstract memory node linked to its members. Here it is one step
of maintenance (``maintain_owner``), so it runs on the flow's maintenance ticks and in
``skillstream maintain``:

1. **Candidates**: the owner's live ``LongTermMemory`` and ``UserMemory`` memories with a vector
   created by the maintenance time (a catch-up tick at an earlier boundary sees only what existed
   then), except session summaries and the nodes themselves, oldest first.
2. **Clusters**: one pass in that order; a memory joins the cluster whose centre (the normalised
   mean of its members' vectors) is most similar, when the cosine is at least
   ``reorganize_threshold``, else it starts a new cluster. The same memories give the same
   clusters, however often maintenance ran before.
3. **Nodes**: a cluster of at least ``reorganize_min_members`` memories gets a node, a memory of
   kind ``topic`` (id from the cluster's oldest member). Offline its text is extractive: the
   three members closest to the centre, joined into one sentence. Its sources are the members'
   sources, its scope the strictest of theirs, its times the members' (first ``valid_from``,
   last creation), so a node never shows what a member's reader could not see.
4. **Links**: one ``memory_relations`` row (``member_of``) per member and node version, ranked by
   closeness to the centre; a node's members are the rows of its latest version.
5. **Incremental refresh**: a node whose members and text did not change is left alone; one that
   changed is updated (``updated``, new version, new links); one whose cluster fell apart is
   archived, and reactivated when the cluster forms again.

Default search skips topic nodes; ``search --nodes`` returns them and ``--expand`` replaces each
node by its members (``services.search``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from skillstream.embed import Embed
from skillstream.ids import prefixed_id
from skillstream.lifecycle.clusters import ClusterPass
from skillstream.lifecycle.clusters import unit as _unit
from skillstream.lifecycle.params import LifecycleParams
from skillstream.lifecycle.states import ChangeLog
from skillstream.memories import LIVE, OwnerMemories, age_key
from skillstream.model import Memory, MemoryRelationRow
from skillstream.vectors import LaterVectors
from skillstream.vocab import LifecycleEvent, MemoryKind, MemoryStatus, MemoryType

MEMBER_OF = "member_of"
"""The ``memory_relations`` relation from a member to its topic node."""
CLUSTERED_TYPES = frozenset({MemoryType.LONG_TERM, MemoryType.USER})
NOT_CLUSTERED = frozenset({MemoryKind.SUMMARY, MemoryKind.TOPIC})
CENTRAL = 3
"""Members whose texts make up an offline node's sentence."""
MAX_TAGS = 5
_SCOPE_ORDER = {"session": 0, "private": 1, "fleet": 2}


def node_id(owner_id: str, anchor_id: str) -> str:
    return prefixed_id("mem", owner_id, "topic", anchor_id)


def candidates(state: OwnerMemories, at: datetime) -> list[Memory]:
    """The memories the reorganizer clusters at ``at`` (created by then), oldest first.

    Read from the index's live memories of the clustered types (the index must know every change),
    so the owner's archived, merged and expired history costs nothing here.
    """
    live = state.index.live_by_type
    found = (state.get(i) for t in sorted(CLUSTERED_TYPES) for i in live.get(t, {}))
    return sorted(
        (
            m
            for m in found
            if m is not None
            and m.status in LIVE
            and m.created_at is not None
            and m.created_at <= at
            and m.memory_type in CLUSTERED_TYPES
            and m.kind not in NOT_CLUSTERED
            and m.vector is not None
        ),
        key=age_key,
    )


def cluster(items: Sequence[Memory], threshold: float) -> list[list[Memory]]:
    """Single-pass clustering by cosine to the cluster centres (``lifecycle.clusters``)."""
    return ClusterPass(threshold).run(items)


class Kept:
    """What the reorganizer keeps of an owner between ticks (derived data of its state): the
    clustering pass, and the node built for each cluster with its members."""

    def __init__(self, threshold: float) -> None:
        self.clusters = ClusterPass(threshold)
        self.nodes: dict[tuple, tuple] = {}
        self._seen: dict[tuple, tuple] = {}

    def node(
        self, owner_id: str, members: Sequence[Memory]
    ) -> tuple[Memory, list[tuple[Memory, float]], np.ndarray]:
        """``build_node`` for a cluster, reused from the last tick when the cluster holds the same
        memory objects at the same versions with the same vectors."""
        key = tuple((m.id, m.version) for m in members)
        got = self.nodes.get(key)
        if got is None or any(
            m is not o or m.vector is not v for m, o, v in zip(members, got[0], got[1])
        ):
            built = build_node(owner_id, members)
            got = (tuple(members), tuple(m.vector for m in members), *built)
        self._seen[key] = got
        _, _, node, ranked, centre = got
        return node.copy(), list(ranked), centre

    def start_tick(self) -> None:
        """Begin a tick: nodes built from here on are kept for the next one."""
        self._seen = {}

    def end_tick(self) -> None:
        """End a tick: keep the nodes of this tick's clusters only."""
        self.nodes, self._seen = self._seen, {}


def sentence(texts: Sequence[str], lang: str) -> str:
    """Member texts joined into one sentence: ``A; B; and C.``"""
    if lang == "zh":
        parts = [t.strip().rstrip("。．.!！?？；;，,") for t in texts]
        return "；".join(p for p in parts if p) + "。"
    parts = [t.strip().rstrip(".!?;,: ") for t in texts]
    parts = [p for p in parts if p]
    if len(parts) > 1:
        parts[-1] = "and " + parts[-1]
    text = "; ".join(parts) + "."
    return text[:1].upper() + text[1:]


def build_node(
    owner_id: str, members: Sequence[Memory]
) -> tuple[Memory, list[tuple[Memory, float]], np.ndarray]:
    """The node for one cluster (without vector), its members by closeness, and its centre."""
    mat = np.asarray([m.vector for m in members], dtype=np.float32)
    centre = _unit(mat.sum(axis=0))
    sims = mat @ centre
    ranked = sorted(
        ((m, round(float(s), 6)) for m, s in zip(members, sims)), key=lambda p: (-p[1], p[0].id)
    )
    langs = Counter(m.lang for m in members)
    lang = "zh" if langs.get("zh", 0) > len(members) / 2 else "en"
    text = sentence([m.text for m, _ in ranked[:CENTRAL]], lang)
    subjects = Counter(m.subject for m in members if m.subject)
    tags = Counter(t for m in members for t in m.tags)
    anchor = members[0]
    created = max(m.created_at for m in members if m.created_at is not None)
    valid = [m.valid_from for m in members if m.valid_from is not None]
    node = Memory(
        id=node_id(owner_id, anchor.id),
        owner_id=owner_id,
        text=text,
        kind=MemoryKind.TOPIC,
        scope=min((m.scope for m in members), key=lambda s: _SCOPE_ORDER.get(s, -1)),
        memory_type=MemoryType.LONG_TERM,
        agent_id=anchor.agent_id,
        conversation_id=anchor.conversation_id,
        key=f"topic|{anchor.id}",
        subject=min(subjects, key=lambda s: (-subjects[s], s)) if subjects else None,
        tags=[t for t, _ in sorted(tags.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_TAGS]],
        confidence=round(float(np.mean([m.confidence for m in members])), 6),
        event_ts=created,
        valid_from=min(valid) if valid else None,
        created_at=created,
        updated_at=created,
        source_message_ids=list(dict.fromkeys(s for m, _ in ranked for s in m.source_message_ids)),
        lang=lang,
    )
    return node, ranked, centre


def _links(
    node: Memory, ranked: Sequence[tuple[Memory, float]], at: datetime, recorded_at: datetime
) -> list[MemoryRelationRow]:
    return [
        MemoryRelationRow(
            relation_id=prefixed_id("rel", m.id, node.id, MEMBER_OF, node.version),
            owner_id=node.owner_id,
            source_id=m.id,
            target_id=node.id,
            relation=MEMBER_OF,
            rank=i,
            weight=sim,
            version=node.version,
            event_ts=at,
            recorded_at=recorded_at,
        )
        for i, (m, sim) in enumerate(ranked)
    ]


def reorganize(
    log: ChangeLog,
    state: OwnerMemories,
    at: datetime,
    params: LifecycleParams,
    embed: Embed | None = None,
    later: LaterVectors | None = None,
) -> int:
    """Write, refresh or archive the owner's topic nodes at ``at``; returns how many changed.

    Nodes get the vectors of their texts (``embed``, or when the caller settles ``later``); with
    neither, a node's vector is its cluster's centre.
    """
    threshold = params.reorganize_threshold
    kept = state.derived("reorganizer", lambda: Kept(threshold))
    if kept.clusters.threshold != threshold:
        kept = state.keep("reorganizer", Kept(threshold))
    kept.start_tick()
    found = kept.clusters.run(candidates(state, at))
    groups = [g for g in found if len(g) >= params.reorganize_min_members]
    built = [kept.node(state.owner_id, g) for g in groups]
    kept.end_tick()
    todo: list[tuple[Memory, list[tuple[Memory, float]], np.ndarray, Memory | None]] = []
    for node, ranked, centre in built:
        current = state.get(node.id)
        if current is not None and (
            current.status in (MemoryStatus.EXPIRED, MemoryStatus.DELETED, MemoryStatus.FROZEN)
            or (
                current.status in LIVE
                and current.text == node.text
                and current.source_message_ids == node.source_message_ids
            )
        ):
            continue  # unchanged (or no longer the reorganizer's to change)
        todo.append((node, ranked, centre, current))
    changed = 0
    # A node keeping its text (only its members changed) keeps its vector: the text is all that
    # is embedded, so only new texts go to the model.
    kept_vector: dict[int, Any] = {
        i: current.vector
        for i, (node, _, _, current) in enumerate(todo)
        if current is not None and current.vector is not None and current.text == node.text
    }
    if later is not None:  # a node whose text's vector is on its way keeps waiting for it
        kept_vector.update(
            (i, None)
            for i, (node, _, _, current) in enumerate(todo)
            if current is not None and later.waits_for(current, node.text)
        )
    fresh = [i for i in range(len(todo)) if i not in kept_vector]
    now = embed is not None and later is None and fresh
    vectors = dict(zip(fresh, embed([todo[i][0].text for i in fresh]))) if now else {}  # type: ignore[misc]
    wanted: list[Memory] = []
    for i, (node, ranked, centre, current) in enumerate(todo):
        vector: np.ndarray | None
        if embed is None and later is None:
            vector = centre
        elif i in kept_vector:
            had = kept_vector[i]
            vector = None if had is None else np.asarray(had, np.float32)
        elif later is not None:
            vector = None  # given when ``later`` settles
        else:
            vector = np.asarray(vectors[i], np.float32)
        members = ", ".join(m.id for m, _ in ranked)
        if current is None:
            node.vector = vector  # type: ignore[assignment]
            node.confidence = min(node.confidence, params.confidence_cap)
            state.put(node)
            log.log(node, LifecycleEvent.CREATED, f"topic of {len(ranked)}: {members}", at)
            target = node
        else:
            if current.status == MemoryStatus.ARCHIVED:
                log.transition(
                    current,
                    MemoryStatus.ACTIVATED,
                    LifecycleEvent.REACTIVATED,
                    "its cluster formed again",
                    at,
                )
            old = current.copy()
            for name in ("text", "scope", "subject", "tags", "confidence", "source_message_ids"):
                setattr(current, name, getattr(node, name))
            current.vector = vector  # type: ignore[assignment]
            current.event_ts = node.event_ts
            current.updated_at = max(at, current.updated_at) if current.updated_at else at
            current.version += 1
            log.log(current, LifecycleEvent.UPDATED, f"topic of {len(ranked)}: {members}", at, old)
            target = current
        log.rows.memory_relations.extend(_links(target, ranked, at, log.recorded_at))
        if later is not None and i not in kept_vector:
            wanted.append(target)
        changed += 1
    if later is not None:
        later.want(wanted)
    built_ids = {n.id for n, _, _ in built}
    nodes = (state.get(i) for i in state.index.topics)
    for m in sorted((m for m in nodes if m is not None), key=age_key):
        if (
            m.kind == MemoryKind.TOPIC
            and m.status in LIVE
            and m.id not in built_ids
            and m.created_at is not None
            and m.created_at <= at
        ):
            log.transition(
                m, MemoryStatus.ARCHIVED, MemoryStatus.ARCHIVED, "its cluster fell apart", at
            )
            changed += 1
    return changed
