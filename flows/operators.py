"""Bytewax operator logic: thin wrappers that call the core (spans, pipeline)."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bytewax.operators import StatefulBatchLogic, StatefulLogic

from skillstream.admit import Admitted, TimeWindow, admit, refusal, refused
from skillstream.model import DeadLetter, Message, Span, SpanResult
from skillstream.pipeline import MemoryPipeline, OwnerState
from skillstream.spans import SpanBuilder, SpanState

T = TypeVar("T")
R = TypeVar("R")


def per_owner(
    pool: ThreadPoolExecutor,
    values: list[T],
    owner_of: Callable[[T], str],
    run: Callable[[str, list[T]], R],
) -> list[tuple[str, R]]:
    """Group ``values`` by owner (keeping their order) and run the groups on ``pool``.

    Different owners run at the same time; one owner's values go to one ``run`` call, in order.
    Returns ``(owner, result)`` in the order owners first appear.
    """
    groups: dict[str, list[T]] = {}
    for v in values:
        groups.setdefault(owner_of(v), []).append(v)
    futures = {owner: pool.submit(run, owner, items) for owner, items in groups.items()}
    return [(owner, futures[owner].result()) for owner in groups]


def shard_of(key: str, shards: int) -> str:
    """A stable shard name for a key (crc32, not ``hash()``, which differs between processes)."""
    return str(zlib.crc32(key.encode("utf-8")) % max(1, shards))


@dataclass
class ConversationState:
    """What ``SpanLogic`` keeps per conversation: the open span and the admission state."""

    spans: SpanState = field(default_factory=SpanState)
    admitted: Admitted = field(default_factory=Admitted)

    def copy(self) -> ConversationState:
        return ConversationState(self.spans.copy(), self.admitted.copy())


class SpanLogic(StatefulLogic[Message, Span | DeadLetter, ConversationState]):
    """Per-conversation span builder; flushes the open span at end of input.

    A message that the conversation does not admit (``skillstream.admit``), or that the span
    builder cannot take (its text cannot be tokenised, say), leaves as a ``DeadLetter``; the
    conversation goes on without it.
    """

    def __init__(
        self,
        builder: SpanBuilder,
        resume: ConversationState | SpanState | None,
        window: TimeWindow | None = None,
    ) -> None:
        self.builder = builder
        self.window = window or TimeWindow()
        if isinstance(resume, SpanState):  # a snapshot taken before admission had state
            resume = ConversationState(resume)
        self.state = resume.copy() if resume is not None else ConversationState()

    def on_item(self, value: Message) -> tuple[Iterable[Span | DeadLetter], bool]:
        reason = refusal(self.window, self.state.admitted, value)
        if reason is not None:
            return [refused(value, reason)], StatefulLogic.RETAIN
        try:  # the builder changes its state only once the message's tokens are counted
            out: list[Span | DeadLetter] = list(self.builder.add(self.state.spans, value))
        except Exception as e:  # noqa: BLE001 - one message must not stop its conversation
            reason = f"could not be added to a span ({type(e).__name__}: {e})"
            return [refused(value, reason)], StatefulLogic.RETAIN
        admit(self.state.admitted, value)
        return out, StatefulLogic.RETAIN

    def on_eof(self) -> tuple[Iterable[Span | DeadLetter], bool]:
        return self.builder.flush(self.state.spans), StatefulLogic.DISCARD

    def snapshot(self) -> ConversationState:
        return self.state.copy()


class ExtractLogic(StatefulBatchLogic[Span, SpanResult, dict]):
    """Extraction for one shard of owners.

    A batch holds spans of many owners. Spans are grouped by owner (keeping their order) and the
    groups run on a shared thread pool, so LLM calls of different owners overlap while each owner's
    spans are applied strictly in order. The state is the owners' memories.
    """

    def __init__(
        self, pipeline: MemoryPipeline, pool: ThreadPoolExecutor, resume: dict | None
    ) -> None:
        self.pipeline = pipeline
        self.pool = pool
        self.owners: dict[str, OwnerState] = dict(resume) if resume else {}

    def on_batch(self, values: list[Span]) -> tuple[Iterable[SpanResult], bool]:
        def run(owner: str, spans: list[Span]) -> tuple[OwnerState, list[SpanResult]]:
            state = self.owners.get(owner)
            if state is None:
                state = self.pipeline.new_state(owner)
            return state, self.pipeline.process_owner(state, spans)

        results: list[SpanResult] = []
        for owner, (state, out) in per_owner(self.pool, values, lambda s: s.owner_id, run):
            self.owners[owner] = state
            results.extend(out)
        return results, StatefulBatchLogic.RETAIN

    def snapshot(self) -> dict[str, Any]:
        return {owner: st.copy() for owner, st in self.owners.items()}
