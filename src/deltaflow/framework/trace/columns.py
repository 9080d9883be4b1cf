"""Column kernels: sorting and consolidating the columns of a batch, in numpy or plain Python.

A batch's four columns (keys, values, times, diffs) are sorted by ``(key, val, time)`` and
*consolidated*: the diffs of equal ``(key, val, time)`` are summed and zeros dropped. Int64
columns are sorted with one stable argsort of a packed column (:func:`pack_int64`) when their
ranges fit in 62 bits together, with ``np.lexsort`` otherwise, and a few rows in plain Python
(numpy's fixed cost per call dominates there). Columns of other Python objects are sorted in
the universal order of :mod:`.order` (:func:`consolidate_objects`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from itertools import compress
from typing import Any

import numpy as np

from ..lattice import Product, Time
from . import order
from .codec import I64_MAX, I64_MIN, PRODUCT, TUPLE, Codec, encode_column

__all__ = [
    "all_unit",
    "as_array",
    "consolidate_objects",
    "consolidate_rows",
    "describe_types",
    "encode_columns",
    "index_lists",
    "pack_int64",
    "sample_size",
    "small_int_arrays",
    "small_int_columns",
    "sort_consolidate_int",
]

# Bits available when packing (key, val, time) into one int64 sort key; one spare bit keeps
# the packed value non-negative.
_PACK_BITS = 62
_NOTHING: Any = object()  # equal to nothing but itself


def encode_columns(
    keys: Any, vals: Any, times: Any, small: bool
) -> tuple[tuple[Codec, Any], tuple[Codec, Any] | None, tuple[Codec, Any]] | None:
    """Encode keys (ints, int tuples), values (any encodable shape or None) and times (ints,
    ``Product(int, int)``), or None when one of them cannot be encoded."""
    k = encode_column(keys, small, (TUPLE,))
    if k is None:
        return None
    t = encode_column(times, small, (PRODUCT,))
    if t is None:
        return None
    if vals is None:
        return k, None, t
    v = encode_column(vals, small, (TUPLE, PRODUCT))
    if v is None:
        return None
    return k, v, t


def as_array(col: Any) -> Any:
    if col is None or isinstance(col, np.ndarray):
        return col
    return np.array(col, dtype=np.int64)


def describe_types(col: Any) -> str:
    types = sorted({type(x).__name__ for x in (col.tolist() if hasattr(col, "tolist") else col)})
    return "values of type " + ", ".join(types)


def all_unit(vals: Sequence[Any], n: int) -> bool:
    if isinstance(vals, (list, tuple)):
        return vals.count(()) == n and set(map(type, vals)) == {tuple}
    return all(v == () and v.__class__ is tuple for v in vals)


def small_int_columns(
    keys: Sequence[Any], vals: Any, times: Any, diffs: Any
) -> tuple[Any, Any, Any, Any] | None:
    """The small-batch path of :meth:`Batch.from_columns` for all-int lists, or None."""
    cols = (keys, times, diffs) if vals is None else (keys, vals, times, diffs)
    for col in cols:
        if not isinstance(col, (list, tuple)) or set(map(type, col)) != {int}:
            return None
        for x in col:
            if not I64_MIN <= x <= I64_MAX:
                return None
    return small_int_arrays(
        list(keys), None if vals is None else list(vals), list(times), list(diffs)
    )


def pack_int64(k: Any, v: Any, t: Any) -> Any:
    """Pack int columns ``(k, v, t)`` (``v`` may be None) into one int64 column whose order is
    their lexicographic order, or None when their ranges need more than 62 bits together.

    One stable ``argsort`` of the packed column then sorts the rows, where ``np.lexsort``
    would sort once per column.

    >>> pack_int64(np.array([1, 0, 1]), None, np.array([5, 9, -2])).tolist()
    [23, 11, 16]
    """
    kmin, kmax = int(k.min()), int(k.max())
    tmin, tmax = int(t.min()), int(t.max())
    bt = (tmax - tmin).bit_length()
    bk = (kmax - kmin).bit_length()
    bv = 0
    if v is not None:
        vmin, vmax = int(v.min()), int(v.max())
        bv = (vmax - vmin).bit_length()
    if bk + bv + bt > _PACK_BITS:
        return None
    p = k - kmin
    if bv + bt:
        p <<= bv + bt
    if bv:
        vv = v - vmin
        vv <<= bt
        p |= vv
    if bt:
        p |= t - tmin
    return p


def sort_consolidate_int(k: Any, v: Any, t: Any, d: Any, small: int) -> tuple[Any, Any, Any, Any]:
    """Sort int64 columns by ``(k, v, t)``, sum diffs of equal triples and drop zeros.

    Up to ``small`` rows are sorted in plain Python (:func:`small_int_arrays`).

    The input arrays must be owned by the caller (they may be reused in the result).
    """
    n = k.shape[0]
    if n <= small:
        if n > 1 or (n == 1 and not d[0]):
            return small_int_arrays(
                k.tolist(), None if v is None else v.tolist(), t.tolist(), d.tolist()
            )
        return k, v, t, d
    if n > 1:
        p = pack_int64(k, v, t)
        if p is None:
            perm = np.lexsort((t, k) if v is None else (t, v, k))
            k, t, d = k[perm], t[perm], d[perm]
            if v is not None:
                v = v[perm]
            same = (k[1:] == k[:-1]) & (t[1:] == t[:-1])
            if v is not None:
                same &= v[1:] == v[:-1]
        else:
            if bool((p[1:] < p[:-1]).any()):
                perm = np.argsort(p, kind="stable")
                p = p[perm]
                k, t, d = k[perm], t[perm], d[perm]
                if v is not None:
                    v = v[perm]
            same = p[1:] == p[:-1]
        if bool(same.any()):
            starts = np.flatnonzero(~same)
            starts += 1
            starts = np.concatenate((np.zeros(1, dtype=np.int64), starts))
            d = np.add.reduceat(d, starts)
            k, t = k[starts], t[starts]
            if v is not None:
                v = v[starts]
    nonzero = d != 0
    if not bool(nonzero.all()):
        k, t, d = k[nonzero], t[nonzero], d[nonzero]
        if v is not None:
            v = v[nonzero]
    return k, v, t, d


def small_int_arrays(
    ks: list[int], vs: list[int] | None, ts: list[int], ds: list[int]
) -> tuple[Any, Any, Any, Any]:
    """Sort and consolidate a few int updates in plain Python (numpy calls cost more here),
    into int64 arrays (the value array is None when ``vs`` is)."""
    arr = np.array
    if vs is None:
        ok, _, ot, od, _ = _fold_sorted(sorted(zip(ks, ts, ds)))
        return arr(ok, dtype=np.int64), None, arr(ot, dtype=np.int64), arr(od, dtype=np.int64)
    ok, ov, ot, od, _ = _fold_sorted4(sorted(zip(ks, vs, ts, ds)))
    return (
        arr(ok, dtype=np.int64),
        arr(ov, dtype=np.int64),
        arr(ot, dtype=np.int64),
        arr(od, dtype=np.int64),
    )


def consolidate_objects(
    keys: Sequence[Any],
    vals: Sequence[Any] | None,
    times: Sequence[Any],
    diffs: Sequence[int],
    safe_keys: bool | None = None,
) -> tuple[list[Any], list[Any] | None, list[Any], list[int], bool]:
    """Sort columns in the universal order and sum the diffs of equal ``(key, val, time)``.

    Returns fresh lists and whether every key left is of one of :data:`order.SAFE_TYPES`
    (``safe_keys``, when known, says whether every key given is).
    When every key and value is of those types and their natural ``<`` does not raise, the
    rows are sorted as tuples and equal neighbours summed (fast for small inputs and sorted
    runs); otherwise they are consolidated with a dict, then sorted.

    Runtime complexity: O(n log n); O(n) for a few sorted runs.
    """
    if safe_keys is None:
        safe_keys = order.is_safe(keys)
    if safe_keys and (vals is None or order.is_safe(vals)):
        try:
            if vals is None:
                return _fold_sorted(sorted(zip(keys, times, diffs)))
            return _fold_sorted4(sorted(zip(keys, vals, times, diffs)))
        except order.INCOMPARABLE:
            pass
    acc: dict[tuple[Any, ...], int] = {}
    get = acc.get
    if vals is None:
        for kt, dd in zip(zip(keys, times), diffs):
            acc[kt] = get(kt, 0) + dd
    else:
        for kvt, dd in zip(zip(keys, vals, times), diffs):
            acc[kvt] = get(kvt, 0) + dd
    items = [item for item in acc.items() if item[1]]
    if not items:
        return [], (None if vals is None else []), [], [], True
    order.sort_pairs(items, safe_keys and (vals is None or order.is_safe(vals)))
    triples, dsum = zip(*items)
    vs: list[Any] | None = None
    if vals is None:
        kcol, tcol = zip(*triples)
    else:
        kcol, vcol, tcol = zip(*triples)
        vs = list(vcol)
    out = list(kcol)
    return out, vs, list(tcol), list(dsum), safe_keys or order.is_safe(out)


def _fold_sorted(
    rows: list[tuple[Any, Any, int]],
) -> tuple[list[Any], None, list[Any], list[int], bool]:
    """The columns of sorted ``(key, time, diff)`` rows, with the diffs of equal neighbours
    summed and zero diffs dropped (see :func:`consolidate_objects`).

    Runtime complexity: O(n), one short Python step per row (equal times are usually one
    object, so comparing them rarely calls ``Product.__eq__``).
    """
    ks: list[Any] = []
    ts: list[Any] = []
    ds: list[int] = []
    pk: Any = _NOTHING
    pt: Any = _NOTHING
    for k, t, d in rows:
        if k == pk and (t is pt or t == pt):
            ds[-1] += d
        else:
            ks.append(k)
            ts.append(t)
            ds.append(d)
            pk, pt = k, t
    if 0 in ds:
        keep = list(map(bool, ds))
        ks, ts, ds = list(compress(ks, keep)), list(compress(ts, keep)), list(compress(ds, keep))
    return ks, None, ts, ds, True


def _fold_sorted4(
    rows: list[tuple[Any, Any, Any, int]],
) -> tuple[list[Any], list[Any], list[Any], list[int], bool]:
    """:func:`_fold_sorted` of sorted ``(key, val, time, diff)`` rows."""
    ks: list[Any] = []
    vs: list[Any] = []
    ts: list[Any] = []
    ds: list[int] = []
    pk: Any = _NOTHING
    pv: Any = _NOTHING
    pt: Any = _NOTHING
    for k, v, t, d in rows:
        if k == pk and v == pv and (t is pt or t == pt):
            ds[-1] += d
        else:
            ks.append(k)
            vs.append(v)
            ts.append(t)
            ds.append(d)
            pk, pv, pt = k, v, t
    if 0 in ds:
        keep = list(map(bool, ds))
        ks, vs = list(compress(ks, keep)), list(compress(vs, keep))
        ts, ds = list(compress(ts, keep)), list(compress(ds, keep))
    return ks, vs, ts, ds, True


def consolidate_rows(
    found: list[list[tuple[Any, Time, int]]], sort: bool = True
) -> list[tuple[Any, Time, int]]:
    """Sum the diffs of equal ``(val, time)`` across row lists; sort by ``(val, time)``.

    Each list is already consolidated, so most rows are unique: one ``setdefault`` per row
    keeps the first row of each ``(val, time)`` as is, and only collisions are summed on the
    side. Product times are keyed by their coordinates: hashing a ``(val, outer, inner)``
    tuple stays in C, where hashing a ``(val, Product)`` tuple calls the Product's
    Python-level hash.
    """
    first: dict[tuple[Any, ...], tuple[Any, Time, int]] = {}
    setdefault = first.setdefault
    sums: dict[tuple[Any, ...], int] = {}
    product = found[0][0][1].__class__ is Product
    for rows in found:
        for row in rows:
            v, t, d = row
            k = (v, t.outer, t.inner) if product else (v, t)  # type: ignore[union-attr]
            kept = setdefault(k, row)
            if kept is not row:
                sums[k] = sums.get(k, kept[2]) + d
    if not sums:
        out = list(first.values())
    else:
        out = []
        for k, row in first.items():
            total = sums.get(k)
            if total is None:
                out.append(row)
            elif total:
                out.append((row[0], row[1], total))
    if sort:
        items = [((v, t), d) for v, t, d in out]
        order.sort_pairs(items, order.is_safe(v for (v, _), _ in items))
        out = [(v, t, d) for (v, t), d in items]
    return out


def index_lists(keys: list[Any], rows: list[tuple[Any, Time, int]]) -> dict[Any, tuple[Any, ...]]:
    """``{key: tuple of its rows}`` for sorted ``keys`` and their aligned ``rows``, in order.

    Runtime complexity: O(n).
    """
    index = dict(zip(keys, [(row,) for row in rows]))
    if len(index) == len(keys):
        return index  # every key distinct (the common case of a few updates)
    index = {}
    start = 0
    n = len(keys)
    for i in range(1, n + 1):
        if i == n or keys[i] != keys[start]:
            index[keys[start]] = tuple(rows[start:i])
            start = i
    return index


def sample_size(col: Sequence[Any]) -> int:
    n = len(col)
    if n == 0:
        return 0
    step = max(1, n // 16)
    sample = [col[i] for i in range(0, n, step)]
    per = sum(_deep_size(x) for x in sample) / len(sample)
    return int(per * n)


def _deep_size(x: object) -> int:
    if isinstance(x, int) and -5 <= x <= 256:
        return 0  # small ints are shared
    size = sys.getsizeof(x)
    if isinstance(x, tuple):
        size += sum(_deep_size(e) for e in x)
    return size
