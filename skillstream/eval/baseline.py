"""The naive baseline of the evaluation: every turn stored verbatim, no extraction.

``RawTurnsExecutor`` is an executor like any other (see :mod:`skillstream.extract`): the memory flow
hands it each span and it returns one INSERT per message, whose text is the turn as the extractor
would have read it (``Speaker said, "text"`` plus an image caption,
:func:`skillstream.spans.render_turn`) and whose only source message is that turn. Everything else
is shared with the real system: the same flow cuts the spans, the same apply step, embedder and
store sink write the items, and the same hybrid retriever searches them. The difference in the
report is therefore the extraction alone.

Two turns with the same text (after the apply step's normalisation) become one item citing both
turns, as any restated memory does.
"""

from __future__ import annotations

from skillstream.extract import Extraction, ExtractionInput
from skillstream.model import MemoryOp
from skillstream.spans import render_turn
from skillstream.vocab import Op

BASELINES = ("raw-turns", "none")
"""Values of ``skillstream eval locomo --baseline``."""


class RawTurnsExecutor:
    """Stores each message of a span as one item, verbatim; makes no LLM call."""

    name = "raw-turns"
    needs_span_vector = False
    reads_retrieved = False
    predictable = False

    def execute(self, inp: ExtractionInput) -> Extraction:
        ops = [
            MemoryOp(
                op=Op.INSERT,
                text=render_turn(m),
                kind="turn",
                subject=m.speaker or None,
                event_ts=m.ts,
                source_message_ids=(m.message_id,),
                reason="raw turn (baseline)",
                memory_skill="insert",
            )
            for m in inp.span.messages
            if m.text and m.text.strip()
        ]
        return Extraction(ops=ops, memory_skills=["insert"])
