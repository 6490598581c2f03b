"""Bytewax operator logic: thin wrappers that call the core (spans, pipeline)."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
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


class AdmitLogic(StatefulLogic[Message, Message | DeadLetter, Admitted]):
    """Per conversation: lets a message through, or turns it into a ``DeadLetter`` when the
    conversation does not admit it (``skillstream.admit``: timestamp window, duplicate ids)."""

    def __init__(self, window: TimeWindow, resume: Admitted | None) -> None:
        self.window = window
        self.state = resume.copy() if resume is not None else Admitted()

    def on_item(self, value: Message) -> tuple[Iterable[Message | DeadLetter], bool]:
        reason = refusal(self.window, self.state, value)
        if reason is not None:
            return [refused(value, reason)], StatefulLogic.RETAIN
        admit(self.state, value)
        return [value], StatefulLogic.RETAIN

    def snapshot(self) -> Admitted:
        return self.state.copy()


class SpanLogic(StatefulLogic[Message, Span | DeadLetter, SpanState]):
    """Per-conversation span builder; flushes the open span at end of input.

    A message that the span builder cannot take (its text cannot be tokenised, say) leaves as a
    ``DeadLetter``; the conversation goes on without it.
    """

    def __init__(self, builder: SpanBuilder, resume: SpanState | None) -> None:
        self.builder = builder
        self.state = resume.copy() if resume is not None else SpanState()

    def on_item(self, value: Message) -> tuple[Iterable[Span | DeadLetter], bool]:
        try:  # the builder changes its state only once the message's tokens are counted
            out: list[Span | DeadLetter] = list(self.builder.add(self.state, value))
        except Exception as e:  # noqa: BLE001 - one message must not stop its conversation
            reason = f"could not be added to a span ({type(e).__name__}: {e})"
            return [refused(value, reason, stage="spans")], StatefulLogic.RETAIN
        return out, StatefulLogic.RETAIN

    def on_eof(self) -> tuple[Iterable[Span | DeadLetter], bool]:
        return self.builder.flush(self.state), StatefulLogic.DISCARD

    def snapshot(self) -> SpanState:
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
