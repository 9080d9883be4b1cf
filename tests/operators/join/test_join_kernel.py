"""The join kernel (:mod:`deltaflow.operators.join.kernel`) against the join's definition.

Random batches of int keys, values of several kinds, int or partially ordered ``Product``
times and diffs of both signs (retractions, updates that cancel) are joined by the kernel,
the other side given as several batches (so as several sorted runs), in budgeted slices;
the output must be, per time, the sums of ``(logic(k, a, b), join(t1, t2), r1 * r2)`` over
every pair, as the row path makes it, with nothing that sums to zero.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from tests.harness import kernel_mode

import deltaflow as df
from deltaflow.framework.antichain import Antichain
from deltaflow.framework.lattice import Product, join as time_join
from deltaflow.framework.time_domain import INT, PAIR, domain_for_depth, domain_of
from deltaflow.framework.trace.batch import Batch
from deltaflow.framework.trace.description import Description
from deltaflow.operators.arrange import RawBatch
from deltaflow.operators.join.kernel import SortedRuns, columns_of, joined, pair_up

int_times = st.integers(0, 6)
product_times = st.builds(Product, st.integers(0, 3), st.integers(0, 3))
diffs = st.sampled_from([-2, -1, 1, 1, 2])
int_keys = st.integers(0, 5)
pair_keys = st.tuples(
    st.integers(-1, 2), st.integers(-(1 << 31), -(1 << 31) + 2) | st.integers(0, 2)
)
values = st.one_of(st.integers(-2, 3), st.sampled_from(["x", "y", (1, 2)]))


def raw(rows: list[tuple[int, Any, Any, int]], unit: bool) -> RawBatch:
    """A forwarded batch of ``(key, val, time, diff)`` rows (every value ``()`` if ``unit``)."""
    keys = [k for k, _, _, _ in rows]
    vals = None if unit else [v for _, v, _, _ in rows]
    return RawBatch(keys, vals, [t for _, _, t, _ in rows], [r for _, _, _, r in rows])


def sealed(rows: list[tuple[int, Any, Any, int]], unit: bool, low: Any) -> Batch:
    """The same rows as a sorted, consolidated (maybe numpy) batch."""
    updates = [(k, () if unit else v, t, r) for k, v, t, r in rows]
    return Batch.from_updates(updates, Description(Antichain([low]), Antichain()))


@st.composite
def sides(draw: st.DrawFn) -> tuple[list[list[tuple[int, Any, Any, int]]], ...]:
    """The arriving batch's rows and the other side's batches' rows, one time kind."""
    time = draw(st.sampled_from([int_times, product_times]))
    key = draw(st.sampled_from([int_keys, pair_keys]))
    row = st.tuples(key, values, time, diffs)
    ints = st.tuples(key, st.integers(0, 9), time, diffs)
    rows = draw(st.sampled_from([row, ints]))
    one_time = draw(st.booleans())
    if one_time:  # the usual message: every update at one time
        t = draw(time)
        rows = rows.map(lambda r: (r[0], r[1], t, r[3]))
    arriving = draw(st.lists(rows, min_size=1, max_size=40))
    other = draw(st.lists(st.lists(rows, min_size=1, max_size=30), min_size=1, max_size=4))
    return arriving, *other


def oracle(
    arriving: list[tuple[int, Any, Any, int]],
    other: list[tuple[int, Any, Any, int]],
    unit: bool,
    swap: bool,
) -> dict[Any, Counter[Any]]:
    """The join by its definition: every pair, its output at the join of the times."""
    out: dict[Any, Counter[Any]] = defaultdict(Counter)
    for k1, v1, t1, r1 in arriving:
        for k2, v2, t2, r2 in other:
            if k1 == k2:
                a, b = ((), ()) if unit else (v1, v2)
                out[time_join(t1, t2)][logic(k1, b, a) if swap else logic(k1, a, b)] += r1 * r2
    return {t: Counter({d: r for d, r in c.items() if r}) for t, c in out.items()}


def logic(k: int, a: Any, b: Any) -> Any:
    return (k, a, b)


@settings(max_examples=300, deadline=None)
@given(
    data=sides(),
    unit=st.booleans(),
    swap=st.booleans(),
    budget=st.integers(1, 50),
    as_batch=st.booleans(),
)
def test_kernel_matches_the_join_of_every_pair(
    data: tuple[list[tuple[int, Any, Any, int]], ...],
    unit: bool,
    swap: bool,
    budget: int,
    as_batch: bool,
) -> None:
    arriving, *others = data
    low = Product(0, 0) if arriving[0][2].__class__ is Product else 0
    batch = sealed(arriving, unit, low) if as_batch else raw(arriving, unit)
    cols = columns_of(batch, domain_of(low))
    if not len(batch):  # everything cancelled as it was sealed: nothing to join
        assert cols is None
        return
    assert cols is not None
    runs = SortedRuns(domain=domain_of(low))
    for rows in others:
        runs.add(raw(rows, unit))
    got: dict[Any, Counter[Any]] = defaultdict(Counter)
    start = 0
    while start < len(cols):
        pairs, end = pair_up(cols, runs.runs(), start, budget)
        assert end > start
        made = sum(len(rows) for rows, _, _ in pairs)
        assert made <= budget or end == start + 1
        for t, out, ds in joined(pairs, cols, runs.runs(), logic, True, swap):
            assert len(set(out)) == len(out) and all(ds)  # summed: one datum once per time
            for d, r in zip(out, ds):
                got[t][d] += r
        start = end
    want = oracle(list(batch.updates()), [u for b in others for u in b], unit, swap)
    # (the sealed batch consolidated the arriving rows; the sums are the same)
    got_clean = {t: Counter({d: r for d, r in c.items() if r}) for t, c in got.items()}
    assert {t: c for t, c in got_clean.items() if c} == {t: c for t, c in want.items() if c}


