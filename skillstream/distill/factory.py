"""Building the task-skill distiller the settings ask for."""

from __future__ import annotations

from typing import Any

from skillstream.distill.distiller import (
    Distiller,
    Hydrate,
    PackagePublisher,
    TaskSkillDistiller,
)
from skillstream.distill.trust import TrustRules
from skillstream.embed import Embed
from skillstream.settings import DistillationSettings, LLMSettings


def make_distiller(
    distillation: DistillationSettings,
    llm: LLMSettings,
    home: str,
    embed: Embed,
    backend: Any = None,
) -> Distiller:
    """The ``rules`` distiller, or the LLM distiller when ``llm.backend`` names an LLM backend.

    Args:
        distillation: The ``distillation`` settings group.
        llm: The ``llm`` settings group.
        home: The home that holds the LLM response cache.
        embed: Texts to unit vectors.
        backend: A ready ``ChatBackend`` (tests); else ``llm.make_backend(llm, home)``.
    """
    if backend is None and llm.backend == "rules":
        from skillstream.distill.heuristics import HeuristicDistiller

        return HeuristicDistiller(
            embed,
            merge_threshold=distillation.merge_threshold,
            shift_threshold=distillation.shift_threshold,
        )
    if backend is None:
        from skillstream.llm import make_backend

        backend = make_backend(llm, home)
    from skillstream.distill.llm import LLMDistiller

    return LLMDistiller(backend, embed, shift_threshold=distillation.shift_threshold)


def make_task_skill_distiller(
    distillation: DistillationSettings,
    llm: LLMSettings,
    home: str,
    embed: Embed,
    *,
    hydrate: Hydrate | None = None,
    publisher: PackagePublisher | None = None,
    backend: Any = None,
    run_id: str = "",
) -> TaskSkillDistiller:
    """The whole distillation step (distiller, gate, full mode).

    Args:
        distillation: The ``distillation`` settings group.
        llm: The ``llm`` settings group.
        home: The home that holds the LLM response cache.
        embed: Texts to unit vectors.
        hydrate: Fills recalled task skills in (see ``TaskSkillDistiller``).
        publisher: Publishes packages (``services.publishing.Publisher``); ``None`` publishes
            nothing.
        backend: A ready ``ChatBackend`` (tests).
        run_id: The run that distils.
    """
    return TaskSkillDistiller(
        make_distiller(distillation, llm, home, embed, backend),
        embed,
        publisher=publisher,
        hydrate=hydrate,
        full=distillation.full,
        min_steps=distillation.min_steps,
        recall_k=distillation.recall_k,
        consolidate_threshold=distillation.merge_threshold,
        run_id=run_id,
        trust=trust_rules(distillation),
    )


def trust_rules(distillation: DistillationSettings) -> TrustRules:
    """The probation, reliability and usage-age rules of the ``distillation`` settings."""
    return TrustRules(
        min_support=distillation.min_support,
        retire_below=distillation.retire_below,
        min_outcomes=distillation.min_outcomes,
        view_weight=distillation.view_weight,
        stale_days=distillation.stale_days,
        archive_days=distillation.archive_days,
    )
