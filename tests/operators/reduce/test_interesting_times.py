"""Tests for the reduction's interesting times and accumulation against brute force and a toy
reduce."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from tests.harness import accumulate as brute_accumulate

from deltaflow.framework.antichain import Antichain
from deltaflow.framework.lattice import (
    Product,
    Time,
    advance_by,
    chain_decomposition,
    join,
    join_all,
    join_closure,
    less_equal,
    less_than,
)
from deltaflow.operators.reduce import (
    interesting_times as it_mod,
    points as points_mod,
)
from deltaflow.operators.reduce.accumulation import accumulate
from deltaflow.operators.reduce.interesting_times import InterestingTimes, interesting_times

# --- helpers ----------------------------------------------------------------------------------


# The search's paths, each forced on by its tunables: the default, the small-pairs scan, the
# pair sweep, the chain fold, and the chain crossing alone.
SEARCH = InterestingTimes()
MODES = [
    pytest.param(SEARCH, id="default"),
    pytest.param(InterestingTimes(line_fast_path=False, pairs_small=1 << 30), id="small-pairs"),
    pytest.param(InterestingTimes(line_fast_path=False, pairs_small=0), id="sweep"),
    pytest.param(
        InterestingTimes(pair_sweep=False, line_fast_path=False, pairs_small=0), id="fold"
    ),
    pytest.param(
        InterestingTimes(
            pairwise_below=0,
            short_chain=0,
            pair_sweep=False,
            line_fast_path=False,
            pairs_small=0,
        ),
        id="chains",
    ),
]


def brute_interesting(seeds: Sequence[Time], stored: Sequence[Time]) -> set[Time]:
    """Joins of every subset of seeds + stored that contains a seed, by enumeration."""
    universe = sorted(set(seeds) | set(stored))
    seed_set = set(seeds)
    out: set[Time] = set()
    for size in range(1, len(universe) + 1):
        for subset in itertools.combinations(universe, size):
            if any(t in seed_set for t in subset):
                out.add(join_all(subset))
    return out


def oracle_interesting(seeds: Sequence[Time], stored: Sequence[Time]) -> set[Time]:
    """Closure times above some seed, via the framework's join_closure (for larger inputs)."""
    seed_set = set(seeds)
    return {
        x
        for x in join_closure(list(seed_set) + list(stored))
        if any(less_equal(s, x) for s in seed_set)
    }


def check_split(
    ready: list[Time], deferred: list[Time], expected: set[Time], upper: Antichain
) -> None:
    """Assert the (ready, deferred) answer is the expected set, split and ordered correctly."""
    assert set(ready) | set(deferred) == expected
    assert len(ready) + len(deferred) == len(expected)
    assert all(not upper.less_equal(t) for t in ready)
    assert all(upper.less_equal(t) for t in deferred)
    assert ready == sorted(ready)
    assert deferred == sorted(deferred)
    for i, a in enumerate(ready):
        assert not any(less_than(b, a) for b in ready[i + 1 :])


ints = st.integers(0, 8)
pairs = st.builds(Product, st.integers(0, 4), st.integers(0, 4))
nested = st.builds(
    Product, st.builds(Product, st.integers(0, 2), st.integers(0, 2)), st.integers(0, 2)
)
SHAPES = [
    pytest.param(ints, id="int"),
    pytest.param(pairs, id="pair"),
    pytest.param(nested, id="nested"),
]


# --- interesting_times ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("times", SHAPES)
@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_matches_brute_force(mode: InterestingTimes, times: Any, data: st.DataObject) -> None:
    """Ready + deferred are exactly the joins of subsets containing a seed, split at upper."""
    seeds = data.draw(st.lists(times, max_size=5))
    stored = data.draw(st.lists(times, max_size=5))
    upper = Antichain(data.draw(st.lists(times, max_size=3)))
    ready, deferred = mode.search(seeds, stored, upper)
    check_split(ready, deferred, brute_interesting(seeds, stored), upper)


