"""The reorganizer's single-pass clustering, kept between maintenance ticks.

The definition (``cluster``): the candidates are taken in their order; each joins the cluster
whose centre (the normalised sum of its members' vectors, float32, added in member order) is most
similar to it, when that cosine (computed in float64) is at least the threshold, and starts a new
cluster otherwise. A cluster's number is the order in which it was started.

Run over an owner's whole set of candidates at every tick, the pass costs the owner's history
(thousands of candidates, each compared with hundreds of centres). ``ClusterPass`` keeps what the
last tick's pass decided, and for each candidate the cosine of the centre it chose and a bound on
the cosine of every other centre. A tick whose candidates begin as the last tick's did resumes
there; from the first difference on (a candidate gone, new, or with a new vector), it replays the
pass without comparing each candidate with every centre again:

* Clusters whose members so far are the same as in the last pass have the same centres, so a
  candidate's cosines to them are the ones it had. Only the clusters that changed (``changed``:
  they lost or gained a member) are compared again.
* A candidate keeps its cluster when its recorded best centre did not change and every changed
  centre stays below it by more than ``MARGIN``, or when a changed centre beats every other centre's
  recorded bound by more than ``MARGIN`` (it then chooses that one). Otherwise, and for every
  candidate the last pass did not see, it is compared with every centre as the definition says.

The margin is far above the float64 rounding of a cosine, so a replayed pass decides exactly what a
full pass decides (a randomised test compares the two). Sums are kept per cluster and added in
member order, as the full pass adds them; a cluster that did not change gets its members' vectors
added only when a full comparison needs its centre.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

MARGIN = 1e-9
"""How far apart two cosines must be for a recorded comparison to decide (float64 rounding of a
cosine of unit float32 vectors is below 1e-15)."""
_NONE = -np.inf


def unit(v: np.ndarray) -> np.ndarray:
    """``v`` scaled to length 1 (a zero vector stays as it is).

    The length is ``np.linalg.norm``'s for a vector (the root of ``v.dot(v)`` in ``v``'s dtype),
    without its checks: this runs once per candidate that joins a cluster.
    """
    n = float(np.sqrt(v.dot(v)))
    return v / n if n > 0 else v


def unit_rows(m: np.ndarray) -> np.ndarray:
    """Each row of ``m`` scaled to length 1 (a zero row stays as it is)."""
    n = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(n > 0, n, 1.0)


class ClusterPass:
    """The clustering pass over one owner's candidates, resumed from tick to tick (see the module
    docstring). ``run`` returns the clusters of the candidates it is given."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.items: list[Any] = []
        """The candidates of the last run, in order."""
        self.vectors: list[Any] = []  # each candidate's vector object at the last run
        self.assign: list[int] = []  # the cluster each candidate joined
        self.best: list[int] = []  # the cluster of the most similar centre (-1: there was none)
        self.top: list[float] = []  # the cosine of that centre
        self.rest: list[float] = []  # a bound on the cosine of every other centre
        self.anchor: list[int] = []  # per cluster, the position of the candidate that started it
        self._sums: list[np.ndarray] = []
        self._centres: np.ndarray = np.empty((0, 0), dtype=np.float64)
        self._pending: dict[int, list[int]] = {}  # cluster -> members not yet added to its sum
        self._dim = 0

    # ------------------------------------------------------------------ entry point
    def run(self, items: Sequence[Any]) -> list[list[Any]]:
        """The clusters of ``items`` (in their order), replaying the last run where it can."""
        same = 0
        for m, was, vec in zip(items, self.items, self.vectors):
            if m is not was or m.vector is not vec:
                break
            same += 1
        old = _Old(self, same, items) if same < len(self.items) else None
        self._cut(same)
        if old is not None:
            old.replay(self, items, same)
        else:
            for j in range(same, len(items)):
                self._step(j, items[j])
        self._flush(list(self._pending))
        groups: list[list[Any]] = [[] for _ in self._sums]
        for m, c in zip(items, self.assign):
            groups[c].append(m)
        return groups

    # ------------------------------------------------------------------ state
    def _cut(self, n: int) -> None:
        """Keep the first ``n`` candidates' decisions, with the sums and centres after them."""
        if n == len(self.items):
            return
        for seq in (self.items, self.vectors, self.assign, self.best, self.top, self.rest):
            del seq[n:]
        del self.anchor[sum(1 for a in self.anchor if a < n) :]
        # the sums again from the members in order, as a full pass adds them
        self._sums, self._pending = [], {}
        for j, c in enumerate(self.assign):
            if c == len(self._sums):
                self._sums.append(self._vec(j).copy())
            else:
                self._pending.setdefault(c, []).append(j)
        self._centres = np.empty((max(16, len(self._sums)), self._dim), dtype=np.float64)
        for c, total in enumerate(self._sums):
            self._centres[c] = unit(total)
        self._flush(list(self._pending))

    def _vec(self, j: int) -> np.ndarray:
        return np.asarray(self.vectors[j], dtype=np.float32).reshape(-1)

    def _flush(self, clusters: Any) -> None:
        """Add the pending members of ``clusters`` to their sums (in member order) and renew
        their centres."""
        for c in clusters:
            waiting = self._pending.pop(c, None)
            if waiting is None:
                continue
            total = self._sums[c]
            for j in waiting:
                total = total + self._vec(j)
            self._sums[c] = total
            self._centres[c] = unit(total)

    def _start(self, j: int, v: np.ndarray) -> int:
        c = len(self._sums)
        self._sums.append(v.copy())
        self.anchor.append(j)
        if c == self._centres.shape[0]:
            grown = np.empty((max(16, 2 * c), v.shape[0]), dtype=np.float64)
            grown[:c] = self._centres[:c]
            self._centres = grown
        self._centres[c] = unit(v)
        return c

    def _join(self, j: int, c: int, v: np.ndarray) -> int:
        """Candidate ``j`` (vector ``v``) joins ``c``, whose sum and centre follow at once."""
        self._flush([c])
        self._sums[c] = self._sums[c] + v
        self._centres[c] = unit(self._sums[c])
        return c

    # ------------------------------------------------------------------ one candidate
    def _step(self, j: int, m: Any) -> tuple[int, bool]:
        """Candidate ``j`` compared with every centre, as the definition says; returns the
        cluster it went to and whether it joined it (else started it)."""
        v = self._vec_of(m)
        if not self._dim:
            self._dim = v.shape[0]
            self._centres = np.empty((16, self._dim), dtype=np.float64)
        self._flush(list(self._pending))
        best, top, rest = self._compare(v)
        joins = best >= 0 and top >= self.threshold - 1e-6
        c = self._join(j, best, v) if joins else self._start(j, v)
        self._record(m, c, best, top, rest)
        return c, joins

    def _record(self, m: Any, c: int, best: int, top: float, rest: float) -> None:
        self.items.append(m)
        self.vectors.append(m.vector)
        self.assign.append(c)
        self.best.append(best)
        self.top.append(top)
        self.rest.append(rest)

    @staticmethod
    def _vec_of(m: Any) -> np.ndarray:
        return np.asarray(m.vector, dtype=np.float32).reshape(-1)

    def _compare(self, v: np.ndarray) -> tuple[int, float, float]:
        n = len(self._sums)
        if n == 0:
            return -1, _NONE, _NONE
        sims = self._centres[:n] @ v.astype(np.float64)
        i = int(np.argmax(sims))
        top = float(sims[i])
        if n == 1:
            return i, top, _NONE
        sims[i] = _NONE
        return i, top, float(sims.max())


