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
   three members closest to the centre, joined into one sentence. Its vector is the normalised sum
   of those three members' vectors (:func:`node_vector`): a node's text is never embedded. Its
   sources are the members' sources, its scope the strictest of theirs, its times the members'
   (first ``valid_from``, last creation), so a node never shows what a member's reader could not
   see.
4. **Links**: ``memory_relations`` rows (``member_of``) written as changes: at each node version a
   ``join`` row (rank and cosine to the centre) for each member that came in since the node's last
   version and a ``leave`` row for each that went; a member that stays costs no row. The state
   keeps each node's members at its last version (``OwnerMemories.topic_members``, read back from
   the catalog with the memories); a node the state has but whose members it does not know (a
   state snapshotted before it kept them) gets a whole listing instead (rows without ``change``).
5. **Versions when a reader would see a change** (:func:`material`): a node is rewritten (new
   version: text, sources, vector, links) only when a member its text shows left the cluster or
   changed its text, when :data:`CHURN` or more of its sources changed since its last version,
   or when a member needs a stricter scope. A new member that changes neither leaves the node as
   it is. The rule reads only the stored node and the cluster, so a resumed or restarted run
   decides as an uninterrupted one. A node whose cluster fell apart is archived, and reactivated
   when the cluster forms again.

Default search skips topic nodes; ``search --nodes`` returns them and ``--expand`` replaces each
node by its members (``services.search``).
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Sequence
from datetime import datetime

import numpy as np

from skillstream.ids import prefixed_id
from skillstream.lifecycle.clusters import ClusterPass
from skillstream.lifecycle.clusters import unit as _unit
from skillstream.lifecycle.params import LifecycleParams
from skillstream.lifecycle.states import ChangeLog
from skillstream.memories import LIVE, OwnerMemories, age_key
from skillstream.model import Memory, MemoryRelationRow
from skillstream.vocab import LifecycleEvent, MemoryKind, MemoryStatus, MemoryType

MEMBER_OF = "member_of"
"""The ``memory_relations`` relation from a member to its topic node."""
JOIN = "join"
"""``change`` of a ``member_of`` row: the member came into the node at that version."""
LEAVE = "leave"
"""``change`` of a ``member_of`` row: the member went out of the node at that version."""
CLUSTERED_TYPES = frozenset({MemoryType.LONG_TERM, MemoryType.USER})
NOT_CLUSTERED = frozenset({MemoryKind.SUMMARY, MemoryKind.TOPIC})
CENTRAL = 3
"""Members whose texts make up an offline node's sentence."""
CHURN = 0.25
"""Share of a node's sources (Jaccard distance between the sources of its last version and its
cluster's now) from which the node gets a new version. A cluster grows a member or two per tick;
rewriting the node at each (its text reorders as the centre moves) made most node versions."""
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


_VECTOR = operator.attrgetter("vector")
_ID = operator.attrgetter("id")
_VERSION = operator.attrgetter("version")


def cluster_key(members: Sequence[Memory]) -> tuple:
    """A cluster's members as ``((id, version), ...)``."""
    return tuple(zip(map(_ID, members), map(_VERSION, members)))


class Kept:
    """What the reorganizer keeps of an owner between ticks (derived data of its state): the
    clustering pass, and the node built for each cluster with its members."""

    def __init__(self, threshold: float) -> None:
        self.clusters = ClusterPass(threshold)
        self.nodes: dict[tuple, tuple] = {}
        self._seen: dict[tuple, tuple] = {}
        self.settled: dict[str, tuple] = {}
        """Node id -> (its cluster's members and versions, the node's version) when ``material``
        last found nothing to change, or the node was last written: the same cluster and node
        need no look again."""

    def node(
        self, owner_id: str, members: Sequence[Memory], key: tuple
    ) -> tuple[Memory, list[tuple[Memory, float]], np.ndarray]:
        """``build_node`` for a cluster (``key``: :func:`cluster_key` of its members), reused from
        the last tick when the cluster holds the same memory objects at the same versions with
        the same vectors."""
        got = self.nodes.get(key)
        # compared object by object at C speed: every tick looks at every clustered memory
        if (
            got is None
            or not all(map(operator.is_, members, got[0]))
            or not all(map(operator.is_, map(_VECTOR, members), got[1]))
        ):
            built = build_node(owner_id, members)
            got = (tuple(members), tuple(map(_VECTOR, members)), *built)
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


def node_vector(ranked: Sequence[tuple[Memory, float]]) -> np.ndarray:
    """A node's vector: the normalised sum of the vectors of the members its text shows (the
    :data:`CENTRAL` closest to the centre), so it stands for what a reader of the node sees."""
    return _unit(np.sum([np.asarray(m.vector, np.float32) for m, _ in ranked[:CENTRAL]], axis=0))


def _shown_part(text: str) -> str:
    """A member's text as a node's sentence shows it (``sentence``), for matching."""
    return text.strip().rstrip("。．.!！?？；;，,: ").casefold()