@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32), lines=st.integers(1, 4), depth=st.sampled_from([1, 2]))
def test_matches_oracle_on_lines(mode: InterestingTimes, seed: int, lines: int, depth: int) -> None:
    """On larger inputs lying on a few lines with gaps, the answer matches join_closure."""
    rng = random.Random(seed)

    def point() -> Time:
        line = rng.randrange(lines)
        t: Time = Product(line, rng.randrange(30))
        if depth == 2:
            t = Product(t, rng.randrange(3))
        return t

    seeds = [point() for _ in range(rng.randrange(1, 25))]
    stored = [point() for _ in range(rng.randrange(25))]
    upper = Antichain([point() for _ in range(rng.randrange(3))])
    ready, deferred = mode.search(seeds, stored, upper)
    check_split(ready, deferred, oracle_interesting(seeds, stored), upper)


@pytest.mark.parametrize("mode", MODES)
def test_grid_is_quadratic(mode: InterestingTimes) -> None:
    """Seeds on one axis and stored times on the other give every point of the grid."""
    n = 12
    seeds = [Product(i, 0) for i in range(n)]
    stored = [Product(0, j) for j in range(n)]
    ready, deferred = mode.search(seeds, stored, Antichain())
    assert deferred == []
    assert ready == sorted(Product(i, j) for i in range(n) for j in range(n))


@pytest.mark.parametrize("mode", MODES)
def test_lines_is_linear(mode: InterestingTimes) -> None:
    """Stored times on line 0 and seeds on line 1 give just the points of line 1."""
    n = 40
    seeds = [Product(1, j) for j in range(n)]
    stored = [Product(0, j) for j in range(n)]
    ready, deferred = mode.search(seeds, stored, Antichain([Product(1, 25)]))
    assert ready == [Product(1, j) for j in range(25)]
    assert deferred == [Product(1, j) for j in range(25, n)]


def test_lines_with_gaps() -> None:
    """Line 1 seeds with gaps pick up the line-0 stored times above the first seed."""
    seeds = [Product(1, j) for j in (3, 10, 11)]
    stored = [Product(0, j) for j in (0, 5, 7, 12)]
    ready, deferred = interesting_times(seeds, stored, Antichain())
    assert ready == [Product(1, j) for j in (3, 5, 7, 10, 11, 12)]
    assert deferred == []


def test_stored_below_seeds_add_nothing() -> None:
    """Stored times below the seeds' meet collapse onto it and contribute no new times."""
    seeds = [Product(2, 5), Product(3, 4)]
    stored = [Product(0, 0), Product(1, 3), Product(2, 4)]
    ready, deferred = interesting_times(seeds, stored, Antichain())
    assert ready == [Product(2, 5), Product(3, 4), Product(3, 5)]
    assert deferred == []


def test_int_times_fast_path() -> None:
    """For ints: the seeds plus the stored times above the smallest seed, cut at upper."""
    ready, deferred = interesting_times([5, 3, 5], [1, 3, 4, 9, 12], Antichain([9]))
    assert (ready, deferred) == ([3, 4, 5], [9, 12])
    assert interesting_times([], [1, 2], Antichain([3])) == ([], [])
    assert interesting_times([2], [7], Antichain()) == ([2, 7], [])


def test_deferred_join_of_ready_seeds_survives() -> None:
    """The join of two ready seeds is deferred when beyond upper, and ready once passed."""
    a, b = Product(0, 1), Product(1, 0)
    ready, deferred = interesting_times([a, b], [], Antichain([Product(1, 1)]))
    assert ready == [a, b]
    assert deferred == [Product(1, 1)]
    # Next round: a and b are stored; only the carried pending time seeds the key.
    ready2, deferred2 = interesting_times(deferred, [a, b], Antichain([Product(5, 5)]))
    assert (ready2, deferred2) == ([Product(1, 1)], [])
    # Without the pending time nothing would ever bring (1, 1) back.
    assert interesting_times([], [a, b], Antichain()) == ([], [])


def test_all_beyond_upper_are_deferred() -> None:
    """Seeds beyond upper and all their joins are returned as deferred, none dropped."""
    seeds = [Product(3, 0), Product(0, 3), Product(2, 2)]
    ready, deferred = interesting_times(seeds, [Product(1, 4)], Antichain([Product(0, 0)]))
    assert ready == []
    check_split(
        ready, deferred, brute_interesting(seeds, [Product(1, 4)]), Antichain([Product(0, 0)])
    )


