"""Batches and merges against naive models: sorting, consolidation, lookups, compaction."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from tests.harness import accumulate

from deltaflow.framework.antichain import Antichain
from deltaflow.framework.lattice import Product, advance_by
from deltaflow.framework.trace import (
    Batch,
    Description,
    Merger,
    merge_batches,
)
from deltaflow.framework.trace.order import ukey
from deltaflow.framework.trace.probes import Probes

# ---------------------------------------------------------------------- models and strategies


def model(updates: list[tuple[Any, Any, Any, int]]) -> list[tuple[Any, Any, Any, int]]:
    """Consolidate naively and sort by the universal order of (key, val, time)."""
    acc: Counter[tuple[Any, Any, Any]] = Counter()
    for k, v, t, d in updates:
        acc[(k, v, t)] += d
    rows = [(k, v, t, d) for (k, v, t), d in acc.items() if d]
    rows.sort(key=lambda r: (ukey(r[0]), ukey(r[1]), ukey(r[2])))
    return rows


def keyed(rows: list[tuple[Any, Any, Any, int]]) -> list[tuple[tuple[Any, Any], Any, int]]:
    """``(key, val, time, diff)`` rows as ``((key, val), time, diff)`` updates."""
    return [((k, v), t, d) for k, v, t, d in rows]


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


@contextmanager
def tiny(n: int) -> Iterator[None]:
    """Temporarily set how many updates from_columns keeps as a list batch (0: use numpy
    whenever the data allows, as for large batches)."""
    saved = Batch.TINY
    Batch.TINY = n
    try:
        yield
    finally:
        Batch.TINY = saved


class NumpyMerger(Merger):
    """A merger that never merges in plain Python: results stay encoded when they can."""

    SMALL_MERGE = 0


# ---------------------------------------------------------------------- construction


@given(int_updates, st.sampled_from([0, 32]))
def test_from_updates_int_matches_model(
    updates: list[tuple[int, int, int, int]], threshold: int
) -> None:
    """All-int updates beyond the list threshold take the numpy path; both layouts equal the
    consolidated, sorted model."""
    with tiny(threshold):
        b = Batch.from_updates(updates, desc(0, 5))
    b._check()
    assert list(b.updates()) == model(updates)
    assert len(b) == len(model(updates))
    if b:
        assert b.columnar == (len(updates) > threshold)
        assert b.encoded == b.columnar


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


@pytest.mark.parametrize("threshold", [0, 32])
def test_unit_vals_are_stored_as_none(threshold: int) -> None:
    """arrange_by_self batches (every val ()) keep no value column, in either layout."""
    with tiny(threshold):
        b = Batch.from_updates([(3, (), 0, 1), (1, (), 0, 2), (3, (), 0, 1)], desc(0, 1))
    assert b.columnar == (threshold == 0) and b._vals is None
    assert list(b.updates()) == [(1, (), 0, 2), (3, (), 0, 2)]
    assert b.lookup(3) == [((), 0, 2)]
    b._check()


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
    """A merger whose steps may be as small as one update (to exercise resumption), never
    merging at once in plain Python."""

    MIN_STEP = 1
    MIN_OBJECT_STEP = 1
    SMALL_MERGE = 0


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
        assert accumulate(keyed(rows), u) == accumulate(keyed(u1 + u2), u)


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
            assert accumulate(keyed(rows), u) == accumulate(keyed(u1 + u2), u)


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
    if len(b1) and len(b2) and len(b1) + len(b2) > 4 * fuel + 200:
        assert steps > 1  # (with one side empty, unchanged times complete the merge at once)


def merged_in_steps(b1: Batch, b2: Batch, since: Antichain, fuel: int) -> Batch:
    """``b1`` and ``b2`` merged (compacted to ``since``) by calls of ``fuel`` each: more than
    three calls, and the result checked."""
    m = Merger(b1, b2, since)
    calls = 0
    while not m.complete:
        m.work(fuel)
        calls += 1
    assert calls > 3
    result = m.finish()
    result._check()
    return result


def test_large_columnar_merge_in_steps() -> None:
    """A large numpy merge spread over fueled calls equals a naive merge."""
    rng = np.random.default_rng(3)
    n = 20_000
    cols1 = rng.integers(0, 1000, n), rng.integers(0, 5, n), rng.integers(0, 5, n)
    cols2 = rng.integers(0, 1000, n), rng.integers(0, 5, n), rng.integers(5, 10, n)
    b1 = Batch.from_columns(*cols1, rng.integers(-1, 2, n), desc(0, 5))
    b2 = Batch.from_columns(*cols2, rng.integers(-1, 2, n), desc(5, 10))
    result = merged_in_steps(b1, b2, Antichain([7]), 3000)
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


# ---------------------------------------------------------------------- encoded batches


@contextmanager
def thresholds(few: int, cached: int, probes: int, after: int = 8) -> Iterator[None]:
    """Temporarily set lookup_many's size thresholds, so that every code path runs."""
    settings = (
        (Batch, "FEW"),
        (Batch, "CACHED_ROWS"),
        (Probes, "FEW_PROBES"),
        (Batch, "CACHE_AFTER"),
    )
    saved = [getattr(owner, name) for owner, name in settings]
    for (owner, name), value in zip(settings, (few, cached, probes, after)):
        setattr(owner, name, value)
    try:
        yield
    finally:
        for (owner, name), value in zip(settings, saved):
            setattr(owner, name, value)


