"""The offline rules executor end to end: spans in, memory operations out, applied in sequence."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from skillstream.apply import apply_ops
from skillstream.extract import ExtractionInput, MemorySkill
from skillstream.memories import OwnerMemories
from skillstream.memskill.seeds import DELETE, INSERT, PRIMITIVES, SKIP, UPDATE
from skillstream.model import MemoryOp, Span
from skillstream.rules import RulesExecutor
from skillstream.spans import SpanBuilder, SpanState

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)  # a Monday
NOW = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.fixture
def chat(message_factory):
    """Build a span from (speaker, text[, role[, metadata]]) turns; ``day`` shifts time and ids."""

    def build(turns: list[tuple], day: int = 0) -> Span:
        msgs = []
        for k, turn in enumerate(turns):
            speaker, text = turn[0], turn[1]
            role = turn[2] if len(turn) > 2 else "user"
            meta = turn[3] if len(turn) > 3 else None
            msgs.append(
                message_factory(
                    text,
                    i=day * 100 + k,
                    role=role,
                    speaker=speaker,
                    session_id=f"s{day}",
                    ts=T0 + timedelta(days=day, minutes=k),
                    metadata=meta,
                )
            )
        builder = SpanBuilder(lambda s: len(s.split()), budget=10**9)
        state = SpanState()
        for m in msgs:
            builder.add(state, m)
        return builder.flush(state)[0]

    return build


def run(
    span: Span, state: OwnerMemories | None = None, skills: list[MemorySkill] | None = None
) -> list[MemoryOp]:
    state = state if state is not None else OwnerMemories(span.owner_id)
    inp = ExtractionInput(span, "", [], list(PRIMITIVES) if skills is None else skills, state)
    return RulesExecutor().execute(inp).ops


def summary(ops: list[MemoryOp]) -> list[tuple]:
    return [(o.op.value, o.kind, o.key, o.text) for o in ops]


def test_first_person_becomes_the_speaker_with_absolute_dates(chat) -> None:
    span = chat(
        [
            ("Caroline", "Hey Mel! Good to see you! How have you been?"),
            ("Melanie", "Hey Caroline! I'm swamped with the kids & work. What's up with you?"),
            ("Caroline", "I went to a LGBTQ support group yesterday and it was so powerful."),
            (
                "Melanie",
                "Wow, that's cool! I love painting, it helps me relax. "
                "We're going camping next month.",
            ),
        ]
    )
    ops = run(span)
    assert summary(ops) == [
        ("INSERT", "fact", "melanie|fact|swamped", "Melanie is swamped with the kids & work."),
        (
            "INSERT",
            "event",
            "caroline|event|support group",
            "Caroline went to a LGBTQ support group on 7 May 2023 and it was so powerful.",
        ),
        (
            "INSERT",
            "preference",
            "melanie|preference|painting",
            "Melanie loves painting, it helps Melanie relax.",
        ),
        (
            "INSERT",
            "plan",
            "melanie|plan|camping",
            "Melanie and others are going camping in June 2023.",
        ),
    ]
    assert [o.source_message_ids for o in ops] == [("c1-m1",), ("c1-m2",), ("c1-m3",), ("c1-m3",)]
    assert [o.subject for o in ops] == ["Melanie", "Caroline", "Melanie", "Melanie"]
    assert ops[1].event_ts == datetime(2023, 5, 7, tzinfo=UTC)
    assert ops[3].event_ts == datetime(2023, 6, 1, tzinfo=UTC)
    assert ops[0].event_ts is None
    assert all(o.memory_skill == "insert" for o in ops)
    assert ops[1].tags == ("support", "group", "lgbtq", "powerful")


def test_small_talk_and_questions_give_no_operations(chat) -> None:
    span = chat(
        [
            ("Caroline", "Hey Mel! How are you?"),
            ("Melanie", "Thanks, Caroline! Haha, sounds good. Talk to you soon!"),
            ("Caroline", "Did you see the game?"),
        ]
    )
    assert run(span) == []


def test_statement_without_first_person_is_reported_as_said(chat) -> None:
    span = chat([("Melanie", "The transgender stories were so inspiring!")])
    assert summary(run(span)) == [
        (
            "INSERT",
            "fact",
            "melanie|fact|transgender story",
            "Melanie said the transgender stories were so inspiring.",
        ),
    ]


def test_assistant_suggestions_are_never_the_users_preferences(chat) -> None:
    span = chat(
        [
            ("User", "Can you suggest a place for dinner?"),
            (
                "Assistant",
                "You should try the new Thai place on 5th street. I love their curry. "
                "How about Sunday?",
                "assistant",
            ),
            ("User", "I prefer Italian food, to be honest."),
        ]
    )
    ops = run(span)
    assert summary(ops) == [
        (
            "INSERT",
            "fact",
            "assistant|fact|place",
            "The assistant suggested that the user should try the new Thai place on 5th street.",
        ),
        ("INSERT", "fact", "assistant|fact|sunday", "The assistant suggested Sunday, 14 May 2023."),
        (
            "INSERT",
            "preference",
            "user|preference|food",
            "The user prefers Italian food, to be honest.",
        ),
    ]
    assert [o.subject for o in ops] == ["assistant", "assistant", "user"]
    assert not any(o.subject == "user" and "curry" in o.text for o in ops)
    assert ops[1].event_ts == datetime(2023, 5, 14, tzinfo=UTC)

    quiet = RulesExecutor(keep_assistant_suggestions=False)
    inp = ExtractionInput(span, "", [], list(PRIMITIVES), OwnerMemories(span.owner_id))
    assert [o.subject for o in quiet.execute(inp).ops] == ["user"]


def test_correction_updates_and_cancellation_deletes(chat) -> None:
    # The executor's side: which operations, aimed at which memories. How an UPDATE lands (in place
    # or as a new version that supersedes a contradicted value) is apply's business, so the state
    # is read back through its keys.
    state = OwnerMemories("c1")
    day0 = chat(
        [
            ("Melanie", "I'm planning a trip to Paris next month."),
            ("Caroline", "I work at Google. I love coffee."),
            ("Melanie", "I'm vegetarian."),
        ]
    )
    apply_ops(state, day0, run(day0, state), NOW)
    assert sorted(m.key or "" for m in state.live()) == [
        "caroline|fact|job",
        "caroline|preference|coffee",
        "melanie|fact|diet",
        "melanie|plan|trip paris",
    ]

    def live(key: str):
        m = state.by_key(key)
        assert m is not None, key
        return m

    trip = live("melanie|plan|trip paris")
    job = live("caroline|fact|job")
    coffee = live("caroline|preference|coffee")
    day1 = chat(
        [
            ("Melanie", "Actually, the trip is on Friday."),
            ("Caroline", "I moved jobs, I work at Microsoft now. I love iced coffee these days."),
        ],
        day=1,
    )
    ops = run(day1, state)
    assert [(o.op.value, o.target_id, o.memory_skill) for o in ops] == [
        ("UPDATE", trip.id, "update"),
        ("UPDATE", job.id, "update"),
        ("UPDATE", coffee.id, "update"),
    ]
    assert [o.text for o in ops] == [
        "Melanie is planning a trip to Paris in June 2023. Melanie said the trip is on Friday, "
        "12 May 2023.",
        "Caroline moved jobs, Caroline works at Microsoft now.",
        "Caroline loves iced coffee these days.",
    ]
    assert ops[0].kind == "plan"  # a merged correction keeps the kind of what it corrects
    assert ops[0].event_ts == datetime(2023, 5, 12, tzinfo=UTC)
    apply_ops(state, day1, ops, NOW)
    assert live("melanie|plan|trip paris").text == ops[0].text
    assert live("caroline|fact|job").text == ops[1].text
    assert live("caroline|preference|coffee").text == ops[2].text

    trip, diet, job = (
        live("melanie|plan|trip paris"),
        live("melanie|fact|diet"),
        live("caroline|fact|job"),
    )
    day2 = chat(
        [
            ("Melanie", "I cancelled my trip to Paris. I'm not vegetarian anymore."),
            ("Caroline", "I no longer work at Microsoft."),
        ],
        day=2,
    )
    ops = run(day2, state)
    assert [(o.op.value, o.target_id) for o in ops] == [
        ("DELETE", trip.id),
        ("INSERT", None),
        ("DELETE", diet.id),
        ("INSERT", None),
        ("DELETE", job.id),
        ("INSERT", None),
    ]
    apply_ops(state, day2, ops, NOW)
    assert (trip.status, diet.status, job.status) == ("deleted", "deleted", "deleted")
    assert sorted(m.text for m in state.live()) == [
        "Caroline loves iced coffee these days.",
        "Caroline no longer works at Microsoft.",
        "Melanie cancelled Melanie's trip to Paris.",
        "Melanie is not vegetarian anymore.",
    ]


def test_restating_a_memory_reinforces_it(chat) -> None:
    state = OwnerMemories("c1")
    first = chat([("Caroline", "I love hiking.")])
    apply_ops(state, first, run(first, state), NOW)
    again = chat([("Caroline", "Haha, I love hiking!")], day=1)
    ops = run(again, state)
    assert summary(ops) == [
        ("INSERT", "preference", "caroline|preference|hiking", "Caroline loves hiking."),
    ]
    apply_ops(state, again, ops, NOW)
    (m,) = state.live()
    assert m.reinforcement == 1
    assert m.source_message_ids == ["c1-m0", "c1-m100"]


def test_refinement_within_one_span_is_folded_into_one_insert(chat) -> None:
    span = chat(
        [
            ("Caroline", "I love coffee."),
            ("Melanie", "Me too!"),
            ("Caroline", "Actually I love iced coffee most."),
        ]
    )
    ops = run(span)
    assert summary(ops) == [
        ("INSERT", "preference", "caroline|preference|coffee", "Caroline loves iced coffee most."),
    ]
    assert ops[0].source_message_ids == ("c1-m0", "c1-m2")


def test_withdrawn_within_one_span_is_not_stored(chat) -> None:
    span = chat([("Melanie", "I'm planning a trip to Rome. Oh wait, I cancelled my trip to Rome.")])
    assert summary(run(span)) == [
        ("INSERT", "plan", "melanie|plan|trip rome", "Melanie cancelled Melanie's trip to Rome."),
    ]


def test_only_selected_memory_skills_act(chat) -> None:
    state = OwnerMemories("c1")
    day0 = chat([("Caroline", "I work at Google. I'm planning a trip to Paris.")])
    apply_ops(state, day0, run(day0, state), NOW)
    day1 = chat([("Caroline", "I work at Microsoft now. I cancelled my trip to Paris.")], day=1)

    only_insert = run(day1, state, [INSERT, SKIP])
    assert [(o.op.value, o.memory_skill) for o in only_insert] == [
        ("INSERT", "insert"),
        ("INSERT", "insert"),
    ]
    assert [o.text for o in only_insert] == [
        "Caroline works at Microsoft now.",
        "Caroline cancelled Caroline's trip to Paris.",
    ]
    assert [o.op.value for o in run(day1, state, [UPDATE])] == ["UPDATE"]
    assert [o.op.value for o in run(day1, state, [DELETE])] == ["DELETE"]
    assert [o.op.value for o in run(day1, state, [UPDATE, DELETE])] == ["UPDATE", "DELETE"]
    assert run(day1, state, [SKIP]) == []
    assert [o.op.value for o in run(day1, state, [])] == ["UPDATE", "DELETE", "INSERT"]


def test_evolved_skill_names_are_reported(chat) -> None:
    temporal = MemorySkill(
        "capture temporal context", "Record when things happen.", "...", "INSERT"
    )
    span = chat([("Caroline", "I went to the beach yesterday.")])
    inp = ExtractionInput(span, "", [], [temporal], OwnerMemories("c1"))
    out = RulesExecutor().execute(inp)
    assert out.memory_skills == ["capture temporal context"]
    assert [(o.op.value, o.memory_skill) for o in out.ops] == [
        ("INSERT", "capture temporal context"),
    ]
    assert out.ops[0].text == "Caroline went to the beach on 7 May 2023."


def test_short_answers_pick_up_the_question(chat) -> None:
    span = chat(
        [
            ("Melanie", "That painting is lovely. Did you go to the art show last weekend?"),
            (
                "Caroline",
                "Yes, with my sister. It was amazing!",
            ),  # the second sentence is small talk
            ("Melanie", "Is this your own painting?"),
            ("Caroline", "Yeah, I painted that lake sunrise last year! It's special to me."),
            ("Melanie", "Are you coming tomorrow?"),
            ("Caroline", "Yep!"),
            ("Melanie", "Did you finish the book?"),
            ("Caroline", "Yes! I finished it two days ago."),
        ]
    )
    ops = run(span)
    assert summary(ops) == [
        ("INSERT", "fact", "melanie|fact|painting", "Melanie said that painting is lovely."),
        (
            "INSERT",
            "fact",
            "caroline|fact|art show",
            'Melanie asked "Did Caroline go to the art show on the weekend before 8 May 2023?" and '
            "Caroline answered: yes, with Caroline's sister.",
        ),
        (
            "INSERT",
            "event",
            "caroline|event|painting",
            "Melanie asked \"Is this Caroline's own "
            'painting?" and Caroline answered: yes, Caroline '
            "painted that lake sunrise in 2022. It's special to Caroline.",
        ),
        (
            "INSERT",
            "fact",
            "caroline|fact|coming",
            'Melanie asked "Are Caroline coming on 9 May 2023?" and Caroline answered: yes.',
        ),
        (
            "INSERT",
            "event",
            "caroline|event|finish book",
            'Melanie asked "Did Caroline finish the book?" and Caroline answered: yes, Caroline '
            "finished it on 6 May 2023.",
        ),
    ]
    assert [o.source_message_ids for o in ops] == [
        ("c1-m0",),
        ("c1-m0", "c1-m1"),
        ("c1-m2", "c1-m3"),
        ("c1-m4", "c1-m5"),
        ("c1-m6", "c1-m7"),
    ]
    assert ops[1].event_ts == datetime(2023, 5, 6, tzinfo=UTC)
    assert ops[2].event_ts == datetime(2022, 1, 1, tzinfo=UTC)


def test_image_captions_become_photo_events(chat) -> None:
    meta = json.dumps({"blip_caption": "a photo of a painting of a sunset over a lake"})
    span = chat([("Melanie", "By the way, take a look at this.", "user", meta)])
    ops = run(span)
    assert summary(ops) == [
        (
            "INSERT",
            "event",
            "melanie|event|photo painting",
            "Melanie shared a photo of a painting of a sunset over a lake.",
        ),
    ]
    assert ops[0].event_ts == T0
    assert ops[0].source_message_ids == ("c1-m0",)


def test_chinese_span(chat) -> None:
    state = OwnerMemories("c1")
    day0 = chat(
        [
            ("小王", "你好！我喜欢喝咖啡。我打算下个月去巴黎旅行。"),
            ("小李", "哈哈，太好了"),
            ("小王", "我昨天和我们家孩子去了公园。"),
        ]
    )
    ops = run(day0, state)
    assert summary(ops) == [
        ("INSERT", "preference", "小王|preference|咖啡", "小王喜欢喝咖啡。"),
        ("INSERT", "plan", "小王|plan|巴黎旅行", "小王打算2023年6月去巴黎旅行。"),
        ("INSERT", "event", "小王|event|公园", "小王2023年5月7日和小王和家人家孩子去了公园。"),
    ]
    assert ops[1].event_ts == datetime(2023, 6, 1, tzinfo=UTC)
    apply_ops(state, day0, ops, NOW)
    day1 = chat([("小王", "我取消了巴黎旅行。其实我更喜欢喝茶。")], day=1)
    ops = run(day1, state)
    plan = state.by_key("小王|plan|巴黎旅行")
    assert plan is not None
    assert summary(ops) == [
        ("DELETE", "plan", "小王|plan|巴黎旅行", "小王取消了巴黎旅行。"),
        ("INSERT", "plan", "小王|plan|巴黎旅行", "小王取消了巴黎旅行。"),
        ("INSERT", "preference", "小王|preference|茶", "小王更喜欢喝茶。"),
    ]
    assert ops[0].target_id == plan.id


def test_operations_are_deterministic(chat) -> None:
    span = chat(
        [
            ("Caroline", "I went to a pottery class yesterday. I love it!"),
            ("Melanie", "Nice! We're going camping next weekend."),
        ]
    )
    assert run(span) == run(span)


def test_chinese_assistant_suggestion_and_generic_user(chat) -> None:
    span = chat(
        [
            ("用户", "我下个月要去东京出差。"),
            ("助手", "好的！建议您住在新宿，交通很方便。", "assistant"),
            ("用户", "我更喜欢安静的地方。"),
        ]
    )
    ops = run(span)
    assert [(o.subject, o.kind, o.key, o.text) for o in ops] == [
        ("user", "plan", "user|plan|东京出差", "用户2023年6月要去东京出差。"),
        ("assistant", "fact", "assistant|fact|住在新宿", "助手建议用户住在新宿，交通很方便。"),
        ("user", "preference", "user|preference|安静地方", "用户更喜欢安静的地方。"),
    ]


def test_names_from_earlier_spans_resolve_you_in_a_one_sided_span(chat) -> None:
    state = OwnerMemories("c1")
    first = chat([("Jon", "I opened a dance studio."), ("Gina", "I run an online clothing store.")])
    apply_ops(state, first, run(first, state), NOW)
    alone = chat([("Gina", "Bye Jon! I hope your studio does great.")], day=1)
    assert summary(run(alone, state)) == [
        ("INSERT", "fact", "gina|fact|studio", "Gina hopes Jon's studio does great."),
    ]