@settings(max_examples=60, deadline=None)
@given(points=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=30))
def test_private_chains_are_minimal_for_pairs(points: list[tuple[int, int]]) -> None:
    """The tuple chain decomposition partitions into ascending chains, as few as the framework's."""
    chains = points_mod.chains(sorted(set(points)))
    assert sorted(p for c in chains for p in c) == sorted(set(points))
    for c in chains:
        assert all(a[0] <= b[0] and a[1] <= b[1] and a != b for a, b in itertools.pairwise(c))
    assert len(chains) == len(chain_decomposition(Product(x, y) for x, y in set(points)))


class Recorder(list):  # type: ignore[type-arg]
    """A list with a set's ``add``, to see every value the chain crossing emits."""

    add = list.append
    update = list.extend


@settings(max_examples=150, deadline=None)
@given(
    a=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 2)), min_size=1),
    b=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 2)), min_size=1),
    dims=st.sampled_from([2, 3]),
)
def test_cross_emits_each_join_exactly_once(
    a: list[tuple[int, ...]], b: list[tuple[int, ...]], dims: int
) -> None:
    """Crossing two chains emits every pairwise join once and nothing twice (the skip lemma)."""
    rows = max(points_mod.chains(sorted({p[:dims] for p in a})), key=len)
    cols = max(points_mod.chains(sorted({p[:dims] for p in b})), key=len)
    out = Recorder()
    it_mod._cross(rows, cols, out)  # type: ignore[arg-type]
    assert len(out) == len(set(out))
    assert set(out) == {points_mod.join(r, c) for r in rows for c in cols}


# --- times on one line -------------------------------------------------------------------------

line_outers = st.one_of(st.integers(0, 3), st.builds(Product, st.integers(0, 2), st.integers(0, 2)))


def line_case(data: st.DataObject) -> tuple[Time, list[Time], list[Time], Antichain]:
    """Seeds on one line ``x``, stored times mostly at or below it, and a random frontier."""
    x = data.draw(line_outers, label="x")
    below = st.one_of(st.just(x), st.builds(Product, st.integers(0, 2), st.integers(0, 2)))
    if x.__class__ is int:
        below = st.integers(0, x) if data.draw(st.booleans()) else st.integers(0, 4)
    ys = st.integers(0, 6)
    seeds = data.draw(st.lists(st.builds(Product, st.just(x), ys), min_size=1, max_size=5))
    stored = data.draw(st.lists(st.builds(Product, below, ys), max_size=6))
    upper = Antichain(data.draw(st.lists(st.builds(Product, below, ys), max_size=3)))
    return x, seeds, stored, upper


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_line_fast_path_matches_general(data: st.DataObject) -> None:
    """Seeds on one line (int or nested outer coordinate): the shortcut gives exactly the
    general answer and the brute-force one, whether or not the stored times fit the line."""
    _x, seeds, stored, upper = line_case(data)
    fast = InterestingTimes(pairs_small=0).search(seeds, stored, upper)
    general = InterestingTimes(line_fast_path=False, pairs_small=0).search(seeds, stored, upper)
    assert fast == general
    check_split(*fast, brute_interesting(seeds, stored), upper)


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_accumulate_on_one_line_matches_general(data: st.DataObject) -> None:
    """Accumulating at times of one line equals the general path and scanning the history."""
    _x, seeds, stored, _ = line_case(data)
    diffs = [1, -1, 2, 1, -2, 1, 1, -1]
    history = list(zip("abcabcab", stored + seeds, diffs))
    fast = accumulate(history, seeds)
    general = accumulate(history, seeds, lines=False)
    assert fast == general == [brute_accumulate(history, t) for t in seeds]


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_line_bound_is_where_the_line_passes_the_frontier(data: st.DataObject) -> None:
    """``Product(x, y)`` is beyond the frontier exactly when ``y >= line_bound(upper, x)``."""
    x, _seeds, _stored, upper = line_case(data)
    bound = it_mod.line_bound(upper, x, 1 if isinstance(x, int) else 2)
    for y in range(9):
        assert upper.less_equal(Product(x, y)) == (bound is not None and y >= bound)


