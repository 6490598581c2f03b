"""Building the LLM executor from the ``llm`` settings (the flow calls it for an LLM backend)."""

from __future__ import annotations

from skillstream.errors import ConfigError
from skillstream.memskill.executor import MemSkillExecutor
from skillstream.settings import LLMSettings


def make_llm_executor(llm: LLMSettings, home: str) -> MemSkillExecutor:
    """The MemSkill executor on the backend ``llm.backend`` names.

    Structured output (the JSON schema of the operations) is sent unless ``llm.response_format``
    is ``text``; then the answer may be JSON or blocks.

    Args:
        llm: The ``llm`` settings group.
        home: The home that holds the LLM response cache.

    Raises:
        ConfigError: the settings name the offline ``rules`` backend (it has its own executor), an
            unknown backend, or an incomplete ``openai`` configuration.
    """
    from skillstream.llm import make_backend

    backend = make_backend(llm, home)
    if backend is None:
        raise ConfigError(
            "the MemSkill LLM executor needs an LLM backend, but SKILLSTREAM_LLM is 'rules'; set "
            "SKILLSTREAM_LLM=openai with SKILLSTREAM_LLM_BASE_URL and SKILLSTREAM_LLM_MODEL"
        )
    return MemSkillExecutor(
        backend,
        structured=llm.response_format != "text",
        max_tokens=llm.extract_max_tokens if llm.extract_max_tokens > 0 else None,
    )
