"""The multilingual embedder (``use-multilingual``): bundled, numpy only, the same bits for a text
whatever it is embedded with, and a home built with it finds Chinese memories by Chinese questions
asked in other words."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from skillstream.embed import get_embedder, identity
from skillstream.settings import Settings
from skillstream.tokens import get_counter

TEXTS = [
    "我对花生严重过敏，一点都不能吃。",
    "The user adopted a grey cat called Miso.",
    "",
    "混合 English 和中文 in one sentence.",
    "x" * 2000,
    "ok",
]


@pytest.fixture(scope="module")
def use():
    return get_embedder("use-multilingual")


def test_unit_vectors_of_512_dimensions_the_same_alone_as_in_a_batch(use):
    batch = use.encode(TEXTS)
    assert batch.shape == (len(TEXTS), 512) and batch.dtype == np.float32
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    alone = np.stack([use.encode([t])[0] for t in TEXTS])
    assert alone.tobytes() == batch.tobytes()
    shuffled = use.encode(TEXTS[::-1])[::-1]
    assert shuffled.tobytes() == batch.tobytes()


def test_a_chinese_question_in_other_words_finds_its_fact(use):
    facts = [
        "我对花生严重过敏，一点都不能吃。",
        "我家养了一只叫馒头的橘猫。",
        "我每天坐地铁去公司上班。",
        "我姐姐住在成都，是一名小学老师。",
    ]
    questions = [
        "她有什么食物过敏吗？",
        "她养了什么宠物？",
        "她平时怎么通勤？",
        "她的姐姐做什么工作？",
    ]
    sims = use.encode(questions) @ use.encode(facts).T
    assert list(sims.argmax(axis=1)) == [0, 1, 2, 3]


def test_spans_are_cut_by_the_models_own_tokens():
    count = get_counter("use-multilingual").count
    assert count("我对花生严重过敏") > 1  # SentencePiece pieces, not one "word"
    assert count("") == 0 and count("hello world") >= 2


def test_the_home_records_the_model():
    settings = Settings.from_keys(embed_model="use-multilingual")
    assert identity(settings.embedding) == "use-multilingual"


def test_the_model_imports_neither_torch_nor_transformers():
    code = (
        "import sys\n"
        "from skillstream.embed import get_embedder\n"
        "v = get_embedder('use-multilingual').encode(['我对花生过敏'])\n"
        "assert v.shape == (1, 512)\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


STATED = [
    ("2025-03-01T09:00:00Z", "我对花生严重过敏，一点都不能吃。"),
    ("2025-03-02T09:00:00Z", "我家养了一只叫馒头的橘猫，三岁了。"),
    ("2025-03-03T09:00:00Z", "我现在开一辆白色的二手丰田卡罗拉。"),
    ("2025-03-04T09:00:00Z", "我在市医院当放射科护士。"),
    ("2025-03-05T09:00:00Z", "I play badminton with my colleagues every Thursday evening."),
]


def test_a_home_built_with_it_finds_chinese_memories_by_questions_in_other_words(tmp_path):
    import skillstream

    home = skillstream.open(tmp_path / "home", owner="li", embed_model="use-multilingual")
    home.add(
        [
            {
                "conversation_id": f"c{i}",
                "user_id": "li",
                "role": "user",
                "content": text,
                "timestamp": ts,
            }
            for i, (ts, text) in enumerate(STATED)
        ],
        flush=True,
    )
    assert home.sql("select count(*) as n from memories").to_pylist()[0]["n"] >= len(STATED)
    for question, word in [
        ("她有什么食物过敏吗？", "花生"),
        ("她养了什么宠物？", "猫"),
        ("她开什么车？", "丰田"),
        ("What sport does she play after work?", "badminton"),
    ]:
        hits = home.search(question, k=3)
        assert any(word in h["text"] for h in hits), (question, [h["text"] for h in hits])
    other = skillstream.open(tmp_path / "home", owner="li")  # the default model
    with pytest.raises(Exception, match="use-multilingual"):
        other.search("过敏", k=1)