@settings(max_examples=100, deadline=None)
@given(
    upper=st.lists(st.builds(Product, st.integers(0, 6), st.integers(0, 6)), max_size=4),
    y=st.integers(0, 7),
)
def test_row_bound_is_where_the_row_passes_the_frontier(upper: list[Time], y: int) -> None:
    """``Product(x, y)`` is beyond the frontier exactly when ``x >= row_bound(upper, y)``."""
    frontier = Antichain(upper)
    bound = it_mod.row_bound(frontier, y)
    for x in range(9):
        assert frontier.less_equal(Product(x, y)) == (bound is not None and x >= bound)


@settings(max_examples=100, deadline=None)
@given(
    seeds=st.lists(ints, min_size=1, max_size=6),
    stored=st.lists(ints, max_size=6),
    bound=st.one_of(st.none(), ints),
)
def test_interesting_on_line_is_the_int_answer(
    seeds: list[int], stored: list[int], bound: int | None
) -> None:
    """Positions on a chain: the joins of subsets with a seed, split at ``bound``."""
    ready, deferred = it_mod.interesting_on_line(seeds, stored, bound)
    upper = Antichain([] if bound is None else [bound])
    check_split(ready, deferred, brute_interesting(seeds, stored), upper)


# --- accumulate -------------------------------------------------------------------------------


@pytest.mark.parametrize("small", [0, 1 << 30], ids=["chains", "scan"])
@pytest.mark.parametrize("times", SHAPES)
@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_accumulate_matches_brute_force(small: int, times: Any, data: st.DataObject) -> None:
    """accumulate() equals scanning the whole history at every queried time."""
    history = data.draw(
        st.lists(st.tuples(st.sampled_from("abc"), times, st.integers(-2, 2)), max_size=12)
    )
    queries = data.draw(st.lists(times, max_size=10))
    got = accumulate(history, queries, small=small)
    assert got == [brute_accumulate(history, t) for t in queries]
    assert all(0 not in d.values() for d in got)
    assert len({id(d) for d in got}) == len(got)


def test_accumulate_on_many_chains() -> None:
    """A larger random history over a wide set of pair times matches brute force."""
    rng = random.Random(7)
    times = [Product(rng.randrange(20), rng.randrange(20)) for _ in range(80)]
    history = [(rng.randrange(6), rng.choice(times), rng.choice((-1, 1, 2))) for _ in range(200)]
    queries = [Product(rng.randrange(22), rng.randrange(22)) for _ in range(100)]
    assert accumulate(history, queries) == [brute_accumulate(history, t) for t in queries]


def test_accumulate_edge_cases() -> None:
    """No times gives no results; cancelled and zero updates leave empty multisets."""
    assert accumulate([("x", 1, 1)], []) == []
    assert accumulate([], [Product(0, 0)]) == [{}]
    history = [("x", Product(0, 0), 1), ("x", Product(1, 1), -1), ("y", Product(0, 0), 0)]
    assert accumulate(history, [Product(1, 1), Product(1, 0)]) == [{}, {"x": 1}]


# --- a toy reduce: interesting_times + accumulate over rounds -------------------------------

Logic = Callable[[dict[Any, int]], dict[Any, int]]


def pair_logic(inp: dict[Any, int]) -> dict[Any, int]:
    """1 when at least two distinct values are present: zero at a and b, not at join(a, b)."""
    return {"pair": 1} if sum(1 for c in inp.values() if c > 0) >= 2 else {}


def min_logic(inp: dict[Any, int]) -> dict[Any, int]:
    """The smallest value with a positive count."""
    present = [v for v, c in inp.items() if c > 0]
    return {min(present): 1} if present else {}


def count_logic(inp: dict[Any, int]) -> dict[Any, int]:
    """The total count."""
    total = sum(inp.values())
    return {total: 1} if total else {}


