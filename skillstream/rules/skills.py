"""The rules executor's extractors as memory skills the controller can choose between offline.

With the ``rules`` backend the four primitives decide *how* a statement changes memory (insert,
update, delete, skip); these skills decide *which* statements of a span are worth it. Each one
covers one category of statement the rules recognise, and each statement falls in exactly one
category (the first that matches, in the order of ``RULE_SKILLS``):

==================  ====================================================================
skill               statements it keeps
==================  ====================================================================
``answers``         a short answer folded with the question it answers ("Yes, last week")
``photos``          an image a speaker shared, from the caption
``suggestions``     an assistant's suggestion, kept as a fact about the assistant
``events``          something that happened or will happen at a time (dates resolved)
``plans``           an intention or arrangement of the speaker
``preferences``     a like, dislike or habit
``opinions``        a judgement or feeling about something
``facts``           any other fact about a speaker or the people they mention
==================  ====================================================================

Selection semantics, applied by ``statement_filter``:

* no category skill selected (the default bank of primitives): every statement is considered, as
  before these skills existed, so the default run writes the same memories;
* at least one selected, or the executor told that its bank holds these skills
  (``RulesExecutor(categories=True)``, set by ``memory-skills train`` and by an activated
  controller trained with them): a statement is considered when the skill of its category is
  selected; statements of no category (none today, the list is exhaustive) go with the ``insert``
  primitive. So selecting ``insert`` alone does not keep everything.

Every category skill's action is INSERT: it *adds* statements to what the planner sees, and the
planner still turns a statement into an UPDATE or DELETE only when those primitives are selected.
The descriptions are what the controller embeds; the instructions document the skill (an LLM
executor could follow them too).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from skillstream.extract import MemorySkill
from skillstream.rules.planner import Statement
from skillstream.vocab import MemoryKind, Op


def _skill(name: str, description: str, when: str, how: str) -> MemorySkill:
    return MemorySkill(
        name=name,
        description=description,
        instruction=(
            f"Purpose: {description}\n"
            f"When to use: {when}\n"
            f"How to apply: {how}\n"
            "Constraints: only INSERT operations; one item per statement, in the third person."
        ),
        action=Op.INSERT,
    )


ANSWERS = _skill(
    "answers",
    "Keep short answers together with the question they answer.",
    "a speaker replies to a question from the other speaker with a few words.",
    "store the question and the answer in one item naming both speakers.",
)
PHOTOS = _skill(
    "photos",
    "Record the pictures a speaker shares and what they show.",
    "a turn carries an image or its caption.",
    "store who shared a photo of what, on which day.",
)
SUGGESTIONS = _skill(
    "suggestions",
    "Note what the assistant suggested, as the assistant's words, not the user's wishes.",
    "the assistant recommends or proposes something.",
    "store that the assistant suggested it, never as the user's preference.",
)
EVENTS = _skill(
    "events",
    "Capture events with their dates: what happened or will happen to someone, and when.",
    "a speaker tells of something done, attended, started or finished at some time.",
    "store the event with its absolute date, resolving words like yesterday or last week.",
)
PLANS = _skill(
    "plans",
    "Capture intentions and arrangements: what someone plans, hopes or is going to do.",
    "a speaker says they will, want to, plan to or are about to do something.",
    "store the plan with who holds it and any date given.",
)
PREFERENCES = _skill(
    "preferences",
    "Capture likes, dislikes and habits of a person.",
    "a speaker says they love, enjoy, prefer, hate or usually do something.",
    "store the preference with its object, one item per object.",
)
OPINIONS = _skill(
    "opinions",
    "Capture opinions and feelings someone expresses about things or people.",
    "a speaker judges something or says how something made them feel.",
    "store whose opinion it is and what it is about.",
)
FACTS = _skill(
    "facts",
    "Capture lasting facts about people: identity, relationships, work, places and belongings.",
    "a speaker states something true about themselves or someone they mention.",
    "store the fact about the person it concerns, naming them.",
)

RULE_SKILLS: tuple[MemorySkill, ...] = (
    ANSWERS,
    PHOTOS,
    SUGGESTIONS,
    EVENTS,
    PLANS,
    PREFERENCES,
    OPINIONS,
    FACTS,
)
"""The category skills, in the order a statement's category is decided."""
NAMES = frozenset(s.name for s in RULE_SKILLS)
_BY_KIND = {
    MemoryKind.EVENT: EVENTS.name,
    MemoryKind.PLAN: PLANS.name,
    MemoryKind.PREFERENCE: PREFERENCES.name,
    MemoryKind.OPINION: OPINIONS.name,
    MemoryKind.FACT: FACTS.name,
}
_BY_ORIGIN = {"answer": ANSWERS.name, "photo": PHOTOS.name, "suggestion": SUGGESTIONS.name}


def category(st: Statement) -> str | None:
    """The name of the category skill a statement belongs to (``None``: no category)."""
    by_origin = _BY_ORIGIN.get(st.origin)
    if by_origin is not None:
        return by_origin
    return _BY_KIND.get(MemoryKind(st.cls.kind)) if st.cls.kind in _BY_KIND else None


def statement_filter(
    selected: Sequence[MemorySkill], categories: bool = False
) -> Callable[[Statement], bool]:
    """Which statements the planner should see for this selection (see the module docstring).

    Args:
        selected: The memory skills the controller selected for the span.
        categories: The bank holds the category skills (a controller trained with them chooses):
            a selection without any category keeps only what ``insert`` covers, none today.
    """
    chosen = {s.name for s in selected if s.name in NAMES}
    if not chosen and not categories:
        return lambda st: True
    residual = any(s.name == "insert" for s in selected)

    def keep(st: Statement) -> bool:
        cat = category(st)
        return cat in chosen if cat is not None else residual

    return keep
