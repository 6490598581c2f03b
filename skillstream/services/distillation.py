"""The one place that builds the task-skill distiller of a run from settings."""

from __future__ import annotations

import uuid
from typing import Any

from skillstream.distill.distiller import TaskSkillDistiller
from skillstream.distill.factory import make_task_skill_distiller
from skillstream.distill.record import TaskSkill
from skillstream.embed import TextEmbedder
from skillstream.services.publishing import Publisher
from skillstream.settings import Settings
from skillstream.storage.home import storage_options
from skillstream.storage.task_skills import TaskSkillIndex


def build_distiller(settings: Settings, embedder: TextEmbedder) -> TaskSkillDistiller:
    """The distillation step of a run: the configured distiller (heuristic or LLM), publishing
    packages to the home's artifact store, owners hydrated from LanceDB ``task_skills`` (opened
    when the first owner needs it, not now), and a new run id."""
    cache: dict[str, Any] = {}

    def hydrate(owner_id: str) -> list[TaskSkill]:
        index = cache.get("index")
        if index is None or not index.table.exists:
            index = cache["index"] = TaskSkillIndex.open(
                settings.storage.lancedb, storage_options(settings), None, create=False
            )
        return index.list(owner_id, statuses=None) if index.table.exists else []

    return make_task_skill_distiller(
        settings.distillation,
        settings.llm,
        settings.storage.home,
        embedder.encode,
        hydrate=hydrate,
        publisher=Publisher.from_settings(settings.storage),
        run_id=uuid.uuid4().hex,
    )
