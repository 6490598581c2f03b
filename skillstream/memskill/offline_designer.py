"""The offline designer: memory skills written by example from hard cases, without an LLM.

The LLM designer (``designer.Designer``) reads the hard cases and writes instructions; the offline
executor cannot follow instructions, only examples (``extract.OfflineForm``). This designer writes
those examples. For every cluster of hard cases (``designer.representatives``, with up to
``per_cluster`` cases each rather than the LLM designer's three, since only the cases whose evidence
was missed teach this designer anything):

1. the cluster's *missed evidence*: the evidence turns of its queries that no memory of the last
   training rollouts cites (the statements were never stored; a query whose evidence was stored
   but not retrieved is a retrieval problem, which examples of what to keep cannot fix: it is
   counted and left alone);
2. their sentences of at least ``MIN_WORDS`` content words become the *prototypes* of a skill that
   keeps statements like them (at most ``max_prototypes``, from the most difficult case on,
   leaving out sentences that are a prototype of some skill already);
3. the skill is named after the content words its prototypes share most (``keep-<w1>-<w2>``) and
   described with them, since the controller selects a skill by its description; when a skill of
   that name already has an offline form, it is *refined* instead: the new prototypes are added
   (a new version). A cluster whose sentences are all prototypes already changes nothing.

At most ``max_changes`` changes per round. Whether a change stays is the loop's decision
(``designer.evolve``): it is kept when the validation reward rises and rolled back otherwise.
``notes`` says, for the last round, what each cluster held and what was written from it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from skillstream.extract import OFFLINE_THRESHOLD, MemorySkill, OfflineForm
from skillstream.memskill.designer import MAX_INSTRUCTION, NAME, Change, HardCase
from skillstream.memskill.rewards import Query
from skillstream.text import content_words, split_sentences
from skillstream.vocab import Op

MIN_WORDS = 2
"""Content words a sentence needs to be a prototype ("Haha, yes!" teaches nothing)."""
MAX_PROTOTYPES = 50
"""Prototypes a skill holds at most (the skill file format's limit)."""
_ASCII_WORD = re.compile(r"^[a-z][a-z0-9]*$")


class OfflineDesigner:
    """Proposes memory skills in their offline form from hard cases (see the module docstring).

    Args:
        evidence: For a query, its evidence turns: each one's text and whether a memory of the
            last training rollouts cites it (message ids are only unique within a conversation,
            so the caller, which knows the query's conversation, answers).
        max_changes: Changes per round at most.
        max_prototypes: Prototypes taken from one cluster at most (sentences that are a
            prototype of a skill already are left out).
        threshold: The cosine threshold of the skills it writes.
    """

    per_cluster = 50
    """Hard cases ``evolve`` shows per cluster (``designer.representatives``): more than the LLM
    designer reads, since only the cases whose evidence was missed teach this one anything."""
    limit = 200

    def __init__(
        self,
        evidence: Callable[[Query], Sequence[tuple[str, bool]]],
        max_changes: int = 3,
        max_prototypes: int = 12,
        threshold: float = OFFLINE_THRESHOLD,
    ) -> None:
        self.evidence = evidence
        self.max_changes = max_changes
        self.max_prototypes = max_prototypes
        self.threshold = threshold
        self.rejected: list[tuple[str, str]] = []
        self.notes: list[dict[str, Any]] = []

    def missed(self, cases: Sequence[HardCase]) -> tuple[list[tuple[str, str]], int]:
        """The sentences of a cluster's missed evidence, each with the query it is evidence for,
        hardest case first, and how many of its cases had all their evidence stored (not
        retrieved: not this designer's to fix)."""
        out: dict[str, str] = {}
        stored_only = 0
        for case in sorted(cases, key=lambda c: -c.difficulty):
            missing = [text for text, cited in self.evidence(case.query) if not cited]
            if not missing:
                stored_only += 1
            for text in missing:
                for sentence in split_sentences(text):
                    sentence = " ".join(sentence.split())
                    if len(content_words(sentence)) >= MIN_WORDS:
                        out.setdefault(sentence, case.query.text)
        return list(out.items()), stored_only

    def round(
        self, groups: Sequence[Sequence[HardCase]], skills: Sequence[MemorySkill]
    ) -> list[Change]:
        """The changes for these clusters of hard cases (see the module docstring)."""
        self.rejected, self.notes = [], []
        current = {s.name: s for s in skills}
        out: list[Change] = []
        for cases in groups:
            if len(out) >= self.max_changes:
                break
            sentences, stored_only = self.missed(cases)
            known = {p for s in current.values() if s.offline for p in s.offline.prototypes}
            fresh = [(p, q) for p, q in sentences if p not in known][: self.max_prototypes]
            prototypes = [p for p, _ in fresh]
            note: dict[str, Any] = {
                "hard_cases": len(cases),
                "stored_not_retrieved": stored_only,
                "cases": list(dict.fromkeys(q for _, q in fresh)),
                "prototypes": prototypes,
            }
            self.notes.append(note)
            if not prototypes:
                note["change"] = None
                if sentences:
                    self.rejected.append((sentences[0][0][:200], "already a prototype"))
                continue
            change = self._change(prototypes, current)
            if change is None:
                note["change"] = None
                continue
            earlier = [c for c in out if c.skill.name == change.skill.name]
            if earlier and earlier[0].new:  # more prototypes for a skill added in this round
                change = Change(replace(change.skill, version=earlier[0].skill.version), new=True)
            note["change"] = ["add" if change.new else "refine", change.skill.name]
            current[change.skill.name] = change.skill
            out = [c for c in out if c.skill.name != change.skill.name] + [change]
        return out

    def _change(self, prototypes: list[str], current: dict[str, MemorySkill]) -> Change | None:
        words = topic_words(prototypes)
        name = skill_name(words)
        taken = current.get(name)
        while taken is not None and taken.offline is None:  # a name the designer did not write
            name = _next_name(name)
            taken = current.get(name)
        if taken is not None and taken.offline is not None:
            have = taken.offline.prototypes
            new = [p for p in prototypes if p not in have]
            if not new:
                return None
            merged = (tuple(have) + tuple(new))[-MAX_PROTOTYPES:]
            offline = replace(taken.offline, prototypes=merged)
            return Change(replace(taken, offline=offline, version=taken.version + 1), new=False)
        form = OfflineForm(prototypes=tuple(prototypes), threshold=self.threshold)
        skill = MemorySkill(
            name, describe(words), instruction(words, prototypes), Op.INSERT, offline=form
        )
        return Change(skill, new=True)


def topic_words(sentences: Sequence[str], n: int = 3) -> list[str]:
    """The ``n`` content words most sentences share (ties: first seen), lower case, ASCII."""
    counts: Counter[str] = Counter()
    for s in sentences:
        words = (w.lower() for w in content_words(s))
        counts.update(list(dict.fromkeys(w for w in words if _ASCII_WORD.match(w))))
    return [w for w, _ in counts.most_common(n)]


def skill_name(words: Sequence[str]) -> str:
    """``keep-<w1>-<w2>-<w3>``: a valid skill name (``designer.NAME``) of at most 48 characters."""
    name = "-".join(["keep", *words]) if words else "keep-examples"
    while len(name) > 48:
        name = name.rsplit("-", 1)[0]
    assert NAME.match(name), name
    return name


def _next_name(name: str) -> str:
    head, _, tail = name.rpartition("-")
    return f"{head}-{int(tail) + 1}" if tail.isdigit() and head else f"{name}-2"


def describe(words: Sequence[str]) -> str:
    """The description the controller embeds: what the skill keeps, in its topic words."""
    topic = ", ".join(words) if words else "what these examples say"
    return (
        f"Keep what speakers say about {topic}, including in questions, small talk and passing "
        "remarks that would otherwise be dropped."
    )


def instruction(words: Sequence[str], prototypes: Sequence[str]) -> str:
    """The four sections, with a few examples, for an LLM executor to follow as well."""
    examples = "; ".join(f'"{p}"' for p in prototypes[:3])
    text = (
        f"Purpose: {describe(words)}\n"
        f"When to use: a speaker mentions something like these examples: {examples}.\n"
        "How to apply: store the statement as a fact of its speaker, with their own words for "
        "what they mention (names, places, dates).\n"
        "Constraints: only INSERT operations; one item per statement; never store small talk that "
        "names nothing."
    )
    return text[:MAX_INSTRUCTION]
