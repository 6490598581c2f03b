"""Task-skill distillation in the memory dataflow (thin Bytewax wiring of ``skillstream.distill``).

    messages -> key by conversation -> blocks (stateful)   a block closes on an idle gap in event
                                                            time, a session change, or end of input
             -> key by owner shard  -> distill (stateful batch; owners of a shard run concurrently,
                                       each owner's blocks strictly in order)
             -> TaskSkillResult values for the store sink (LanceDB task_skills + catalog rows
                in the sink's one transaction; packages are published by the distill step)

:func:`distil_task_skills` is that chain as one Bytewax operator; ``flows.memory.build_flow`` gives
its output to the store sink when distillation is on, and your own flow can do the same.

Event time only, as for spans: a backfill closes exactly the blocks a live run would. With a Kafka
source that never ends, a conversation's last block closes when its next message arrives after the
idle gap (or when the flow stops with end of input).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import bytewax.operators as op
from bytewax.dataflow import Stream, operator
from bytewax.operators import StatefulBatchLogic, StatefulLogic

from skillstream.distill.distiller import OwnerTaskSkills, TaskSkillDistiller
from skillstream.distill.record import ConversationBlock, TaskSkillResult
from skillstream.flows.progress import Counters
from skillstream.flows.shards import per_owner, shard_key, shard_of
from skillstream.model import Message

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

    def __init__(self, gap: timedelta, resume: BlockState | None) -> None:
        self.gap = gap
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


@dataclass(frozen=True)
class Distillation:
    """What :func:`distil_task_skills` runs (``Runner.parts()`` builds it from the settings).

    Attributes:
        distiller: The distillation step (heuristic or LLM distiller, publisher, hydration).
        idle_gap: A block closes when its conversation's next message comes this much later.
        workers: Bytewax workers of the flow, the whole cluster's.
        shards: Owner shards (setting ``shards``; 0: one per worker).
        concurrency: Owners of a shard distilled at once (setting ``concurrency``).
        counters: The run's counters.
    """

    distiller: TaskSkillDistiller
    idle_gap: timedelta
    workers: int = 1
    shards: int = 0
    concurrency: int = 4
    counters: Counters = field(default_factory=Counters)


@operator
def distil_task_skills(
    step_id: str, messages: Stream[Message], distillation: Distillation
) -> Stream[TaskSkillResult]:
    """Task-skill distillation for a stream of admitted messages.

    Args:
        step_id: Unique id of this step in the flow.
        messages: ``skillstream.model.Message`` values (one conversation's messages in order).
        distillation: The distiller, the idle gap and the shards
            (``Runner.parts().distillation``).

    Returns:
        The results the store sink writes: every changed task skill, and failures (their LLM
        calls are accounted).
    """
    step = distillation.distiller
    gap, counters = distillation.idle_gap, distillation.counters
    workers = max(1, distillation.workers)
    shards = distillation.shards or workers
    pool = ThreadPoolExecutor(
        max_workers=max(1, distillation.concurrency), thread_name_prefix="distill"
    )
    by_conv = op.key_on("by-conversation", messages, lambda m: m.conversation_id)
    keyed_blocks = op.stateful("blocks", by_conv, lambda resume: BlockLogic(gap, resume))
    blocks = op.key_rm("blocks-unkeyed", keyed_blocks)
    by_shard = op.key_on(
        "by-owner-shard", blocks, lambda b: shard_key(shard_of(b.owner_id, shards), workers)
    )
    keyed_results = op.stateful_batch(
        "distill", by_shard, lambda resume: DistillLogic(step, pool, resume)
    )
    results = op.key_rm("distill-unkeyed", keyed_results)

    def count(step_id: str, r: TaskSkillResult) -> None:
        counters.bump(f"task_skills_{r.action}")
        if r.action == "failed":  # not recorded as distilled: the next run tries the segment again
            log.warning(
                "task-skill distillation failed for conversation %s: %s",
                r.conversation_id,
                r.error,
            )

    op.inspect("count-task-skills", results, count)
    return op.filter(
        "written", results, lambda r: r.changed or bool(r.llm_calls) or r.action == "failed"
    )
