"""Loops inside loops: the time domain of every nested scope, and nested iteration at depth 2
and 3 (the general domain) against a from-scratch fixed point.

Each operator of a scope ``d`` loops deep must compute with ``domain_for_depth(d)``, never
the enclosing scope's and never a domain found from the data; the progress tracker must read
each port's times with the domain of the port's depth. The dataflows here put a join and
reductions (``distinct``) in every level of a three-deep nest, so that joins, reductions and
arrangements run on int, pair and general times at once, at several worker counts and in two
processes, with retractions at later times.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from tests.harness import Update, clean, fixed_point, histories, lift, loop_settings, run
from tests.jobs import pipeline_of, run_job
from tests.reference import assert_matches_oracle

import deltaflow as df
from deltaflow.framework.progress import Location
from deltaflow.framework.time_domain import TimeDomain, domain_for_depth
from deltaflow.operators.iterate import iterate

NODES = 8


def cap2(n: int) -> int:
    return min(n + 2, NODES - 1)


def half(n: int) -> int:
    return n // 2


def step3(c: df.Collection, edges: df.Collection) -> df.Collection:
    """One edge further from every node of ``c``, plus ``c`` (a join and a distinct)."""
    return c.map(lambda n: (n, n)).join_map(edges, lambda _n, _m, dst: dst).concat(c).distinct()


def nested3(xs: df.Collection, edges: df.Collection) -> df.Collection:
    """Three loops deep: reachability innermost, +2 steps around it, halving around that."""

    def level1(a: df.Collection) -> df.Collection:
        def level2(b: df.Collection) -> df.Collection:
            return iterate(b, lambda c: step3(c, edges)).map(cap2).concat(b).distinct()

        return iterate(a, level2).map(half).concat(a).distinct()

    return iterate(xs, level1)


def nested2(xs: df.Collection, edges: df.Collection) -> df.Collection:
    """Two loops deep: reachability inside, halving around it, counted by residue outside."""

    def level1(a: df.Collection) -> df.Collection:
        return iterate(a, lambda c: step3(c, edges)).map(half).concat(a).distinct()

    return iterate(xs, level1).map(lambda n: (n % 3, n)).count()


def _step3_model(edges: Counter[Any]) -> Any:
    def step(c: Counter[Any]) -> Counter[Any]:
        out = Counter(c)
        for (a, b), m in edges.items():
            if c.get(a):
                out[b] += c[a] * m
        return Counter({k: 1 for k, v in out.items() if v > 0})

    return step


def _distinct(c: Counter[Any]) -> Counter[Any]:
    return Counter({k: 1 for k, v in c.items() if v > 0})


def nested3_model(c: dict[str, Counter[Any]]) -> Counter[Any]:
    inner = _step3_model(c["edges"])

    def level2(b: Counter[Any]) -> Counter[Any]:
        return _distinct(lift(cap2)(fixed_point(inner, b)) + b)

    def level1(a: Counter[Any]) -> Counter[Any]:
        return _distinct(lift(half)(fixed_point(level2, a)) + a)

    return fixed_point(level1, c["xs"])


def nested2_model(c: dict[str, Counter[Any]]) -> Counter[Any]:
    inner = _step3_model(c["edges"])

    def level1(a: Counter[Any]) -> Counter[Any]:
        return _distinct(lift(half)(fixed_point(inner, a)) + a)

    by_residue = Counter(n % 3 for n in fixed_point(level1, c["xs"]))
    return clean(Counter(dict.fromkeys(by_residue.items(), 1)))


xs_histories = histories(st.integers(0, NODES - 1), max_time=3, max_size=5)
edge_histories = histories(
    st.tuples(st.integers(0, NODES - 1), st.integers(0, NODES - 1)), max_time=3, max_size=8
)


@pytest.mark.parametrize("workers", [1, 2, 3])
@loop_settings
@given(xs=xs_histories, edges=edge_histories)
def test_three_nested_loops_match_the_fixed_point(
    workers: int, xs: list[Update], edges: list[Update]
) -> None:
    """A join and distincts at depth 3, 2 and 1, with times ``Product(Product(Product(t, i),
    j), k)`` innermost: the output at every time is the nested fixed point of the inputs
    accumulated there."""
    out = run(nested3, workers, xs=xs, edges=edges)
    assert_matches_oracle(out, {"xs": xs, "edges": edges}, nested3_model)


@pytest.mark.parametrize("workers", [1, 2, 3])
@loop_settings
@given(xs=xs_histories, edges=edge_histories)
def test_two_nested_loops_match_the_fixed_point(
    workers: int, xs: list[Update], edges: list[Update]
) -> None:
    """A join and a distinct at depth 2, a distinct at depth 1 and a count at the top."""
    out = run(nested2, workers, xs=xs, edges=edges)
    assert_matches_oracle(out, {"xs": xs, "edges": edges}, nested2_model)


@settings(max_examples=3, deadline=None)
@given(xs=xs_histories, edges=edge_histories)
def test_nested_loops_in_two_processes(xs: list[Update], edges: list[Update]) -> None:
    """Two processes of two workers each agree with the fixed point, at depth 3 and 2."""
    for build, model in ((nested3, nested3_model), (nested2, nested2_model)):
        out = df.run(pipeline_of(build), workers=2, processes=2, xs=xs, edges=edges)
        assert_matches_oracle(out, {"xs": xs, "edges": edges}, model)


def _ours(x: object) -> bool:
    """An object of deltaflow's operators or framework (not the scheduler's, which lead to
    every other operator)."""
    module = type(x).__module__
    return module.startswith("deltaflow.") and not module.startswith("deltaflow.scheduler")


def _domains_held(operator: object) -> list[TimeDomain]:
    """Every TimeDomain an operator holds, in its own attributes or its traces' and
    histories' (three levels down; not through the scheduler's objects)."""
    found: list[TimeDomain] = []
    seen: set[int] = set()
    stack: list[tuple[Any, int]] = [(operator, 0)]
    while stack:
        x, level = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, TimeDomain):
            found.append(x)
            continue
        if level >= 3:
            continue
        if isinstance(x, list | tuple):
            children = list(x)
        elif _ours(x):
            children = list(getattr(x, "__dict__", {}).values())
            for cls in type(x).__mro__:
                slots = cls.__dict__.get("__slots__", ())
                children.extend(getattr(x, s) for s in slots if hasattr(x, s))
        else:
            continue
        stack.extend((c, level + 1) for c in children)
    return found


@pytest.mark.parametrize("workers", [1, 2])
def test_every_operator_of_a_nested_scope_has_its_scopes_domain(workers: int) -> None:
    """Joins, reductions and arrangements at depths 0 to 3 each hold their own scope's
    domain, and the tracker reads each output port's times with the domain of its node."""
    xs = [(0, 0, 1), (3, 1, 1), (3, 2, -1)]
    edges = [((0, 1), 0, 1), ((1, 5), 1, 1), ((5, 6), 2, 1)]

    def build(xs: df.Collection, edges: df.Collection) -> df.Collection:
        return nested3(xs, edges).map(lambda n: (n % 2, n)).join(edges).distinct()

    job = run_job(pipeline_of(build), workers, xs=xs, edges=edges)
    depths_with_domains: Counter[int] = Counter()
    for worker in job.workers:
        for idx, actor in enumerate(worker.actors):
            node = job.plan.nodes[idx]
            expected = domain_for_depth(node.depth)
            for domain in _domains_held(actor.operator):
                assert (domain.name, domain.depth, domain.loops) == (
                    expected.name,
                    expected.depth,
                    expected.loops,
                ), (node.name, node.depth, domain)
                depths_with_domains[node.depth] += 1
            for port in range(node.outputs):
                held = worker.tracker.domain_at(Location.source(idx, port))
                assert held is expected, (node.name, port, held)
    # Every depth has operators that compute with a domain: the check above is not vacuous.
    assert set(depths_with_domains) == {0, 1, 2, 3}, depths_with_domains
