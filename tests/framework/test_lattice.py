"""Property tests for the timestamp lattice: laws, advance_by, join_closure, chains."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable

import pytest
from hypothesis import given, settings, strategies as st
from tests.strategies import shapes, time_lists, time_lists_any_shape, times_of

from deltaflow.framework.antichain import Antichain
from deltaflow.framework.lattice import (
    Product,
    Time,
    advance_by,
    advancer,
    chain_decomposition,
    depth,
    join,
    join_all,
    join_closure,
    less_equal,
    less_than,
    meet,
    meet_all,
    minimum_like,
    sort_key,
)

# Coordinates bound for the brute-force grids below; every drawn time lies inside its grid.
GRID_MAX = {"int": 6, "product": 3, "nested": 2}


def _grid(shape: str) -> list[Time]:
    """Every time of ``shape`` whose coordinates are all in ``[0, GRID_MAX[shape]]``."""
    r = range(GRID_MAX[shape] + 1)
    if shape == "int":
        return list(r)
    if shape == "product":
        return [Product(a, b) for a in r for b in r]
    return [Product(Product(a, b), c) for a in r for b in r for c in r]


GRIDS = {shape: _grid(shape) for shape in GRID_MAX}


def in_grid(shape: str) -> st.SearchStrategy[Time]:
    return times_of(shape, GRID_MAX[shape])


def same_shape(n: int) -> st.SearchStrategy[tuple[Time, ...]]:
    """``n`` times of one (drawn) shape."""
    return shapes().flatmap(lambda s: st.tuples(*[times_of(s)] * n))


def shape_and() -> st.SearchStrategy[tuple[str, Time, list[Time]]]:
    """A shape, a grid time and a grid frontier list of that shape."""
    return shapes().flatmap(
        lambda s: st.tuples(st.just(s), in_grid(s), st.lists(in_grid(s), min_size=0, max_size=4))
    )


def brute_closure(times: Iterable[Time]) -> set[Time]:
    distinct = list(set(times))
    out: set[Time] = set()
    for r in range(1, len(distinct) + 1):
        for subset in itertools.combinations(distinct, r):
            out.add(join_all(subset))
    return out


def worklist_closure(times: Iterable[Time]) -> set[Time]:
    """The naive pairwise closure: join new times with everything until nothing is new."""
    closure = set(times)
    work = list(closure)
    while work:
        t = work.pop()
        for u in list(closure):
            j = join(t, u)
            if j not in closure:
                closure.add(j)
                work.append(j)
    return closure


def width(times: Iterable[Time]) -> int:
    """Size of the largest antichain, by brute force."""
    distinct = list(set(times))
    for r in range(len(distinct), 0, -1):
        for subset in itertools.combinations(distinct, r):
            if not any(
                less_equal(a, b) or less_equal(b, a) for a, b in itertools.combinations(subset, 2)
            ):
                return r
    return 0


# --- lattice laws -------------------------------------------------------------------------


@given(same_shape(3))
def test_join_and_meet_are_commutative_associative_idempotent(abc: tuple[Time, ...]) -> None:
    """join and meet are commutative, associative and idempotent."""
    a, b, c = abc
    for op in (join, meet):
        assert op(a, b) == op(b, a)
        assert op(op(a, b), c) == op(a, op(b, c))
        assert op(a, a) == a


@given(same_shape(2))
def test_absorption(ab: tuple[Time, ...]) -> None:
    """join(a, meet(a, b)) == a and meet(a, join(a, b)) == a."""
    a, b = ab
    assert join(a, meet(a, b)) == a
    assert meet(a, join(a, b)) == a


@given(same_shape(3))
def test_less_equal_is_a_partial_order(abc: tuple[Time, ...]) -> None:
    """less_equal is reflexive, antisymmetric and transitive, and agrees with join/meet."""
    a, b, c = abc
    assert less_equal(a, a)
    if less_equal(a, b) and less_equal(b, a):
        assert a == b
    if less_equal(a, b) and less_equal(b, c):
        assert less_equal(a, c)
    assert less_equal(a, b) == (join(a, b) == b) == (meet(a, b) == a)
    assert less_than(a, b) == (less_equal(a, b) and a != b)


@given(same_shape(2))
def test_less_equal_is_coordinatewise(ab: tuple[Time, ...]) -> None:
    """less_equal compares every (flattened) coordinate; join/meet take max/min of each."""
    a, b = ab
    fa, fb = sort_key(a), sort_key(b)
    assert less_equal(a, b) == all(x <= y for x, y in zip(fa, fb))
    assert sort_key(join(a, b)) == tuple(map(max, fa, fb))
    assert sort_key(meet(a, b)) == tuple(map(min, fa, fb))


@given(shapes().flatmap(lambda s: st.tuples(st.just(s), in_grid(s), in_grid(s))))
def test_join_is_least_upper_bound_and_meet_greatest_lower_bound(
    case: tuple[str, Time, Time],
) -> None:
    """Over a whole grid: c >= a, b iff c >= join(a, b); c <= a, b iff c <= meet(a, b)."""
    shape, a, b = case
    j, m = join(a, b), meet(a, b)
    for c in GRIDS[shape]:
        assert (less_equal(a, c) and less_equal(b, c)) == less_equal(j, c)
        assert (less_equal(c, a) and less_equal(c, b)) == less_equal(c, m)


@given(same_shape(2))
def test_total_order_is_a_linear_extension(ab: tuple[Time, ...]) -> None:
    """The dunder order is total, extends less_equal, and matches sort_key."""
    a, b = ab
    assert [a < b, a == b, a > b].count(True) == 1
    assert (a <= b) == (a < b or a == b)
    assert (a >= b) == (a > b or a == b)
    if less_equal(a, b):
        assert a <= b
    assert (a < b) == (sort_key(a) < sort_key(b))


@given(time_lists_any_shape(min_size=1))
def test_join_all_and_meet_all_fold(times: list[Time]) -> None:
    """join_all / meet_all are the least upper / greatest lower bound of all the times."""
    j, m = join_all(times), meet_all(times)
    assert all(less_equal(t, j) and less_equal(m, t) for t in times)
    assert j in brute_closure(times)
    assert j == join_all(reversed(times))
    assert m == meet_all(reversed(times))


@given(st.sampled_from(["int", "product", "nested"]).flatmap(times_of))
def test_depth_and_minimum_like(t: Time) -> None:
    """minimum_like has the same shape, is <= t and is the bottom of the grid."""
    bottom = minimum_like(t)
    assert depth(bottom) == depth(t)
    assert less_equal(bottom, t)
    assert set(sort_key(bottom)) == {0}
    assert len(sort_key(bottom)) == len(sort_key(t)) == depth(t) + 1


# --- advance_by ---------------------------------------------------------------------------


def _indistinguishable(t: Time, t2: Time, frontier: list[Time], grid: list[Time]) -> bool:
    """Whether every grid time beyond ``frontier`` is >= t exactly when it is >= t2."""
    return all(
        less_equal(t, u) == less_equal(t2, u)
        for u in grid
        if any(less_equal(f, u) for f in frontier)
    )


@settings(max_examples=150)
@given(shape_and())
def test_advance_by_is_correct(case: tuple[str, Time, list[Time]]) -> None:
    """No time beyond the frontier can tell advance_by(t, F) from t."""
    shape, t, frontier = case
    advanced = advance_by(t, frontier)
    assert _indistinguishable(t, advanced, frontier, GRIDS[shape])
    if frontier:
        assert less_equal(t, advanced)
    else:
        assert advanced == t


@settings(max_examples=60)
@given(shape_and())
def test_advance_by_is_optimal(case: tuple[str, Time, list[Time]]) -> None:
    """advance_by(t, F) is >= every time indistinguishable from t beyond F (brute force)."""
    shape, t, frontier = case
    if not frontier:
        return
    advanced = advance_by(t, frontier)
    grid = GRIDS[shape]
    # Coordinates beyond the grid cannot matter: clamping u into the grid keeps every
    # comparison with t, t2 and F, all of which lie inside it.
    for t2 in grid:
        if _indistinguishable(t, t2, frontier, grid):
            assert less_equal(t2, advanced), (t2, advanced)


@settings(max_examples=150)
@given(shape_and())
def test_advancer_agrees_with_advance_by(case: tuple[str, Time, list[Time]]) -> None:
    """The advancer specialised to a frontier's shape gives advance_by's answer."""
    _, t, frontier = case
    assert advancer(frontier)(t) == advance_by(t, frontier)


@given(shape_and())
def test_advance_by_accepts_antichains_and_is_idempotent(
    case: tuple[str, Time, list[Time]],
) -> None:
    """An Antichain frontier gives the same answer as its list; advancing twice changes nothing."""
    _, t, frontier = case
    advanced = advance_by(t, frontier)
    assert advance_by(t, Antichain(frontier)) == advanced
    assert advance_by(advanced, frontier) == advanced
    if any(less_equal(f, t) for f in frontier):
        assert advanced == t


@given(
    shapes().flatmap(
        lambda s: st.tuples(times_of(s), times_of(s), st.lists(times_of(s), max_size=4))
    )
)
def test_advance_by_is_monotone(case: tuple[Time, Time, list[Time]]) -> None:
    """t1 <= t2 implies advance_by(t1, F) <= advance_by(t2, F)."""
    t1, other, frontier = case
    t2 = join(t1, other)
    assert less_equal(advance_by(t1, frontier), advance_by(t2, frontier))


# --- join_closure --------------------------------------------------------------------------


@given(time_lists_any_shape(max_size=7))
def test_join_closure_matches_all_subsets(times: list[Time]) -> None:
    """join_closure is exactly the set of joins of non-empty subsets."""
    assert join_closure(times) == brute_closure(times)


@given(
    st.integers(min_value=0, max_value=3).flatmap(
        lambda fixed: st.lists(
            st.builds(
                lambda a, b: Product(Product(fixed, a), b),
                st.integers(0, 5),
                st.integers(0, 5),
            ),
            max_size=8,
        )
    )
)
def test_join_closure_deep_times_varying_in_two_coordinates(times: list[Time]) -> None:
    """Nested products with a constant outer coordinate use the two-coordinate sweep correctly."""
    assert join_closure(times) == brute_closure(times)


@settings(max_examples=30)
@given(time_lists("product", max_size=40, max_value=12))
def test_join_closure_matches_worklist_on_larger_sets(times: list[Time]) -> None:
    """On larger sets, join_closure equals the naive worklist closure."""
    assert join_closure(times) == worklist_closure(times)


@pytest.mark.parametrize("drop", [0.0, 0.3])
def test_join_closure_lines_and_grid(drop: float) -> None:
    """The 'lines' example has a linear closure and the 'grid' example a quadratic one."""
    rng = random.Random(4)
    n = 150
    old = [Product(0, i) for i in range(n) if rng.random() >= drop]
    new = [Product(1, i) for i in range(n) if rng.random() >= drop]
    lines = join_closure(old + new)
    assert lines == worklist_closure(old + new)
    assert len(lines) <= 2 * n
    expected = set(old) | {Product(1, t.inner) for t in old if t.inner >= new[0].inner} | set(new)
    assert lines == expected
    grid = join_closure([Product(0, i) for i in range(40)] + [Product(i, 0) for i in range(40)])
    assert grid == {Product(i, j) for i in range(40) for j in range(40)}


def test_join_closure_lines_scale_linearly() -> None:
    """Many times on two lines: the closure stays linear in size (and is computed at all)."""
    n = 20000
    times = [Product(0, i) for i in range(n)] + [Product(1, i) for i in range(n)]
    assert len(join_closure(times)) == 2 * n
    deep = [Product(Product(7, k), i) for k in range(3) for i in range(n // 4)]
    assert len(join_closure(deep)) == 3 * (n // 4)


def test_join_closure_small_inputs() -> None:
    """Empty input, a single time and ints are their own closure."""
    assert join_closure([]) == set()
    assert join_closure([Product(1, 2)] * 3) == {Product(1, 2)}
    assert join_closure([3, 1, 3]) == {1, 3}


# --- chain_decomposition -------------------------------------------------------------------


def _assert_valid_chains(times: list[Time], chains: list[list[Time]]) -> None:
    flat = [t for chain in chains for t in chain]
    assert len(flat) == len(set(flat)) == len(set(times))
    assert set(flat) == set(times)
    for chain in chains:
        assert chain
        assert all(less_than(a, b) for a, b in itertools.pairwise(chain))


@given(time_lists("product", max_size=9))
def test_chain_decomposition_is_minimum_for_pairs(times: list[Time]) -> None:
    """For Product(int, int) the chains are ascending, partition the times, and are fewest."""
    chains = chain_decomposition(times)
    _assert_valid_chains(times, chains)
    assert len(chains) == width(times)


@given(time_lists("nested", max_size=9))
def test_chain_decomposition_deep_shapes_are_valid(times: list[Time]) -> None:
    """Nested products still get valid ascending chains partitioning the times."""
    chains = chain_decomposition(times)
    _assert_valid_chains(times, chains)
    assert len(chains) >= width(times)


@given(
    st.lists(
        st.builds(lambda a, b: Product(Product(a, 2), b), st.integers(0, 4), st.integers(0, 4)),
        max_size=9,
    )
)
def test_chain_decomposition_deep_two_coordinates_is_minimum(times: list[Time]) -> None:
    """Nested products varying in two coordinates get the minimum number of chains."""
    chains = chain_decomposition(times)
    _assert_valid_chains(times, chains)
    assert len(chains) == width(times)


@given(time_lists("int"))
def test_chain_decomposition_ints_is_one_chain(times: list[Time]) -> None:
    """Ints form one sorted chain (or none when empty)."""
    chains = chain_decomposition(times)
    assert chains == ([sorted(set(times))] if times else [])


# --- deep shapes: every lattice operation against the coordinates ---------------------------


def _deep_times(levels: int, inner: str) -> st.SearchStrategy[Time]:
    """Times nested ``levels`` deep in the outer coordinate (nested loops), each inner
    coordinate an int, or (``inner="pair"``) a ``Product(int, int)`` at the top level."""
    t: st.SearchStrategy[Time] = st.integers(0, 3)
    for _ in range(levels):
        t = st.builds(Product, t, st.integers(0, 3))
    if inner == "pair":
        t = st.builds(Product, t, st.builds(Product, st.integers(0, 3), st.integers(0, 3)))
    return t


def _coords(t: Time) -> list[int]:
    return [t] if t.__class__ is int else _coords(t[0]) + _coords(t[1])  # type: ignore[index]


def _rebuild(like: Time, coords: list[int]) -> Time:
    """A time shaped like ``like`` with ``coords`` (consumed from the front)."""
    if like.__class__ is int:
        return coords.pop(0)
    outer = _rebuild(like[0], coords)  # type: ignore[index]
    return Product(outer, _rebuild(like[1], coords))  # type: ignore[index]


@st.composite
def _deep_case(draw: st.DrawFn) -> tuple[Time, Time, list[Time]]:
    times = _deep_times(draw(st.integers(1, 5)), draw(st.sampled_from(["int", "pair"])))
    return draw(times), draw(times), draw(st.lists(times, min_size=1, max_size=4))


@settings(max_examples=200)
@given(_deep_case())
def test_deep_shapes_agree_with_coordinates(case: tuple[Time, Time, list[Time]]) -> None:
    """less_equal, join, meet and the advancer on times nested up to five loops deep (the
    spine walks) give the coordinate-wise answers, and advance_by's."""
    a, b, frontier = case
    ca, cb = _coords(a), _coords(b)
    assert less_equal(a, b) == all(x <= y for x, y in zip(ca, cb))
    assert join(a, b) == _rebuild(a, [max(x, y) for x, y in zip(ca, cb)])
    assert meet(a, b) == _rebuild(a, [min(x, y) for x, y in zip(ca, cb)])
    meets = [min(c) for c in zip(*map(_coords, frontier))]
    expected = _rebuild(a, [max(x, m) for x, m in zip(ca, meets)])
    assert advancer(frontier)(a) == advance_by(a, frontier) == expected
