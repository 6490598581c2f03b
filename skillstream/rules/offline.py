"""Memory skills the rules executor runs by example: the ``OfflineForm`` of a memory skill.

A memory skill written for an LLM is instructions; the rules executor cannot follow them. Its
``offline`` form (``extract.OfflineForm``) says the same thing by example, which the executor can
run without an LLM: example sentences of what to keep (*prototypes*), patterns, and examples of
what not to keep (*skip*), with a cosine threshold over sentence embeddings.

What the executor does with the selected skills that carry one (``RulesExecutor.execute``):

* a *candidate* is a statement the rules would not store for this selection: a question, small
  talk or an assistant's remark that is not a suggestion (the sentences the rules drop), or a
  statement of a category no selected category skill keeps; it is stored, as a fact of its
  speaker, when its sentence is like one of a skill's prototypes (cosine at least the skill's
  threshold) or matches one of its patterns; the operation names that skill;
* a statement the rules would store is dropped when its sentence is like one of a skill's skip
  examples, more than it is like any prototype of the selected skills.

With no such skill selected nothing changes: the default bank's memories are the same. The
decision is pure: sentences and an embedding function in, one verdict per sentence out;
``Matcher`` keeps the vectors of the examples and of sentences it has seen (bounded).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from skillstream.extract import MemorySkill, OfflineForm

Embed = Callable[[Sequence[str]], Any]
VECTORS_KEPT = 20000
"""Sentence vectors a matcher keeps for later spans (each is a few kilobytes)."""


def offline_skills(selected: Sequence[MemorySkill]) -> list[MemorySkill]:
    """The selected skills the rules executor runs by example (an offline form with content)."""
    return [
        s
        for s in selected
        if s.offline is not None and (s.offline.prototypes or s.offline.patterns or s.offline.skip)
    ]


@dataclass(frozen=True)
class Verdict:
    """What the selected offline skills say of one sentence."""

    keep: str | None = None
    """The skill that keeps it (the most similar prototype, else the first matching pattern)."""
    skip: str | None = None
    """The skill that drops it (a skip example closer than any prototype)."""


class Matcher:
    """Compares sentences with the selected skills' examples (see the module docstring).

    Args:
        embed: Texts in, unit vectors out; ``None``: only patterns apply (no similarity).
    """

    def __init__(self, embed: Embed | None) -> None:
        self.embed = embed
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._patterns: dict[str, re.Pattern[str]] = {}
        self._lock = threading.Lock()

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts`` (rows), from the kept ones where possible."""
        assert self.embed is not None
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            got = np.asarray(self.embed(missing), dtype=np.float32)
            norms = np.linalg.norm(got, axis=1, keepdims=True)
            got = got / np.where(norms > 0, norms, 1.0)
            with self._lock:
                for t, v in zip(missing, got):
                    self._vectors[t] = v
                while len(self._vectors) > VECTORS_KEPT:
                    self._vectors.popitem(last=False)
        with self._lock:
            rows = [self._vectors.get(t) for t in texts]
        if any(r is None for r in rows):  # evicted by another thread meanwhile: embed again
            return np.asarray(self.embed(list(texts)), dtype=np.float32)
        return np.stack(rows) if rows else np.zeros((0, 0), dtype=np.float32)

    def pattern(self, text: str) -> re.Pattern[str] | None:
        got = self._patterns.get(text)
        if got is None:
            try:
                got = re.compile(text, re.IGNORECASE)
            except re.error:
                return None
            self._patterns[text] = got
        return got

    def judge(self, skills: Sequence[MemorySkill], sentences: Sequence[str]) -> list[Verdict]:
        """One verdict per sentence for the offline forms of ``skills``."""
        n = len(sentences)
        if not n or not skills:
            return [Verdict()] * n
        forms: list[tuple[str, OfflineForm]] = [(s.name, s.offline) for s in skills if s.offline]
        similar = self.embed is not None and any(f.prototypes or f.skip for _, f in forms)
        sent = self.vectors(sentences) if similar else None
        best_keep = np.full(n, -np.inf)
        keep_by: list[str | None] = [None] * n
        best_skip = np.full(n, -np.inf)
        skip_by: list[str | None] = [None] * n
        for name, form in forms:
            if sent is not None and form.prototypes:
                sims = (sent @ self.vectors(form.prototypes).T).max(axis=1)
                for j in np.flatnonzero((sims >= form.threshold) & (sims > best_keep)):
                    best_keep[j], keep_by[int(j)] = float(sims[j]), name
            if sent is not None and form.skip:
                sims = (sent @ self.vectors(form.skip).T).max(axis=1)
                for j in np.flatnonzero((sims >= form.threshold) & (sims > best_skip)):
                    best_skip[j], skip_by[int(j)] = float(sims[j]), name
            for text in form.patterns:
                rx = self.pattern(text)
                if rx is None:
                    continue
                for i, s in enumerate(sentences):
                    if keep_by[i] is None and rx.search(s):
                        best_keep[i], keep_by[i] = 1.0, name  # a pattern is explicit: it wins
        out = []
        for i in range(n):
            if skip_by[i] is not None and best_skip[i] > best_keep[i]:
                out.append(Verdict(skip=skip_by[i]))
            else:
                out.append(Verdict(keep=keep_by[i]))
        return out
