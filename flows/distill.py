"""Task-skill distillation in the memory dataflow (thin Bytewax wiring of ``skillstream.distill``).

    messages -> key by conversation -> blocks (stateful)   a block closes on an idle gap in event
                                                            time, a session change, or end of input
             -> key by owner shard  -> distill (stateful batch; owners of a shard run concurrently,
                                       each owner's blocks strictly in order)
             -> TaskSkillResult values for the store sink (LanceDB task_skills + catalog rows
                in the sink's one transaction; packages are published by the distill step)

:func:`distil_task_skills` is that chain as one Bytewax operator; ``flows.memory.build_flow`` gives
its output to the store sink when ``settings.distill`` is on, and your own flow can do the same.

Event time only, as for spans: a backfill closes exactly the blocks a live run would. With a Kafka
source that never ends, a conversation's last block closes when its next message arrives after the
idle gap (or when the flow stops with end of input).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import bytewax.operators as op
from bytewax.dataflow import Stream, operator
from bytewax.operators import StatefulBatchLogic, StatefulLogic

from skillstream.distill.distiller import OwnerTaskSkills, TaskSkillDistiller
from skillstream.distill.record import ConversationBlock, TaskSkill, TaskSkillResult
from skillstream.flows import progress
from skillstream.flows.shards import per_owner, shard_key, shard_of
from skillstream.model import Message
from skillstream.settings import Settings

log = logging.getLogger(__name__)

MAX_BLOCK_MESSAGES = 400
"""A block this long closes even without a gap, to bound the state and the prompt."""


@dataclass
class BlockState:
    """Open block of one conversation (small and picklable for snapshots)."""

    messages: list[Message] = field(default_factory=list)

    def copy(self) -> BlockState:
        return BlockState(list(self.messages))


class BlockLogic(StatefulLogic[Message, ConversationBlock, BlockState]):
    """Collects a conversation's messages until its session or task segment closes."""

    def __init__(self, settings: Settings, resume: BlockState | None) -> None:
        self.gap = settings.spans.idle_gap
        self.state = resume.copy() if resume is not None else BlockState()

    def on_item(self, value: Message) -> tuple[Iterable[ConversationBlock], bool]:
        out = []
        if self.state.messages:
            last = self.state.messages[-1]
            if (
                value.session_id != last.session_id
                or value.ts - last.ts > self.gap
                or len(self.state.messages) >= MAX_BLOCK_MESSAGES
            ):
                out.append(ConversationBlock.of(self.state.messages))
                self.state.messages = []
        self.state.messages.append(value)
        return out, StatefulLogic.RETAIN

    def on_eof(self) -> tuple[Iterable[ConversationBlock], bool]:
        out = [ConversationBlock.of(self.state.messages)] if self.state.messages else []
        self.state.messages = []
        return out, StatefulLogic.DISCARD

    def snapshot(self) -> BlockState:
        return self.state.copy()


class DistillLogic(StatefulBatchLogic[ConversationBlock, TaskSkillResult, dict]):
    """Distillation for one shard of owners; the state is each owner's ``OwnerTaskSkills``.

    A state restored from a snapshot is read again from the store before it is used, so task
    skills edited through the API between runs are never overwritten by a stale copy.
    """

    def __init__(
        self, core: TaskSkillDistiller, pool: ThreadPoolExecutor, resume: dict | None
    ) -> None:
        self.core = core
        self.pool = pool
        self.owners: dict[str, OwnerTaskSkills] = dict(resume) if resume else {}

    def on_batch(self, values: list[ConversationBlock]) -> tuple[Iterable[TaskSkillResult], bool]:
        def run(
            owner: str, blocks: list[ConversationBlock]
        ) -> tuple[OwnerTaskSkills, list[TaskSkillResult]]:
            state = self.owners.get(owner)
            if state is None or state.run_id != self.core.run_id:
                # new in this run, or restored from a snapshot: read the owner's task skills from
                # the store, which is never behind a snapshot (and may be ahead of it: segments
                # written after the snapshot are recognised by their ids and skipped)
                state = self.core.new_state(owner)
            out: list[TaskSkillResult] = []
            for block in blocks:
                out.extend(self.core.distill_block(state, block))
            return state, out

        results: list[TaskSkillResult] = []
        for owner, (state, out) in per_owner(self.pool, values, lambda b: b.owner_id, run):
            self.owners[owner] = state
            results.extend(out)
        return results, StatefulBatchLogic.RETAIN

    def snapshot(self) -> dict[str, Any]:
        return {owner: st.copy() for owner, st in self.owners.items()}


def make_core(settings: Settings, embedder: Any) -> TaskSkillDistiller:
    """The distillation step for a flow: hydrates owners from LanceDB ``task_skills``."""
    from skillstream.distill.factory import make_task_skill_distiller
    from skillstream.services.publishing import Publisher
    from skillstream.storage.home import storage_options
    from skillstream.storage.task_skills import TaskSkillIndex

    cache: dict[str, TaskSkillIndex] = {}

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


@operator
def distil_task_skills(
    step_id: str,
    messages: Stream[Message],
    settings: Settings,
    *,
    embedder: Any = None,
    workers: int = 1,
    distiller: TaskSkillDistiller | None = None,
) -> Stream[TaskSkillResult]:
    """Task-skill distillation for a stream of validated messages.

    Args:
        step_id: Unique id of this step in the flow.
        messages: ``skillstream.model.Message`` values (one conversation's messages in order).
        settings: ``idle_gap_s``, ``shards``, ``concurrency`` and the ``distill_*`` settings.
        embedder: The flow's embedder (default: the settings' shared one).
        workers: Bytewax workers (for the default number of shards).
        distiller: A ready distillation step (tests); else built from the settings.

    Returns:
        The results the store sink writes: every changed task skill, and failures (their LLM
        calls are accounted).
    """
    if distiller is None:
        if embedder is None:
            from skillstream.embed import get_embedder

            embedder = get_embedder(settings.embedding)
        distiller = make_core(settings, embedder)
    step = distiller
    shards = settings.flow.shards or max(1, workers)
    pool = ThreadPoolExecutor(
        max_workers=max(1, settings.flow.concurrency), thread_name_prefix="distill"
    )
    by_conv = op.key_on("by-conversation", messages, lambda m: m.conversation_id)
    keyed_blocks = op.stateful("blocks", by_conv, lambda resume: BlockLogic(settings, resume))
    blocks = op.key_rm("blocks-unkeyed", keyed_blocks)
    by_shard = op.key_on(
        "by-owner-shard", blocks, lambda b: shard_key(shard_of(b.owner_id, shards), workers)
    )
    keyed_results = op.stateful_batch(
        "distill", by_shard, lambda resume: DistillLogic(step, pool, resume)
    )
    results = op.key_rm("distill-unkeyed", keyed_results)
    op.inspect("count-task-skills", results, _count)
    return op.filter(
        "written", results, lambda r: r.changed or bool(r.llm_calls) or r.action == "failed"
    )


def _count(step_id: str, r: TaskSkillResult) -> None:
    progress.bump(f"task_skills_{r.action}")
    if r.action == "failed":  # not recorded as distilled: the next run tries the segment again
        log.warning(
            "task-skill distillation failed for conversation %s: %s", r.conversation_id, r.error
        )
