"""Loops that reduce, on several workers, with many times pending, under random schedules.

Each shape of :mod:`tests.loops` is a deltaflow pipeline and the same computation written as
plain Python over multisets (a from-scratch fixed point at every time). Hypothesis draws a
random graph that churns (edges inserted and retracted at every time, roots coming and
going), how the updates are fed (``df.run``; or ``df.open`` with ``update_at`` for every time
and the job closed with all of them pending, or advanced through some of them first) and the
seed of a randomized delivery schedule (:mod:`tests.schedule`: the interleavings of workers in
separate processes); the output must equal the recompute at every time, at 1, 2, 3 and 4
workers.

The two regressions at the end are inputs on which a reduction inside a loop once gave wrong
answers at two or more workers: a reduction that deferred only the lowest of several
positions it owed a correction at, trusting its input history to show the others again, lost
those whose input updates compaction then cancelled while its output had not caught up.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.loops import (
    SHAPES,
    TIMES,
    Multiset,
    Update,
    churning_graphs,
    components,
    q_components,
    q_reach,
    run_shape,
    to_node,
)
from tests.reference import assert_matches_oracle
from tests.schedule import scheduled

import deltaflow as df
from deltaflow.graphs import Reachability
from deltaflow.testing import accumulate

COMPONENTS_INPUT: dict[str, list[Update]] = {
    "roots": [(6, 0, 1), (8, 0, 1), (28, 0, 1)],
    "edges": [((34, 6), 0, 1), ((8, 39), 0, 1), ((39, 28), 0, 1), ((12, 34), 0, 1),
              ((39, 12), 1, 1), ((8, 39), 2, -1), ((28, 23), 3, 1)],
}  # fmt: skip


REACH_INPUT: dict[str, list[Update]] = {
    "roots": [(2, 1, 1), (1, 6, 1), (2, 8, -1)],
    "edges": [((0, 9), 0, 1), ((5, 23), 0, 1), ((13, 9), 0, 1), ((1, 4), 1, 1),
              ((12, 24), 1, 1), ((0, 12), 2, 1), ((1, 18), 2, 1), ((11, 2), 2, 1),
              ((9, 0), 3, 1), ((18, 0), 3, 1), ((12, 7), 4, 1), ((18, 5), 4, 1),
              ((2, 13), 5, 1), ((16, 13), 5, 1), ((9, 13), 6, 1), ((18, 11), 6, 1),
              ((4, 2), 7, 1), ((18, 11), 7, -1), ((9, 0), 8, -1), ((23, 16), 8, 1),
              ((4, 2), 9, -1), ((16, 13), 9, -1), ((18, 0), 9, -1), ((18, 11), 9, 1)],
}  # fmt: skip


DEEP_INPUT: dict[str, list[Update]] = {
    "roots": [(0, 0, 1), (5, 0, 1), (7, 2, 1), (5, 3, -1)],
    "edges": [((0, 3), 0, 1), ((3, 8), 0, 1), ((8, 0), 0, 1), ((5, 1), 0, 1), ((1, 9), 0, 1),
              ((9, 4), 0, 1), ((4, 6), 0, 1), ((2, 2), 0, 1), ((8, 5), 1, 1), ((3, 8), 1, -1),
              ((7, 2), 2, 1), ((2, 0), 2, 1), ((3, 8), 3, 1), ((9, 4), 3, -1), ((6, 7), 3, 1)],
}  # fmt: skip


@pytest.mark.parametrize("workers", [1, 2, 3, 4])
@pytest.mark.parametrize("shape", sorted(SHAPES))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    inputs=churning_graphs(),
    how=st.sampled_from(["run", "open"]),
    stops=st.lists(st.integers(1, TIMES), max_size=2),
    seed=st.integers(0, 2**32 - 1),
)
def test_loops_match_the_recompute_under_random_schedules(
    shape: str,
    workers: int,
    inputs: dict[str, list[Update]],
    how: str,
    stops: list[int],
    seed: int,
) -> None:
    build, query = SHAPES[shape]
    with scheduled(seed):
        out = run_shape(build, workers, inputs, how, stops)
    assert_matches_oracle(out, inputs, query)


SEEDS = range(200)


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_components_with_several_times_pending(workers: int) -> None:
    """Label propagation with ``min``: at time 2 every node of the component of 6 is
    labelled 6 (28 is reached through 39 and 12 once (8, 39) is gone)."""
    for seed in [None, *SEEDS]:
        with contextlib.nullcontext() if seed is None else scheduled(seed):
            out = run_shape(components, workers, COMPONENTS_INPUT, "run", [])
        assert_matches_oracle(out, COMPONENTS_INPUT, q_components)
        at_2 = set(accumulate(out, 2))
        assert at_2 == {(6, 6), (8, 8), (12, 6), (28, 6), (34, 6), (39, 6)}, seed


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_reachability_with_several_times_pending(workers: int) -> None:
    """The contract's ``Reachability`` (``iterate`` + ``distinct``): every reachable pair
    once, at every time (once gave ``(1, 13)`` a count of 2 from time 7 to 8)."""
    for seed in [None, *SEEDS]:
        with contextlib.nullcontext() if seed is None else scheduled(seed):
            out = run_shape(Reachability().build, workers, REACH_INPUT, "run", [])
        assert_matches_oracle(out, REACH_INPUT, q_reach_by_root)


def q_reach_by_root(c: dict[str, Multiset]) -> Multiset:
    return Counter({(root, node): n for (node, root), n in q_reach(c).items()})


# -- loops nested deep ----------------------------------------------------------------------
def deep_reach(depth: int) -> Callable[[df.Collection, df.Collection], df.Collection]:
    """Reachability as loops nested ``depth`` deep: each level iterates the level inside it
    to a fixed point (times nest ``depth`` products deep; every level computes the same)."""

    def level(d: int, x: df.Collection, edges: df.Collection) -> df.Collection:
        if d == 1:
            return x.iterate(lambda y: y.join_map(edges, to_node).concat(y).distinct())
        return x.iterate(lambda y: level(d - 1, y, edges).concat(y).distinct())

    def build(roots: df.Collection, edges: df.Collection) -> df.Collection:
        return level(depth, roots.map(lambda r: (r, r)), edges)

    return build


@pytest.mark.parametrize("depth", [3, 4])
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_deeply_nested_loops_match_the_recompute(depth: int, workers: int) -> None:
    """Loops nested 3 and 4 deep over edges and roots that come and go at four times, fed at
    once and through ``df.open`` with a stop on the way, plain and under a random schedule."""
    build = deep_reach(depth)
    for seed in [None, 1]:
        for how, stops in [("run", []), ("open", [2])]:
            with contextlib.nullcontext() if seed is None else scheduled(seed):
                out = run_shape(build, workers, DEEP_INPUT, how, stops)
            assert_matches_oracle(out, DEEP_INPUT, q_reach)


# -- regressions ----------------------------------------------------------------------------
