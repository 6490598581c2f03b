"""The designer's two prompts through the real ``openai`` client against the llama.cpp server.

Plumbing, not quality: a 135M model proposes poor skills, but both calls go out with their JSON
schemas (llama.cpp turns them into grammars), come back, parse and are validated; whatever the
model proposes either becomes a valid change or is listed as rejected.
"""

from __future__ import annotations

import numpy as np
import pytest

from skillstream.llm import make_backend
from skillstream.memskill.designer import Designer, HardCaseBuffer, representatives
from skillstream.memskill.rewards import Query
from skillstream.memskill.seeds import PRIMITIVES
from skillstream.settings import Settings
from tests.servers.llama import MODEL_ALIAS

pytestmark = [pytest.mark.llama, pytest.mark.slow]


def test_designer_prompts_parse_through_llama_cpp(tmp_path, llama_base_url) -> None:
    settings = Settings.load(
        home=str(tmp_path / "home"),
        llm="openai",
        llm_base_url=llama_base_url,
        llm_model=MODEL_ALIAS,
        llm_response_format="json_object",
        llm_timeout_s=300,
        llm_max_retries=2,
    )
    backend = make_backend(settings.llm, settings.storage.home)
    assert backend is not None
    buf = HardCaseBuffer()
    for i, text in enumerate(["When did Ana move to Lisbon?", "What is Ben's cat called?"]):
        v: np.ndarray = np.zeros(4, dtype=np.float32)
        v[i] = 1.0
        buf.add(Query(text, (f"D1:{i}",), v), 0.0, 0)
    designer = Designer(backend, max_changes=2)
    changes = designer.round(representatives(buf, clusters=2), list(PRIMITIVES))
    assert len(changes) <= 2
    for ch in changes:
        assert ch.skill.name and ch.skill.description
    calls = [r for r in designer.rejected if r[0] == "(answer)"]
    assert not calls, calls  # both answers parsed (the grammar holds the model to the schema)
