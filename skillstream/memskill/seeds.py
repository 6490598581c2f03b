"""The four primitive memory skills every bank starts with."""

from __future__ import annotations

from skillstream.extract import MemorySkill
from skillstream.vocab import Op

INSERT = MemorySkill(
    name="insert",
    description="Record new lasting information from the span as separate memory items.",
    instruction=(
        "Purpose: keep facts, events, preferences, plans and opinions "
        "that will still matter later.\n"
        "When to use: the span states something about a person or the world that no retrieved "
        "memory already holds.\n"
        "How to apply: write one self-contained item per distinct piece of information, in the "
        "third person, naming who it is about, with absolute dates instead of relative ones.\n"
        "Constraints: do not copy what a retrieved memory already says; only INSERT operations."
    ),
    action=Op.INSERT,
)

UPDATE = MemorySkill(
    name="update",
    description="Fold new details into the retrieved memory they refine.",
    instruction=(
        "Purpose: keep one current item per subject instead of many partial ones.\n"
        "When to use: the span adds to, corrects or narrows a retrieved memory.\n"
        "How to apply: pick the single best-matching retrieved item by its index and write its "
        "full new text, keeping what is still true.\n"
        "Constraints: only UPDATE operations, only indexes of the retrieved list."
    ),
    action=Op.UPDATE,
)

DELETE = MemorySkill(
    name="delete",
    description="Retire a retrieved memory that the span explicitly cancels or contradicts.",
    instruction=(
        "Purpose: stop acting on information that is no longer true.\n"
        "When to use: the speaker withdraws, cancels or negates what a retrieved item says.\n"
        "How to apply: name the retrieved item's index.\n"
        "Constraints: only on an explicit cancellation or contradiction; when unsure, do nothing."
    ),
    action=Op.DELETE,
)

SKIP = MemorySkill(
    name="skip",
    description="Leave memory unchanged when the span holds nothing worth keeping.",
    instruction=(
        "Purpose: avoid storing greetings, filler and small talk.\n"
        "When to use: no other selected skill finds anything to do.\n"
        "How to apply: produce no operation.\n"
        "Constraints: never together with another operation for the same statement."
    ),
    action=Op.NOOP,
)

PRIMITIVES: tuple[MemorySkill, ...] = (INSERT, UPDATE, DELETE, SKIP)
