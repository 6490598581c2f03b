"""Scopes and policies: configuration, enforcement on writes, and (property-based) on every read."""

from __future__ import annotations

import tempfile
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from skillstream.apply import ApplyOptions, apply_ops
from skillstream.errors import ConfigError
from skillstream.lifecycle.params import LifecycleParams
from skillstream.lifecycle.policy import SCOPES, Policy, PolicySet, Reader, can_read
from skillstream.memories import OwnerMemories
from skillstream.model import Memory, MemoryEvent, MemoryOp, Op
from skillstream.services.home_lifecycle import get_memory, history
from skillstream.services.search import MemorySearch
from skillstream.settings import Settings
from skillstream.storage.catalog import Catalog
from skillstream.storage.filters import read_filter
from skillstream.storage.lance import MemoryIndex
from tests.lifecycle.conftest import T0, lifecycle_params, span


@pytest.mark.parametrize(
    "table,message",
    [
        ({"readable": ["private"]}, r"unknown keys \['readable'\]"),
        ({"readable_scopes": ["private", "team"]}, "expected a list of scopes"),
        ({"default_scope": "team"}, "default_scope: 'team' is not one of"),
        ({"max_items_per_scope": {"fleet": -1}}, "expected a scope of"),
        ({"default_expiry": "soon"}, "duration 'soon' is not understood"),
        (
            {"sensitive_patterns": [{"name": "x", "regex": "(", "action": "redact"}]},
            "does not compile",
        ),
        (
            {"sensitive_patterns": [{"name": "x", "regex": "x", "action": "mask"}]},
            "action 'mask' is not one of",
        ),
    ],
)
def test_bad_policies_are_refused_with_the_place_and_the_reason(table, message):
    with pytest.raises(ConfigError, match=message):
        PolicySet.from_config({"bot": table})


def test_policies_from_settings(tmp_path):
    s = Settings.load(
        home=str(tmp_path),
        policies={
            "*": {"readable_scopes": ["private", "fleet"], "writable_scopes": ["private"]},
            "bot": {
                "default_scope": "session",
                "default_expiry": "30d",
                "max_items_per_scope": {"session": 5},
            },
        },
    )
    ps = LifecycleParams.from_settings(s).policy_set
    default, bot = ps.for_agent(None), ps.for_agent("bot")
    assert (default.readable, default.writable, ps.for_agent("other") is default) == (
        ("private", "fleet"),
        ("private",),
        True,
    )
    assert (bot.default_scope, bot.default_expiry, bot.max_items_for("session"), bot.readable) == (
        "session",
        timedelta(days=30),
        5,
        SCOPES,
    )


def test_writes_outside_the_policy_are_refused_and_patterns_apply(recorded):
    policy = lifecycle_params(
        policies={
            "bot": {
                "writable_scopes": ["private"],
                "sensitive_patterns": [
                    {"name": "ticket", "regex": r"TCK-\d{6}", "action": "redact"},
                    {"name": "diagnosis", "regex": r"(?i)diagnosed with \w+", "action": "reject"},
                ],
            }
        }
    )
    state = OwnerMemories("o1")
    r = apply_ops(
        state,
        span(["x"], at=T0, agent="bot"),
        [
            MemoryOp(Op.INSERT, "User shared fleet note", scope="fleet"),
            MemoryOp(Op.INSERT, "User opened ticket TCK-123456 about billing"),
            MemoryOp(Op.INSERT, "User was diagnosed with flu"),
        ],
        recorded,
        ApplyOptions(params=policy),
    )
    assert [m.text for m in state.items.values()] == [
        "User opened ticket [REDACTED:ticket] about billing"
    ]
    assert r.refused == [  # texts are checked first, scopes as the operations are applied
        (
            "INSERT: 'User was diagnosed with flu'",
            "matches sensitive pattern(s) diagnosis of policy 'bot'",
        ),
        ("INSERT: 'User shared fleet note'", "policy 'bot' may not write scope 'fleet'"),
    ]
    # another agent (default policy) may write the fleet scope
    apply_ops(
        state,
        span(["y"], at=T0, agent="other"),
        [MemoryOp(Op.INSERT, "Shared note", scope="fleet")],
        recorded,
        ApplyOptions(params=policy),
    )
    assert sorted(m.scope for m in state.items.values()) == ["fleet", "private"]


def test_user_patterns_join_the_defaults_at_parse_time_and_reject_wins(tmp_path):
    from skillstream.redact import DEFAULT_REDACTOR, redactor_for

    assert redactor_for(Settings.load(home=str(tmp_path)).lifecycle.policies) is DEFAULT_REDACTOR
    s = Settings.load(
        home=str(tmp_path),
        policies={
            "*": {
                "sensitive_patterns": [
                    {"name": "employee", "regex": r"EMP-\d{6}", "action": "redact"}
                ]
            },
            "hr-bot": {
                "sensitive_patterns": [
                    {"name": "employee", "regex": r"EMP-\d{6}", "action": "reject"}
                ]
            },
        },
    )
    r = redactor_for(s.lifecycle.policies)
    text, hits, rejected = r.check("EMP-123456 with password: hunter22")
    assert (text, hits, rejected) == (
        "[REDACTED:employee] with password: [REDACTED:password]",
        ["password", "employee"],
        ["employee"],
    )


