"""The naive baseline: recompute each workload's query from scratch after every round.

This is what an application without incremental computation does: keep the live input (a
multiset, updated in place as changes arrive) and, after each round, run the query over the
whole of it with plain Python — a ``Counter`` for W1, a depth-first search per root for W2, a
breadth-first search for W4. Its cost per round is proportional to the *data*, where
deltaflow's should be proportional to the *change*; the ratio of the two rates is the figure
the workload benchmarks report next to deltaflow's own.

Measuring every round of a slow query would take minutes, so :func:`measure` stops after a
time budget: the rate is taken over the rounds it ran (always at least a few).

    >>> from workloads import w2_reach
    >>> from deltaflow.graphs import reachable_pairs
    >>> roots, init, rounds = w2_reach(nodes=50, edges=80, roots=2, rounds=10)
    >>> naive = NaiveRecompute(lambda edges: reachable_pairs(roots, edges), init)
    >>> answer = naive.round([rounds[0]])
    >>> (0, 0) in answer and (1, 1) in answer
    True
    >>> measure(naive, [[r] for r in rounds[1:]], budget_s=10.0)["rounds"]
    9
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import attrs
from workloads import Edge

from deltaflow.graphs import bfs_distances, reachable_pairs

__all__ = [
    "NaiveRecompute",
    "count_per_key",
    "measure",
    "naive_w1",
    "naive_w2",
    "naive_w4",
    "pooled",
]


def _as_counter(items: Iterable[Any]) -> Counter[Any]:
    return Counter(items)


@attrs.define
class NaiveRecompute:
    """A live input multiset and a query recomputed over all of it after every round.

    Attributes:
        query: takes the live input as a list (with repeats) and returns the answer.
        live: the live input, ``{datum: count}`` with positive counts only.
    """

    query: Callable[[list[Any]], Any]
    live: Counter[Any] = attrs.field(converter=_as_counter)

    def round(self, changes: Iterable[tuple[Any, Any]]) -> Any:
        """Apply ``(insert, retract)`` pairs, then recompute the whole answer.

        Runtime complexity: O(changes) to update the input, then the query over all of it.
        """
        live = self.live
        for ins, ret in changes:
            live[ins] += 1
            n = live[ret] - 1
            if n:
                live[ret] = n
            else:
                del live[ret]
        return self.query(list(live.elements()))

    def _check(self) -> None:
        """Every live count is positive (a retraction never outran its insertion)."""
        assert all(n > 0 for n in self.live.values()), self.live


def count_per_key(records: list[int]) -> dict[int, int]:
    """W1's query from scratch: ``{key: count}`` over every live record.

    >>> count_per_key([3, 1, 3])
    {3: 2, 1: 1}
    """
    return dict(Counter(records))


def naive_w1(init: list[int]) -> NaiveRecompute:
    """W1: the per-key count of the live records."""
    return NaiveRecompute(count_per_key, init)


def naive_w2(roots: list[int], init: list[Edge]) -> NaiveRecompute:
    """W2: the reachable ``(root, node)`` pairs of the live edges."""
    return NaiveRecompute(lambda edges: reachable_pairs(roots, edges), init)


def naive_w4(root: int, init: list[Edge]) -> NaiveRecompute:
    """W4: the BFS distance of every node reached from ``root`` over the live edges."""
    return NaiveRecompute(lambda edges: bfs_distances([root], edges), init)


def measure(
    naive: NaiveRecompute,
    rounds: list[list[tuple[Any, Any]]],
    *,
    budget_s: float = 2.0,
    min_rounds: int = 3,
) -> dict[str, Any]:
    """Run ``rounds`` (each a list of ``(insert, retract)``) until done or out of time.

    Returns the rounds run, the rate and latency percentiles (milliseconds), and the last
    answer (under ``"answer"``; the caller drops it before printing).
    """
    lat: list[float] = []
    spent = 0.0
    answer: Any = None
    clock = time.perf_counter
    for changes in rounds:
        start = clock()
        answer = naive.round(changes)
        took = clock() - start
        lat.append(took)
        spent += took
        if spent > budget_s and len(lat) >= min_rounds:
            break
    if not lat:
        return {"rounds": 0, "rounds_per_s": None, "p50_ms": None, "answer": answer}
    ordered = sorted(lat)
    return {
        "rounds": len(lat),
        "rounds_per_s": len(lat) / spent,
        "p50_ms": statistics.median(lat) * 1e3,
        "p99_ms": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1e3,
        "answer": answer,
    }


def pooled(*measured: dict[str, Any]) -> dict[str, Any]:
    """Several :func:`measure` results as one: rounds and time added up, and each part's rate.

    The machine's speed drifts; a naive rate measured just before *and* just after the
    system under test, pooled, is fairer to both than either window alone.

    >>> pooled({"rounds": 10, "rounds_per_s": 100.0}, {"rounds": 30, "rounds_per_s": 300.0})
    {'rounds': 40, 'rounds_per_s': 200.0, 'parts_rounds_per_s': [100.0, 300.0]}
    """
    parts = [m for m in measured if m["rounds_per_s"]]
    rounds = sum(m["rounds"] for m in parts)
    spent = sum(m["rounds"] / m["rounds_per_s"] for m in parts)
    return {
        "rounds": rounds,
        "rounds_per_s": rounds / spent if spent else None,
        "parts_rounds_per_s": [m["rounds_per_s"] for m in measured],
    }
