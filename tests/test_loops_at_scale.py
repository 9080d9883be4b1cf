"""Loops that reduce, on several workers, with many times pending, under random schedules.

Each shape below is a deltaflow pipeline and the same computation written as plain Python
over multisets (a from-scratch fixed point at every time). Hypothesis draws a random graph
that churns (edges inserted and retracted at every time, roots coming and going), how the
updates are fed (``df.run``; or ``df.open`` with ``update_at`` for every time and the job
closed with all of them pending, or advanced through some of them first) and the seed of a
randomized delivery schedule (:mod:`tests.schedule`: the interleavings of workers in separate
processes); the output must equal the recompute at every time, at 1, 2, 3 and 4 workers.

The two regressions at the end are inputs on which a reduction inside a loop once gave wrong
answers at two or more workers: a reduction that deferred only the lowest of several
positions it owed a correction at, trusting its input history to show the others again, lost
those whose input updates compaction then cancelled while its output had not caught up.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.reference import assert_matches_oracle
from tests.schedule import scheduled

import deltaflow as df
from deltaflow.graphs import Reachability
from deltaflow.testing import accumulate

Update = tuple[Any, int, int]
Multiset = Counter[Any]

NODES = 10
TIMES = 10


# -- the shapes, as plain Python over multisets ------------------------------------------------
def positive(c: Multiset) -> Multiset:
    return Counter({d: n for d, n in c.items() if n > 0})


def join_map(left: Multiset, right: Multiset, f: Callable[..., Any]) -> Multiset:
    """``left.join_map(right, f)`` on ``(key, val)`` pairs: counts multiply."""
    by_key: dict[Any, list[tuple[Any, int]]] = {}
    for (k, b), n in right.items():
        by_key.setdefault(k, []).append((b, n))
    out: Multiset = Counter()
    for (k, a), n in left.items():
        for b, m in by_key.get(k, ()):
            out[f(k, a, b)] += n * m
    return Counter({d: n for d, n in out.items() if n})


def grouped(c: Multiset) -> dict[Any, list[tuple[Any, int]]]:
    """Positive counts of ``(key, val)`` pairs by key, values sorted."""
    out: dict[Any, list[tuple[Any, int]]] = {}
    for (k, v), n in c.items():
        if n > 0:
            out.setdefault(k, []).append((v, n))
    for vals in out.values():
        vals.sort()
    return out


def reduce_min(c: Multiset) -> Multiset:
    return Counter({(k, vals[0][0]): 1 for k, vals in grouped(c).items()})


def top_2(c: Multiset) -> Multiset:
    out: Multiset = Counter()
    for k, vals in grouped(c).items():
        left = 2
        for v, n in vals:
            take = min(n, left)
            out[(k, v)] += take
            left -= take
            if not left:
                break
    return out


def distinct(c: Multiset) -> Multiset:
    return Counter(dict.fromkeys(positive(c), 1))


def fixed_point(step: Callable[[Multiset], Multiset], start: Multiset) -> Multiset:
    x = Counter({d: n for d, n in start.items() if n})
    for _ in range(500):
        nxt = step(x)
        if nxt == x:
            return x
        x = nxt
    raise AssertionError("the recompute did not reach a fixed point")


def to_node(_n: Any, root: Any, m: Any) -> Any:
    return (m, root)


def next_distance(_n: Any, dist: int, m: Any) -> Any:
    return (m, dist + 1)


def q_reach(c: dict[str, Multiset]) -> Multiset:
    roots, edges = c["roots"], c["edges"]
    start = Counter({(r, r): n for r, n in roots.items()})
    return fixed_point(lambda x: distinct(join_map(x, edges, to_node) + start), start)


def q_bfs(c: dict[str, Multiset]) -> Multiset:
    roots, edges = c["roots"], c["edges"]
    start = Counter({(r, 0): n for r, n in roots.items()})
    return fixed_point(lambda x: reduce_min(join_map(x, edges, next_distance) + start), start)


def undirected(edges: Multiset) -> Multiset:
    return edges + Counter({(b, a): n for (a, b), n in edges.items()})


def q_components(c: dict[str, Multiset]) -> Multiset:
    nodes, sym = c["roots"], undirected(c["edges"])
    start = Counter({(n, n): k for n, k in nodes.items()})
    return fixed_point(lambda x: reduce_min(join_map(x, sym, to_node) + start), start)


def q_top_2(c: dict[str, Multiset]) -> Multiset:
    roots, edges = c["roots"], c["edges"]
    start = Counter({(r, r): n for r, n in roots.items()})
    return fixed_point(lambda x: top_2(distinct(join_map(x, edges, to_node) + start)), start)


# -- the same shapes as deltaflow pipelines ----------------------------------------------------
def first_value(_key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    """A generic logic (not a built-in reduction's shortcut): the smallest value, once."""
    return [(vals[0][0], 1)]


def reach(roots: df.Collection, edges: df.Collection) -> df.Collection:
    start = roots.map(lambda r: (r, r))
    return start.iterate(lambda x: x.join_map(edges, to_node).concat(start).distinct())


def bfs(roots: df.Collection, edges: df.Collection) -> df.Collection:
    start = roots.map(lambda r: (r, 0))
    return start.iterate(lambda x: x.join_map(edges, next_distance).concat(start).min())


def components(roots: df.Collection, edges: df.Collection) -> df.Collection:
    sym = edges.concat(edges.map(lambda e: (e[1], e[0])))
    start = roots.map(lambda n: (n, n))
    return start.iterate(lambda x: x.join_map(sym, to_node).concat(start).min())


def components_by_reduce(roots: df.Collection, edges: df.Collection) -> df.Collection:
    sym = edges.concat(edges.map(lambda e: (e[1], e[0])))
    start = roots.map(lambda n: (n, n))
    return start.iterate(lambda x: x.join_map(sym, to_node).concat(start).reduce(first_value))


def two_smallest_roots(roots: df.Collection, edges: df.Collection) -> df.Collection:
    start = roots.map(lambda r: (r, r))
    return start.iterate(lambda x: x.join_map(edges, to_node).concat(start).distinct().top_k(2))


def nested_reach(roots: df.Collection, edges: df.Collection) -> df.Collection:
    """Reachability as a loop inside a loop: the inner one closes what the outer one has
    under the edges; the outer one adds the roots again (times nest two products deep)."""
    start = roots.map(lambda r: (r, r))

    def outer(x: df.Collection) -> df.Collection:
        closed = x.iterate(lambda y: y.join_map(edges, to_node).concat(y).distinct())
        return closed.concat(start).distinct()

    return start.iterate(outer)


SHAPES: dict[str, tuple[Callable[..., df.Collection], Callable[..., Multiset]]] = {
    "reach-distinct": (reach, q_reach),
    "bfs-min": (bfs, q_bfs),
    "components-min": (components, q_components),
    "components-reduce": (components_by_reduce, q_components),
    "top_k": (two_smallest_roots, q_top_2),
    "nested-reach": (nested_reach, q_reach),
}


def pipeline_of(build: Callable[..., df.Collection]) -> df.Pipeline:
    return type("Shape", (df.Pipeline,), {"build": staticmethod(build)})()


# -- inputs: graphs that churn ------------------------------------------------------------------
@st.composite
def churning_graphs(draw: st.DrawFn) -> dict[str, list[Update]]:
    """Roots and edges over a few nodes: a graph at time 0, then at every time a few edges
    inserted and a few of those present retracted; roots come and go too."""
    node = st.integers(0, NODES - 1)
    edge = st.tuples(node, node)
    edges: list[Update] = []
    roots: list[Update] = []
    present: Counter[Any] = Counter()
    live_roots: set[int] = set()
    for t in range(draw(st.integers(1, TIMES))):
        for e in draw(st.lists(edge, max_size=14 if t == 0 else 4)):
            edges.append((e, t, 1))
            present[e] += 1
        gone = draw(st.lists(st.sampled_from(sorted(present)), max_size=3)) if present else []
        for e in gone:
            if present[e] > 0:
                edges.append((e, t, -1))
                present[e] -= 1
        for r in draw(st.lists(node, max_size=2 if t == 0 else 1)):
            if r in live_roots and draw(st.booleans()):
                roots.append((r, t, -1))
                live_roots.discard(r)
            elif r not in live_roots:
                roots.append((r, t, 1))
                live_roots.add(r)
    return {"roots": roots, "edges": edges}


async def fed_through_open(
    pipe: df.Pipeline,
    workers: int,
    inputs: dict[str, list[Update]],
    stops: list[int],
    processes: int = 1,
) -> list[Update]:
    """Every update fed with ``update_at``, the job advanced to each of ``stops`` on the way
    and closed with the remaining times still open."""
    async with df.open(pipe, workers=workers, processes=processes) as job:
        times = sorted({t for ups in inputs.values() for _, t, _ in ups})
        for t in times:
            if t in stops:
                await job.advance_to(t)
            for name, ups in inputs.items():
                for d, ut, r in ups:
                    if ut == t:
                        job.inputs[name].update_at(d, ut, r)
    return job.output.updates()


def run_shape(
    build: Callable[..., df.Collection],
    workers: int,
    inputs: dict[str, list[Update]],
    how: str,
    stops: list[int],
    processes: int = 1,
) -> list[Update]:
    pipe = pipeline_of(build)
    if how == "run":
        out: list[Update] = df.run(pipe, workers=workers, processes=processes, **inputs)
        return out
    return trio.run(fed_through_open, pipe, workers, inputs, stops, processes)


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


# -- regressions ----------------------------------------------------------------------------
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


DEEP_INPUT: dict[str, list[Update]] = {
    "roots": [(0, 0, 1), (5, 0, 1), (7, 2, 1), (5, 3, -1)],
    "edges": [((0, 3), 0, 1), ((3, 8), 0, 1), ((8, 0), 0, 1), ((5, 1), 0, 1), ((1, 9), 0, 1),
              ((9, 4), 0, 1), ((4, 6), 0, 1), ((2, 2), 0, 1), ((8, 5), 1, 1), ((3, 8), 1, -1),
              ((7, 2), 2, 1), ((2, 0), 2, 1), ((3, 8), 3, 1), ((9, 4), 3, -1), ((6, 7), 3, 1)],
}  # fmt: skip


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
