"""Consolidation of task skills: a duplicate becomes a new version of one skill, with both
histories kept; recall finds an existing skill for a task asked in other words."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from skillstream.distill.consolidate import MERGED_FROM, MERGED_INTO, fit
from skillstream.distill.distiller import OwnerTaskSkills, TaskSkillDistiller
from skillstream.distill.heuristics import HeuristicDistiller
from skillstream.distill.recall import recall
from skillstream.services.publishing import Publisher
from skillstream.storage.home import open_stores
from skillstream.storage.writer import write_results
from tests.distill.conftest import DEPLOY_1, block

NOW = datetime(2025, 6, 1, tzinfo=UTC)

DEPLOY_REWORDED = [
    ("user", "How do I ship the Flask service onto the staging box?"),
    ("assistant", "First run pytest and make sure the tests pass."),
    ("assistant", "Then build the image with docker build -t app:staging ."),
    ("assistant", "Push it with docker push registry.local/app:staging."),
    ("assistant", "Finally restart it with systemctl restart app and check the health endpoint."),
]
BACKUP = [
    ("user", "Can you help me back up the Postgres database every night?"),
    ("assistant", "First, create a dump with pg_dump -Fc shop > shop.dump."),
    ("assistant", "Then copy the dump to the bucket with aws s3 cp shop.dump s3://backups/."),
    ("assistant", "Next, add a cron entry that runs the script at 2 am."),
    ("assistant", "Finally, restore one dump into a scratch database to test it."),
]
SOUP = [
    ("user", "I'd like to cook a tomato soup for four people tonight."),
    ("assistant", "First, chop two onions and fry them in olive oil until soft."),
    ("assistant", "Then add a kilo of chopped tomatoes and a litre of stock."),
    ("assistant", "Simmer for twenty minutes, then blend until smooth."),
    ("assistant", "Finally, season with salt, pepper and a little sugar."),
]


def distiller(embedder, *, update_threshold: float, publisher=None) -> TaskSkillDistiller:
    """The offline distiller; ``update_threshold`` above 1 makes every segment a new skill (a
    recall that misses), so the duplicate is left to consolidation."""
    return TaskSkillDistiller(
        HeuristicDistiller(embedder.encode, merge_threshold=update_threshold),
        embedder.encode,
        publisher=publisher,
        consolidate_threshold=0.55,
        clock=lambda: NOW,
    )


def test_a_duplicate_is_merged_into_a_new_version_with_both_sources(settings, embedder):
    publisher = Publisher.from_settings(settings.storage)
    core = distiller(embedder, update_threshold=2.0, publisher=publisher)
    state = OwnerTaskSkills("omar")
    first = core.distill_block(state, block(DEPLOY_1, owner_id="omar", conversation_id="c1"))
    second = core.distill_block(
        state, block(DEPLOY_REWORDED, owner_id="omar", conversation_id="c2")
    )
    assert [r.action for r in first] == ["created"]
    assert [r.action for r in second] == ["created", "merged", "merged"]
    original, duplicate = first[0].skill, second[0].skill
    assert original.name != duplicate.name and original.version == duplicate.version == 1

    kept, gone = second[1].skill, second[2].skill
    # the survivor is the older skill (same number of sources): a new version, published again
    assert (kept.id, kept.version, kept.status) == (original.id, 2, "active")
    assert kept.source_conversation_ids == ["c1", "c2"]
    assert kept.source_segment_ids == [first[0].segment_id, second[0].segment_id]
    assert kept.stats[MERGED_FROM] == [duplicate.id]
    assert kept.package_url and kept.package_url != original.package_url
    assert "Push it with docker push registry.local/app:staging." not in original.procedure
    assert kept.stats["n"] == 2 and len(kept.procedure) >= len(original.procedure)
    # the absorbed skill is archived as its next version, pointing at the survivor
    assert (gone.id, gone.version, gone.status) == (duplicate.id, 2, "archived")
    assert gone.stats[MERGED_INTO] == original.id
    assert gone.package_url == duplicate.package_url
    assert [s.id for s in state.skills.values() if s.status == "active"] == [original.id]

    # stored: every version of both skills, every package of the survivor
    with open_stores(settings, embedder.dim) as stores:
        write_results(stores, first + second)
        versions = stores.catalog.sql(
            "select name, version, change, status from task_skill_versions order by name, version"
        ).to_pylist()
        current = stores.catalog.sql(
            "select name, version, status, source_conversation_ids from task_skills order by name"
        ).to_pylist()
    assert [(v["name"], v["version"], v["change"], v["status"]) for v in versions] == sorted(
        [
            (original.name, 1, "created", "active"),
            (original.name, 2, "merged", "active"),
            (duplicate.name, 1, "created", "active"),
            (duplicate.name, 2, "merged", "archived"),
        ]
    )
    by_name = {r["name"]: r for r in current}
    assert by_name[original.name]["source_conversation_ids"] == ["c1", "c2"]
    assert by_name[duplicate.name]["status"] == "archived"
    assert publisher.versions("omar", original.name) == [
        f"omar/{original.name}/v1/{original.name}.zip",
        f"omar/{original.name}/v2/{original.name}.zip",
    ]
    assert publisher.versions("omar", duplicate.name) == [
        f"omar/{duplicate.name}/v1/{duplicate.name}.zip"
    ]


def test_different_tasks_are_not_merged(embedder):
    core = distiller(embedder, update_threshold=2.0)
    state = OwnerTaskSkills("omar")
    results = []
    for cid, turns in (("c1", DEPLOY_1), ("c2", BACKUP), ("c3", SOUP)):
        results += core.distill_block(state, block(turns, owner_id="omar", conversation_id=cid))
    assert [r.action for r in results] == ["created"] * 3
    deploy, backup, soup = (r.skill for r in results)
    assert fit(deploy, backup) < 0.55 and fit(deploy, soup) < 0.55 and fit(backup, soup) < 0.55


def test_recall_finds_the_existing_skill_for_a_reworded_task(embedder):
    core = distiller(embedder, update_threshold=0.55)
    state = OwnerTaskSkills("omar")
    for cid, turns in (("c1", DEPLOY_1), ("c2", BACKUP), ("c3", SOUP)):
        core.distill_block(state, block(turns, owner_id="omar", conversation_id=cid))
    deploy = next(s for s in state.skills.values() if s.source_conversation_ids == ["c1"])
    query = "How do I ship the Flask service onto the staging box?"
    hits = recall(query, embedder.encode([query])[0], list(state.skills.values()), k=3)
    assert hits[0].skill.id == deploy.id
    # and distilling the reworded conversation updates that skill instead of creating one
    (r,) = core.distill_block(state, block(DEPLOY_REWORDED, owner_id="omar", conversation_id="c4"))
    assert (r.action, r.skill.id, r.skill.version) == ("updated", deploy.id, 2)
    assert r.skill.source_conversation_ids == ["c1", "c4"]


def test_consolidate_merges_stored_duplicates_once(settings, embedder):
    from skillstream.services.task_skills import TaskSkillAPI

    core = distiller(embedder, update_threshold=2.0)
    core.consolidate_threshold = 2.0  # the flow misses the duplicate: both are stored
    core.publisher = Publisher.from_settings(settings.storage)
    state = OwnerTaskSkills("omar")
    results = []
    for cid, turns in (("c1", DEPLOY_1), ("c2", BACKUP), ("c3", DEPLOY_REWORDED)):
        results += core.distill_block(state, block(turns, owner_id="omar", conversation_id=cid))
    assert [r.action for r in results] == ["created"] * 3
    with open_stores(settings, embedder.dim) as stores:
        write_results(stores, results)
    deploy, backup, reworded = (r.skill for r in results)

    api = TaskSkillAPI(settings, owner="omar", embed=embedder.encode, clock=lambda: NOW)
    assert api.consolidate() == [(reworded.name, deploy.name)]
    assert api.consolidate() == []  # nothing left to merge
    assert [s["name"] for s in api.list()] == sorted([deploy.name, backup.name])
    merged = api.get(deploy.name)
    assert (merged.version, merged.source_conversation_ids) == (2, ["c1", "c3"])
    assert api.package(deploy.name) == Publisher.from_settings(settings.storage).read(
        f"omar/{deploy.name}/v2/{deploy.name}.zip"
    )
    archived = api.get(reworded.name)
    assert (archived.version, archived.status) == (2, "archived")
    assert archived.stats[MERGED_INTO] == deploy.id


def _skill(name: str, vector: list[float], steps: list[str], sources: int):
    from skillstream.distill.record import TaskSkill

    return TaskSkill.new(
        "omar",
        name,
        title=name.replace("-", " "),
        procedure=steps,
        vector=vector,
        source_segment_ids=[f"{name}-seg-{i}" for i in range(sources)],
    )


def test_a_duplicate_needs_alike_requests_and_shared_steps():
    from skillstream.distill.consolidate import duplicate_of

    steps = ["Ask for the guest name.", "Ask for the arrival date.", "Confirm the booking number."]
    old = _skill("book-room", [1.0, 0.0], steps, 9)
    young = _skill("reserve-room", [0.96, 0.28], steps[:2], 1)
    assert duplicate_of(young, [old, young], threshold=0.55) is old
    # two skills of one task that each gathered segments are duplicates all the same
    grown = _skill("reserve-room", [0.96, 0.28], steps[:2], 4)
    assert duplicate_of(grown, [old, grown], threshold=0.55) is old
    # asked alike but with other steps: a different task
    other = _skill("book-table", [0.96, 0.28], ["Ask for the party size.", "Pick a table."], 1)
    assert duplicate_of(other, [old, other], threshold=0.55) is None
    # the same steps but asked about something else
    far = _skill("reserve-car", [0.6, 0.8], steps[:2], 1)
    assert duplicate_of(far, [old, far], threshold=0.55) is None


def _seen(skill, clock: int):
    from skillstream.distill.consolidate import SEEN

    skill.stats[SEEN] = clock
    return skill


def test_a_young_skill_near_an_established_one_folds_at_once():
    from skillstream.distill.consolidate import fold_targets

    old = _seen(_skill("book-room", [1.0, 0.0], ["Ask for the guest name."], 9), 10)
    # just changed (seen at the clock), cosine 0.8: folds although no step is shared
    near = _seen(_skill("room-tonight", [0.8, 0.6], ["Say sorry for the wait."], 1), 12)
    assert fold_targets([old, near], clock=12) == [(near, old)]
    # cosine 0.6: not yet
    mid = _seen(_skill("room-later", [0.6, 0.8], ["Say sorry for the wait."], 1), 12)
    assert fold_targets([old, mid], clock=12) == []


def test_a_stale_young_skill_folds_when_reasonably_near_and_a_far_one_stays():
    from skillstream.distill.consolidate import STALE, fold_targets

    old = _seen(_skill("book-room", [1.0, 0.0], ["Ask for the guest name."], 9), 10)
    mid = _seen(_skill("room-later", [0.6, 0.8], ["Say sorry for the wait."], 1), 12)
    far = _seen(_skill("weather", [0.3, 0.954], ["Give the forecast."], 1), 12)
    assert fold_targets([old, mid, far], clock=12 + STALE - 1) == []
    assert fold_targets([old, mid, far], clock=12 + STALE) == [(mid, old)]
    # an established skill never folds, whatever its age
    grown = _seen(_skill("room-later", [0.6, 0.8], ["Say sorry for the wait."], 4), 12)
    assert fold_targets([old, grown], clock=12 + STALE) == []
    # nothing to fold into: no established skill
    assert fold_targets([mid, far], clock=12 + STALE) == []


def test_a_stale_young_skill_folds_from_fold_min_on():
    import math

    from skillstream.distill.consolidate import FOLD_MIN, STALE, fold_targets

    old = _seen(_skill("book-room", [1.0, 0.0], ["Ask for the guest name."], 9), 10)

    def young(cos: float):
        return _seen(_skill("room-odd", [cos, math.sqrt(1 - cos * cos)], ["Say sorry."], 1), 12)

    above, below = young(FOLD_MIN + 0.01), young(FOLD_MIN - 0.01)
    assert fold_targets([old, above], clock=12 + STALE) == [(above, old)]
    assert fold_targets([old, below], clock=12 + STALE) == []


def test_the_distiller_folds_a_stale_young_skill_with_both_histories_kept():
    from skillstream.distill.consolidate import STALE

    old = _seen(_skill("book-room", [1.0, 0.0], ["Ask for the guest name."], 9), 10)
    mid = _seen(_skill("room-later", [0.6, 0.8], ["Say sorry for the wait."], 1), 12)
    state = OwnerTaskSkills("omar")
    for s in (old, mid):
        state.put(s)
    for i in range(STALE + 2):  # the owner's clock: segments in its task skills, 12 + STALE
        state.segments.add(f"other-seg-{i}")
    core = TaskSkillDistiller(
        None,  # type: ignore[arg-type]  # folding needs no distiller
        lambda texts: np.tile(np.array([1.0, 0.0], dtype=np.float32), (len(texts), 1)),
    )
    results = core.fold(state)
    kept, gone = (r.skill for r in results)
    assert [r.action for r in results] == ["merged", "merged"]
    assert (kept.id, kept.version, kept.status) == (old.id, 2, "active")
    assert set(kept.source_segment_ids) == set(old.source_segment_ids) | set(mid.source_segment_ids)
    assert kept.stats[MERGED_FROM] == [mid.id]
    assert (gone.id, gone.version, gone.status) == (mid.id, 2, "archived")
    assert gone.stats[MERGED_INTO] == old.id
    assert core.fold(state) == []  # nothing young is left
