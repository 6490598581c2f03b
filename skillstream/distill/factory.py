"""Building the task-skill distiller the settings ask for."""

from __future__ import annotations

from typing import Any

from skillstream.config import Settings
from skillstream.distill.distiller import Distiller, Hydrate, TaskSkillDistiller
from skillstream.embed import Embed


def make_distiller(settings: Settings, embed: Embed, backend: Any = None) -> Distiller:
    """The ``rules`` distiller, or the LLM distiller when ``settings.llm`` names an LLM backend.

    Args:
        settings: ``llm``, ``distill_*`` settings.
        embed: Texts to unit vectors.
        backend: A ready ``ChatBackend`` (tests); else ``llm.make_backend(settings)``.
    """
    if backend is None and settings.llm == "rules":
        from skillstream.distill.rules import RulesDistiller

        return RulesDistiller(
            embed,
            merge_threshold=settings.distill_merge_threshold,
            shift_threshold=settings.distill_shift_threshold,
        )
    if backend is None:
        from skillstream.llm import make_backend

        backend = make_backend(settings)
    from skillstream.distill.llm import LLMDistiller

    return LLMDistiller(backend, embed, shift_threshold=settings.distill_shift_threshold)


def make_task_skill_distiller(
    settings: Settings,
    embed: Embed,
    *,
    hydrate: Hydrate | None = None,
    publish: bool = True,
    backend: Any = None,
    run_id: str = "",
) -> TaskSkillDistiller:
    """The whole distillation step for ``settings`` (distiller, gate, full mode, publisher)."""
    publisher = None
    if publish:
        from skillstream.distill.publish import Publisher

        publisher = Publisher.from_settings(settings)
    return TaskSkillDistiller(
        make_distiller(settings, embed, backend),
        embed,
        publisher=publisher,
        hydrate=hydrate,
        full=settings.distill_full,
        min_steps=settings.distill_min_steps,
        recall_k=settings.distill_recall_k,
        run_id=run_id,
    )