def toy_reduce(
    rounds: Sequence[tuple[list[tuple[Any, Time, int]], Antichain]],
    logic: Logic,
    carry: bool,
    search: InterestingTimes = SEARCH,
) -> list[tuple[Any, Time, int]]:
    """Drive one key through rounds as the reduce operator would, compacting to each upper;
    ``search`` finds the interesting times, and its ``line_fast_path`` also picks the
    accumulation's."""
    stored_in: list[tuple[Any, Time, int]] = []
    stored_out: list[tuple[Any, Time, int]] = []
    produced: list[tuple[Any, Time, int]] = []
    pending: list[Time] = []
    for updates, upper in rounds:
        seeds = [t for _, t, _ in updates] + pending
        ready, deferred = search.search(seeds, [t for _, t, _ in stored_in], upper)
        stored_in = stored_in + updates
        lines = search.line_fast_path
        for t in ready:
            (inp,) = accumulate(stored_in, [t], lines=lines)
            (out,) = accumulate(stored_out, [t], lines=lines)
            want = logic(inp)
            for v in sorted(set(want) | set(out), key=repr):
                d = want.get(v, 0) - out.get(v, 0)
                if d:
                    stored_out.append((v, t, d))
                    produced.append((v, t, d))
        pending = deferred if carry else []
        if upper:
            stored_in = [(v, advance_by(t, upper), d) for v, t, d in stored_in]
            stored_out = [(v, advance_by(t, upper), d) for v, t, d in stored_out]
    return produced


def assert_reduce_correct(
    rounds: Sequence[tuple[list[tuple[Any, Time, int]], Antichain]],
    produced: list[tuple[Any, Time, int]],
    logic: Logic,
    size: int,
) -> None:
    """The produced output accumulates to logic(input) at every time of a grid."""
    inputs = [u for updates, _ in rounds for u in updates]
    grid = [Product(i, j) for i in range(size) for j in range(size)]
    for t, got in zip(grid, accumulate(produced, grid)):
        assert got == logic(brute_accumulate(inputs, t)), t


def test_trap_pending_join_is_kept() -> None:
    """f(a) = f(b) = 0 but f(join(a, b)) != 0: the deferred join must be carried and fixed."""
    a, b = Product(0, 1), Product(1, 0)
    rounds = [([("x", a, 1), ("y", b, 1)], Antichain([Product(1, 1)])), ([], Antichain())]
    produced = toy_reduce(rounds, pair_logic, carry=True)
    assert produced == [("pair", Product(1, 1), 1)]
    assert_reduce_correct(rounds, produced, pair_logic, 3)
    # Dropping the pending time loses the correction for ever.
    assert toy_reduce(rounds, pair_logic, carry=False) == []


@pytest.mark.parametrize("mode", [MODES[0], MODES[4]])
@pytest.mark.parametrize("logic", [pair_logic, min_logic, count_logic])
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_toy_reduce_is_correct_over_rounds(mode: InterestingTimes, logic: Logic, seed: int) -> None:
    """Rounds of random updates with advancing frontiers and compaction give correct output."""
    check_toy_reduce(logic, seed, mode)


def check_toy_reduce(logic: Logic, seed: int, search: InterestingTimes = SEARCH) -> None:
    """Build random rounds from ``seed``, run the toy reduce, and check it at every time."""
    rng = random.Random(seed)
    size = 6
    frontier = Antichain([Product(0, 0)])
    rounds: list[tuple[list[tuple[Any, Time, int]], Antichain]] = []
    for _ in range(rng.randrange(1, 5)):
        updates = []
        for _ in range(rng.randrange(4)):
            base = rng.choice(frontier.elements)
            t = join(base, Product(rng.randrange(size - 1), rng.randrange(size - 1)))
            updates.append((rng.randrange(3), t, rng.choice((-1, 1, 1))))
        nxt = [
            join(rng.choice(frontier.elements), Product(rng.randrange(size), rng.randrange(size)))
            for _ in range(rng.randrange(1, 3))
        ]
        frontier = Antichain(nxt)
        rounds.append((updates, frontier))
    rounds.append(([], Antichain()))
    produced = toy_reduce(rounds, logic, carry=True, search=search)
    assert_reduce_correct(rounds, produced, logic, size + 2)


@given(data=st.data())
def test_points_codec_of_a_scope_flattens_as_sort_key(data: st.DataObject) -> None:
    """A scope's point codec, read level by level from its depth, flattens a time as
    ``sort_key`` does and rebuilds it exactly."""
    from deltaflow.framework.lattice import sort_key
    from deltaflow.framework.time_domain import domain_for_depth
    from deltaflow.operators.reduce.points import codec

    depth = data.draw(st.integers(1, 4))
    t: Time = data.draw(st.integers(0, 9))
    for _ in range(depth):
        t = Product(t, data.draw(st.integers(0, 9)))
    encode, decode = codec(t, domain_for_depth(depth))
    assert encode(t) == sort_key(t)
    assert decode(encode(t)) == t