class _Old:
    """The last run's decisions from the first difference on, and which clusters differ since."""

    def __init__(self, kept: ClusterPass, start: int, items: Sequence[Any]) -> None:
        self.items = kept.items[:]
        self.vectors = kept.vectors[:]
        self.assign = kept.assign[:]
        self.best = kept.best[:]
        self.top = kept.top[:]
        self.rest = kept.rest[:]
        self.starters = set(kept.anchor)
        self.pos = {id(m): j for j, m in enumerate(self.items[start:], start)}
        self.twin: dict[int, int] = {c: c for c, a in enumerate(kept.anchor) if a < start}
        """Last run's cluster -> this run's cluster that had the same members so far (-1: none)."""
        self.changed: set[int] = set()
        """This run's clusters whose members differ from their last run's twin (or have none)."""
        present = {id(m) for m in items[start:]}
        self.lossy = {
            self.assign[j]
            for j in range(start, len(self.items))
            if id(self.items[j]) not in present or self._seen(self.items[j]) is None
        }
        """Last run's clusters that lose a member this time (a candidate gone or with a new
        vector): their twins differ from some point on, so they are compared again from the
        start."""

    def _seen(self, m: Any) -> int | None:
        """``m``'s position in the last run, if it had the same vector then."""
        j = self.pos.get(id(m))
        if j is None or self.items[j] is not m or self.vectors[j] is not m.vector:
            return None
        return j

    def replay(self, run: ClusterPass, items: Sequence[Any], start: int) -> None:
        """Run the pass over ``items[start:]``, deciding each candidate the last run saw from its
        record and the changed centres, and the others (or an undecided one) with a full step."""
        changed: list[int] = []  # this run's clusters that differ, in order
        rows: np.ndarray = np.empty((0, run._dim), dtype=np.float64)  # their centres
        twin, best_of, top_of, rest_of, assign_of = (
            self.twin,
            self.best,
            self.top,
            self.rest,
            self.assign,
        )
        threshold = run.threshold - 1e-6

        def change(c: int) -> None:
            nonlocal rows
            if c in self.changed:
                return
            run._flush([c])
            self.changed.add(c)
            changed.append(c)
            changed.sort()
            rows = run._centres[changed].copy()

        for k in self.lossy:  # their twins lose a member at some point: compared from the start
            t = twin.get(k, -1)
            if t >= 0:
                change(t)
        for j in range(start, len(items)):
            m = items[j]
            o = self._seen(m)
            if o is None:  # new, or a new vector: a full step
                c, joins = run._step(j, m)
                self._moved(c, joins, None, change)
                rows[changed.index(c)] = run._centres[c]  # ``c`` is changed now: its new centre
                continue
            v = run._vec_of(m)
            if changed:  # every changed cluster exists: a cluster is changed once it is made
                sims = (rows @ v.astype(np.float64)).tolist()
                near, near_c, second = _NONE, -1, _NONE
                for c, sim in zip(changed, sims):  # the first of equal ones, as argmax takes
                    if sim > near:
                        near, near_c, second = sim, c, near
                    elif sim > second:
                        second = sim
            else:
                near, near_c, second = _NONE, -1, _NONE
            best, top, rest = best_of[o], top_of[o], rest_of[o]
            t = twin.get(best, -1) if best >= 0 else -1
            decided: tuple[int, float, float] | None
            if t >= 0 and t not in self.changed:  # its best centre is the same as then
                if near < top - MARGIN:
                    decided = (t, top, max(rest, near))
                elif near > top + MARGIN:
                    decided = (near_c, near, max(top, second))
                else:
                    decided = None
            elif near_c < 0:  # its best centre changed or is gone, and no centre is known
                decided = (-1, _NONE, _NONE) if best < 0 else None
            elif near > rest + MARGIN:  # every unchanged centre is below ``rest``
                decided = (near_c, near, max(rest, second))
            else:
                decided = None
            if decided is None:
                c, joins = run._step(j, m)
            else:
                b, top, rest = decided
                joins = b >= 0 and top >= threshold
                was = assign_of[o]
                if joins and b not in self.changed and twin.get(was, -1) == b:
                    run._pending.setdefault(b, []).append(j)  # the same cluster, unchanged
                    c = b
                elif joins:
                    c = run._join(j, b, v)
                else:
                    c = run._start(j, v)
                run._record(m, c, b, top, rest)
            self._moved(c, joins, o, change)
            if c in self.changed:  # its centre may have moved
                rows[changed.index(c)] = run._centres[c]

    def _moved(self, c: int, joins: bool, o: int | None, change: Any) -> None:
        """Note where a candidate went (``c``, joined or started) against where it went last."""
        if o is not None:
            was = self.assign[o]
            if o in self.starters:
                if not joins:  # started its cluster again: the two have the same members
                    self.twin[was] = c
                    if was in self.lossy:
                        change(c)
                    return
                self.twin[was] = -1  # the cluster it started then has no twin now
            elif joins and self.twin.get(was, -1) == c:
                return  # joined the same cluster again
            else:
                t = self.twin.get(was, -1)
                if t >= 0:
                    change(t)
        change(c)  # joined or started elsewhere than last time (or is new): it differs
