"""Scopes that nest by themselves, and ``Collection.enter_at``, against plain-Python fixed
points at every time.

A loop started inside another loop's step nests in that step's loop whatever the scope of
the collection it starts from; a collection of any enclosing scope enters any loop nested in
it; ``enter_at`` makes each datum present in a loop from a round of its own. The oracle
(``tests/reference.py``) recomputes the fixed point from the inputs accumulated at each
time: where data enter a loop changes how the loop gets there, never where it ends.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, strategies as st
from tests.harness import (
    Update,
    clean,
    fixed_point,
    histories,
    lift,
    loop_settings,
    run,
)
from tests.jobs import pipeline_of
from tests.reference import assert_matches_oracle

import deltaflow as df
from deltaflow.errors import OperatorError
from deltaflow.framework.lattice import Product, Time
from deltaflow.operators.builder import DataflowBuilder
from deltaflow.operators.iterate import Variable, iterate, loop_scope


def grow(n: int) -> int:
    return n + 3


def small(n: int) -> bool:
    return n < 12


def distinct(c: Counter[Any], keep: Any = lambda _n: True) -> Counter[Any]:
    """The model of ``filter(keep).distinct()``: each datum with a positive count, once."""
    return Counter({d: 1 for d, n in c.items() if n > 0 and keep(d)})


def spread(c: Counter[Any], seed: Counter[Any]) -> Counter[Any]:
    """The model of ``x.filter(small).map(grow).concat(seed).distinct()``."""
    nxt = lift(grow, small)(c)
    nxt.update(seed)
    return distinct(nxt)


def plus(*cs: Counter[Any]) -> Counter[Any]:
    """The model of ``concat``: counts added, negative ones kept."""
    out: Counter[Any] = Counter()
    for c in cs:
        out.update(c)
    return out


@st.composite
def insertions(draw: st.DrawFn, data: st.SearchStrategy[Any]) -> list[Update]:
    """Insertions at times 0..4, some retracted whole at the same time or later: no count
    is ever negative."""
    base = draw(st.lists(st.tuples(data, st.integers(0, 4), st.integers(1, 2)), max_size=8))
    out = list(base)
    out += [(d, draw(st.integers(t, 4)), -r) for d, t, r in base if draw(st.booleans())]
    return draw(st.permutations(out))


# -- scopes nest by themselves ------------------------------------------------------------------


@loop_settings
@given(xs=histories(st.integers(0, 8), max_size=6), ys=histories(st.integers(0, 8), max_size=6))
def test_loop_started_from_a_top_collection_inside_a_step_nests_in_it(
    workers: int, xs: list[Update], ys: list[Update]
) -> None:
    """``ys.iterate`` called inside the step of ``xs.iterate``, with ``ys`` of the top scope:
    the inner loop nests in the outer one, so its step can use the outer loop's variable."""
    depths: list[int] = []

    def build(xs: df.Collection, ys: df.Collection) -> df.Collection:
        def outer(x: df.Collection) -> df.Collection:
            def inner(y: df.Collection) -> df.Collection:
                depths.append(y.scope.depth)
                seed = x.filter(lambda n: n % 2 == 0)
                return y.filter(small).map(grow).concat(seed).distinct()

            found = ys.iterate(inner)
            depths.append(found.scope.depth)
            return x.concat(found).filter(small).distinct()

        return xs.iterate(outer)

    out = run(build, workers, xs=xs, ys=ys)
    assert depths == [2, 1]

    def model(c: dict[str, Counter[Any]]) -> Counter[Any]:
        def outer(x: Counter[Any]) -> Counter[Any]:
            seed = lift(lambda n: n, lambda n: n % 2 == 0)(x)
            found = fixed_point(lambda y: spread(y, seed), c["ys"])
            merged = Counter(x)
            merged.update(found)
            return distinct(merged, small)

        return fixed_point(outer, c["xs"])

    assert_matches_oracle(out, {"xs": xs, "ys": ys}, model)


