"""The extraction contract: a span goes in, memory operations come out.

An ``Extractor`` is what the flow calls per span. It is made of

* a memory-skill *selection* (the controller; with no controller every primitive is selected), and
* an *executor* that applies the selected memory skills to the span and returns ``MemoryOp``s.

The offline ``rules`` executor (``skillstream.rules``) implements the four primitive memory skills
with text rules; the LLM executor of ``skillstream.memskill`` renders one prompt per span. Both take
the same inputs, so the flow does not change when an LLM is configured.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from skillstream.memories import OwnerMemories
from skillstream.model import LLMCall, Memory, MemoryOp, Span

OFFLINE_THRESHOLD = 0.6
"""Default cosine at which a statement counts as like a prototype (sentence embeddings of the
default model: paraphrases of one statement score above it, statements on other topics below)."""


@dataclass(frozen=True)
class OfflineForm:
    """What a memory skill does without an LLM: which statements it keeps or drops by example.

    The offline ``rules`` executor reads it (``skillstream.rules.offline``). A statement the rules
    would not store (a question, small talk, an assistant's remark, or one of a category no selected
    skill keeps) is stored, as a fact of its speaker, when it is like one of ``prototypes`` (cosine
    of the sentence embeddings at least ``threshold``) or matches one of ``patterns``; a statement
    like one of ``skip`` (and closer to it than to any prototype) is not stored at all.

    Attributes:
        prototypes: Example sentences of what is worth keeping.
        threshold: The cosine at which a sentence is like a prototype or a skip example.
        patterns: Regular expressions (case-insensitive, searched in the sentence) of what to keep.
        skip: Example sentences of what not to keep, even when the rules would.
    """

    prototypes: tuple[str, ...] = ()
    threshold: float = OFFLINE_THRESHOLD
    patterns: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values (the bank's ``offline`` column, skill files, checkpoints); only the
        parts that are set, besides the threshold."""
        out: dict[str, Any] = {"threshold": round(float(self.threshold), 4)}
        for key in ("prototypes", "patterns", "skip"):
            if getattr(self, key):
                out[key] = list(getattr(self, key))
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OfflineForm:
        """The form of ``to_dict``'s values (unknown keys are an error of the caller)."""
        return cls(
            prototypes=tuple(str(x) for x in data.get("prototypes") or ()),
            threshold=float(data.get("threshold", OFFLINE_THRESHOLD)),
            patterns=tuple(str(x) for x in data.get("patterns") or ()),
            skip=tuple(str(x) for x in data.get("skip") or ()),
        )


@dataclass(frozen=True)
class MemorySkill:
    """A routine for how to extract memory from a span (see docs/architecture.md: memory skill)."""

    name: str
    description: str
    instruction: str
    action: str
    """The operation type the skill may produce: INSERT, UPDATE, DELETE or NOOP."""
    version: int = 1
    offline: OfflineForm | None = None
    """What the offline executor does with the skill (``None``: only its action, or its category
    for the rules' category skills)."""


@dataclass
class Extraction:
    """What an executor produced for one span."""

    ops: list[MemoryOp] = field(default_factory=list)
    llm_calls: list[LLMCall] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)
    """(operation as text, reason) for every proposed operation that was invalid and not applied."""
    memory_skills: list[str] = field(default_factory=list)


@dataclass
class ExtractionInput:
    """Everything an executor may look at for one span."""

    span: Span
    span_text: str
    retrieved: list[Memory]
    """The owner's memories most similar to the span, best first (index = position in the list)."""
    memory_skills: list[MemorySkill]
    state: OwnerMemories
    span_vector: np.ndarray | None = None
    embed: Callable[[Sequence[str]], Any] | None = None
    """The pipeline's sentence embedder (texts in, unit vectors out), for executors that compare
    sentences with a skill's examples (``OfflineForm``); ``None`` when there is none."""


class Executor(Protocol):
    """Applies memory skills to a span."""

    name: str
    needs_span_vector: bool
    reads_retrieved: bool
    """The executor is shown the owner's memories most similar to the span (``retrieved``, an LLM
    prompt lists them) and may act on them; showing one is its first use (``activated``). ``False``
    for an executor that reads the owner's memories by key itself (the offline rules): it is shown
    none, and the pipeline retrieves nothing for it."""
    predictable: bool
    """Extraction is cheap and has no side effects, so the pipeline may run it once more for a
    span to predict the texts it will store (and ask the model for a batch's texts at once).
    ``False`` for anything that calls an LLM: such an executor is called exactly once per span."""

    def execute(self, inp: ExtractionInput) -> Extraction: ...


class Controller(Protocol):
    """Picks the memory skills for a span."""

    def select(
        self,
        span_vector: np.ndarray | None,
        retrieved: Sequence[Memory],
        skills: Sequence[MemorySkill],
    ) -> list[MemorySkill]: ...


class AllSkills:
    """The trivial controller: every skill in the bank is selected."""

    def select(
        self,
        span_vector: np.ndarray | None,
        retrieved: Sequence[Memory],
        skills: Sequence[MemorySkill],
    ) -> list[MemorySkill]:
        return list(skills)