small_ints = st.integers(-3, 40)
int_key_strategy = small_ints
pair_key_strategy = st.tuples(st.integers(0, 5), small_ints)
triple_key_strategy = st.tuples(st.integers(-2, 2), st.integers(0, 3), st.integers(0, 300))
key_shapes = st.sampled_from(["int", "pair", "triple"])
val_shapes = st.sampled_from(["unit", "int", "pair", "product"])
prod = st.builds(Product, st.integers(0, 6), st.integers(0, 5))


def _strategy(shape: str) -> st.SearchStrategy[Any]:
    return {
        "int": int_key_strategy,
        "pair": pair_key_strategy,
        "triple": triple_key_strategy,
        "unit": st.just(()),
        "product": prod,
    }[shape]


@st.composite
def product_updates(
    draw: st.DrawFn, max_size: int = 60, outer: tuple[int, int] = (0, 3)
) -> list[tuple[Any, Any, Product, int]]:
    """Updates with keys and values of one drawn shape and Product(int, int) times."""
    kshape, vshape = draw(key_shapes), draw(val_shapes)
    times = st.builds(Product, st.integers(*outer), st.integers(0, 5))
    row = st.tuples(_strategy(kshape), _strategy(vshape), times, diffs)
    return draw(st.lists(row, max_size=max_size))


def same_batches(a: Batch, b: Batch) -> None:
    """Two batches hold the same updates, keys and per-key rows (with the same Python types)."""
    ua, ub = list(a.updates()), list(b.updates())
    assert ua == ub
    assert [tuple(map(type, u)) for u in ua] == [tuple(map(type, u)) for u in ub]
    assert a.keys() == b.keys()
    assert list(a.iter_keys()) == list(b.iter_keys())


