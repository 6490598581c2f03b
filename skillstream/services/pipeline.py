"""The one place that builds the memory pipeline from settings.

The runner (``flows.runner.Runner``, for every run of the flow: the CLI, the API, the LoCoMo
evaluation and the benchmarks) and ``skillstream retry-failed`` call :func:`build_pipeline`, so
they extract with the same
executor, memory skills, controller, lifecycle parameters and maintenance for the same settings.
What differs between them (where memories are hydrated from, the spans already done, whether
maintenance runs) is an argument, not a second assembly.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skillstream.apply import ApplyOptions
from skillstream.embed import TextEmbedder
from skillstream.extract import Executor, MemorySkill
from skillstream.lifecycle.maintenance import Maintenance
from skillstream.lifecycle.params import LifecycleParams
from skillstream.memskill.bank import MemorySkillBank
from skillstream.memskill.controller import make_controller
from skillstream.memskill.seeds import PRIMITIVES
from skillstream.model import Span
from skillstream.pipeline import Hydrate, MemoryPipeline
from skillstream.settings import Settings
from skillstream.tokens import get_counter


def checkpoint_skills(settings: Settings) -> list[str]:
    """The memory skills the controller checkpoint in use (``memory_skill_scorer``: activated or
    set, see ``Settings.load``) was trained with."""
    path = settings.extraction.memory_skill_scorer
    if not path or not Path(path).is_file():
        return []
    from skillstream.memskill.controller import checkpoint_meta

    return [s for s in (checkpoint_meta(path).get("skills") or "").split(",") if s]


def checkpoint_bank(settings: Settings) -> list[MemorySkill]:
    """The memory skills the controller checkpoint in use carries whole (``bank`` in its meta:
    the skills it was trained with that are neither primitives nor rules categories, such as the
    designer's, with their offline forms); empty for a checkpoint that carries none."""
    path = settings.extraction.memory_skill_scorer
    if not path or not Path(path).is_file():
        return []
    from skillstream.memskill.controller import checkpoint_meta
    from skillstream.memskill.versions import carried_skills

    return carried_skills(checkpoint_meta(path))


def make_executor(settings: Settings) -> Executor:
    """The executor of the configured backend: the offline ``rules`` one or the LLM one.

    The ``rules`` executor keeps only the statements of selected categories when the controller
    checkpoint in use was trained with the rules category skills."""
    if settings.llm.backend == "rules":
        from skillstream.rules import RulesExecutor
        from skillstream.rules.skills import NAMES

        return RulesExecutor(
            categories=bool(NAMES & set(checkpoint_skills(settings))),
            hemisphere=settings.extraction.hemisphere,
        )
    from skillstream.memskill.factory import make_llm_executor

    return make_llm_executor(settings.llm, settings.storage.home)


def load_memory_skills(settings: Settings, catalog: Any = None) -> list[MemorySkill]:
    """The memory skills the pipeline selects from: the bank's active ones.

    Args:
        settings: Locates the catalog file.
        catalog: An open catalog to read from. Without it the file is opened read-only and closed
            again (the flow reads the bank when it is built, before its sink opens the file for
            writing; DuckDB refuses a read-only and a read-write connection in one process).

    Returns:
        The active memory skills in bank order; the four primitives when the catalog file, the
        table or any row is missing.
    """
    if catalog is not None:
        return MemorySkillBank(catalog).active_skills()
    from skillstream.storage.catalog import catalog_exists, open_catalog

    if not catalog_exists(settings.storage):
        return list(PRIMITIVES)
    cat = open_catalog(settings.storage, read_only=True)
    try:
        return MemorySkillBank(cat).active_skills()
    finally:
        cat.close()


def apply_options(settings: Settings, embedder: TextEmbedder | None = None) -> ApplyOptions:
    """How operations are applied: the settings' lifecycle parameters; with ``embedder``,
    near-duplicates merge as they arrive."""
    return ApplyOptions.from_settings(
        settings.lifecycle, settings.spans.idle_gap, embed=embedder.encode if embedder else None
    )


def make_maintenance(settings: Settings, embedder: TextEmbedder) -> Maintenance | None:
    """The pipeline's maintenance hook for ``settings`` (``None`` when maintenance is off)."""
    params = LifecycleParams.from_settings(settings)
    if params.maintenance_interval is None:
        return None
    return Maintenance(
        params, embed=embedder.encode, token_count=get_counter(settings.embedding.model).count
    )


def build_pipeline(
    settings: Settings,
    embedder: TextEmbedder,
    *,
    executor: Executor | None = None,
    hydrate: Hydrate | None = None,
    catalog: Any = None,
    done_spans: frozenset[str] = frozenset(),
    memory_skills: Sequence[MemorySkill] | None = None,
    bank: Sequence[MemorySkill] | None = None,
    options: ApplyOptions | None = None,
    maintenance: bool = True,
) -> MemoryPipeline:
    """The memory pipeline for ``settings``.

    The parts are built in this order (the same in every caller): executor, memory skills,
    controller, apply options, maintenance.

    Args:
        settings: Backend, memory-skill selection (the activated controller is part of it when
            the settings were loaded with ``Settings.load``), retrieval and lifecycle settings.
        embedder: The embedding model (vectors, controller, near-duplicate merging).
        executor: The executor to use (default: :func:`make_executor`).
        hydrate: Reads an owner's stored memories when its state is first created.
        catalog: An open catalog to read the memory skill bank from (default: the settings'
            catalog file, opened read-only for the read).
        done_spans: Span ids already in the ledger (skipped for owners new in this run).
        memory_skills: The memory skills to select from, as they are (default: the bank's
            active skills, with the skills a controller checkpoint in use was trained with that
            the bank lacks: the rules categories it names, the skills it carries whole).
        bank: The bank's active skills, already read by the caller (default: read now with
            :func:`load_memory_skills`).
        options: How operations are applied (default: :func:`apply_options` with the embedder).
        maintenance: Run lifecycle maintenance on the owners' clock ticks (when the settings
            give a maintenance interval).

    Returns:
        The pipeline; its ``run_id`` is new.
    """
    executor = executor or make_executor(settings)
    if memory_skills is None:
        memory_skills = list(bank) if bank is not None else load_memory_skills(settings, catalog)
        trained = checkpoint_skills(settings)
        if trained and settings.llm.backend == "rules":
            from skillstream.rules.skills import RULE_SKILLS

            have = {s.name for s in memory_skills}
            memory_skills += [s for s in RULE_SKILLS if s.name in trained and s.name not in have]
        if trained:
            have = {s.name for s in memory_skills}
            memory_skills += [s for s in checkpoint_bank(settings) if s.name not in have]
    controller = make_controller(settings.extraction, settings.llm.backend, embedder)
    if options is None:
        options = apply_options(settings, embedder)
    return MemoryPipeline(
        executor=executor,
        embed=embedder.encode,
        hydrate=hydrate,
        memory_skills=memory_skills,
        controller=controller,
        done_spans=done_spans,
        retrieve_k=settings.extraction.retrieve_k,
        options=options,
        maintenance=make_maintenance(settings, embedder) if maintenance else None,
        submit=embedder.submit,
        prefetch=settings.embedding.prefetch,
        cut_span=SpanCutter(settings.embedding.model, embedder),
    )


class SpanCutter:
    """Cuts a span into pieces ``embedder`` reads whole (``spans.span_pieces``), counting tokens
    with the model's own tokenizer (``tokens.get_counter``); the model's limit is read when the
    first span is cut, so a pipeline that embeds no span loads nothing for it."""

    def __init__(self, model: str, embedder: Any) -> None:
        self.model = model
        self.embedder = embedder

    def __call__(self, span: Span) -> list[tuple[str, int]]:
        from skillstream.spans import span_pieces

        limit = int(getattr(self.embedder, "max_tokens", 0) or 0)
        return span_pieces(span, get_counter(self.model).count, limit)


def store_hydrate(
    settings: Settings, dim: int, expired: Any, contradictions: Any, members: Any = None
) -> Hydrate:
    """How a run's pipeline reads an owner it meets first: the owner's memories from the home's
    LanceDB table (opened on first need), the minimal rows of its expired memories, its open
    contradictions and its topic nodes' members (``expired``, ``contradictions`` and
    ``members``: ``storage.tombstones``, read by the runner)."""
    from skillstream.memories import OwnerMemories
    from skillstream.storage.home import open_index

    cache: dict[str, Any] = {}

    def hydrate(owner_id: str) -> Any:
        idx = cache.get("idx")
        if idx is None:
            idx = cache["idx"] = open_index(settings, dim)
        state = OwnerMemories(owner_id)
        for m in [*idx.owner_memories(owner_id), *expired.owner(owner_id)]:
            state.put(m)
        contradictions.fill(state)
        return members.fill(state) if members is not None else state

    return hydrate