def test_read_filter_text():
    r = Reader("o'1", "bot", "s1")
    assert read_filter(r, Policy()) == (
        "(scope = 'fleet') OR (scope = 'private' AND owner_id = 'o''1') OR "
        "(scope = 'session' AND owner_id = 'o''1' AND session_id = 's1')"
    )
    assert read_filter(Reader(None, "bot"), Policy(readable=("private",))) == "FALSE"
    assert read_filter(Reader(), Policy(readable=())) is None  # the operator


# ---------------------------------------------------------------------------- property-based
OWNERS = ["o1", "o2", "o3"]
AGENTS = ["a1", "a2", "a3"]
SESSIONS = ["s1", "s2"]
WORDS = ["tea", "hiking", "paris", "cello", "garden"]
STATUSES = ["activated", "activated", "frozen", "archived", "deleted"]


def expected_visible(reader: Reader, policies: dict, m: dict) -> bool:
    """The policy, written out independently of skillstream.lifecycle.policy."""
    if reader.owner_id is None and reader.agent_id is None:
        return True
    table = (policies.get(reader.agent_id) if reader.agent_id in policies else None) or (
        policies.get("*", {})
    )
    if m["scope"] not in table.get("readable_scopes", SCOPES):
        return False
    if m["scope"] == "fleet":
        return True
    if m["owner_id"] != reader.owner_id:
        return False
    return m["scope"] == "private" or (
        reader.session_id is not None and m["session_id"] == reader.session_id
    )


scopes_subset = st.lists(st.sampled_from(SCOPES), unique=True, max_size=3)
policies_st = st.dictionaries(
    st.sampled_from(["*", "a1", "a2"]),
    st.fixed_dictionaries({"readable_scopes": scopes_subset}),
    max_size=3,
)
memories_st = st.lists(
    st.tuples(
        st.sampled_from(OWNERS),
        st.sampled_from(SCOPES),
        st.sampled_from(SESSIONS),
        st.sampled_from(STATUSES),
        st.sampled_from(WORDS),
        st.sampled_from(WORDS),
    ),
    min_size=1,
    max_size=14,
)
readers_st = st.lists(
    st.builds(
        Reader,
        st.sampled_from(OWNERS + [None]),
        st.sampled_from(AGENTS + [None]),
        st.sampled_from(SESSIONS + [None]),
    ),
    min_size=1,
    max_size=4,
)


@pytest.fixture(scope="module")
def lance_dir():
    with tempfile.TemporaryDirectory() as d:
        yield d


COUNTER = iter(range(10**6))


@hsettings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    policies=policies_st,
    rows=memories_st,
    readers=readers_st,
    strategy=st.sampled_from(["keyword", "semantic", "hybrid"]),
    seed=st.integers(0, 2**16),
)
def test_no_search_or_api_result_ever_violates_the_policy(
    lance_dir, embedder, policies, rows, readers, strategy, seed
):
    rng = np.random.default_rng(seed)
    memories = []
    for i, (owner, scope, session, status, w1, w2) in enumerate(rows):
        v = rng.normal(size=embedder.dim).astype(np.float32)
        memories.append(
            Memory(
                id=f"m{i}",
                owner_id=owner,
                text=f"The user mentioned {w1} and {w2}",
                kind="fact",
                scope=scope,
                status=status,
                session_id=session,
                created_at=T0,
                updated_at=T0,
                valid_from=T0,
                vector=(v / np.linalg.norm(v)).tolist(),
            )
        )
    index = MemoryIndex(lance_dir, embedder.dim, table=f"memories_{next(COUNTER)}")
    index.upsert(memories)
    index.optimize()
    settings = Settings.load(home=lance_dir, policies=policies)
    catalog = Catalog(":memory:")
    catalog.upsert(
        "memory_meta", [{k: v for k, v in m.row().items() if k != "vector"} for m in memories]
    )
    catalog.insert_ignore(
        "memory_events",
        [
            MemoryEvent(
                f"e{m.id}",
                m.id,
                m.owner_id,
                "created",
                "",
                None,
                "{}",
                None,
                m.status,
                None,
                "t",
                T0,
                T0,
                1,
            )
            for m in memories
        ],
    )
    by_id = {m.id: m.row() for m in memories}
    with MemorySearch(settings, record=False, index=index) as search:
        for reader in readers:
            hits = search.search(
                "tea hiking paris",
                owner=reader.owner_id,
                agent=reader.agent_id,
                session=reader.session_id,
                k=50,
                strategy=strategy,
            )
            for h in hits:
                assert expected_visible(reader, policies, by_id[h["id"]]), (
                    reader,
                    h["id"],
                    h["scope"],
                )
                assert h["status"] in ("activated", "frozen")
            if strategy == "semantic":  # and nothing allowed is filtered out by mistake
                want = {
                    i
                    for i, m in by_id.items()
                    if m["status"] in ("activated", "frozen")
                    and expected_visible(reader, policies, m)
                }
                assert {h["id"] for h in hits} == want
            for m in memories:
                ok = expected_visible(reader, policies, by_id[m.id])
                assert (get_memory(catalog, m.id, reader, search.params) is not None) == ok
                assert bool(history(catalog, m.id, reader, search.params)) == ok
                assert (
                    can_read(reader, search.params.policy_set.for_agent(reader.agent_id), m) == ok
                )
    catalog.close()