@settings(max_examples=80, deadline=None)
@given(product_updates())
def test_encoded_product_batch_equals_object_batch(
    updates: list[tuple[Any, Any, Product, int]],
) -> None:
    """Int / int-tuple keys with Product times are encoded and equal the object layout."""
    with tiny(0):
        enc = Batch.from_updates(updates, pdesc(0, 4))
    obj = Batch.from_updates(updates, pdesc(0, 4), force_objects=True)
    small = Batch.from_updates(updates, pdesc(0, 4))
    enc._check()
    obj._check()
    small._check()
    assert not obj.encoded and not enc.columnar
    assert enc.encoded or not updates
    assert small.encoded == (len(updates) > Batch.TINY)
    same_batches(enc, obj)
    same_batches(small, obj)
    if enc.encoded:
        assert enc.as_encoded() is enc
    again = obj.as_encoded()
    assert (again is None) == (not len(obj))  # nothing to encode in an empty batch
    if again is not None:
        again._check()
        same_batches(again, obj)
    assert list(enc.updates()) == model(updates)
    for key, rows in obj.iter_keys():
        assert enc.lookup(key) == rows
    for _, _, t, _ in enc.updates():
        assert type(t) is Product and type(t.outer) is int and type(t.inner) is int


def test_large_encoded_batch_uses_numpy_and_interns_times() -> None:
    """A big Product batch sorts with numpy; equal times come out as one shared object."""
    rng = np.random.default_rng(5)
    n = 3000
    keys = list(zip(rng.integers(0, 30, n).tolist(), rng.integers(0, 1000, n).tolist()))
    times = [Product(o, i) for o, i in zip(rng.integers(0, 3, n).tolist(), [0, 1] * (n // 2))]
    ds = rng.integers(-1, 2, n).tolist()
    b = Batch.from_columns(keys, None, times, ds, pdesc(0, 3))
    b._check()
    assert b.encoded
    rows = list(b.updates())
    assert rows == model([(k, (), t, d) for k, t, d in zip(keys, times, ds)])
    distinct = {id(t) for _, _, t, _ in rows}
    assert len(distinct) == len({t for _, _, t, _ in rows})


def test_shapes_that_stay_on_the_object_path() -> None:
    """Mixed int and Product times, nested products, bools, ragged or huge tuples: objects."""
    d = pdesc(0, 2)
    mixed_rows = [(1, 0, Product(0, 0), 1), (1, 0, 0, 1), (1, 0, Product(0, 0), 1)]
    mixed = Batch.from_updates(mixed_rows, d)  # no valid description holds both kinds
    assert not mixed.encoded and list(mixed.updates()) == model(mixed_rows)
    nested = Batch.from_updates([(1, 0, Product(Product(0, 1), 0), 1)], d)
    flags = Batch.from_updates([((True, 1), 0, Product(0, 0), 1)], d)
    ragged = Batch.from_updates([((1, 2), 0, Product(0, 0), 1), ((1,), 0, Product(0, 0), 1)], d)
    huge = Batch.from_updates(
        [((2**62, 0), 0, Product(0, 0), 1), ((-(2**62), 5), 0, Product(0, 0), 1)], d
    )
    floats = Batch.from_updates([(1, 0, Product(0.5, 0), 1)], d)
    for b in (nested, flags, ragged, huge, floats):
        assert not b.encoded
        if b is not nested and b is not floats:  # neither is a valid time of this description
            b._check()
    with tiny(0):
        wide = Batch.from_updates([((2**40, 5), 0, Product(0, 0), 1)], d)
    assert wide.encoded and wide.lookup((2**40, 5)) == [(0, Product(0, 0), 1)]
    for b in (nested, flags, ragged, huge, floats):
        assert b.as_encoded() is None


@settings(max_examples=60, deadline=None)
@given(product_updates(), product_updates(outer=(3, 6)), product_frontiers, st.booleans())
def test_encoded_product_merge_equals_object_merge(
    u1: list[tuple[Any, Any, Product, int]],
    u2: list[tuple[Any, Any, Product, int]],
    since: Antichain,
    tiny: bool,
) -> None:
    """Merging encoded Product batches (any frontier) equals the object merge, and keeps
    every accumulation at times beyond the frontier."""
    since = Antichain(Product(t.outer + 1, t.inner) for t in since)
    d1, d2 = pdesc(0, 3), pdesc(3, 7)
    merger = TinyMerger if tiny else Merger
    enc = merger(Batch.from_updates(u1, d1), Batch.from_updates(u2, d2), since).finish()
    obj = merger(
        Batch.from_updates(u1, d1, force_objects=True),
        Batch.from_updates(u2, d2, force_objects=True),
        since,
    ).finish()
    enc._check()
    obj._check()
    same_batches(enc, obj)
    rows = list(enc.updates())
    assert rows == model([(k, v, advance_by(t, since), d) for k, v, t, d in u1 + u2])
    for u in (Product(a, b) for a in range(9) for b in range(8)):
        if since.less_equal(u):
            assert accumulate(keyed(rows), u) == accumulate(keyed(u1 + u2), u)


def test_large_encoded_merge_in_steps_with_multi_element_frontier() -> None:
    """A large Product merge spread over fueled calls, against a two-element frontier."""
    rng = np.random.default_rng(11)
    n = 6000

    def updates(lo: int) -> list[tuple[Any, Any, Product, int]]:
        ks = rng.integers(0, 400, n).tolist()
        vs = rng.integers(0, 3, n).tolist()
        outer = rng.integers(lo, lo + 3, n).tolist()
        inner = rng.integers(0, 6, n).tolist()
        ds = rng.integers(-1, 2, n).tolist()
        return [(k, v, Product(o, i), d) for k, v, o, i, d in zip(ks, vs, outer, inner, ds)]

    u1, u2 = updates(0), updates(3)
    b1, b2 = Batch.from_updates(u1, pdesc(0, 3)), Batch.from_updates(u2, pdesc(3, 6))
    since = Antichain([Product(2, 4), Product(4, 1)])
    result = merged_in_steps(b1, b2, since, 1000)
    assert result.encoded
    assert list(result.updates()) == model(
        [(k, v, advance_by(t, since), d) for k, v, t, d in u1 + u2]
    )


def test_merge_re_encodes_batches_with_different_codecs() -> None:
    """Batches whose key, value and time ranges differ merge into one encoded batch; when
    the union cannot be encoded they merge as objects, still correctly."""
    a = [((k, -k), (k, 2 * k), Product(0, k % 3), 1) for k in range(20)]
    b = [((k * 1000, k), (-k, k), Product(7, 40 + k), 1) for k in range(20)]
    with tiny(0):
        b1, b2 = Batch.from_updates(a, pdesc(0, 5)), Batch.from_updates(b, pdesc(5, 9))
    assert b1._kc is not b2._kc and b1._tc is not b2._tc
    since = Antichain([Product(1, 50)])
    for merger in (NumpyMerger, TinyMerger, Merger):
        merged = merger(b1, b2, since).finish()
        merged._check()
        assert merged.encoded == (merger is not Merger)  # 40 updates: Merger uses Python
        assert list(merged.updates()) == model(
            [(k, v, advance_by(t, since), d) for k, v, t, d in a + b]
        )
    far = [((2**61, 1), 0, Product(5, 0), 1)]
    near = [((-(2**61), 1), 0, Product(0, 0), 1)]
    with tiny(0):
        b3, b4 = Batch.from_updates(near, pdesc(0, 5)), Batch.from_updates(far, pdesc(5, 9))
    assert b3.encoded and b4.encoded
    for merger in (NumpyMerger, Merger):
        merged = merger(b3, b4, Antichain([Product(0, 0)])).finish()
        merged._check()
        assert not merged.encoded and list(merged.updates()) == model(near + far)


def test_merging_encoded_and_object_product_batches() -> None:
    """An encoded Product batch merges with an object batch (strings) and an int-time batch
    never meets a Product frontier on the numpy path."""
    with tiny(0):
        b1 = Batch.from_updates([(1, 0, Product(0, 1), 1), (2, 0, Product(0, 0), 1)], pdesc(0, 1))
    b2 = Batch.from_updates([("a", 0, Product(1, 0), 1), (1, 0, Product(1, 0), -1)], pdesc(1, 2))
    assert b1.encoded and not b2.encoded and b2.as_encoded() is None
    since = Antichain([Product(1, 0), Product(0, 2)])
    u = [(1, 0, Product(0, 1), 1), (2, 0, Product(0, 0), 1)]
    u += [("a", 0, Product(1, 0), 1), (1, 0, Product(1, 0), -1)]
    for merger in (Merger, NumpyMerger):
        m = merger(b1, b2, since)
        assert not m._columnar
        merged = m.finish()
        merged._check()
        assert not merged.encoded
        assert list(merged.updates()) == model(
            [(k, v, advance_by(t, since), d) for k, v, t, d in u]
        )


# ---------------------------------------------------------------------- list batches


def test_tiny_batches_are_lists_indexed_on_first_read() -> None:
    """A few updates make a list batch; its first lookup builds a dict index, no numpy."""
    rows = [((r, n), (), Product(2, i), 1) for r, n, i in [(1, 5, 0), (0, 9, 1), (1, 5, 2)]]
    b = Batch.from_updates([*rows, ((0, 9), (), Product(2, 1), -1)], pdesc(2, 3))
    assert not b.encoded and b._vals is None and b._cached is None
    assert list(b.updates()) == [((1, 5), (), Product(2, 0), 1), ((1, 5), (), Product(2, 2), 1)]
    assert b.lookup((1, 5)) == [((), Product(2, 0), 1), ((), Product(2, 2), 1)]
    assert b._cached is not None and b._cached[1] is not None
    assert b.lookup((0, 9)) == [] and b.lookup((1.0, 5)) == b.lookup((1, 5))
    assert b.lookup_many([(1, 5), (2, 2), Pair((1, 5))]) == {
        (1, 5): b.lookup((1, 5)),
        Pair((1, 5)): b.lookup((1, 5)),
    }
    b._check()
    strings = Batch.from_updates([(frozenset({1}), 0, 0, 1), (frozenset(), 0, 0, 1)], desc(0, 1))
    assert strings.lookup_many([frozenset(), 1]) == {frozenset(): [(0, 0, 1)]}
    assert strings._cached == (None, None)  # keys of other classes: bisection, no index
    strings._check()


def test_large_encoded_batch_merges_with_small_list_batch_vectorised() -> None:
    """An encoded batch meeting a list batch of encodable data merges with numpy (the list
    batch is encoded), in either order, and equals the list-layout merge."""
    rng = np.random.default_rng(2)
    n = 3000
    big_rows = [
        ((int(a), int(b)), (), Product(int(o), int(i)), 1)
        for a, b, o, i in zip(
            rng.integers(0, 10, n),
            rng.integers(0, 500, n),
            rng.integers(0, 2, n),
            rng.integers(0, 9, n),
        )
    ]
    small_rows = [((a, 7 * a), (), Product(2, a), -1 + 2 * (a % 2)) for a in range(9)]
    big = Batch.from_updates(big_rows, pdesc(0, 2))
    small = Batch.from_updates(small_rows, pdesc(2, 3))
    assert big.encoded and not small.encoded
    since = Antichain([Product(1, 3), Product(2, 0)])
    for merger in (Merger, TinyMerger):
        m = merger(big, small, since)
        assert m._columnar
        merged = m.finish()
        merged._check()
        assert merged.encoded
        expected = model([(k, v, advance_by(t, since), d) for k, v, t, d in big_rows + small_rows])
        assert list(merged.updates()) == expected
    early = Batch.from_updates([((1, 2), (), Product(0, 0), 1)], pdesc(0, 1))
    late = Batch.from_updates(
        [(k, v, Product(t.outer + 1, t.inner), d) for k, v, t, d in big_rows], pdesc(1, 3)
    )
    m = Merger(early, late, Antichain([Product(0, 0)]))
    assert m._columnar
    merged = m.finish()
    merged._check()
    assert merged.encoded and len(merged) == len(late) + 1


def test_small_merges_give_list_batches() -> None:
    """Merges of few updates run in plain Python and give list batches, whatever their
    inputs' layout; a numpy merge whose result is small gives a list batch too."""
    ups1 = [(k, k % 3, Product(0, k % 2), 1) for k in range(40)]
    ups2 = [(k, k % 3, Product(1, 0), 1) for k in range(40)]
    with tiny(0):
        b1, b2 = Batch.from_updates(ups1, pdesc(0, 1)), Batch.from_updates(ups2, pdesc(1, 2))
    assert b1.encoded and b2.encoded
    since = Antichain([Product(1, 0)])
    merged = merge_batches(b1, b2, since)
    merged._check()
    assert not merged.encoded
    assert list(merged.updates()) == list(NumpyMerger(b1, b2, since).finish().updates())
    n = 400
    plus = Batch.from_updates([(k, 0, k % 5, 1) for k in range(n)], desc(0, 5))
    minus = Batch.from_updates([(k, 0, 5, -1) for k in range(n - 3)], desc(5, 6))
    assert plus.encoded and minus.encoded
    m = Merger(plus, minus, Antichain([5]))
    assert m._columnar
    left = m.finish()
    left._check()
    assert not left.encoded and list(left.updates()) == [(k, 0, 5, 1) for k in range(n - 3, n)]


def test_merge_with_an_empty_batch_keeps_the_columns_when_no_time_changes() -> None:
    """An empty side and a frontier not beyond the other side's lower: the result shares the
    other batch's columns; a frontier that moves times still compacts them."""
    ups = [((k, 1), (), Product(3, k % 2), 1) for k in range(40)]
    for threshold in (0, 32):
        with tiny(threshold):
            b = Batch.from_updates(ups, pdesc(3, 4))
        empty = Batch.empty(pdesc(4, 5))
        kept = Merger(b, empty, Antichain([Product(2, 0)])).finish()
        kept._check()
        assert kept._keys is b._keys and kept.description.upper == empty.upper
        assert kept.description.since == Antichain([Product(2, 0)])
        moved = Merger(b, empty, Antichain([Product(3, 1)])).finish()
        moved._check()
        assert moved._keys is not b._keys
        assert {t for _, _, t, _ in moved.updates()} == {Product(3, 1)}
        early = Merger(Batch.empty(pdesc(2, 3)), b, Antichain([Product(3, 0)])).finish()
        assert early._keys is b._keys and early.description.lower == Antichain([Product(2, 0)])
        # Times all beyond {(2, 5)}, though the lower (3, 0) is not: checked time by time.
        late_ups = [(k, v, Product(3, 5 + t.inner), d) for k, v, t, d in ups]
        with tiny(threshold):
            late = Batch.from_updates(late_ups, pdesc(3, 4))
        late_list = Batch.from_updates(late_ups, pdesc(3, 4), force_objects=True)
        for source in (late, late_list):
            for since in ([Product(2, 5)], [Product(2, 5), Product(4, 0)]):
                same = Merger(source, empty, Antichain(since)).finish()
                same._check()
                assert same._keys is source._keys
            changed = Merger(source, empty, Antichain([Product(2, 6)])).finish()
            changed._check()
            assert changed._keys is not source._keys and len(changed) == len(source)


# ---------------------------------------------------------------------- searching


probe_values = st.one_of(
    small_ints,
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**63 - 1, -(2**63), True, False, 2.0, 2.5, float("inf"), "a", None]),
    pair_key_strategy,
    triple_key_strategy,
    st.tuples(st.integers(0, 5), st.integers(-100, 100)),
    st.tuples(st.integers(-(2**70), 2**70), st.integers(0, 3)),
    st.tuples(st.sampled_from([1.0, True, 0.5]), small_ints),
    st.tuples(small_ints, st.sampled_from(["x", None])),
    st.just(()),
    st.tuples(small_ints),
)


class Pair(tuple):  # type: ignore[type-arg]
    """A tuple subclass: equal to the plain tuple with the same items."""

    __slots__ = ()


@contextmanager
def by_key(many: int, per_key: int) -> Iterator[None]:
    """Temporarily set when a small batch looks its own keys up among a spine's probes."""
    saved = (Batch.MANY_PROBES, Batch.PROBES_PER_KEY)
    Batch.MANY_PROBES, Batch.PROBES_PER_KEY = many, per_key
    try:
        yield
    finally:
        Batch.MANY_PROBES, Batch.PROBES_PER_KEY = saved


@settings(max_examples=120, deadline=None)
@given(
    st.one_of(product_updates(), int_updates, object_updates),
    st.lists(probe_values, max_size=12),
    st.sampled_from([(32, 1024, 64, 8), (0, 0, 0, 0), (1, 3, 2, 0), (2, 8, 5, 1), (4, 64, 3, 2)]),
    st.sampled_from([0, 32]),
    st.sampled_from([(16, 4), (0, 0), (1, 1)]),
)
def test_lookup_many_equals_lookup(
    updates: list[tuple[Any, Any, Any, int]],
    probes: list[Any],
    limits: tuple[int, int, int, int],
    threshold: int,
    many: tuple[int, int],
) -> None:
    """lookup_many answers exactly the keys lookup answers, with the same rows, whichever
    path (dict index of a small batch, looking the batch's keys up among the probes, one
    searchsorted, reading rows element by element or gathered, per-key bisection) answers,
    in either layout."""
    d = pdesc(0, 4) if updates and isinstance(updates[0][2], Product) else desc(0, 5)
    with tiny(threshold):
        b = Batch.from_updates(updates, d)
    keys = b.keys()
    probes = probes + keys[::2] + [Pair(k) for k in keys[1::3] if type(k) is tuple]
    probes += [float(k) for k in keys[:2] if type(k) is int]
    probes.append((1, [2]))  # a tuple that cannot be hashed
    with thresholds(4, 0, 64):  # no dict index: binary searches only
        expected = {p: b.lookup(p) for p in probes if b.lookup(p)}
    rows = dict(b.iter_keys())
    assert all(expected[k] == rows[k] for k in keys[::2])
    with thresholds(*limits), by_key(*many):
        got = b.lookup_many(probes)
        assert got == expected
        assert b.lookup_many(Probes(probes)) == expected
        assert {p: b.lookup(p) for p in probes if b.lookup(p)} == expected
        assert b.lookup_many([]) == {}
        for answer in got.values():
            answer.append(None)  # the lists are the caller's own: the batch is unchanged
        assert b.lookup_many(probes) == expected
        for _ in range(limits[3] + 1):
            assert b.lookup_many(probes) == expected
        if b.encoded and 0 < len(b) <= limits[1]:  # read often enough to have built its index
            assert b._cached is not None
        b._check()


@settings(max_examples=80, deadline=None)
@given(product_updates(), st.lists(probe_values, max_size=10))
def test_seek_finds_the_universal_order_position(
    updates: list[tuple[Any, Any, Product, int]], probes: list[Any]
) -> None:
    """Seeking any value in an encoded batch lands where the universal order puts it."""
    with tiny(0):
        b = Batch.from_updates(updates, pdesc(0, 4))
    keys = [k for k, _, _, _ in b.updates()]
    for p in probes + list(set(keys)):
        if isinstance(p, float) and p != p:
            continue
        before = sum(1 for k in keys if ukey(k) < ukey(p))
        not_after = sum(1 for k in keys if not ukey(p) < ukey(k))
        assert b.seek(p, 0) == before, p
        assert b.after(p, before) == not_after, p
        assert b.seek(p, before) == before
