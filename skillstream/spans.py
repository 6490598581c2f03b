"""Cutting a conversation into spans (pure logic, no Bytewax).

A span is a run of consecutive messages of one conversation. The open span is closed when

* adding the next message would pass the token budget (a single longer message forms its own span),
* the session id changes,
* the next message comes more than ``idle_gap`` after the previous one, in *event time*,
* the input ends (``flush``).

Event time only: a backfill of last year's logs cuts exactly the spans a live run would have cut.
Span ids hash the conversation and the message ids, so a replay gives the same ids.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta

from skillstream.ids import prefixed_id
from skillstream.lang import detect_language
from skillstream.model import Message, Span


@dataclass
class SpanState:
    """Open span of one conversation; small and picklable for Bytewax snapshots."""

    messages: list[Message] = field(default_factory=list)
    tokens: int = 0
    seq: int = 0

    def copy(self) -> SpanState:
        return replace(self, messages=list(self.messages))


def render_turn(message: Message) -> str:
    """One turn as the extractor sees it: ``Speaker said, "text"`` plus any image caption."""
    line = f'{message.speaker} said, "{message.text}"'
    if message.metadata:
        try:
            meta = json.loads(message.metadata)
        except ValueError:
            meta = {}
        caption = meta.get("image_caption") or meta.get("blip_caption")
        if caption:
            line += f" and shared {caption}"
    return line


def render_span(span: Span) -> str:
    """The span's text with its date header (the header is not counted in the budget)."""
    header = f"[{span.start_ts.strftime('%Y-%m-%d %H:%M %Z').strip()}]"
    return header + "\n" + "\n".join(render_turn(m) for m in span.messages)


class SpanBuilder:
    """Accumulates messages of one conversation into spans."""

    def __init__(
        self,
        count_tokens: Callable[[str], int],
        budget: int = 512,
        idle_gap: timedelta = timedelta(minutes=30),
    ) -> None:
        self.count_tokens = count_tokens
        self.budget = budget
        self.idle_gap = idle_gap

    def add(self, state: SpanState, message: Message) -> list[Span]:
        """Add one message; return the spans this closes (zero or one)."""
        out: list[Span] = []
        tokens = self.count_tokens(render_turn(message))
        if state.messages:
            last = state.messages[-1]
            if (
                message.session_id != last.session_id
                or message.ts - last.ts > self.idle_gap
                or state.tokens + tokens > self.budget
            ):
                out.extend(self.flush(state))
        state.messages.append(message)
        state.tokens += tokens
        return out

    def flush(self, state: SpanState) -> list[Span]:
        """Close the open span, if any."""
        if not state.messages:
            return []
        msgs = tuple(state.messages)
        first = msgs[0]
        text = " ".join(m.text for m in msgs)
        span = Span(
            span_id=prefixed_id("spn", first.conversation_id, [m.message_id for m in msgs]),
            owner_id=first.owner_id,
            conversation_id=first.conversation_id,
            session_id=first.session_id,
            seq=state.seq,
            messages=msgs,
            n_tokens=state.tokens,
            lang=detect_language(text),
        )
        state.messages = []
        state.tokens = 0
        state.seq += 1
        return [span]
