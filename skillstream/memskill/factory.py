"""Building the LLM executor from settings (the flow calls it when ``settings.llm != "rules"``)."""

from __future__ import annotations

from skillstream.config import Settings
from skillstream.errors import ConfigError
from skillstream.memskill.executor import MemSkillExecutor


def make_llm_executor(settings: Settings) -> MemSkillExecutor:
    """The MemSkill executor on the backend ``settings.llm`` names.

    Structured output (the JSON schema of the operations) is sent unless
    ``settings.llm_response_format`` is ``text``; then the answer may be JSON or blocks.

    Raises:
        ConfigError: the settings name the offline ``rules`` backend (it has its own executor), an
            unknown backend, or an incomplete ``openai`` configuration.
    """
    from skillstream.llm import make_backend

    backend = make_backend(settings)
    if backend is None:
        raise ConfigError(
            "the MemSkill LLM executor needs an LLM backend, but SKILLSTREAM_LLM is 'rules'; set "
            "SKILLSTREAM_LLM=openai with SKILLSTREAM_LLM_BASE_URL and SKILLSTREAM_LLM_MODEL"
        )
    return MemSkillExecutor(
        backend,
        structured=settings.llm_response_format != "text",
        max_tokens=settings.extract_max_tokens if settings.extract_max_tokens > 0 else None,
    )
