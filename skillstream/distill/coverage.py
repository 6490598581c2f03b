"""How much of a procedure that was actually followed another procedure covers, in order.

The measure of whether a task skill would have helped: given the steps an assistant took in a
conversation (in order) and the steps a skill's procedure gives, :func:`step_recall` is the share
of the conversation's steps that the procedure matches in the same order (the longest common
subsequence under step matching, over the conversation's step count). Two steps match when their
content terms overlap as much as the distiller asks of a step it merges into a known one
(``heuristics.STEP_MATCH``, Jaccard), so the measure and distillation agree on what "the same
step" is. A procedure that covers no step, or no procedure at all (no skill), scores 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from skillstream.distill import steps as st
from skillstream.distill.draft import STEP_MATCH


def same_step(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two steps' term sets match (Jaccard at least ``STEP_MATCH``)."""
    return bool(a and b) and len(a & b) / len(a | b) >= STEP_MATCH


def step_recall(actual: Sequence[str], procedure: Sequence[str]) -> float:
    """Share of ``actual``'s steps that ``procedure`` matches in order (0 when ``actual`` is
    empty)."""
    if not actual:
        return 0.0
    a = [frozenset(st.terms(s)) for s in actual]
    b = [frozenset(st.terms(s)) for s in procedure]
    if not b:
        return 0.0
    # longest common subsequence under same_step, one row at a time
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            cur[j] = prev[j - 1] + 1 if same_step(x, y) else max(prev[j], cur[j - 1])
        prev = cur
    return prev[-1] / len(a)
