"""Iteration: ``iterate``, ``Variable`` and loop scopes, against plain-Python fixed points.

Every loop body here converges on its own (a ``consolidate`` on the cycle cancels equal
updates of opposite sign, and the bodies are nilpotent or contracting), or is bounded by an
iteration ``limit``. The oracle computes, for every outer time ``t``, the fixed point of the
body applied to the inputs accumulated at ``t`` (``tests/reference.py``); the dataflow must
agree at every time, including after retractions at later times. Tests that run a dataflow
run it on one worker and on two, under a timeout (a loop that never ends fails the test).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import assume, given, strategies as st
from tests.harness import (
    Build,
    FakeContext,
    Update,
    clean,
    fixed_point,
    histories,
    lift,
    loop_settings,
    run,
)
from tests.jobs import pipeline_of
from tests.reference import (
    assert_matches_oracle,
    expected_at,
    interesting_times_for_check,
)

import deltaflow as df
from deltaflow.framework.antichain import Antichain
from deltaflow.framework.lattice import Product, Time, depth
from deltaflow.framework.summary import PathSummary
from deltaflow.graphs import reachable_pairs
from deltaflow.operators.base import Interest, Operator, OperatorContext, UpdateBatch
from deltaflow.operators.builder import DataflowBuilder
from deltaflow.operators.dataflow import DataflowSpec, Edge
from deltaflow.operators.iterate import (
    FeedbackOperator,
    LoopScope,
    Variable,
    check_variables_set,
    iterate,
    loop_scope,
)
from deltaflow.operators.linear import Concat, LinearOperator, Step
from deltaflow.scheduler.local.plan import make_plan

# -- helpers ------------------------------------------------------------------------------


# -- loop bodies and their models ---------------------------------------------------------


def count_up(n: int) -> int:
    return min(n + 1, 10)


def halve_even(n: int) -> int:
    return n // 2 if n % 2 == 0 else n


def below_8(n: int) -> bool:
    return n < 8


def succ(n: int) -> int:
    return n + 1


# -- iterate: fixed points at every outer time --------------------------------------------


@loop_settings
@given(xs=histories(st.integers(0, 12)))
def test_iterate_reaches_fixed_point_at_every_time(workers: int, xs: list[Update]) -> None:
    """iterate(count_up) gives the fixed point of the inputs accumulated at each outer time."""
    out = run(lambda xs: iterate(xs, lambda x: x.map(count_up).consolidate()), workers, xs=xs)
    assert_matches_oracle(out, {"xs": xs}, lambda c: fixed_point(lift(count_up), c["xs"]))


@loop_settings
@given(roots=histories(st.integers(0, 9)), extra=histories(st.integers(0, 9)))
def test_iterate_uses_outer_collections(
    workers: int, roots: list[Update], extra: list[Update]
) -> None:
    """A collection of the enclosing scope used in the body is present in every round."""

    def build(roots: df.Collection, extra: df.Collection) -> df.Collection:
        return iterate(roots, lambda x: x.filter(below_8).map(succ).concat(extra).consolidate())

    out = run(build, workers, roots=roots, extra=extra)

    def model(c: dict[str, Counter[Any]]) -> Counter[Any]:
        shift = lift(succ, below_8)

        def step(x: Counter[Any]) -> Counter[Any]:
            out = shift(x)
            out.update(c["extra"])  # update keeps negative counts, unlike +
            return clean(out)

        return fixed_point(step, c["roots"])

    assert_matches_oracle(out, {"roots": roots, "extra": extra}, model)


def test_iterate_exact_updates_with_retractions(workers: int) -> None:
    """Halving evens to a fixed point, with insertions and removals at later outer times."""
    xs = [(12, 0, 1), (8, 1, 1), (12, 2, -1), (5, 3, 1), (0, 3, 1), (8, 4, -1), (6, 4, 2)]
    out = df.run(
        pipeline_of(lambda xs: iterate(xs, lambda x: x.map(halve_even).consolidate())),
        workers=workers,
        xs=xs,
    )
    # 12 -> 6 -> 3; 8 -> 4 -> 2 -> 1; 6 -> 3; 5 and 0 are fixed.
    assert out == [
        (3, 0, 1),
        (1, 1, 1),
        (3, 2, -1),
        (0, 3, 1),
        (5, 3, 1),
        (1, 4, -1),
        (3, 4, 2),
    ]


def test_unchanging_body_returns_its_input(workers: int) -> None:
    """A body that changes nothing returns its input at every time (the source and its
    negation fed back cancel in the consolidate, so nothing circulates)."""
    xs = [("a", 0, 2), ("b", 1, 1), ("a", 3, -1)]
    assert run(lambda xs: iterate(xs, lambda x: x.consolidate()), workers, xs=xs) == xs


def test_iterate_rounds_carry_product_times(workers: int) -> None:
    """Inside the loop times are Product(t, round); round i holds step applied i times."""
    seen: list[Update] = []

    def build(xs: df.Collection) -> df.Collection:
        return iterate(xs, lambda x: x.inspect(seen.append).map(count_up).consolidate())

    out = run(build, workers, xs=[(7, 0, 1), (7, 2, -1), (9, 2, 1)])
    assert out == [(10, 0, 1)]
    assert all(t.__class__ is Product and t.outer.__class__ is int for _, t, _ in seen)

    def at(t: int, i: int) -> dict[Any, int]:
        acc: Counter[Any] = Counter()
        for d, u, r in seen:
            if u.outer <= t and u.inner <= i:  # type: ignore[union-attr]
                acc[d] += r
        return dict(clean(acc))

    assert [at(0, i) for i in range(5)] == [{7: 1}, {8: 1}, {9: 1}, {10: 1}, {10: 1}]
    assert [at(2, i) for i in range(3)] == [{9: 1}, {10: 1}, {10: 1}]


class FrontierWatch(Operator):
    """Records its input frontier each time it changes (probe-like, for loop scopes)."""

    interest = Interest.ALWAYS
    name = "watch"

    def __init__(self, seen: list[Antichain]) -> None:
        self.seen = seen

    def schedule(self, ctx: OperatorContext) -> None:
        ctx.messages(0)
        self.seen.append(ctx.frontier(0))


async def test_frontier_passes_every_round_of_a_time(workers: int) -> None:
    """Interactively: once nothing circulates for time t, the loop frontier passes (t, i) for
    every i while later times are still open, and each time's output is complete."""
    seen: list[list[Antichain]] = [[] for _ in range(workers)]

    def build(xs: df.Collection) -> df.Collection:
        def step(x: df.Collection) -> df.Collection:
            x.builder.add("watch", lambda w, _n: FrontierWatch(seen[w]), [x])
            return x.map(count_up).consolidate()

        return iterate(xs, step)

    def loop_frontiers() -> list[list[Time]]:
        return [sorted(per_worker[-1]) for per_worker in seen]

    with trio.fail_after(20):
        async with df.open(pipeline_of(build), workers=workers) as job:
            xs = job.inputs["xs"]
            xs.insert(4)
            xs.insert(9)
            await job.advance_to(1)
            assert job.output.at(0) == {10: 2}
            await trio.testing.wait_all_tasks_blocked()
            assert loop_frontiers() == [[Product(1, 0)]] * workers
            xs.remove(4)
            xs.insert(12)
            await job.advance_to(2)
            assert job.output.at(1) == {10: 2}
            xs.remove(9)
            await job.advance_to(3)
            await trio.testing.wait_all_tasks_blocked()
            assert loop_frontiers() == [[Product(3, 0)]] * workers
            assert job.output.at(2) == {10: 1}
            assert job.output.at(0) == {10: 2}
    assert loop_frontiers() == [[]] * workers


