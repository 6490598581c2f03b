"""Cutting a conversation into spans (pure logic, no Bytewax).

A span is a run of consecutive messages of one conversation. The open span is closed when

* adding the next message would pass the token budget (a single longer message forms its own span),
* the session id changes,
* the next message comes more than ``idle_gap`` after the previous one, in *event time*,
* the input ends (``flush``),
* on a live stream, its conversation has gone quiet (``skillstream.quiet``: processing time,
  consistent with event time).

A backfill of last year's logs cuts exactly the spans a live run would have cut. Span ids hash the
conversation and the message ids, so a replay gives the same ids; a message already inside a done
span is dropped from a span cut differently (:meth:`SpanBuilder.trim`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
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
    last_seen: float = 0.0
    """Wall-clock time (seconds since the epoch) the conversation was last heard from."""

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


def span_header(span: Span) -> str:
    """The date line a span's text starts with."""
    return f"[{span.start_ts.strftime('%Y-%m-%d %H:%M %Z').strip()}]"


def render_span(span: Span) -> str:
    """The span's text with its date header (the header is not counted in the budget)."""
    return span_header(span) + "\n" + "\n".join(render_turn(m) for m in span.messages)


def span_pieces(
    span: Span, count_tokens: Callable[[str], int], limit: int
) -> list[tuple[str, int]]:
    """The span's text cut into pieces an embedding model reading ``limit`` tokens reads whole,
    each with its token count (the weight of its vector in the span's vector).

    A span within the limit is one piece, its whole text (:func:`render_span`). A longer one is
    cut between turns: each piece is the date header and as many consecutive turns as fit; a turn
    longer than a piece alone is cut between words (a run of characters without spaces, between
    characters). Counts are summed per turn, which is exact for tokenizers that split on white
    space first (WordPiece, as the default model's). ``limit`` of 0 or less: no limit.
    """
    text = render_span(span)
    whole = count_tokens(text)
    if limit <= 0 or whole <= limit:
        return [(text, whole)]
    header = span_header(span)
    budget = max(1, limit - count_tokens(header))
    parts: list[tuple[str, int]] = []
    for turn in (render_turn(m) for m in span.messages):
        n = count_tokens(turn)
        parts.extend([(turn, n)] if n <= budget else _cut(turn, count_tokens, budget))
    pieces: list[tuple[str, int]] = []
    lines: list[str] = []
    used = 0
    for line, n in parts:
        if lines and used + n > budget:
            pieces.append((header + "\n" + "\n".join(lines), used))
            lines, used = [], 0
        lines.append(line)
        used += n
    if lines:
        pieces.append((header + "\n" + "\n".join(lines), used))
    return pieces


def _cut(text: str, count_tokens: Callable[[str], int], budget: int) -> list[tuple[str, int]]:
    """``text`` cut between words into parts of at most ``budget`` tokens."""
    words: list[tuple[str, int]] = []
    for word in text.split():
        n = count_tokens(word)
        if n <= budget:
            words.append((word, n))
            continue
        # no spaces to cut at (Chinese, a long token): a character is at most one token
        for i in range(0, len(word), budget):
            chunk = word[i : i + budget]
            words.append((chunk, count_tokens(chunk)))
    parts: list[tuple[str, int]] = []
    current: list[str] = []
    used = 0
    for word, n in words:
        if current and used + n > budget:
            parts.append((" ".join(current), used))
            current, used = [], 0
        current.append(word)
        used += n
    if current:
        parts.append((" ".join(current), used))
    return parts


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
        span = make_span(tuple(state.messages), state.seq, state.tokens)
        state.messages = []
        state.tokens = 0
        state.seq += 1
        return [span]

    def resume(self, messages: Sequence[Message], seq: int, last_seen: float) -> SpanState:
        """The open state of a span held in the home (``skillstream.held``)."""
        tokens = sum(self.count_tokens(render_turn(m)) for m in messages)
        return SpanState(list(messages), tokens, seq, last_seen)

    def trim(self, span: Span, done: Callable[[Message], bool]) -> Span | None:
        """``span`` without the messages ``done`` says are already in a done span: the span
        itself when none is, ``None`` when all are."""
        keep = tuple(m for m in span.messages if not done(m))
        if len(keep) == len(span.messages):
            return span
        if not keep:
            return None
        tokens = sum(self.count_tokens(render_turn(m)) for m in keep)
        return replace(make_span(keep, span.seq, tokens), trimmed=True)


def make_span(messages: tuple[Message, ...], seq: int, tokens: int) -> Span:
    """The span of ``messages`` (one conversation's, in order)."""
    first = messages[0]
    text = " ".join(m.text for m in messages)
    return Span(
        span_id=prefixed_id(
            "spn", first.owner_id, first.conversation_id, [m.message_id for m in messages]
        ),
        owner_id=first.owner_id,
        conversation_id=first.conversation_id,
        session_id=first.session_id,
        seq=seq,
        messages=messages,
        n_tokens=tokens,
        lang=detect_language(text),
    )
