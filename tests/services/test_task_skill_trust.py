"""Trust through the task-skill service on a real home: probation in distillation, usage age,
pins and feedback, each change of state a version at an exact time with its reason."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from skillstream.distill.distiller import OwnerTaskSkills, TaskSkillDistiller
from skillstream.distill.heuristics import HeuristicDistiller
from skillstream.distill.record import TaskSkill
from skillstream.distill.trust import TrustRules
from skillstream.services.task_skills import TaskSkillAPI
from skillstream.settings import Settings
from skillstream.storage.catalog import Catalog
from tests.distill.conftest import DEPLOY_1, DEPLOY_2, block

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def versions(settings: Settings) -> list[tuple]:
    cat = Catalog(settings.storage.catalog, read_only=True)
    try:
        rows = cat.sql(
            "select version, change, status, reason, created_at from task_skill_versions "
            "order by created_at, version"
        ).to_pylist()
    finally:
        cat.close()
    return [(r["version"], r["change"], r["status"], r["reason"], r["created_at"]) for r in rows]


def test_a_candidate_becomes_active_when_a_second_session_supports_it(embedder):
    now = [T0]
    core = TaskSkillDistiller(
        HeuristicDistiller(embedder.encode),
        embedder.encode,
        clock=lambda: now[0],
        trust=TrustRules(min_support=2),
    )
    state = OwnerTaskSkills("u1")
    (first,) = core.distill_block(state, block(DEPLOY_1))
    now[0] = T0 + timedelta(days=14)
    (second,) = core.distill_block(state, block(DEPLOY_2, session_id="s2"))
    assert (first.action, first.skill.status, first.skill.updated_at) == (
        "created",
        "candidate",
        T0,
    )
    assert first.reason == "new: candidate" and first.skill.package_url is None
    assert (second.action, second.skill.status, second.skill.updated_at) == (
        "updated",
        "active",
        T0 + timedelta(days=14),
    )
    assert second.reason == "candidate -> active: supported by 2 segments"


def test_usage_age_makes_a_skill_stale_then_archived_and_a_pin_holds_it(tmp_path, embedder):
    settings = Settings.from_keys(
        home=str(tmp_path / "home"), skill_stale_days=30, skill_archive_days=90
    )
    now = [T0]

    service = TaskSkillAPI(settings, owner="u1", embed=embedder.encode, clock=lambda: now[0])

    def api() -> TaskSkillAPI:
        return service

    for name in ("deploy-app", "rotate-keys", "book-room"):
        api().save(TaskSkill.new("u1", name, description=f"{name}.", procedure=["Do it."]))
    for day, note in ((1, "no room"), (2, "wrong date"), (3, "double booked")):
        now[0] = T0 + timedelta(days=day)
        got = api().feedback("book-room", False, note)
    assert (got["state"], got["change"]) == (
        "retired",
        "active -> retired: reliability 0.20 below 0.4 after failure: double booked",
    )
    now[0] = T0 + timedelta(days=10)
    assert api().pin("rotate-keys")["pinned"] is True
    now[0] = T0 + timedelta(days=29, hours=23)
    assert api().maintain() == []
    stale_at = T0 + timedelta(days=30)
    now[0] = stale_at
    assert api().maintain() == [
        {
            "owner_id": "u1",
            "name": "deploy-app",
            "old": "active",
            "new": "stale",
            "reason": "unused for 30 days (limit 30)",
            "at": stale_at.isoformat(),
        }
    ]
    assert [s["name"] for s in api().list()] == ["rotate-keys"]  # a stale skill is not served
    archived_at = T0 + timedelta(days=90)
    now[0] = archived_at
    (moved,) = api().maintain()
    assert (moved["old"], moved["new"], moved["at"]) == (
        "stale",
        "archived",
        archived_at.isoformat(),
    )
    every = api().list(include_archived=True)
    assert [(s["name"], s["state"], s["pinned"]) for s in every] == [
        ("rotate-keys", "active", True),
        ("book-room", "retired", False),
        ("deploy-app", "archived", False),
    ]
    assert [v for v in versions(settings) if v[1] != "saved"] == [
        (2, "feedback", "active", "failure: no room", T0 + timedelta(days=1)),
        (3, "feedback", "active", "failure: wrong date", T0 + timedelta(days=2)),
        (
            4,
            "feedback",
            "retired",
            "active -> retired: reliability 0.20 below 0.4 after failure: double booked",
            T0 + timedelta(days=3),
        ),
        (2, "pinned", "active", "active -> active: pinned by a person", T0 + timedelta(days=10)),
        (2, "aged", "stale", "active -> stale: unused for 30 days (limit 30)", stale_at),
        (3, "aged", "archived", "stale -> archived: unused for 90 days (limit 90)", archived_at),
    ]
