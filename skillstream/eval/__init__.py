"""Evaluation of skillstream's memory on public benchmarks (LoCoMo), next to a naive baseline.

* :mod:`.locomo`: the run (build per conversation, retrieve, score, cost);
* :mod:`.scoring` and :mod:`.porter`: the LoCoMo answer scoring rules and evidence recall;
* :mod:`.qa`: answering from memories and the LLM judge;
* :mod:`.baseline`: the raw-turn executor of the baseline;
* :mod:`.report`: JSON, markdown and the bar chart;
* :mod:`.skills`: the task-skill evaluation on STAR dialogues (``skillstream eval skills``).

The command is ``skillstream eval locomo PATH``.
"""

from skillstream.eval.locomo import CATEGORIES, EvalOptions, evaluate_locomo
from skillstream.eval.scoring import evidence_recall, score_answer, token_f1

__all__ = [
    "CATEGORIES",
    "EvalOptions",
    "evaluate_locomo",
    "evidence_recall",
    "score_answer",
    "token_f1",
]