class _NoFixedPoint(Exception):
    """The loop body has no fixed point from this start (it oscillates)."""


def reach_step(roots: df.Collection, edges: df.Collection) -> Callable[[df.Collection], Any]:
    """The body of reachability: one more edge from every reached node, plus the roots."""

    def step(reach: df.Collection) -> df.Collection:
        return (
            reach.map(lambda rn: (rn[1], rn[0]))
            .join_map(edges, lambda node, root, dst: (root, dst))
            .concat(roots.map(lambda r: (r, r)))
            .distinct()
        )

    return step


@loop_settings
@given(
    roots=histories(st.integers(0, 5), max_size=3),
    edges=histories(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=10),
)
def test_reachability_with_join_and_distinct(
    workers: int, roots: list[Update], edges: list[Update]
) -> None:
    """The contract's example: (root, node) pairs reachable from each root, kept up to date
    as edges and roots come and go (a join and a distinct inside the loop)."""

    def build(roots: df.Collection, edges: df.Collection) -> df.Collection:
        return iterate(roots.map(lambda r: (r, r)), reach_step(roots, edges))

    def model(c: dict[str, Counter[Any]]) -> Counter[Any]:
        # The fixed point of the loop body over multisets, iterated from the start
        # collection: with negative input counts this differs from graph reachability,
        # and the operator must compute the former.
        start: Counter[Any] = Counter({(r, r): n for r, n in c["roots"].items() if n})
        x = start
        for _ in range(100):
            body: Counter[Any] = Counter()
            for (root, node), n in x.items():
                for (a, b), m in c["edges"].items():
                    if a == node and m:
                        body[(root, b)] += n * m
            for rr, n in start.items():
                body[rr] += n
            nxt: Counter[Any] = Counter({k: 1 for k, v in body.items() if v > 0})
            if nxt == x:
                break
            x = nxt
        else:
            raise _NoFixedPoint
        return x

    # With negative input counts the body may oscillate between two sets for ever: then no
    # fixed point exists and the dataflow (correctly) never finishes; such inputs are skipped.
    inputs = {"roots": roots, "edges": edges}
    try:
        for t in interesting_times_for_check(inputs):
            expected_at(inputs, model, t)
    except _NoFixedPoint:
        assume(False)
    out = run(build, workers, roots=roots, edges=edges)

    assert_matches_oracle(out, {"roots": roots, "edges": edges}, model)


