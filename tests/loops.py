"""Loops that reduce, as pipelines beside their from-scratch recompute: the shapes the loop,
checkpoint, peer and process tests run over churning graphs.

- ``SHAPES``: name -> (a pipeline's build, the same computation as plain Python over
  multisets, a fixed point at every time).
- ``churning_graphs``: a hypothesis strategy of graphs whose edges and roots come and go.
- ``run_shape``: feeds one such graph to a shape's pipeline the way a test asks (``df.run``,
  or ``df.open`` with times left pending) under a randomized schedule.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import trio
from hypothesis import strategies as st
from tests.jobs import pipeline_of

import deltaflow as df

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
