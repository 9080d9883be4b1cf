"""Batches and merges against naive models: sorting, consolidation, lookups, compaction."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from deltaflow.framework.antichain import Antichain
from deltaflow.framework.lattice import Product, advance_by, less_equal
from deltaflow.framework.trace import Batch, Description, Merger, merge_batches
from deltaflow.framework.trace._order import ukey

# ---------------------------------------------------------------------- models and strategies


def model(updates: list[tuple[Any, Any, Any, int]]) -> list[tuple[Any, Any, Any, int]]:
    """Consolidate naively and sort by the universal order of (key, val, time)."""
    acc: Counter[tuple[Any, Any, Any]] = Counter()
    for k, v, t, d in updates:
        acc[(k, v, t)] += d
    rows = [(k, v, t, d) for (k, v, t), d in acc.items() if d]
    rows.sort(key=lambda r: (ukey(r[0]), ukey(r[1]), ukey(r[2])))
    return rows


def accumulate(rows: list[tuple[Any, Any, Any, int]], u: Any) -> dict[tuple[Any, Any], int]:
    """The collection at time ``u``: per (key, val), the sum of diffs at times <= u."""
    acc: Counter[tuple[Any, Any]] = Counter()
    for k, v, t, d in rows:
        if less_equal(t, u):
            acc[(k, v)] += d
    return {kv: c for kv, c in acc.items() if c}


def desc(lo: int, hi: int) -> Description:
    return Description(Antichain([lo]), Antichain([hi]))


def pdesc(lo: int, hi: int) -> Description:
    return Description(Antichain([Product(lo, 0)]), Antichain([Product(hi, 0)]))


diffs = st.integers(-2, 2)
int_updates = st.lists(
    st.tuples(st.integers(-3, 6), st.integers(0, 3), st.integers(0, 4), diffs), max_size=60
)
mixed_keys = st.one_of(
    st.integers(-2, 3),
    st.sampled_from(["a", "b", "zz"]),
    st.tuples(st.integers(0, 2), st.sampled_from(["x", 1])),
    st.none(),
    st.floats(-2, 2, allow_nan=False).map(lambda f: round(f, 1)),
)
mixed_vals = st.one_of(st.just(()), st.integers(0, 2), st.sampled_from(["p", "q"]))
product_times = st.builds(Product, st.integers(0, 3), st.integers(0, 3))
object_updates = st.lists(st.tuples(mixed_keys, mixed_vals, product_times, diffs), max_size=50)


def key_rows(rows: list[tuple[Any, Any, Any, int]], key: Any) -> list[tuple[Any, Any, int]]:
    return [(v, t, d) for k, v, t, d in rows if k == key and type(k) is type(key)]


# ---------------------------------------------------------------------- construction


@given(int_updates)
def test_from_updates_int_matches_model(updates: list[tuple[int, int, int, int]]) -> None:
    """All-int updates take the numpy path and equal the consolidated, sorted model."""
    b = Batch.from_updates(updates, desc(0, 5))
    b._check()
    assert list(b.updates()) == model(updates)
    assert len(b) == len(model(updates))
    if b:
        assert b.columnar


@given(object_updates)
def test_from_updates_objects_match_model(updates: list[tuple[Any, Any, Any, int]]) -> None:
    """Mixed, mutually incomparable keys with Product times still sort deterministically."""
    b = Batch.from_updates(updates, pdesc(0, 4))
    b._check()
    assert not b.columnar
    assert list(b.updates()) == model(updates)


@given(int_updates, st.booleans())
def test_from_columns_numpy_equals_from_updates(
    updates: list[tuple[int, int, int, int]], unit: bool
) -> None:
    """The columnar constructor (numpy arrays, or vals=None) agrees with from_updates."""
    if unit:
        updates = [(k, (), t, d) for k, _, t, d in updates]
    cols = list(zip(*updates)) if updates else [(), (), (), ()]
    keys = np.array(cols[0], dtype=np.int64)
    vals = None if unit else np.array(cols[1], dtype=np.int64)
    times = np.array(cols[2], dtype=np.int64)
    ds = np.array(cols[3], dtype=np.int64)
    b = Batch.from_columns(keys, vals, times, ds, desc(0, 5))
    b._check()
    assert list(b.updates()) == list(Batch.from_updates(updates, desc(0, 5)).updates())
    assert list(b.updates()) == model(updates)


def test_large_batch_numpy_path_matches_model() -> None:
    """A batch beyond the small-batch threshold sorts and consolidates with numpy correctly."""
    rng = np.random.default_rng(7)
    n = 5000
    keys, vals, times = rng.integers(0, 50, n), rng.integers(0, 4, n), rng.integers(0, 5, n)
    ds = rng.integers(-1, 2, n)
    updates = list(zip(keys.tolist(), vals.tolist(), times.tolist(), ds.tolist()))
    b = Batch.from_columns(keys, vals, times, ds, desc(0, 5))
    b._check()
    assert b.columnar
    assert list(b.updates()) == model(updates)


def test_wide_ranges_use_lexsort_and_stay_correct() -> None:
    """Keys and values too wide to pack into one int64 still sort (the lexsort path)."""
    big = 2**62
    updates = [(big * s, -big * s, t, 1) for s in (1, -1, 0) for t in (0, 1)] * 20
    updates += [(0, 0, 1, -1)] * 20
    b = Batch.from_updates(updates, desc(0, 5))
    b._check()
    assert b.columnar
    assert list(b.updates()) == model(updates)


def test_huge_ints_and_bools_fall_back_to_objects() -> None:
    """Ints beyond 64 bits and bools are stored as objects, not numpy columns."""
    huge = Batch.from_updates([(2**70, 0, 0, 1), (1, 0, 0, 1)], desc(0, 1))
    huge._check()
    assert not huge.columnar and huge.keys() == [1, 2**70]
    flags = Batch.from_updates([(True, 0, 0, 1), (2, 0, 0, 1)], desc(0, 1))
    assert not flags.columnar and flags.keys() == [True, 2]


def test_unit_vals_are_stored_as_none() -> None:
    """arrange_by_self batches (every val ()) keep no value column."""
    b = Batch.from_updates([(3, (), 0, 1), (1, (), 0, 2), (3, (), 0, 1)], desc(0, 1))
    assert b.columnar and b._vals is None
    assert list(b.updates()) == [(1, (), 0, 2), (3, (), 0, 2)]
    assert b.lookup(3) == [((), 0, 2)]


def test_plain_python_ints_come_out() -> None:
    """Lookups and iteration of a numpy batch yield Python ints, not numpy scalars."""
    rng = np.random.default_rng(1)
    n = 200
    b = Batch.from_columns(
        rng.integers(0, 9, n),
        rng.integers(0, 9, n),
        rng.integers(0, 3, n),
        np.ones(n, int),
        desc(0, 3),
    )
    for row in b.updates():
        assert all(type(x) is int for x in row)
    key, rows = next(b.iter_keys())
    assert type(key) is int and all(type(x) is int for r in rows for x in r)
    assert all(type(x) is int for r in b.lookup(key) for x in r)
    distinct = b.keys()
    assert all(type(k) is int for k in distinct)


def test_bad_input_is_rejected() -> None:
    """Malformed updates, mismatched columns and non-int diffs raise clear errors."""
    with pytest.raises(ValueError, match="tuples"):
        Batch.from_updates([(1, 2, 3)], desc(0, 5))  # type: ignore[list-item]
    with pytest.raises(ValueError, match="same length"):
        Batch.from_columns([1, 2], [1, 2], [0], [1, 1], desc(0, 5))
    with pytest.raises(TypeError, match="diffs"):
        Batch.from_updates([(1, 2, 0, 1.5)], desc(0, 5))  # type: ignore[list-item]
    with pytest.raises(TypeError, match="diffs"):
        Batch.from_updates([("a", 2, 0, "x")], desc(0, 5))  # type: ignore[list-item]


# ---------------------------------------------------------------------- reading


@settings(max_examples=60)
@given(st.one_of(int_updates, object_updates), st.lists(mixed_keys, max_size=5))
def test_lookup_iter_keys_and_updates_agree(
    updates: list[tuple[Any, Any, Any, int]], probes: list[Any]
) -> None:
    """lookup, iter_keys, keys and updates all describe the same consolidated rows."""
    d = pdesc(0, 4) if updates and isinstance(updates[0][2], Product) else desc(0, 5)
    b = Batch.from_updates(updates, d)
    rows = model(updates)
    grouped = list(b.iter_keys())
    assert [k for k, _ in grouped] == b.keys()
    assert [(k, v, t, dd) for k, rs in grouped for v, t, dd in rs] == rows
    for key, rs in grouped:
        assert b.lookup(key) == rs
    distinct = b.keys()
    for probe in probes:
        if not any(probe == k for k in distinct):
            assert b.lookup(probe) == []


def test_lookup_of_other_types_in_int_batch() -> None:
    """Probing an int batch with floats, strings or huge ints finds exactly the equal keys."""
    b = Batch.from_updates([(k, 0, 0, 1) for k in range(0, 100, 2)], desc(0, 1))
    assert b.lookup(4.0) == [(0, 0, 1)]
    assert b.lookup(4.5) == [] and b.lookup("4") == [] and b.lookup(2**80) == []
    assert b.lookup(float("inf")) == [] and b.lookup(float("nan")) == []
    assert b.lookup(-(2**80)) == []


def test_nbytes_is_a_plausible_estimate() -> None:
    """numpy batches report their column bytes; list batches a positive estimate."""
    n = 1000
    b = Batch.from_columns(
        np.arange(n), np.arange(n), np.zeros(n, int), np.ones(n, int), desc(0, 1)
    )
    assert 32 * n <= b.nbytes <= 32 * n + 1000
    o = Batch.from_updates([(str(i), i, 0, 1) for i in range(n)], desc(0, 1))
    assert o.nbytes > 32 * n


# ---------------------------------------------------------------------- merging


class TinyMerger(Merger):
    """A merger whose steps may be as small as one update (to exercise resumption)."""

    MIN_STEP = 1
    MIN_OBJECT_STEP = 1


@given(int_updates, int_updates, st.integers(0, 12), st.booleans())
def test_merge_preserves_accumulations_beyond_frontier(
    u1: list[tuple[int, int, int, int]],
    u2: list[tuple[int, int, int, int]],
    f: int,
    unit: bool,
) -> None:
    """THE compaction property: accumulations at every time beyond `since` are unchanged."""
    u2 = [(k, v, t + 5, d) for k, v, t, d in u2]
    if unit:
        u1 = [(k, (), t, d) for k, _, t, d in u1]
        u2 = [(k, (), t, d) for k, _, t, d in u2]
    b1, b2 = Batch.from_updates(u1, desc(0, 5)), Batch.from_updates(u2, desc(5, 10))
    since = Antichain([f])
    merged = merge_batches(b1, b2, since)
    merged._check()
    assert merged.description == Description(Antichain([0]), Antichain([10]), since)
    rows = list(merged.updates())
    assert rows == model([(k, v, advance_by(t, since), d) for k, v, t, d in u1 + u2])
    for u in range(f, 14):
        assert accumulate(rows, u) == accumulate(u1 + u2, u)


product_frontiers = st.lists(product_times, min_size=1, max_size=3).map(Antichain)


@settings(max_examples=60, deadline=None)
@given(object_updates, object_updates, product_frontiers)
def test_merge_with_product_times_preserves_accumulations(
    u1: list[tuple[Any, Any, Product, int]],
    u2: list[tuple[Any, Any, Product, int]],
    since: Antichain,
) -> None:
    """Compaction against a partially ordered frontier keeps every accumulation beyond it."""
    u2 = [(k, v, Product(t.outer + 4, t.inner), d) for k, v, t, d in u2]
    merged = merge_batches(
        Batch.from_updates(u1, pdesc(0, 4)), Batch.from_updates(u2, pdesc(4, 8)), since
    )
    merged._check()
    rows = list(merged.updates())
    grid = [Product(a, b) for a in range(10) for b in range(6)]
    for u in grid:
        if since.less_equal(u):
            assert accumulate(rows, u) == accumulate(u1 + u2, u)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 30), st.integers(0, 2), st.integers(0, 4), diffs), max_size=200
    ),
    st.lists(
        st.tuples(st.integers(0, 30), st.integers(0, 2), st.integers(5, 9), diffs), max_size=200
    ),
    st.integers(1, 7),
    st.booleans(),
)
def test_resumable_merge_equals_one_shot(
    u1: list[tuple[Any, Any, int, int]],
    u2: list[tuple[Any, Any, int, int]],
    fuel: int,
    as_objects: bool,
) -> None:
    """Merging in many small fueled steps gives the same batch as merging at once."""
    if as_objects:
        u1 = [(str(k), v, t, d) for k, v, t, d in u1]
        u2 = [(str(k), v, t, d) for k, v, t, d in u2]
    b1, b2 = Batch.from_updates(u1 * 3, desc(0, 5)), Batch.from_updates(u2 * 3, desc(5, 10))
    since = Antichain([6])
    m = TinyMerger(b1, b2, since)
    steps = 0
    while not m.complete:
        before = m.remaining
        left = m.work(fuel)
        assert m.remaining < before  # every call makes progress
        assert left <= fuel
        steps += 1
    result = m.finish()
    result._check()
    assert list(result.updates()) == list(merge_batches(b1, b2, since).updates())
    if len(b1) + len(b2) > 4 * fuel + 200:
        assert steps > 1


def test_large_columnar_merge_in_steps() -> None:
    """A large numpy merge spread over fueled calls equals a naive merge."""
    rng = np.random.default_rng(3)
    n = 20_000
    cols1 = rng.integers(0, 1000, n), rng.integers(0, 5, n), rng.integers(0, 5, n)
    cols2 = rng.integers(0, 1000, n), rng.integers(0, 5, n), rng.integers(5, 10, n)
    b1 = Batch.from_columns(*cols1, rng.integers(-1, 2, n), desc(0, 5))
    b2 = Batch.from_columns(*cols2, rng.integers(-1, 2, n), desc(5, 10))
    m = Merger(b1, b2, Antichain([7]))
    calls = 0
    while not m.complete:
        m.work(3000)
        calls += 1
    assert calls > 3
    result = m.finish()
    result._check()
    assert result.columnar
    expected = model([(k, v, max(t, 7), d) for k, v, t, d in [*b1.updates(), *b2.updates()]])
    assert list(result.updates()) == expected


def test_merging_int_and_object_batches() -> None:
    """A numpy batch merges with a list batch (and a unit batch with a valued one)."""
    b1 = Batch.from_updates([(1, 0, 0, 1), (2, 0, 0, 1)], desc(0, 1))
    b2 = Batch.from_updates([("a", 0, 1, 1), (1, 0, 1, -1)], desc(1, 2))
    merged = merge_batches(b1, b2, Antichain([1]))
    merged._check()
    assert list(merged.updates()) == [(2, 0, 1, 1), ("a", 0, 1, 1)]
    u = Batch.from_updates([(1, (), 2, 1)], desc(2, 3))
    mixed = merge_batches(merged, u, Antichain([0]))
    mixed._check()
    assert list(mixed.updates()) == [(1, (), 2, 1), (2, 0, 1, 1), ("a", 0, 1, 1)]


def test_merge_requires_chaining_batches() -> None:
    """Batches whose frontiers do not meet cannot be merged."""
    with pytest.raises(ValueError, match="chain"):
        Merger(Batch.empty(desc(0, 2)), Batch.empty(desc(3, 4)), Antichain([0]))
