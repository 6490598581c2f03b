"""Memory skills the rules executor runs by example (``OfflineForm``): extraction, bank, files."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from skillstream.errors import InputError
from skillstream.extract import ExtractionInput, MemorySkill, OfflineForm
from skillstream.memories import OwnerMemories
from skillstream.memskill.bank import TABLE, MemorySkillBank
from skillstream.memskill.files import read_skill_file, to_markdown
from skillstream.memskill.seeds import PRIMITIVES
from skillstream.memskill.versions import MemorySkillVersion
from skillstream.model import Message, Span
from skillstream.rules import RulesExecutor
from skillstream.settings import Settings
from skillstream.storage.catalog import Catalog
from skillstream.vocab import Op

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)

TRAVEL = MemorySkill(
    "keep-travel-questions",
    "Keep what a speaker asks about someone's travels and trips.",
    "Purpose: keep travel questions.\nWhen to use: a question about a trip.\n"
    "How to apply: store the question as the speaker's.\nConstraints: only INSERT.",
    Op.INSERT,
    offline=OfflineForm(prototypes=("Did you enjoy your trip to Japan?",), threshold=0.5),
)


def span(*turns: tuple[str, str]) -> Span:
    msgs = tuple(
        Message(
            message_id=f"m{i}",
            conversation_id="c1",
            owner_id="o1",
            session_id="s1",
            role="user",
            speaker=speaker,
            text=text,
            ts=T0 + timedelta(minutes=i),
        )
        for i, (speaker, text) in enumerate(turns)
    )
    return Span("sp1", "o1", "c1", "s1", 0, msgs, 40, "en")


SPAN = (
    ("Ana", "How was your trip to Kyoto last month?"),
    ("Ana", "I adopted a cat named Miso."),
    ("Ben", "Are you still working at the bakery?"),
)


def texts(skills: list[MemorySkill], embed, executor: RulesExecutor | None = None) -> list[str]:
    ex = executor or RulesExecutor()
    inp = ExtractionInput(span(*SPAN), "", [], skills, OwnerMemories("o1"), embed=embed)
    return [op.text for op in ex.execute(inp).ops]


def test_a_prototype_keeps_a_question_the_rules_drop(embedder) -> None:
    plain = texts(list(PRIMITIVES), embedder.encode)
    assert not any("Kyoto" in t for t in plain)
    ex = RulesExecutor()
    inp = ExtractionInput(
        span(*SPAN), "", [], [*PRIMITIVES, TRAVEL], OwnerMemories("o1"), embed=embedder.encode
    )
    ops = ex.execute(inp).ops
    kept = [op for op in ops if "Kyoto" in op.text]
    assert [op.text for op in kept] == ['Ana asked Ben: "How was your trip to Kyoto last month?"']
    assert kept[0].memory_skill == TRAVEL.name and kept[0].subject == "Ana"
    assert kept[0].source_message_ids == ("m0",)
    # the bakery question is not like the prototype; the rules' own statements are all still there
    assert not any("bakery" in op.text for op in ops)
    assert [op.text for op in ops if op not in kept] == plain
    # message order: the question comes before Ana's statement
    assert ops[0] is kept[0]


def test_patterns_skip_examples_and_no_embedder(embedder) -> None:
    bakery = MemorySkill(
        "keep-work",
        "Work questions.",
        "Purpose: x",
        Op.INSERT,
        offline=OfflineForm(patterns=(r"\bbakery\b",)),
    )
    got = texts([*PRIMITIVES, bakery], None)  # patterns need no embedder
    assert any("bakery" in t for t in got)
    no_cats = MemorySkill(
        "skip-pets",
        "Drop pet news.",
        "Purpose: x",
        Op.NOOP,
        offline=OfflineForm(skip=("My dog is called Rex.",), threshold=0.4),
    )
    assert not any("Miso" in t for t in texts([*PRIMITIVES, no_cats], embedder.encode))
    # without an embedder, similarity does nothing: the default memories
    plain = texts(list(PRIMITIVES), None)
    assert texts([*PRIMITIVES, TRAVEL, no_cats], None) == plain


def test_the_offline_form_round_trips_through_bank_and_files(tmp_path: Path) -> None:
    settings = Settings.load(home=str(tmp_path / "home"))
    Path(settings.storage.catalog).parent.mkdir(parents=True, exist_ok=True)
    v = MemorySkillVersion.from_skill(TRAVEL, source="designer")
    cat = Catalog(settings.storage.catalog)
    try:
        bank = MemorySkillBank(cat)
        stored = bank.put(v, "designer")
        assert stored is not None and stored.offline == TRAVEL.offline
        assert bank.put(v, "designer") is None  # same content: no new version
        assert bank.get(TRAVEL.name).to_skill().offline == TRAVEL.offline
        got = {s.name: s for s in bank.active_skills()}[TRAVEL.name]
        assert got.offline == TRAVEL.offline
        files = bank.export(tmp_path / "skills")
    finally:
        cat.close()
    path = tmp_path / "skills" / f"{TRAVEL.name}.md"
    assert path in files and "offline:" in path.read_text()
    assert "offline:" not in (tmp_path / "skills" / "insert.md").read_text()
    back = read_skill_file(path).version
    assert back.offline == TRAVEL.offline and back.content() == stored.content()
    # a version without an offline form hashes as before the field existed
    plain = MemorySkillVersion.from_skill(PRIMITIVES[0])
    assert "offline" not in plain.content()


def test_a_bank_stored_before_the_column_existed_opens_unchanged(tmp_path: Path) -> None:
    settings = Settings.load(home=str(tmp_path / "home"))
    Path(settings.storage.catalog).parent.mkdir(parents=True, exist_ok=True)
    cat = Catalog(settings.storage.catalog)
    try:
        MemorySkillBank(cat).ensure_seeded()
    finally:
        cat.close()
    con = duckdb.connect(settings.storage.catalog)
    con.execute(f"ALTER TABLE {TABLE} DROP COLUMN offline")
    before = con.execute(f"SELECT version_id, content_hash FROM {TABLE} ORDER BY 1").fetchall()
    con.close()
    cat = Catalog(settings.storage.catalog, read_only=True)
    try:
        skills = MemorySkillBank(cat).active_skills()
    finally:
        cat.close()
    assert [s.name for s in skills] == [s.name for s in PRIMITIVES]
    assert all(s.offline is None for s in skills)
    cat = Catalog(settings.storage.catalog)  # a writer adds the column; rows stay as they were
    try:
        bank = MemorySkillBank(cat)
        assert {v.version_id: v.content_hash() for v in bank.current()} == dict(before)
        assert bank.put(MemorySkillVersion.from_skill(TRAVEL), "import") is not None
    finally:
        cat.close()


@pytest.mark.parametrize(
    "offline, error",
    [
        ("{threshold: 2, prototypes: [a]}", "cosine in"),
        ("{prototypes: [a], colour: red}", "must be a mapping"),
        ("{patterns: ['(']}", "invalid pattern"),
        ("{threshold: 0.5}", "needs prototypes"),
    ],
)
def test_invalid_offline_forms_are_refused(tmp_path: Path, offline: str, error: str) -> None:
    text = to_markdown(MemorySkillVersion.from_skill(PRIMITIVES[0])).replace(
        "description:", f"offline: {offline}\ndescription:", 1
    )
    path = tmp_path / "insert.md"
    path.write_text(text)
    with pytest.raises(InputError, match=error):
        read_skill_file(path)
