"""W2's rounds made on demand, for runs too long to hold every round as a Python tuple.

``workloads.w2_reach(rounds=n)`` builds ``n`` rounds of ``(insert_edge, retract_edge)``
tuples, ~250 bytes each: a million-round run would hold ~250 MB of rounds beside the job it
measures. :class:`W2Stream` draws exactly the same numbers (same seed, same numpy calls in
the same order) but keeps the new edges as one ``int64`` array (16 bytes a round) and builds
each round when asked. Round ``t`` inserts ``extra[t - 1]`` and retracts the oldest live
edge: the ``t``-th edge of ``initial + extra``.

    >>> from workloads import w2_reach
    >>> s = W2Stream(rounds=5, nodes=50, edges=3)
    >>> roots, init, rounds = w2_reach(nodes=50, edges=3, rounds=5)
    >>> s.initial == init and [s.round(t) for t in range(1, 6)] == rounds
    True
"""

from __future__ import annotations

from typing import Any

import numpy as np
from workloads import SEED, Edge

__all__ = ["W2Stream"]


class W2Stream:
    """The data of ``w2_reach(nodes, edges, roots, rounds, seed)``, rounds built on demand.

    >>> s = W2Stream(rounds=4, nodes=10, edges=2)
    >>> len(s.live(4)) == 2 and s.live(0) == s.initial
    True
    """

    def __init__(
        self,
        rounds: int,
        nodes: int = 1000,
        edges: int = 2000,
        roots: int = 10,
        seed: int = SEED,
    ) -> None:
        rng = np.random.default_rng(seed + 2)
        self.roots: list[int] = list(range(roots))
        self.initial: list[Edge] = [
            tuple(e) for e in rng.integers(0, nodes, size=(edges, 2)).tolist()
        ]
        self.extra: np.ndarray[Any, np.dtype[np.int64]] = rng.integers(0, nodes, size=(rounds, 2))
        self.rounds = rounds

    def _edge(self, i: int) -> Edge:
        """The ``i``-th edge (from 0) of ``initial + extra``."""
        n = len(self.initial)
        if i < n:
            return self.initial[i]
        a, b = self.extra[i - n].tolist()
        return (a, b)

    def round(self, t: int) -> tuple[Edge, Edge]:
        """Round ``t`` (from 1): ``(insert_edge, retract_edge)``."""
        if not 1 <= t <= self.rounds:
            msg = f"round must be in 1..{self.rounds}, not {t!r}"
            raise ValueError(msg)
        return self._edge(len(self.initial) + t - 1), self._edge(t - 1)

    def live(self, t: int) -> list[Edge]:
        """The edges live after round ``t`` (0: the initial ones), oldest first."""
        return [self._edge(i) for i in range(t, t + len(self.initial))]
