"""Vectors asked for ahead of need and given after it, so that a batch of spans shares model calls.

The memory pipeline processes an owner's spans strictly in order, and applying a span needs the
vectors of the texts it stores (the near-duplicate and contradiction checks). Two helpers let it
ask the model for many spans' texts at once without changing any decision:

* ``VectorLookup`` serves texts that were predicted and submitted up front, as the model's rows
  arrive; a text nobody predicted goes to the model when it is asked for. Because a text's vector
  does not depend on what it is embedded with (``skillstream.embed``), a served vector is the one
  the span would have got on its own.
* ``LaterVectors`` collects memories whose vectors nothing reads before the batch ends (session
  summaries: no extraction, merge or retrieval looks at them), submits their texts
  at once and gives each memory its vector at the end of the batch (``settle``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from skillstream.embed import Embed, Pending
from skillstream.model import Memory

Submit = Callable[[Sequence[str]], Pending]
"""Hands texts to the model and returns at once (``Embedder.submit`` is one)."""


def submit_now(embed: Embed) -> Submit:
    """A ``Submit`` for an embedder that has no model threads of its own: it embeds at once."""

    def submit(texts: Sequence[str]) -> Pending:
        if not texts:
            return Pending(0, 0)
        return Pending.of(np.asarray(embed(texts), dtype=np.float32))

    return submit


class VectorLookup:
    """An ``Embed`` that serves predicted texts from vectors asked for up front.

    Args:
        embed: The model, for texts that were not predicted.
        submit: Where predicted texts go (``add``).
    """

    def __init__(self, embed: Embed, submit: Submit) -> None:
        self.embed = embed
        self.submit = submit
        self.rows: dict[str, tuple[Pending, int]] = {}
        self.used: set[str] = set()
        """Predicted texts that were asked for."""
        self.missed = 0
        """Texts asked for that were not predicted (each went to the model when asked for)."""

    def add(self, texts: Sequence[str]) -> None:
        """Ask the model for the vectors of ``texts`` (those not asked for yet) now."""
        new = list(dict.fromkeys(t for t in texts if t not in self.rows))
        if not new:
            return
        pending = self.submit(new)
        for i, t in enumerate(new):
            self.rows[t] = (pending, i)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self.rows))
        got = dict(zip(missing, self.embed(missing))) if missing else {}
        self.missed += len(missing)
        out = []
        for t in texts:
            if t in got:
                out.append(np.asarray(got[t], dtype=np.float32))
            else:
                pending, i = self.rows[t]
                self.used.add(t)
                out.append(pending.result()[i])
        if not out:
            return np.asarray(self.embed([]), dtype=np.float32)
        return np.stack(out)


class LaterVectors:
    """Memories that get the vectors of their texts at the end of a batch (``settle``).

    ``want`` submits the texts at once; ``settle`` waits for them and gives each memory the vector
    of the text it was asked for, if that is still its text (a memory that changed again or
    expired in between keeps what it has: a later ``want`` covers a new text). Until its text is
    sent, a memory waits once however often it is wanted, and its text at the time of sending is
    the one embedded: a memory that several ticks of one batch rewrite costs one text, not one per
    tick.
    """

    def __init__(self, submit: Submit, at_once: int = 64) -> None:
        self.submit = submit
        self.at_once = at_once
        self.waiting: list[tuple[Memory, str, Pending, int]] = []
        self._unsent: dict[int, Memory] = {}  # wanted since the last send, once each
        self._asked: dict[str, tuple[Memory, str]] = {}  # id -> the memory and its last text

    def want(self, memories: Sequence[Memory]) -> None:
        """Drop the memories' vectors until ``settle`` gives them the vectors of their texts.

        Texts go to the model ``at_once`` at a time (the rest when ``settle`` is called): the
        model's batches are texts of one padded length, so a few texts at a time make small ones.
        """
        for m in memories:
            m.vector = None
            self._asked[m.id] = (m, m.text)
            self._unsent[id(m)] = m
        if len(self._unsent) >= self.at_once:
            self._send()

    def _send(self) -> None:
        if not self._unsent:
            return
        sent, self._unsent = list(self._unsent.values()), {}
        row: dict[str, int] = {}  # each text's row: two memories of one text share it
        for m in sent:
            row.setdefault(m.text, len(row))
        pending = self.submit(list(row))
        for m in sent:
            self.waiting.append((m, m.text, pending, row[m.text]))

    def waits_for(self, m: Memory, text: str) -> bool:
        """Whether ``m`` waits for the vector of ``text`` (asked for since the last settle)."""
        asked = self._asked.get(m.id)
        return m.vector is None and asked is not None and asked[0] is m and asked[1] == text

    def settle(self) -> list[Memory]:
        """Give every waiting memory its vector; returns the memories that got one, in order."""
        self._send()
        done: dict[str, Memory] = {}
        for m, text, pending, i in self.waiting:
            vectors = pending.result()
            if m.text == text and m.text:
                m.vector = vectors[i]  # type: ignore[assignment]
                done[m.id] = m
        self.waiting, self._asked = [], {}
        return list(done.values())