@given(data=sides())
@settings(max_examples=100, deadline=None)
def test_runs_hold_every_noted_batch_sorted(
    data: tuple[list[tuple[int, Any, Any, int]], ...],
) -> None:
    """Runs merge as they grow (a run per read); together they hold every update noted, in
    the order of their keys' codes."""
    runs = SortedRuns(domain=domain_of(data[0][0][2]))
    noted: Counter[Any] = Counter()
    for rows in data:
        runs.add(raw(rows, False))
        noted.update((k, v, t, r) for k, v, t, r in rows)
        held: Counter[Any] = Counter()
        for run in runs.runs():
            keys = run.keys.tolist()
            assert keys == sorted(keys)
            vals = run.vals if isinstance(run.vals, list) else run.vals.tolist()
            times = run.times.tolist()
            objs = keys if run.objs is None else run.objs
            for k, v, t, r in zip(objs, vals, times, run.diffs.tolist()):
                held[(k, v, Product(*t) if isinstance(t, list) else t, r)] += 1
        assert held == noted
        assert runs.size == noted.total() and runs.usable(runs.size)
        assert len(runs.runs()) <= 1 + len(data).bit_length()


@pytest.mark.parametrize(
    "batch",
    [
        RawBatch(["a", "b"], [1, 2], [0, 0], [1, 1]),  # keys that are not ints
        RawBatch([1, True], [1, 2], [0, 0], [1, 1]),  # a bool among them
        RawBatch([1, 2], [1, 2], [0, 0], [1, 1 << 40]),  # a diff whose products may overflow
        RawBatch([1, 1 << 70], [1, 2], [0, 0], [1, 1]),  # a key beyond int64
        RawBatch([(1, 2), (1, 2.5)], [1, 2], [0, 0], [1, 1]),  # a pair with a float
        RawBatch([(1, 2), (1, 2, 3)], [1, 2], [0, 0], [1, 1]),  # not all pairs
        RawBatch([(1, 2), (1, 1 << 31)], [1, 2], [0, 0], [1, 1]),  # beyond what packs
        RawBatch([(1, 2), 3], [1, 2], [0, 0], [1, 1]),  # pairs and ints mixed
    ],
)
def test_batches_the_kernel_does_not_take(batch: RawBatch) -> None:
    assert columns_of(batch, INT) is None


def test_times_of_nested_loops_keep_the_row_path() -> None:
    """A scope two loops deep keeps its times as objects: its joins never take the kernel,
    whatever the keys; the shapes the domains hold are read through their codecs."""
    nested = [Product(Product(0, 1), 2), Product(Product(0, 1), 3)]
    assert columns_of(RawBatch([1, 2], [1, 2], nested, [1, 1]), domain_for_depth(2)) is None
    for times, domain in (([3, 4], INT), ([Product(0, 1), Product(2, 0)], PAIR)):
        cols = columns_of(RawBatch([1, 2], [1, 2], times, [1, 1]), domain)
        assert cols is not None and domain.from_columns(cols.times) == times


def test_runs_given_up_when_the_history_differs() -> None:
    """A history compacted (smaller than the runs) or fed a batch without int columns is no
    longer what the runs hold: they are given up for good."""
    runs = SortedRuns(domain=INT)
    runs.add(RawBatch([1, 2], [1, 2], [0, 0], [1, 1]))
    assert runs.usable(2) and runs.runs()
    assert not runs.usable(1) and runs.runs() == []
    runs.add(RawBatch([1], [1], [0], [1]))
    assert not runs.usable(1)
    other = SortedRuns(domain=INT)
    other.add(RawBatch(["a"], [1], [0], [1]))
    assert other.usable(1) and other.runs() == [] and not other.valid
    # Runs of int keys and of pair keys (a collection may hold both) are never read together.
    mixed = SortedRuns(domain=INT)
    mixed.add(RawBatch([1, 2, 3, 4], [1, 2, 3, 4], [0] * 4, [1] * 4))
    assert len(mixed.runs()) == 1
    mixed.add(RawBatch([(0, 1)], [1], [0], [1]))
    assert mixed.runs() == [] and not mixed.valid


class Triangles(df.Pipeline):
    def build(self, edges: df.Collection) -> df.Collection:
        two_paths = edges.map(lambda ab: (ab[1], ab[0])).join_map(
            edges, lambda b, a, c: ((a, c), b)
        )
        return two_paths.semijoin(edges)


@settings(max_examples=25, deadline=None)
@given(
    edges=st.lists(
        st.tuples(st.tuples(st.integers(0, 6), st.integers(0, 6)), st.integers(0, 8), diffs),
        max_size=60,
    )
)
def test_join_operator_same_output_either_path(edges: list[tuple[Any, int, int]]) -> None:
    """The whole operator, every time's output: kernels at every size against none."""
    results = []
    for mode in ("always", "never"):
        with kernel_mode(mode):
            out = df.run(Triangles(), edges=edges)
        per_time: dict[int, Counter[Any]] = defaultdict(Counter)
        for d, t, r in out:
            per_time[t][d] += r
        results.append({t: {d: r for d, r in c.items() if r} for t, c in per_time.items()})
    assert results[0] == results[1]