@loop_settings
@given(xs=histories(st.integers(0, 8), max_size=6))
def test_loop_scope_in_a_with_block_nests(workers: int, xs: list[Update]) -> None:
    """A loop scope made from a top-scope collection inside another loop scope's ``with``
    block nests in it, as does an ``iterate`` started there."""
    depths: list[int] = []

    def build(xs: df.Collection) -> df.Collection:
        with loop_scope(xs, "outer") as outer:
            x = Variable.from_collection(xs.enter(outer))
            with loop_scope(xs, "inner") as inner:
                depths.append(inner.depth)
                y = Variable.from_collection(xs.enter(inner))
                y.set(y.filter(small).map(grow).concat(x.filter(lambda n: n % 2 == 0)).distinct())
            deeper = xs.iterate(lambda z: z.concat(x).filter(small).distinct())
            depths.append(deeper.scope.depth)
            x.set(x.concat(y.leave(), deeper).filter(small).distinct())
        return x.leave()

    out = run(build, workers, xs=xs)
    assert depths == [2, 1]

    def model(c: dict[str, Counter[Any]]) -> Counter[Any]:
        def outer(x: Counter[Any]) -> Counter[Any]:
            evens = lift(lambda n: n, lambda n: n % 2 == 0)(x)
            y = fixed_point(lambda y: spread(y, evens), c["xs"])
            merged = Counter(x)
            merged.update(y)
            merged.update(fixed_point(lambda z: distinct(plus(z, x), small), c["xs"]))
            return distinct(merged, small)

        return fixed_point(outer, c["xs"])

    assert_matches_oracle(out, {"xs": xs}, model)


@pytest.mark.parametrize("n_workers", [1, 2, 3, 4])
def test_a_collection_of_any_enclosing_scope_enters_a_loop_three_deep(n_workers: int) -> None:
    """Collections of the top scope and of each enclosing loop enter a loop three levels
    deep, and the loop nests there whatever scope its own start came from."""
    seen: list[int] = []

    def build(xs: df.Collection) -> df.Collection:
        def one(a: df.Collection) -> df.Collection:
            def two(b: df.Collection) -> df.Collection:
                def three(c: df.Collection) -> df.Collection:
                    seen.append(c.scope.depth)
                    return c.concat(a, b, xs).filter(small).distinct()

                return xs.iterate(three).concat(b).distinct()

            return xs.iterate(two).concat(a).map(grow).filter(small).distinct()

        return xs.iterate(one)

    out = df.run(pipeline_of(build), workers=n_workers, xs=[(1, 0, 1), (2, 1, 1), (1, 2, -1)])
    assert seen == [3]

    def model(xs: set[int]) -> set[int]:
        a = set(xs)
        while True:
            nxt = {grow(n) for n in a | xs if small(grow(n))}
            if nxt == a:
                return a
            a = nxt

    for t, live in enumerate([{1}, {1, 2}, {2}]):
        got = {d for d, n in df.testing.accumulate(out, t).items() if n}
        assert got == model(live), t


def test_errors_name_scopes_by_nesting_path_and_line_and_say_what_to_do() -> None:
    """A collection kept from one loop and used in a sibling loop nested in the same outer
    loop: the error names both scopes with the path of scopes they nest in and the line that
    made each, and says to .leave() it."""
    kept: list[df.Collection] = []

    def build(xs: df.Collection) -> df.Collection:
        def outer(x: df.Collection) -> df.Collection:
            x.iterate(lambda y: kept.append(y) or y.distinct())  # type: ignore[func-returns-value]
            return x.iterate(lambda z: z.concat(kept[0]).distinct())

        return xs.iterate(outer)

    with pytest.raises(ValueError) as info:
        pipeline_of(build).instantiate()
    message = str(info.value)
    made = r"'iterate' \(made at [^)]*test_scopes\.py:(\d+)\)"
    paths = re.findall(rf"{made} in {made}", message)
    assert len(paths) == 2, message
    (first, outer1), (second, outer2) = paths
    assert outer1 == outer2  # both nested in the one outer loop
    assert int(first) + 1 == int(second) and int(outer1) == int(first) + 3
    assert ".leave()" in message


def test_a_loop_from_a_sibling_scope_is_refused_with_what_to_do() -> None:
    """Starting a loop, inside one loop's step, from a collection of another loop (neither
    enclosing nor nested in it) is refused naming both and the way out."""
    builder = DataflowBuilder()
    xs = builder.new_input("xs")
    kept: list[df.Collection] = []
    iterate(xs, lambda y: kept.append(y) or y.distinct())  # type: ignore[func-returns-value]
    with pytest.raises(ValueError, match=r"iterate\(\) started from a collection of scope "):
        iterate(xs, lambda x: iterate(kept[0], lambda z: z.distinct()))
    with pytest.raises(ValueError, match=r"\.leave\(\) it to a scope enclosing both"):
        iterate(xs, lambda x: iterate(kept[0], lambda z: z.distinct()))


# -- enter_at -----------------------------------------------------------------------------------


def round_of(n: int) -> int:
    return (n * 5) % 7


