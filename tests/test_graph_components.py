"""deltaflow.graphs' label propagation, strongly and weakly connected components, against
networkx recomputed from scratch after every change.

Random directed graphs (self-loops, parallel edges and all) are loaded, then changed one edge
at a time, insertions and deletions alike; after each change the job's output, accumulated
at that time, must be exactly networkx's answer for the live edges. Each formulation
(prioritised, the default, and every label at once) runs at one and two workers and on two
processes; ``--schedule`` runs the same jobs under random delivery orders.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import networkx as nx
import pytest
import trio
from hypothesis import HealthCheck, given, settings, strategies as st

import deltaflow as df
from deltaflow.graphs import (
    connected_components,
    propagate,
    propagate_at,
    scc,
    strongly_connected,
)
from deltaflow.testing import accumulate

Edge = tuple[int, int]
TIMEOUT = 120

graph_settings = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


# -- oracles ----------------------------------------------------------------------------------


def _digraph(edges: Iterable[Edge]) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_edges_from(edges)
    return graph


def _by_smallest(components: Iterable[set[int]]) -> Counter[Any]:
    """Every node of ``components`` with the smallest node of its component."""
    out: Counter[Any] = Counter()
    for component in components:
        smallest = min(component)
        out.update((n, smallest) for n in component)
    return out


def nx_scc(edges: Iterable[Edge]) -> Counter[Any]:
    """Every node of ``edges`` with the smallest node of its strongly connected component."""
    return _by_smallest(nx.strongly_connected_components(_digraph(edges)))


def nx_scc_edges(edges: Iterable[Edge]) -> Counter[Any]:
    """The edges (with their multiplicity) whose ends lie in one strongly connected
    component."""
    edges = list(edges)
    label = dict(nx_scc(edges).keys())
    return Counter(e for e in edges if label[e[0]] == label[e[1]])


def nx_weak(edges: Iterable[Edge]) -> Counter[Any]:
    """Every node of ``edges`` with the smallest node of its weakly connected component."""
    return _by_smallest(nx.weakly_connected_components(_digraph(edges)))


def nx_propagate(edges: Iterable[Edge], nodes: Iterable[tuple[int, int]]) -> Counter[Any]:
    """Every node reached from a labelled node (itself included) with the smallest label of
    the labelled nodes reaching it."""
    graph = _digraph(edges)
    best: dict[int, int] = {}
    for node, label in nodes:
        reached = nx.descendants(graph, node) | {node} if node in graph else {node}
        for m in reached:
            if m not in best or label < best[m]:
                best[m] = label
    return Counter(best.items())


# -- pipelines --------------------------------------------------------------------------------


class SccAll(df.Pipeline):
    """Strongly connected components, every label entering at once (DD's formulation)."""

    def build(self, edges: df.Collection) -> df.Collection:
        return scc(edges, priority=None)


class SccAt(df.Pipeline):
    """Strongly connected components, prioritised (the default)."""

    def build(self, edges: df.Collection) -> df.Collection:
        return scc(edges)


class SccEdges(df.Pipeline):
    """The edges inside strongly connected components."""

    def build(self, edges: df.Collection) -> df.Collection:
        return strongly_connected(edges)


class Weak(df.Pipeline):
    """Weakly connected components, prioritised."""

    def build(self, edges: df.Collection) -> df.Collection:
        return connected_components(edges)


class WeakAll(df.Pipeline):
    """Weakly connected components, every label at once."""

    def build(self, edges: df.Collection) -> df.Collection:
        return connected_components(edges, priority=None)


def _fixed_nodes(edges: df.Collection) -> df.Collection:
    """Nodes 0, 3, 6, ... labelled with ``(node * 7) % 11`` (labels out of node order)."""
    return (
        edges.flat_map(lambda e: e)
        .distinct()
        .filter(lambda n: n % 3 == 0)
        .map(lambda n: (n, (n * 7) % 11))
    )


class Propagated(df.Pipeline):
    """propagate() of labels of every third node."""

    def build(self, edges: df.Collection) -> df.Collection:
        return propagate(edges, _fixed_nodes(edges))


class PropagatedAt(df.Pipeline):
    """propagate_at() of labels of every third node, with a priority of its own."""

    def build(self, edges: df.Collection) -> df.Collection:
        return propagate_at(edges, _fixed_nodes(edges), priority=lambda label: label * 3)


def _labelled(edges: Iterable[Edge]) -> list[tuple[int, int]]:
    nodes = {n for e in edges for n in e}
    return [(n, (n * 7) % 11) for n in nodes if n % 3 == 0]


ORACLES: dict[str, tuple[Callable[[], df.Pipeline], Callable[[list[Edge]], Counter[Any]]]] = {
    "scc_all": (SccAll, nx_scc),
    "scc_at": (SccAt, nx_scc),
    "scc_edges": (SccEdges, nx_scc_edges),
    "weak": (Weak, nx_weak),
    "weak_all": (WeakAll, nx_weak),
    "propagate": (Propagated, lambda es: nx_propagate(es, _labelled(es))),
    "propagate_at": (PropagatedAt, lambda es: nx_propagate(es, _labelled(es))),
}


# -- churn ------------------------------------------------------------------------------------


def churn(
    seed: int, nodes: int, edges: int, changes: int
) -> tuple[list[Edge], list[tuple[Edge, int]]]:
    """A random directed graph and single-edge changes ``(edge, diff)``: about half delete a
    live edge, the others insert an edge (new, or one more copy of a live one)."""
    rng = random.Random(seed)
    initial = [(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(edges)]
    live = Counter(initial)
    steps: list[tuple[Edge, int]] = []
    for _ in range(changes):
        if live and rng.random() < 0.5:
            edge, diff = rng.choice(sorted(live.elements())), -1
        else:
            edge, diff = (rng.randrange(nodes), rng.randrange(nodes)), 1
        live[edge] += diff
        live += Counter()  # drop zero counts
        steps.append((edge, diff))
    return initial, steps


async def _check_churn(
    name: str, seed: int, nodes: int, n_edges: int, changes: int, **config: int
) -> int:
    """Run ``ORACLES[name]`` over ``churn(...)`` in an open job, comparing with networkx after
    the load and after every change; returns how many comparisons were made."""
    make, oracle = ORACLES[name]
    initial, steps = churn(seed, nodes, n_edges, changes)
    live = Counter(initial)
    checks = 0
    with trio.fail_after(TIMEOUT):
        async with df.open(make(), **config) as job:
            job.inputs["edges"].insert_many(initial)
            await job.advance_to(1)
            assert job.output.at(0) == oracle(list(live.elements())), "after the load"
            checks += 1
            for t, (edge, diff) in enumerate(steps, 1):
                live[edge] += diff
                job.inputs["edges"].insert_many([edge], [diff])
                await job.advance_to(t + 1)
                want = oracle(list(live.elements()))
                got = job.output.at(t)
                assert got == want, f"after change {t} ({edge}, {diff:+d}): {got} != {want}"
                checks += 1
    return checks


@pytest.mark.parametrize("name", sorted(ORACLES))
@pytest.mark.parametrize("seed", [1, 2])
async def test_churn_matches_networkx(name: str, seed: int, workers: int) -> None:
    """Single-edge insertions and deletions: the output after each is networkx's answer."""
    checks = await _check_churn(name, seed, nodes=14, n_edges=22, changes=25, workers=workers)
    assert checks == 26


@pytest.mark.parametrize("workers_", [3, 4])
@pytest.mark.parametrize("name", ["scc_all", "scc_at"])
async def test_churn_at_three_and_four_workers(name: str, workers_: int) -> None:
    """The same with labels exchanged among three and four workers."""
    checks = await _check_churn(name, 4, nodes=14, n_edges=22, changes=12, workers=workers_)
    assert checks == 13


@pytest.mark.parametrize("name", ["scc_all", "scc_at", "weak"])
async def test_churn_on_two_processes(name: str) -> None:
    """The same on two processes (a worker each), where labels cross between processes."""
    checks = await _check_churn(name, 3, nodes=12, n_edges=18, changes=10, workers=2, processes=2)
    assert checks == 11


async def test_scc_larger_graph_with_cuts() -> None:
    """A graph with big components, where one deletion can relabel many nodes at once."""
    checks = await _check_churn("scc_at", 5, nodes=60, n_edges=150, changes=30, workers=2)
    assert checks == 31


# -- whole histories: several changes per time, retractions, compared at every time -----------


@st.composite
def edge_histories(draw: st.DrawFn, nodes: int = 8) -> list[tuple[Edge, int, int]]:
    """Edge updates at times 0..4: insertions (count 1 or 2) and, for some, retractions of
    the same count at the same time or later, so no edge's count is ever negative."""
    edge = st.tuples(st.integers(0, nodes - 1), st.integers(0, nodes - 1))
    base = draw(st.lists(st.tuples(edge, st.integers(0, 4), st.integers(1, 2)), max_size=16))
    out = [(e, t, r) for e, t, r in base]
    for e, t, r in base:
        if draw(st.booleans()):
            out.append((e, draw(st.integers(t, 4)), -r))
    return draw(st.permutations(out))


def _compare_every_time(
    pipeline: df.Pipeline, oracle: Callable[[list[Edge]], Counter[Any]], **config: Any
) -> Callable[[list[tuple[Edge, int, int]]], None]:
    def check(history: list[tuple[Edge, int, int]]) -> None:
        out = df.run(pipeline, edges=history, **config)
        for t in range(6):
            live = accumulate(history, t)
            assert all(n >= 0 for n in live.values())
            edges = [e for e, n in live.items() for _ in range(n)]
            assert accumulate(out, t) == oracle(edges), t

    return check


@pytest.mark.parametrize("name", ["scc_all", "scc_at", "scc_edges", "weak", "propagate_at"])
def test_histories_match_networkx_at_every_time(name: str, workers: int) -> None:
    """Many edges changing at each of several times (with retractions and parallel edges):
    the output at every time is networkx's answer for the edges live then."""
    make, oracle = ORACLES[name]

    @graph_settings
    @given(history=edge_histories())
    def prop(history: list[tuple[Edge, int, int]]) -> None:
        _compare_every_time(make(), oracle, workers=workers)(history)

    prop()


def test_graph_functions_nest_inside_a_loop_step() -> None:
    """scc() called inside another loop's step nests its loops in that step: here, the
    components of the edges among nodes reachable from 0, recomputed as reachability grows."""

    class ReachableScc(df.Pipeline):
        def build(self, edges: df.Collection) -> df.Collection:
            def step(reached: df.Collection) -> df.Collection:
                inside = edges.semijoin(reached)
                labels = scc(inside, priority=None)
                return reached.concat(labels.map(lambda nl: nl[0])).distinct()

            start = edges.filter(lambda e: e[0] == 0).map(lambda e: e[0]).distinct()
            return start.iterate(step)

    history = [((0, 1), 0, 1), ((1, 2), 0, 1), ((2, 1), 0, 1), ((3, 4), 0, 1), ((2, 0), 1, 1)]
    history += [((1, 2), 2, -1)]
    out = df.run(ReachableScc(), edges=history)
    for t in range(3):
        live = [e for e, n in accumulate(history, t).items() if n > 0]
        reach = nx.descendants(_digraph(live), 0) | {0}
        assert accumulate(out, t) == dict.fromkeys(reach, 1), t
