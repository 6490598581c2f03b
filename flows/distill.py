"""Task-skill distillation in the memory dataflow (thin Bytewax wiring of ``skillstream.distill``).

    messages -> key by conversation -> blocks (stateful)   a block closes on an idle gap in event
                                                            time, a session change, or end of input
             -> key by owner shard  -> distill (stateful batch; owners of a shard run concurrently,
                                       each owner's blocks strictly in order)
             -> TaskSkillResult values for the store sink (LanceDB task_skills + catalog rows
                in the sink's one transaction; packages are published by the distill step)

:func:`distil_task_skills` is that chain as one Bytewax operator; ``flows.memory.build_flow`` gives
its output to the store sink when distillation is on, and your own flow can do the same.

Blocks close as spans do (``flows.live``): on event time, so a backfill closes exactly the blocks a
live run would; on a live stream also when the conversation has been quiet for the idle gap; and
an open block is held in the home when the input ends without closing it (``Home.add``, a stopped
run).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, cast

import bytewax.operators as op
from bytewax.dataflow import Stream, operator
from bytewax.operators import StatefulBatchLogic

from skillstream.distill.distiller import OwnerTaskSkills, TaskSkillDistiller
from skillstream.distill.record import ConversationBlock, TaskSkillResult
from skillstream.flows.live import OpenLogic, OpenSpans, conversation_of
from skillstream.flows.progress import Counters
from skillstream.flows.shards import per_owner, shard_key, shard_of
from skillstream.held import BLOCKS, OpenState, Released, Wake
from skillstream.model import Message
from skillstream.quiet import IdleRule

log = logging.getLogger(__name__)

MAX_BLOCK_MESSAGES = 400
"""A block this long closes even without a gap, to bound the state and the prompt."""


@dataclass
class BlockState:
    """Open block of one conversation (small and picklable for snapshots)."""

    messages: list[Message] = field(default_factory=list)
    last_seen: float = 0.0
    """Wall-clock time (seconds since the epoch) the conversation was last heard from."""
    held: list[str] = field(default_factory=list)
    """Ids of its messages given back from the home."""

    def copy(self) -> BlockState:
        return BlockState(list(self.messages), self.last_seen, list(getattr(self, "held", [])))


class BlockLogic(OpenLogic[BlockState]):
    """Collects a conversation's messages until its session or task segment closes, with the
    open-state rules of ``flows.live`` (a quiet conversation's block closes on a live stream; an
    open block is held in the home when the input ends that way)."""

    stage = BLOCKS

    def __init__(
        self, gap: timedelta, resume: BlockState | None, live: OpenSpans | None = None
    ) -> None:
        self.gap = gap
        if live is None:
            live = OpenSpans(IdleRule(gap))
        super().__init__(resume, live)

    def copy(self, state: BlockState) -> BlockState:
        return state.copy()

    def fresh(self, now: float) -> BlockState:
        return BlockState(last_seen=now)

    def give_back(self, held: OpenState, messages: list[Message], last_seen: float) -> BlockState:
        return BlockState(list(messages), last_seen, [m.message_id for m in messages])

    def accept(self, state: BlockState, message: Message) -> list[Any]:
        out = []
        if state.messages:
            last = state.messages[-1]
            if (
                message.session_id != last.session_id
                or message.ts - last.ts > self.gap
                or len(state.messages) >= MAX_BLOCK_MESSAGES
            ):
                out = self.close(state)
        state.messages.append(message)
        return out

    def close(self, state: BlockState) -> list[Any]:
        if not state.messages:
            return []
        block = ConversationBlock.of(state.messages, getattr(state, "held", ()))
        state.messages = []
        state.held = []
        return [block]


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
            out: list[Any] = []
            for block in blocks:
                results = self.core.distill_block(state, block)
                out.extend(results)
                if block.held and not any(r.action == "failed" for r in results):
                    # distilled: its messages held in the home are no longer open
                    out.append(Released(BLOCKS, owner, block.conversation_id, block.held))
            return state, out

        results: list[Any] = []
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
        live: Open blocks across time and runs (``flows.live``); default: blocks close on
            event time and at the input's end only.
    """

    distiller: TaskSkillDistiller
    idle_gap: timedelta
    workers: int = 1
    shards: int = 0
    concurrency: int = 4
    counters: Counters = field(default_factory=Counters)
    live: OpenSpans | None = None


@operator
def distil_task_skills(
    step_id: str,
    messages: Stream[Message],
    distillation: Distillation,
    wakes: Stream[Wake] | None = None,
) -> Stream[Any]:
    """Task-skill distillation for a stream of admitted messages.

    Args:
        step_id: Unique id of this step in the flow.
        messages: ``skillstream.model.Message`` values (one conversation's messages in order).
        distillation: The distiller, the idle gap and the shards
            (``Runner.parts().distillation``).
        wakes: A ``Wake`` per conversation whose open block is held in the home.

    Returns:
        The results the store sink writes: every changed task skill, failures (their LLM
        calls are accounted), and the ``Held`` and ``Released`` records of open blocks.
    """
    step = distillation.distiller
    gap, counters = distillation.idle_gap, distillation.counters
    workers = max(1, distillation.workers)
    shards = distillation.shards or workers
    pool = ThreadPoolExecutor(
        max_workers=max(1, distillation.concurrency), thread_name_prefix="distill"
    )
    live = distillation.live
    arriving: Stream[Any] = messages
    if wakes is not None:
        arriving = op.merge("with-wakes", messages, wakes)
    by_conv = op.key_on("by-conversation", arriving, conversation_of)
    keyed_blocks = op.stateful("blocks", by_conv, lambda resume: BlockLogic(gap, resume, live))
    closed = op.branch("closed", op.key_rm("blocks-unkeyed", keyed_blocks), _is_block)
    blocks = cast("Stream[ConversationBlock]", closed.trues)
    by_shard = op.key_on(
        "by-owner-shard", blocks, lambda b: shard_key(shard_of(b.owner_id, shards), workers)
    )
    keyed_results = op.stateful_batch(
        "distill", by_shard, lambda resume: DistillLogic(step, pool, resume)
    )
    out = op.branch("released", op.key_rm("distill-unkeyed", keyed_results), _is_result)
    results = cast("Stream[TaskSkillResult]", out.trues)

    def count(step_id: str, r: TaskSkillResult) -> None:
        counters.bump(f"task_skills_{r.action}")
        if r.action == "failed":  # not recorded as distilled: the next run tries the segment again
            log.warning(
                "task-skill distillation failed for conversation %s: %s",
                r.conversation_id,
                r.error,
            )

    op.inspect("count-task-skills", results, count)
    written = op.filter(
        "written", results, lambda r: r.changed or bool(r.llm_calls) or r.action == "failed"
    )
    # held and released open blocks go to the store as they are
    return op.merge("with-open", written, out.falses, closed.falses)


def _is_block(item: Any) -> bool:
    return isinstance(item, ConversationBlock)


def _is_result(item: Any) -> bool:
    return isinstance(item, TaskSkillResult)
