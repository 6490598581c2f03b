"""``skillstream forget`` on a DuckDB-file home with a local artifact store: no marker of the
forgotten owner left in any byte of the home, the other owner unchanged, the home still runs, and a
replay does not bring the erased messages back (``tests/services/forget_home.py`` builds it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillstream.settings import Settings
from skillstream.storage.catalog import open_catalog
from skillstream.storage.lock import HomeBusyError, run_lock
from tests.servers.openai_stub import OpenAIStub
from tests.servers.processes import cli_env, run_cli
from tests.services import forget_home as fh

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
]


def stored(home: Path) -> dict[str, bytes]:
    out = fh.files(home)
    out.update(fh.lance_versions(str(home / "lancedb")))
    out.update(fh.catalog_rows(home / "catalog.duckdb"))
    out.update(fh.sqlite_rows(home))
    return out


def forget(home: Path, *args: str) -> dict:
    out = run_cli(
        "forget",
        "--owner",
        fh.TARGET,
        "--recovery-dir",
        str(home / "recovery"),
        "--json",
        *args,
        env=cli_env(home),
    )
    return json.loads(out.stdout)


def test_no_marker_is_left_in_any_byte_and_the_other_owner_is_unchanged(home, tmp_path):
    settings = Settings.load(home=str(home))
    before = stored(home)
    where = fh.marked(before)
    # the search sees every store that held the owner: LanceDB rows, catalog rows, the answer
    # cache, the recovery snapshots, the task-skill package inside its zip
    assert set(where) == set(fh.MARKERS), where
    hits = {w for ws in where.values() for w in ws}
    for store in (
        "lance:memories",
        "lance:task_skills",
        "duckdb:memory_meta",
        "duckdb:spans",
        "duckdb:dead_letters",
        "duckdb:queries",
        "duckdb:task_skill_versions",
        "sqlite:llm-cache.sqlite",
        "sqlite:part-",
        "SKILL.md",
    ):
        assert any(store in h for h in hits), store
    other = fh.owner_content(settings, fh.OTHER)
    assert other["lance:memories"] and other["packages"]

    report = forget(home, "--yes")

    counts = report["counts"]
    assert counts["lancedb"]["memories"] > 0 and counts["lancedb"]["task_skills"] == 1
    assert counts["catalog"]["memory_meta"] > 0 and counts["catalog"]["dead_letters"] == 2
    assert counts["catalog"]["llm_calls"] > 0 and counts["catalog"]["queries"] == 1
    assert counts["artifacts"]["packages"] >= 1 and counts["llm_cache"]["answers"] > 0
    assert counts["recovery"]["snapshots"] > 0 and counts["tombstones"]["messages"] == 10
    assert fh.marked(stored(home)) == {}
    assert fh.owner_content(settings, fh.OTHER) == other
    with open_catalog(settings.storage, read_only=True) as cat:
        (audit,) = cat.sql("SELECT * FROM erasures").to_pylist()
    assert audit["status"] == "done" and audit["messages"] == 10
    assert json.loads(audit["counts"]) == counts
    assert fh.TARGET not in json.dumps(audit, default=str)

    # forgetting again finds nothing more and changes nothing of the other owner
    again = forget(home, "--yes")
    assert again["total"] == 0
    assert fh.owner_content(settings, fh.OTHER) == other


def test_a_replay_stays_forgotten_and_new_messages_of_the_owner_are_taken(home, tmp_path):
    settings = Settings.load(home=str(home))
    forget(home, "--yes")
    other = fh.owner_content(settings, fh.OTHER)
    source = fh.write(tmp_path / "chat.jsonl", fh.rows())
    with OpenAIStub(fh.answer) as stub:
        e = fh.env(home, stub.url)
        # the same source again, without the recovery folder: a whole replay
        run_cli("run", "--source", str(source), env=e)
        assert fh.owner_content(settings, fh.TARGET) == fh.owner_content(settings, "nobody")
        # (a replay distils the other owner's conversation again: new rows of LLM calls)
        again = fh.owner_content(settings, fh.OTHER)
        assert again.pop("catalog:llm_calls") and other.pop("catalog:llm_calls")
        assert again == other
        # a new message of the owner, with a new id, is taken as new
        new = dict(fh.rows()[0], message_id=f"{fh.TARGET}-new", content="I adopted a dog.")
        run_cli("run", "--source", str(fh.write(tmp_path / "new.jsonl", [new])), env=e)
    with open_catalog(settings.storage, read_only=True) as cat:
        texts = (
            cat.sql("SELECT text FROM memory_meta WHERE owner_id = ?", [fh.TARGET])
            .column(0)
            .to_pylist()
        )
    assert texts == ["Qzspeaker said: I adopted a dog."]


def test_a_dry_run_counts_and_changes_nothing(home):
    before = fh.files(home)
    report = forget(home, "--dry-run")
    assert report["dry_run"] and report["counts"]["lancedb"]["memories"] > 0
    assert report["counts"]["tombstones"]["messages"] == 10
    assert fh.files(home) == before


def test_refused_while_a_run_holds_the_home(home):
    from skillstream.services.forget import forget_owner

    settings = Settings.load(home=str(home))
    with (
        run_lock(settings.storage.catalog, str(home)),
        pytest.raises(HomeBusyError, match="in use"),
    ):
        forget_owner(settings, fh.TARGET)
