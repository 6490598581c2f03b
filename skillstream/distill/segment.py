"""Task chunking without an LLM: split a conversation block into independent task segments.

1. **Chit-chat is dropped**: a message whose every sentence is small talk ("Hi!", "Thanks, that
   worked", "你好") belongs to no task.
2. **Exchanges**: the rest is cut into exchanges, a user turn (or run of user turns) with the
   assistant turns that answer it.
3. **Topic shifts**: each exchange is embedded. An exchange opens a new segment when the user makes
   a new request (a request cue such as "can you", "I need", "how do I", "帮我") *and* its
   similarity to the running centroid of the current segment falls below ``shift_threshold``.
   Follow-ups without a request cue ("It failed at the push step") stay with the current task, so
   one task is not torn apart by a short off-topic turn.
4. **Fragments fold back**: a split-off piece that states no step of its own is a follow-up of
   the task before it (or after it, when it comes first), not a task: it joins that segment.
5. **Interleaving**: a new request that resembles an earlier segment of the same block (similarity
   of at least ``resume_threshold`` to its centroid) resumes that segment instead, so a segment's
   message positions may interleave with another's ("plan the trip" / "fix the printer" / "back to
   the trip").

The result is deterministic for a given block and embedder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from skillstream.distill.record import ConversationBlock, TaskSegment
from skillstream.distill.steps import count_steps, is_filler, sentences, terms
from skillstream.embed import Embed
from skillstream.lang import detect_language
from skillstream.model import Message

_REQUEST_EN = re.compile(
    r"\b(?:can|could|would|will) you\b|\bhelp me\b|\bhow (?:do|can|should|would) (?:i|we|you)\b|"
    r"\bi(?:'d| would) like\b|\bi (?:need|want|have) "
    r"to\b|\bi (?:need|want)\b|\bwe (?:need|want|have) to\b|"
    r"\blet'?s\b|\bi'?m (?:trying|looking|planning)\b|\bwhat'?s the best way\b|\bwalk me through\b|"
    r"\bshow me\b|\bset up\b|\bi'?d love\b|\bremind me\b|\bis there a way\b",
    re.IGNORECASE,
)
_REQUEST_ZH = re.compile(r"帮我|帮忙|怎么|如何|我想|我需要|我要|请|能不能|可以.*吗|教我")


def is_chit_chat(message: Message) -> bool:
    """True when every sentence of the message is small talk (greetings, thanks, agreement) or a
    generic offer of help."""
    parts = sentences(message.text)
    return not parts or all(is_filler(s) for s in parts)


def is_request(text: str) -> bool:
    """Whether a user turn asks for something new (and says enough to name a task)."""
    rx = _REQUEST_ZH if detect_language(text) == "zh" else _REQUEST_EN
    return bool(rx.search(text)) and len(set(terms(text))) >= 3


REQUEST_TURNS = 2
"""User turns with content that make up a segment's request."""


def request_text(messages: tuple[Message, ...] | list[Message], limit: int = 400) -> str:
    """What the user asked for: the first ``REQUEST_TURNS`` user turns with content, small talk
    left out ("Hello!" / "I need to book a viewing" -> "I need to book a viewing").

    The user states the goal at the opening of a task in any domain, while the assistant's steps
    share much across related tasks ("Could I get your name?"), so the request tells tasks apart
    where the steps do not.
    """
    parts: list[str] = []
    turns = 0
    for m in messages:
        if m.role != "user" or is_chit_chat(m):
            continue
        parts.extend(s for s in sentences(m.text) if not is_filler(s))
        turns += 1
        if turns >= REQUEST_TURNS:
            break
    return " ".join(parts)[:limit].strip()


@dataclass
class _Segment:
    positions: list[int] = field(default_factory=list)
    vectors: list[np.ndarray] = field(default_factory=list)

    def centroid(self) -> np.ndarray:
        c = np.mean(np.stack(self.vectors), axis=0)
        n = float(np.linalg.norm(c))
        return c / n if n else c


def exchanges(block: ConversationBlock) -> list[list[int]]:
    """Positions of the block's messages grouped into exchanges, chit-chat left out."""
    out: list[list[int]] = []
    prev_role = None
    for i, m in enumerate(block.messages):
        if is_chit_chat(m):
            continue
        if not out or (m.role == "user" and prev_role != "user"):
            out.append([i])
        else:
            out[-1].append(i)
        prev_role = m.role
    return out


def segment_block(
    block: ConversationBlock,
    embed: Embed,
    *,
    shift_threshold: float = 0.2,
    resume_threshold: float = 0.55,
) -> list[TaskSegment]:
    """Split a block into task segments (see the module docstring).

    Args:
        block: The messages of one conversation between two closes.
        embed: Texts to unit vectors.
        shift_threshold: A new request below this cosine similarity to the current segment
            opens a new segment.
        resume_threshold: A new request at or above this similarity to an earlier segment
            resumes it.

    Returns:
        Segments in order of their first message; empty when the block is all chit-chat.
    """
    groups = exchanges(block)
    if not groups:
        return []
    users = [
        " ".join(block.messages[i].text for i in g if block.messages[i].role == "user")
        for g in groups
    ]
    if not any(is_request(u) for u in users[1:]):
        # no later turn asks for something new: one task, nothing to embed
        positions = [i for g in groups for i in g]
        text = " ".join(block.messages[i].text for i in positions)
        return [TaskSegment.of(block, positions, lang=detect_language(text))]
    texts = ["\n".join(block.messages[i].text for i in g) for g in groups]
    vectors = np.asarray(embed(texts), dtype=np.float32)
    segments: list[_Segment] = [_Segment(list(groups[0]), [vectors[0]])]
    current = 0
    for g, vec, user_text in zip(groups[1:], vectors[1:], users[1:]):
        opens = False
        if user_text and is_request(user_text):
            sim = float(vec @ segments[current].centroid())
            opens = sim < shift_threshold
        if opens:
            sims = [float(vec @ s.centroid()) for s in segments]
            best = int(np.argmax(sims))
            if best != current and sims[best] >= resume_threshold:
                current = best
            else:
                segments.append(_Segment())
                current = len(segments) - 1
        segments[current].positions.extend(g)
        segments[current].vectors.append(vec)
    segments = _fold_fragments(block, segments)
    out = []
    for s in segments:
        text = " ".join(block.messages[i].text for i in s.positions)
        out.append(TaskSegment.of(block, s.positions, lang=detect_language(text)))
    out.sort(key=lambda seg: seg.positions[0])
    return out


def _fold_fragments(block: ConversationBlock, segments: list[_Segment]) -> list[_Segment]:
    """Join every segment without a step of its own to its neighbour (see the module docstring)."""
    if len(segments) < 2:
        return segments
    ordered = sorted(segments, key=lambda s: s.positions[0])
    keep: list[_Segment] = []
    pending: list[int] = []
    for seg in ordered:
        if count_steps(block.messages[i] for i in seg.positions) == 0:
            if keep:
                keep[-1].positions.extend(seg.positions)
            else:
                pending.extend(seg.positions)
            continue
        seg.positions = sorted(pending + seg.positions)
        pending = []
        keep.append(seg)
    if not keep:
        return [_Segment(sorted(i for s in ordered for i in s.positions))]
    for seg in keep:
        seg.positions.sort()
    return keep