@pytest.mark.parametrize("batch", [1, 12])
async def test_reachability_over_a_sliding_window_of_edges(workers: int, batch: int) -> None:
    """W2's shape at a small size, round by round in an open job: each round retracts the
    oldest edges and inserts new ones (one, or a batch of them, so that a round's changes
    reach a key at several iterations at once, before the frontier passes them); after each
    round the output is exactly the reachable pairs of the live edges."""
    rng = random.Random(7)
    nodes, roots = 40, [0, 1, 2]
    window = [(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(70)]
    live = Counter(window)

    class Reach(df.Pipeline):
        def build(self, roots: df.Collection, edges: df.Collection) -> df.Collection:
            return iterate(roots.map(lambda r: (r, r)), reach_step(roots, edges))

    async with df.open(Reach(), workers=workers) as job:
        job.inputs["roots"].insert_many(roots)
        job.inputs["edges"].insert_many(window)
        await job.advance_to(1)
        assert set(job.output.at(0)) == reachable_pairs(roots, live.elements())
        for t in range(1, 9):
            new = [(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(batch)]
            old, window = window[:batch], window[batch:] + new
            job.inputs["edges"].insert_many(new + old, [1] * batch + [-1] * batch)
            live.update(new)
            live.subtract(old)
            await job.advance_to(t + 1)
            out = job.output.at(t)
            assert all(n == 1 for n in out.values()), out
            assert set(out) == reachable_pairs(roots, live.elements()), t


# -- nested loops ---------------------------------------------------------------------------


def inner_cap(ab: tuple[int, int]) -> tuple[int, int]:
    a, b = ab
    return (a, min(b + 1, a + 2))


def outer_bump(ab: tuple[int, int]) -> tuple[int, int]:
    a, b = ab
    return (min(a + 1, 3), b)


@loop_settings
@given(xs=histories(st.tuples(st.integers(0, 4), st.integers(0, 6)), max_size=6))
def test_nested_iterate(workers: int, xs: list[Update]) -> None:
    """A loop inside a loop: inner rounds run to a fixed point inside every outer round, at
    times Product(Product(t, i), j)."""
    inner_times: list[Time] = []

    def build(xs: df.Collection) -> df.Collection:
        def outer(x: df.Collection) -> df.Collection:
            def inner(y: df.Collection) -> df.Collection:
                return y.inspect(lambda u: inner_times.append(u[1])).map(inner_cap).consolidate()

            return iterate(x, inner).map(outer_bump).consolidate()

        return iterate(xs, outer)

    out = run(build, workers, xs=xs)

    def model(c: dict[str, Counter[Any]]) -> Counter[Any]:
        return fixed_point(lambda x: lift(outer_bump)(fixed_point(lift(inner_cap), x)), c["xs"])

    assert_matches_oracle(out, {"xs": xs}, model)
    assert all(depth(t) == 2 for t in inner_times)


@loop_settings
@given(roots=histories(st.integers(0, 12), max_size=6))
def test_nested_iterate_enters_collections_of_every_enclosing_scope(
    workers: int, roots: list[Update]
) -> None:
    """The inner body uses a top-scope input (entered twice) and an outer-loop collection
    (entered once); both are present in every inner round."""

    def build(roots: df.Collection) -> df.Collection:
        def outer(x: df.Collection) -> df.Collection:
            seed = x.filter(lambda n: n < 30).map(lambda n: n + 10)

            def inner(y: df.Collection) -> df.Collection:
                return (
                    y.filter(lambda n: n % 10 < 3)
                    .map(succ)
                    .concat(seed, roots.map(lambda r: r + 100))
                    .consolidate()
                )

            return iterate(seed, inner).concat(roots).consolidate()

        return iterate(roots, outer)

    out = run(build, workers, roots=roots)

    def model(c: dict[str, Counter[Any]]) -> Counter[Any]:
        r = c["roots"]

        def outer(x: Counter[Any]) -> Counter[Any]:
            seed = lift(lambda n: n + 10, lambda n: n < 30)(x)

            def inner(y: Counter[Any]) -> Counter[Any]:
                nxt = lift(succ, lambda n: n % 10 < 3)(y)
                nxt.update(seed)
                nxt.update(lift(lambda n: n + 100)(r))
                return clean(nxt)

            res = fixed_point(inner, seed)
            res.update(r)
            return clean(res)

        return fixed_point(outer, r)

    assert_matches_oracle(out, {"roots": roots}, model)


# -- iteration limits -----------------------------------------------------------------------


def perm7(n: int) -> int:
    return (3 * n + 1) % 7


@loop_settings
@given(xs=histories(st.integers(0, 6), max_size=6), limit=st.integers(1, 6))
def test_limit_stops_a_loop_that_never_converges(
    workers: int, xs: list[Update], limit: int
) -> None:
    """With limit=n the body is applied exactly n times, even when it would cycle for ever."""
    out = run(
        lambda xs: iterate(xs, lambda x: x.map(perm7).consolidate(), limit=limit),
        workers,
        xs=xs,
    )
    assert_matches_oracle(out, {"xs": xs}, lambda c: fixed_point(lift(perm7), c["xs"], limit))


def test_limit_bounds_a_loop_without_consolidation(workers: int) -> None:
    """Without a consolidate, +/- pairs circulate for ever; a limit still ends the loop."""
    out = run(
        lambda xs: iterate(xs, lambda x: x.map(lambda n: min(n + 1, 3)), limit=6),
        workers,
        xs=[(0, 0, 1), (2, 1, 2)],
    )
    assert out == [(3, 0, 1), (3, 1, 2)]


def _countdown(n: int) -> int:
    return n - 1


@loop_settings
@given(xs=histories(st.integers(0, 6), max_size=6))
def test_a_loop_without_consolidation_gets_one_and_ends(workers: int, xs: list[Update]) -> None:
    """Steps with no reduction or consolidate on their cycle (the identity, a map, a
    countdown that filters itself away) still reach their fixed point: set() consolidates
    before the feedback, so the round-0 source and its negation fed back cancel."""
    assert_matches_oracle(
        run(lambda xs: iterate(xs, lambda x: x), workers, xs=xs),
        {"xs": xs},
        lambda c: c["xs"],
    )
    assert_matches_oracle(
        run(lambda xs: iterate(xs, lambda x: x.map(count_up)), workers, xs=xs),
        {"xs": xs},
        lambda c: fixed_point(lift(count_up), c["xs"]),
    )

    def countdown(x: df.Collection) -> df.Collection:
        return x.filter(lambda n: n > 1).map(_countdown)

    assert_matches_oracle(
        run(lambda xs: iterate(xs, countdown), workers, xs=xs),
        {"xs": xs},
        lambda c: fixed_point(lift(_countdown, lambda n: n > 1), c["xs"]),
    )


def test_consolidation_is_added_only_where_a_cycle_lacks_it() -> None:
    """A consolidate is put before the feedback only when some path from the variable to its
    value has no consolidating operator, and never with a limit."""

    def consolidates(build: Build) -> int:
        spec = pipeline_of(build).instantiate().spec
        return sum(n.name == "consolidate" for n in spec.nodes)

    assert consolidates(lambda xs: iterate(xs, lambda x: x.map(succ))) == 1
    assert consolidates(lambda xs: iterate(xs, lambda x: x.map(succ), limit=3)) == 0
    assert consolidates(lambda xs: iterate(xs, lambda x: x.map(succ).distinct())) == 0
    assert consolidates(lambda xs: iterate(xs, lambda x: x.concat(x.map(succ).distinct()))) == 1
    assert consolidates(lambda xs: iterate(xs, lambda x: xs.map(succ))) == 0  # no cycle


@pytest.mark.parametrize("limit", [1, 2, 5])
def test_limit_on_a_plain_variable_counts_rounds(workers: int, limit: int) -> None:
    """A variable that starts empty and grows each round holds rounds 0..limit-1 only."""

    def build(roots: df.Collection) -> df.Collection:
        with loop_scope(roots) as scope:
            v = Variable(scope, limit=limit)
            result = v.set(roots.concat(v.map(succ)).consolidate())
        return result.leave()

    out = run(build, workers, roots=[(0, 0, 1)])
    assert sorted(d for d, _, _ in out) == list(range(limit))


# -- Variable: explicit forms and mutual recursion ------------------------------------------


@loop_settings
@given(roots=histories(st.integers(0, 7), max_size=6))
def test_mutual_recursion_even_odd(workers: int, roots: list[Update]) -> None:
    """Two variables in one scope: numbers reachable from the roots by an even or an odd
    number of +1 steps (up to 8), with multiplicities (one path per root)."""

    def build(roots: df.Collection) -> dict[str, df.Collection]:
        with loop_scope(roots, "parity") as scope:
            even, odd = Variable(scope), Variable(scope)

            def step(c: df.Collection) -> df.Collection:
                return c.filter(below_8).map(succ)

            even_next = even.set(roots.concat(step(odd)).consolidate())
            odd_next = odd.set(step(even).consolidate())
            scope._check()
        return {"even": even_next.leave(), "odd": odd_next.leave()}

    out = run(build, workers, roots=roots)

    def model(c: dict[str, Counter[Any]]) -> dict[str, Counter[Any]]:
        shift = lift(succ, below_8)
        even: Counter[Any] = Counter()
        odd: Counter[Any] = Counter()
        for _ in range(100):
            e2 = shift(odd)
            e2.update(c["roots"])
            e2, o2 = clean(e2), shift(even)
            if (e2, o2) == (even, odd):
                break
            even, odd = e2, o2
        return {"even": even, "odd": odd}

    assert_matches_oracle(out, {"roots": roots}, model)


def test_variable_from_collection_matches_iterate(workers: int) -> None:
    """Variable.from_collection with an explicit scope is the loop iterate builds."""
    xs = [(1, 0, 1), (6, 1, 2), (1, 2, -1), (15, 2, 1)]

    def by_variable(xs: df.Collection) -> df.Collection:
        with loop_scope(xs) as scope:
            x = Variable.from_collection(xs, scope=scope)
            assert x.source is not None and x.source.scope is scope
            result = x.set(x.map(count_up).consolidate())
            x._check()
        return result.leave()

    def by_entered(xs: df.Collection) -> df.Collection:
        scope = loop_scope(xs)
        x = Variable.from_collection(xs.enter(scope))
        return x.set(x.map(count_up).consolidate()).leave()

    def by_iterate(xs: df.Collection) -> df.Collection:
        return iterate(xs, lambda x: x.map(count_up).consolidate())

    expected = run(by_iterate, workers, xs=xs)
    assert expected == [(10, 0, 1), (10, 1, 2)]  # {1}, then {1, 6, 6}, then {6, 6, 15}
    assert run(by_variable, workers, xs=xs) == expected
    assert run(by_entered, workers, xs=xs) == expected


def test_set_accepts_outer_collection_and_returns_it_entered() -> None:
    """set() enters a collection of an enclosing scope; the loop then holds it from round 1."""

    def build(roots: df.Collection) -> df.Collection:
        scope = loop_scope(roots)
        v = Variable(scope)
        result = v.set(roots)
        assert result.scope is scope
        return v.leave()

    assert run(build, 1, roots=[("a", 0, 1), ("a", 2, -1)]) == [("a", 0, 1), ("a", 2, -1)]


# -- scope and wiring errors ------------------------------------------------------------------


def test_unset_variable_is_reported_with_its_origin() -> None:
    """A Variable never set is an error when the pipeline finishes building (and when its
    loop_scope block ends), naming where it was created."""

    def forgot(roots: df.Collection) -> df.Collection:
        Variable(loop_scope(roots))
        return roots

    with pytest.raises(ValueError, match=r"never set \(created at .*test_iterate\.py:\d+"):
        check_variables_set(pipeline_of(forgot).instantiate())

    def forgot_in_block(roots: df.Collection) -> df.Collection:
        with loop_scope(roots) as scope:
            Variable(scope)
        return roots

    with pytest.raises(ValueError, match="1 loop Variable"):
        pipeline_of(forgot_in_block).instantiate()


def test_variable_set_twice_is_rejected() -> None:
    """A Variable is set exactly once."""

    def build(roots: df.Collection) -> df.Collection:
        v = Variable(loop_scope(roots))
        v.set(v.consolidate())
        with pytest.raises(ValueError, match="already set"):
            v.set(roots)
        return roots

    pipeline_of(build).instantiate()


def test_inner_scope_collections_cannot_escape() -> None:
    """A loop's collection used outside the loop without leave() is rejected, as is a
    nested loop's collection returned from a body or set into an outer variable."""
    leaked: list[df.Collection] = []

    def leak(x: df.Collection) -> df.Collection:
        leaked.append(x)
        return x.consolidate()

    def as_output(xs: df.Collection) -> df.Collection:
        iterate(xs, leak)
        return leaked[-1].map(succ)

    with pytest.raises(ValueError, match="inside an iteration scope"):
        pipeline_of(as_output).instantiate()

    def in_sibling_loop(xs: df.Collection) -> df.Collection:
        iterate(xs, leak)
        first = leaked[-1]
        return iterate(xs, lambda x: x.concat(first).consolidate())

    with pytest.raises(ValueError, match=r"cannot be used in scope|does not enclose"):
        pipeline_of(in_sibling_loop).instantiate()

    def nested_not_left(xs: df.Collection) -> df.Collection:
        def outer(x: df.Collection) -> df.Collection:
            iterate(x, leak)
            return leaked[-1]

        return iterate(xs, outer)

    with pytest.raises(ValueError, match=r"nested inside scope .*\.leave\(\)"):
        pipeline_of(nested_not_left).instantiate()

    def set_from_nested(xs: df.Collection) -> df.Collection:
        scope = loop_scope(xs)
        v = Variable(scope)
        inner = Variable(loop_scope(scope))
        v.set(inner)
        return xs

    with pytest.raises(ValueError, match=r"call \.leave"):
        pipeline_of(set_from_nested).instantiate()


def test_bad_arguments() -> None:
    """Misuse gets a TypeError/ValueError naming what is wrong."""
    builder = DataflowBuilder()
    xs = builder.new_input("xs")
    with pytest.raises(TypeError, match="loop scope"):
        Variable(builder.top)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not in a loop scope"):
        Variable.from_collection(xs)
    with pytest.raises(ValueError, match="positive int"):
        Variable(loop_scope(xs), limit=0)
    with pytest.raises(ValueError, match="positive int"):
        iterate(xs, lambda x: x, limit=-1)
    with pytest.raises(TypeError, match="must be a Collection"):
        iterate(xs, lambda x: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="must be a Collection"):
        iterate([1, 2], lambda x: x)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="enclosing scope"):
        LoopScope(parent=None, name="x", builder=builder)
    other = DataflowBuilder().new_input("ys")
    with pytest.raises(ValueError, match="another pipeline"):
        Variable(loop_scope(xs)).set(other)
    with pytest.raises(ValueError, match="another pipeline"):
        iterate(xs, lambda x: other)


def test_a_step_that_leaves_its_loop_is_named() -> None:
    """A step (or a variable's value) computed in the loop and then left would feed the loop
    its own fixed point at round 0 again; the error says so, not only that a cycle does not
    advance. A value of an enclosing scope that does not come from the loop is fine."""
    builder = DataflowBuilder()
    xs = builder.new_input("xs")
    with pytest.raises(ValueError, match=r"step of iterate\(\) returned .* left it \(\.leave"):
        iterate(xs, lambda x: x.distinct().leave())
    scope = loop_scope(xs)
    v = Variable.from_collection(xs.enter(scope))
    with pytest.raises(ValueError, match=r"set to a collection .* left it \(\.leave"):
        v.set(v.distinct().leave())
    outer = xs.map(succ)
    assert iterate(xs, lambda x: outer).scope is builder.top


def test_two_loops_are_told_apart_by_where_they_were_made() -> None:
    """Every iterate scope is called "iterate": a collection used in a sibling loop is
    reported with the file and line of each loop."""
    leaked: list[df.Collection] = []

    def build(xs: df.Collection) -> df.Collection:
        iterate(xs, lambda x: leaked.append(x) or x.distinct())  # type: ignore[func-returns-value]
        return iterate(xs, lambda y: y.concat(leaked[0]).distinct())

    made_here = r"'iterate' \(made at .*test_iterate\.py:\d+\)"
    with pytest.raises(ValueError, match=made_here) as info:
        pipeline_of(build).instantiate()
    first, second = re.findall(r"test_iterate\.py:(\d+)", str(info.value))
    assert int(second) == int(first) + 1  # the lines of the two iterate calls in ``build``


# -- the progress graph -----------------------------------------------------------------------


def _hand_loop(back_summary: PathSummary) -> DataflowSpec:
    """input -> enter -> concat(enter, back) -> map -> back, with ``back`` closing the cycle."""
    spec = DataflowSpec()
    inp = spec.add_node("input", factory=lambda w, n: None, inputs=[], outputs=1)
    enter = spec.add_node(
        "enter",
        factory=lambda w, n: None,
        inputs=[Edge(inp, 0)],
        outputs=1,
        summaries={(0, 0): PathSummary.enter()},
        depth=1,
    )
    head = spec.add_node(
        "head", factory=lambda w, n: Concat(2), inputs=[Edge(enter, 0)], outputs=1, depth=1
    )
    body = spec.add_node(
        "body",
        factory=lambda w, n: LinearOperator([Step("map", succ)]),
        inputs=[Edge(head, 0)],
        outputs=1,
        depth=1,
    )
    back = spec.add_node(
        "back",
        factory=lambda w, n: None,
        inputs=[Edge(body, 0)],
        outputs=1,
        summaries={(0, 0): back_summary},
        depth=1,
    )
    spec.set_input(head, 1, Edge(back, 0))
    return spec


def test_progress_graph_accepts_feedback_and_rejects_non_advancing_cycles() -> None:
    """A cycle through a +1 feedback is a valid loop; the same cycle with an identity (or a
    summary that leaves the scope) is rejected when the job is built."""
    make_plan(_hand_loop(PathSummary.feedback()))
    with pytest.raises(ValueError, match="cycle does not advance times"):
        make_plan(_hand_loop(PathSummary.identity()))

    def closes_loop_without_feedback(xs: df.Collection) -> df.Collection:
        scope = loop_scope(xs)
        head = xs.enter(scope).concat(xs.enter(scope))
        body = head.map(succ)
        xs.builder.spec.set_input(head.node, 1, Edge(body.node, body.port))
        return body.consolidate().leave()

    with pytest.raises(ValueError, match="cycle does not advance times"):
        df.run(pipeline_of(closes_loop_without_feedback), xs=[(1, 0, 1)])


def test_iterate_builds_one_feedback_per_loop() -> None:
    """iterate adds exactly one feedback node (+1 summary) at the loop's depth, and the
    resulting graph passes validation."""

    def build(xs: df.Collection) -> df.Collection:
        return iterate(xs, lambda x: iterate(x, lambda y: y.consolidate()).consolidate())

    builder = pipeline_of(build).instantiate()
    feedbacks = [n for n in builder.spec.nodes if n.name.startswith("feedback:")]
    assert sorted(n.depth for n in feedbacks) == [1, 2]
    assert all(n.summaries == {(0, 0): PathSummary.feedback()} for n in feedbacks)
    check_variables_set(builder)
    make_plan(builder.spec)


# -- the feedback operator on its own ---------------------------------------------------------


def test_feedback_operator_advances_rounds_and_drops_past_limit() -> None:
    """Each batch moves one round later on the innermost coordinate; past the limit it is
    dropped; nested products keep their outer part."""
    a = UpdateBatch(["a"], [1])
    b = UpdateBatch(["b"], [-1])
    nested = Product(Product(3, 4), 1)

    def sent(limit: int | None, lower: Time, inbox: list[tuple[Time, Any]]) -> list[Any]:
        ctx = FakeContext(lower, inbox)
        FeedbackOperator(limit=limit).schedule(ctx)  # type: ignore[arg-type]
        return ctx.payloads

    flat = [(Product(0, 0), a), (Product(2, 1), b)]
    deep = Product(Product(0, 0), 0)
    assert sent(2, Product(0, 0), flat) == [(0, Product(0, 1), a)]
    assert sent(2, deep, [(nested, a)]) == []
    assert sent(None, Product(0, 0), flat) == [(0, Product(0, 1), a), (0, Product(2, 2), b)]
    assert sent(None, deep, [(nested, a)]) == [(0, Product(Product(3, 4), 2), a)]
