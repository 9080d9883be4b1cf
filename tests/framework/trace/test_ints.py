"""The one reader of int columns (``framework.trace.ints``) against the batches' own rows."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
from hypothesis import given, settings, strategies as st

from deltaflow.framework.antichain import Antichain
from deltaflow.framework.lattice import Product
from deltaflow.framework.time_domain import domain_of
from deltaflow.framework.trace.batch import Batch
from deltaflow.framework.trace.description import Description
from deltaflow.framework.trace.ints import int_columns, read_columns
from deltaflow.operators.arrange import RawBatch

_small = st.integers(-4, 4)
_keys = st.one_of(
    st.just(st.one_of(_small, st.integers(-(2**63), 2**63 - 1))),
    st.just(st.tuples(_small, st.integers(-(2**31), 2**31 - 1))),
    st.just(st.one_of(_small, st.text(max_size=1), st.booleans())),
    st.just(st.tuples(_small, st.integers(2**31, 2**40))),  # beyond a pair code
)
_vals = st.one_of(st.just(None), st.just(_small), st.just(st.one_of(_small, st.text(max_size=1))))
_times = st.one_of(
    st.just(st.integers(0, 5)),
    st.just(st.builds(Product, st.integers(0, 3), st.integers(0, 3))),
    st.just(st.builds(Product, st.integers(0, 2), st.just(Product(0, 1)))),
)


@st.composite
def _batches(draw: st.DrawFn) -> Any:
    keys, vals, times = draw(_keys), draw(_vals), draw(_times)
    n = draw(st.integers(1, 60))
    ks = draw(st.lists(keys, min_size=n, max_size=n))
    vs = None if vals is None else draw(st.lists(vals, min_size=n, max_size=n))
    ts = draw(st.lists(times, min_size=n, max_size=n))
    ds = draw(st.lists(st.integers(-3, 3).filter(bool), min_size=n, max_size=n))
    form = draw(st.sampled_from(["raw", "list", "batch"]))
    if form == "raw":
        return RawBatch(ks, vs, ts, ds)
    description = Description(Antichain(), Antichain())
    batch = Batch.from_columns(ks, vs, ts, ds, description, force_objects=form == "list")
    return batch if len(batch) else RawBatch(ks, vs, ts, ds)


def _rows(batch: Any) -> Counter[Any]:
    out: Counter[Any] = Counter()
    for k, v, t, r in batch.updates():
        out[(k.__class__, k, v.__class__, v, t.__class__, t)] += r
    return out


def _plain(x: Any) -> bool:
    return x.__class__ is int and -(2**63) <= x < 2**63


@settings(max_examples=300)
@given(_batches())
def test_read_columns_holds_the_batch_or_declines(batch: Any) -> None:
    """``read_columns`` gives back exactly the batch's updates (keys, values, times, diffs
    as the Python values they were) when its keys are ints or int pairs that fit a code and
    its times ints or ``Product`` of two ints; None otherwise. ``int_columns`` does so only
    when keys, values and times are all plain ints."""
    rows = list(batch.updates())
    keys_ok = all(_plain(k) for k, *_ in rows) or all(
        k.__class__ is tuple and len(k) == 2 and all(_plain(x) and -(2**31) <= x < 2**31 for x in k)
        for k, *_ in rows
    )
    times_ok = all(_plain(t) for *_, t, _ in rows) or all(
        t.__class__ is Product and _plain(t.outer) and _plain(t.inner) for *_, t, _ in rows
    )
    cols = read_columns(batch)
    assert (cols is not None) == (keys_ok and times_ok)
    if cols is not None:
        n = len(cols)
        keys = cols.key_objects(np.arange(n))
        vals = [()] * n if cols.vals is None else list(cols.vals)
        vals = [v.item() if hasattr(v, "item") else v for v in vals]
        times = [Product(*t) if cols.times.ndim == 2 else t for t in cols.times.tolist()]
        got: Counter[Any] = Counter()
        for k, v, t, r in zip(keys, vals, times, cols.diffs.tolist()):
            got[(k.__class__, k, v.__class__, v, t.__class__, t)] += r
        assert got == _rows(batch)
    # (Values all ``()`` are no value column in a trace batch, a column of ``()`` in a raw one.)
    unit = batch.unit_values if isinstance(batch, Batch) else batch.vals is None
    plain = all(_plain(k) and (unit or _plain(v)) and _plain(t) for k, v, t, _ in rows)
    ints = int_columns(batch)
    assert (ints is not None) == plain
    if ints is not None:
        k, v, t, d = ints
        vs = [()] * len(k) if v is None else v.tolist()
        got = Counter()
        for row in zip(k.tolist(), vs, t.tolist(), d.tolist()):
            got[(int, row[0], row[1].__class__, row[1], int, row[2])] += row[3]
        assert got == _rows(batch)


@settings(max_examples=200)
@given(_batches())
def test_the_scope_domain_reads_the_times_as_the_column_shape_does(batch: Any) -> None:
    """Given the time domain of the batch's scope (the shape of its times), ``read_columns``
    reads the times with the domain's codec: the same columns as found from the column's
    shape, and none for a domain that keeps its times as objects (nested loops)."""
    rows = list(batch.updates())
    domain = domain_of(rows[0][2])
    found = read_columns(batch)
    given_domain = read_columns(batch, domain=domain)
    if domain.columns is None:
        assert given_domain is None or (
            isinstance(batch, Batch) and batch.encoded  # (a trace batch's own time codec)
        )
        return
    assert (found is None) == (given_domain is None)
    if found is not None and given_domain is not None:
        assert found.times.tolist() == given_domain.times.tolist()
        assert domain.from_columns(given_domain.times) == domain.from_columns(found.times)
        assert found.keys.tolist() == given_domain.keys.tolist()