@loop_settings
@given(xs=histories(st.integers(0, 12), max_size=8))
def test_enter_at_presents_each_datum_from_its_own_round(workers: int, xs: list[Update]) -> None:
    """Inside the loop, each update of ``xs`` arrives at ``Product(t, at(d))`` with its
    count, and the loop's fixed point is the one with every datum entered at once."""
    entered: list[tuple[Any, Time, int]] = []

    def build(xs: df.Collection) -> df.Collection:
        def step(x: df.Collection) -> df.Collection:
            seed = xs.enter_at(x.scope, round_of).inspect(entered.append)
            return x.filter(small).map(grow).concat(seed).distinct()

        return xs.filter(lambda n: False).iterate(step)

    out = run(build, workers, xs=xs)
    for d, t, _ in entered:
        assert isinstance(t, Product) and t.inner == round_of(d)
    got: Counter[Any] = Counter()
    for d, t, r in entered:
        got[d, t.outer] += r  # type: ignore[union-attr]
    want: Counter[Any] = Counter()
    for d, t, r in xs:
        want[d, t] += r
    assert clean(got) == clean(want)

    def model(c: dict[str, Counter[Any]]) -> Counter[Any]:
        return fixed_point(lambda x: spread(x, c["xs"]), Counter())

    assert_matches_oracle(out, {"xs": xs}, model)


@loop_settings
@given(
    xs=insertions(st.tuples(st.integers(0, 3), st.integers(0, 9))),
    scale=st.integers(0, 40),
)
def test_enter_at_min_per_key_whatever_the_rounds(
    workers: int, xs: list[Update], scale: int
) -> None:
    """The smallest value per key, each value entering at a round that grows with it (scale
    0: all at once): the same at every time, retractions included."""

    def build(xs: df.Collection) -> df.Collection:
        def step(x: df.Collection) -> df.Collection:
            return x.concat(xs.enter_at(x.scope, lambda kv: scale * kv[1])).min()

        return xs.filter(lambda kv: False).iterate(step)

    out = run(build, workers, xs=xs)

    def model(c: dict[str, Counter[Any]]) -> Counter[Any]:
        best: dict[int, int] = {}
        for (k, v), n in c["xs"].items():
            if n > 0 and (k not in best or v < best[k]):
                best[k] = v
        return Counter(dict.fromkeys(best.items(), 1))

    assert_matches_oracle(out, {"xs": xs}, model)


@loop_settings
@given(xs=histories(st.integers(0, 12), max_size=6))
def test_enter_at_a_loop_two_deep(workers: int, xs: list[Update]) -> None:
    """A top-scope collection entering a loop nested in another: round 0 of the outer loop,
    its own round of the inner one."""
    inner_times: list[Time] = []

    def build(xs: df.Collection) -> df.Collection:
        def outer(x: df.Collection) -> df.Collection:
            def inner(y: df.Collection) -> df.Collection:
                seed = xs.enter_at(y.scope, round_of)
                seed = seed.inspect(lambda u: inner_times.append(u[1]))
                return y.filter(small).map(grow).concat(seed).distinct()

            return x.concat(x.iterate(inner)).filter(small).distinct()

        return xs.iterate(outer)

    out = run(build, workers, xs=xs)
    assert all(t.outer.inner == 0 for t in inner_times)  # type: ignore[union-attr]

    def model(c: dict[str, Counter[Any]]) -> Counter[Any]:
        def outer(x: Counter[Any]) -> Counter[Any]:
            inner = fixed_point(lambda y: spread(y, c["xs"]), x)
            merged = Counter(x)
            merged.update(inner)
            return distinct(merged, small)

        return fixed_point(outer, c["xs"])

    assert_matches_oracle(out, {"xs": xs}, model)


def test_enter_at_bad_rounds_stop_the_job_naming_operator_datum_and_value() -> None:
    """A round that is not a non-negative int stops the job with the operator, the datum
    and the value; a scope that is not nested in the collection's is refused at build."""

    def build(at: Any) -> df.Pipeline:
        return pipeline_of(
            lambda xs: xs.filter(lambda n: False).iterate(
                lambda x: x.concat(xs.enter_at(x.scope, at)).distinct()
            )
        )

    with pytest.raises(OperatorError, match=r"enter_at:iterate.*for 3 it gave the round -3"):
        df.run(build(lambda n: -n), xs=[(0, 0, 1), (3, 0, 1)])
    with pytest.raises(OperatorError, match=r"enter_at.*for 'a' it gave the round 'a'"):
        df.run(build(lambda n: n), xs=[("a", 0, 1)])
    builder = DataflowBuilder()
    xs = builder.new_input("xs")
    with pytest.raises(TypeError, match="must be a loop scope"):
        xs.enter_at(xs.scope, round_of)
    kept: list[df.Collection] = []
    iterate(xs, lambda y: kept.append(y) or y.distinct())  # type: ignore[func-returns-value]
    with pytest.raises(ValueError, match="only a scope nested in the collection's"):
        kept[0].enter_at(kept[0].scope, round_of)