def shows(node_text: str, member: Memory) -> bool:
    """Whether ``node_text`` (a node's sentence) shows ``member``'s text as one of its parts."""
    part = _shown_part(member.text)
    if not part:
        return False
    text = node_text.casefold()
    starts = ("", "; ", "; and ", "；")
    ends = (";", ".", "；", "。")
    at = text.find(part)
    while at >= 0:
        before, after = text[:at], text[at + len(part) : at + len(part) + 1]
        if after in ends and any(before.endswith(x) if x else at == 0 for x in starts):
            return True
        at = text.find(part, at + 1)
    return False


def material(current: Memory, node: Memory, members: Sequence[Memory]) -> str | None:
    """Why the live node ``current`` needs the new version ``node`` for its cluster ``members``,
    or ``None`` when a reader of ``current`` would see nothing materially different."""
    shown = sum(1 for m in members if shows(current.text, m))
    if shown < min(CENTRAL, len(members)):
        return "a member it shows left or changed"
    old, new = set(current.source_message_ids), set(node.source_message_ids)
    union = old | new
    if union and len(old ^ new) / len(union) >= CHURN:
        return f"{CHURN:.0%} or more of its sources changed"
    if _SCOPE_ORDER.get(node.scope, -1) < _SCOPE_ORDER.get(current.scope, -1):
        return f"a member is {node.scope}"
    return None


def links(
    node: Memory,
    ranked: Sequence[tuple[Memory, float]],
    before: Sequence[str] | None,
    at: datetime,
    recorded_at: datetime,
) -> list[MemoryRelationRow]:
    """The ``member_of`` rows of ``node``'s new version, whose members are ``ranked``: a ``join``
    for each member not in ``before`` (the members of its last version) and a ``leave`` for each
    member of ``before`` that is gone, in ``before``'s order; with ``before`` not known
    (``None``), a whole listing (every member, no ``change``)."""

    def row(
        member_id: str, change: str | None, rank: int | None, sim: float | None
    ) -> MemoryRelationRow:
        return MemoryRelationRow(
            relation_id=prefixed_id("rel", member_id, node.id, MEMBER_OF, node.version),
            owner_id=node.owner_id,
            source_id=member_id,
            target_id=node.id,
            relation=MEMBER_OF,
            rank=rank,
            weight=sim,
            version=node.version,
            event_ts=at,
            recorded_at=recorded_at,
            change=change,
        )

    if before is None:
        return [row(m.id, None, i, sim) for i, (m, sim) in enumerate(ranked)]
    had = set(before)
    now = {m.id for m, _ in ranked}
    joins = [row(m.id, JOIN, i, sim) for i, (m, sim) in enumerate(ranked) if m.id not in had]
    return joins + [row(i, LEAVE, None, None) for i in before if i not in now]


def reorganize(log: ChangeLog, state: OwnerMemories, at: datetime, params: LifecycleParams) -> int:
    """Write, refresh or archive the owner's topic nodes at ``at``; returns how many changed."""
    threshold = params.reorganize_threshold
    kept = state.derived("reorganizer", lambda: Kept(threshold))
    if kept.clusters.threshold != threshold:
        kept = state.keep("reorganizer", Kept(threshold))
    kept.start_tick()
    found = kept.clusters.run(candidates(state, at))
    groups = [(g, cluster_key(g)) for g in found if len(g) >= params.reorganize_min_members]
    built = [(*kept.node(state.owner_id, g, key), g, key) for g, key in groups]
    kept.end_tick()
    changed = 0
    for node, ranked, _, members, key in built:
        current = state.get(node.id)
        if current is not None and current.status in (
            MemoryStatus.EXPIRED,
            MemoryStatus.DELETED,
            MemoryStatus.FROZEN,
        ):
            continue  # no longer the reorganizer's to change
        why = None
        if current is not None and current.status in LIVE:
            if kept.settled.get(node.id) == (key, current.version):
                continue  # the cluster and the node as they were when last looked at
            why = material(current, node, members)
            if why is None:
                kept.settled[node.id] = (key, current.version)
                continue
        described = f"topic of {len(ranked)}: {', '.join(m.id for m, _ in ranked)}"
        vector = node_vector(ranked)
        if current is None:
            node.vector = vector  # type: ignore[assignment]
            node.confidence = min(node.confidence, params.confidence_cap)
            state.put(node)
            log.log(node, LifecycleEvent.CREATED, described, at)
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
            reason = described if why is None else f"{described} ({why})"
            log.log(current, LifecycleEvent.UPDATED, reason, at, old)
            target = current
        before = state.topic_members.get(target.id) if current is not None else ()
        log.rows.memory_relations.extend(links(target, ranked, before, at, log.recorded_at))
        state.topic_members[target.id] = tuple(m.id for m, _ in ranked)
        kept.settled[target.id] = (key, target.version)
        changed += 1
    built_ids = {n.id for n, _, _, _, _ in built}
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
