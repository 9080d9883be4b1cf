"""Batches: immutable, sorted, consolidated runs of ``(key, val, time, diff)`` updates.

A :class:`Batch` is the unit a trace stores, merges and shares between readers. Its invariants:

* updates are sorted by ``(key, val, time)`` in deltaflow's total order (times by their total
  order; keys and values by the universal order of :mod:`._order`, which agrees with ``<``
  whenever ``<`` works);
* no two updates have equal ``(key, val, time)`` and no diff is zero (the batch is
  *consolidated*);
* every time is beyond ``description.lower``, and is left unchanged by
  ``advance_by(time, description.since)`` (it has been compacted to ``since``);
* it never changes after construction, so many readers may hold it at once.

Storage is columnar. When every key, value and time is a plain ``int`` (``bool`` excluded) and
fits in 64 bits, the four columns are numpy ``int64`` arrays (32 bytes per update), sorted and
consolidated with vectorised numpy: the three sort columns are packed into one integer when their
ranges fit in 62 bits (one stable argsort), otherwise ``np.lexsort``. Otherwise the columns are
Python lists, consolidated with a dict and sorted with the natural order when it applies. When
every value is ``()`` (an arrangement of keys only) the value column is ``None``, not a column
of empty tuples.

Everything a batch hands out (lookups, iteration) is plain Python: ``int``, not numpy scalars.

    >>> from deltaflow.framework.antichain import Antichain
    >>> d = Description(Antichain([0]), Antichain([3]))
    >>> b = Batch.from_updates([(2, 7, 1, 1), (1, 5, 0, 1), (2, 7, 1, 2), (1, 5, 2, -1)], d)
    >>> list(b.updates())
    [(1, 5, 0, 1), (1, 5, 2, -1), (2, 7, 1, 3)]
    >>> b.lookup(2), b.columnar
    ([(7, 1, 3)], True)
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from typing import Any, Literal

import attrs
import numpy as np

from ..antichain import Antichain
from ..lattice import Time, advance_by
from . import _order
from .description import Description

__all__ = ["Batch", "Update"]

Update = tuple[Any, Any, Time, int]

_I64_MIN = -(2**63)
_I64_MAX = 2**63 - 1
# Bits available when packing (key, val, time) into one int64 sort key; one spare bit keeps
# the packed value non-negative.
_PACK_BITS = 62
# Up to this many updates, sorting and consolidating int columns in plain Python beats the fixed
# cost of a dozen numpy calls.
_SMALL = 48


@attrs.frozen(eq=False, repr=False)
class Batch:
    """An immutable, sorted, consolidated batch of ``(key, val, time, diff)`` updates.

    Build one with :meth:`from_updates`, :meth:`from_columns` or :meth:`empty`; the constructor
    is internal (it trusts its arguments).

    >>> from deltaflow.framework.antichain import Antichain
    >>> b = Batch.from_updates([("a", (), 0, 1)], Description(Antichain([0]), Antichain([1])))
    >>> list(b.iter_keys())
    [('a', [((), 0, 1)])]
    """

    description: Description
    _keys: Any
    _vals: Any  # None: every value is ()
    _times: Any
    _diffs: Any
    _columnar: bool
    _natural: bool  # object storage only: every key's type is one of _order.SAFE_TYPES

    # ------------------------------------------------------------------ construction

    @classmethod
    def empty(cls, description: Description) -> Batch:
        """A batch with no updates (it still records the interval ``description`` covers).

        >>> from deltaflow.framework.antichain import Antichain
        >>> len(Batch.empty(Description(Antichain([0]), Antichain([4]))))
        0
        """
        return cls(description, [], None, [], [], False, True)

    @classmethod
    def from_updates(cls, updates: Iterable[Update], description: Description) -> Batch:
        """Sort and consolidate ``(key, val, time, diff)`` updates into a batch.

        Times are stored as given (callers advance them first if they want compaction).

        Args:
            updates: the updates; diffs must be ints.
            description: the interval the updates belong to.

        Raises:
            ValueError: if an update is not a 4-tuple.
            TypeError: if a diff is not an int.

        Runtime complexity: O(n log n); vectorised numpy when everything is an int.

        >>> from deltaflow.framework.antichain import Antichain
        >>> d = Description(Antichain([0]), Antichain([9]))
        >>> len(Batch.from_updates([(1, 1, 0, 1), (1, 1, 0, -1)], d))
        0
        """
        rows = updates if isinstance(updates, (list, tuple)) else list(updates)
        if not rows:
            return cls.empty(description)
        try:
            keys, vals, times, diffs = zip(*rows)
        except ValueError:
            msg = f"updates must be (key, val, time, diff) tuples; got {rows[0]!r}"
            raise ValueError(msg) from None
        return cls.from_columns(keys, vals, times, diffs, description)

    @classmethod
    def from_columns(
        cls,
        keys: Sequence[Any] | np.ndarray[Any, Any],
        vals: Sequence[Any] | np.ndarray[Any, Any] | None,
        times: Sequence[Time] | np.ndarray[Any, Any],
        diffs: Sequence[int] | np.ndarray[Any, Any],
        description: Description,
    ) -> Batch:
        """Sort and consolidate updates given as four equally long columns.

        ``vals=None`` means every value is ``()``. Integer numpy arrays (or lists of plain ints)
        take the vectorised path; the inputs are copied, never kept.

        Raises:
            ValueError: if the columns have different lengths.
            TypeError: if a diff is not an integer.

        Runtime complexity: O(n log n).

        >>> import numpy as np
        >>> from deltaflow.framework.antichain import Antichain
        >>> d = Description(Antichain([0]), Antichain([9]))
        >>> b = Batch.from_columns(np.array([3, 1]), None, np.array([0, 0]), np.array([1, 1]), d)
        >>> list(b.updates())
        [(1, (), 0, 1), (3, (), 0, 1)]
        """
        n = len(keys)
        if len(times) != n or len(diffs) != n or (vals is not None and len(vals) != n):
            msg = "keys, vals, times and diffs must have the same length"
            raise ValueError(msg)
        if n == 0:
            return cls.empty(description)
        if vals is not None:
            if isinstance(vals, np.ndarray):
                if vals.dtype.kind == "O":
                    vals = vals.tolist()
            elif _all_unit(vals, n):
                vals = None
        if n <= _SMALL and isinstance(keys, (list, tuple)):
            small = _small_int_columns(keys, vals, times, diffs)
            if small is not None:
                k, v, t, d = small
                return cls(description, k, v, t, d, True, True)
        k = _as_int64(keys)
        t = _as_int64(times) if k is not None else None
        v = _as_int64(vals) if (t is not None and vals is not None) else None
        if t is not None and (vals is None or v is not None):
            d = _as_int64(diffs)
            if d is None:
                msg = f"diffs must be integers; got {_describe(diffs)}"
                raise TypeError(msg)
            assert k is not None
            k, v, t, d = _sort_consolidate_int(k, v, t, d)
            return cls(description, k, v, t, d, True, True)
        ks = keys.tolist() if isinstance(keys, np.ndarray) else list(keys)
        vs = None
        if vals is not None:
            vs = vals.tolist() if isinstance(vals, np.ndarray) else list(vals)
        ts = times.tolist() if isinstance(times, np.ndarray) else list(times)
        ds = diffs.tolist() if isinstance(diffs, np.ndarray) else list(diffs)
        if not set(map(type, ds)) <= {int}:
            msg = f"diffs must be ints; got {_describe(ds)}"
            raise TypeError(msg)
        ks, vs, ts, ds = _consolidate_objects(ks, vs, ts, ds)
        return cls(description, ks, vs, ts, ds, False, _order.is_safe(ks))

    # ------------------------------------------------------------------ reading

    @property
    def lower(self) -> Antichain:
        """``description.lower``."""
        return self.description.lower

    @property
    def upper(self) -> Antichain:
        """``description.upper``."""
        return self.description.upper

    @property
    def since(self) -> Antichain:
        """``description.since``."""
        return self.description.since

    @property
    def columnar(self) -> bool:
        """True when the columns are numpy ``int64`` arrays (the all-int fast path)."""
        return self._columnar

    def __len__(self) -> int:
        return len(self._keys)

    def keys(self) -> list[Any]:
        """The distinct keys, in order.

        Runtime complexity: O(n).

        >>> from deltaflow.framework.antichain import Antichain
        >>> d = Description(Antichain([0]), Antichain([9]))
        >>> Batch.from_updates([(2, 0, 0, 1), (1, 0, 0, 1), (2, 1, 0, 1)], d).keys()
        [1, 2]
        """
        if self._columnar:
            k = self._keys
            return k[self._key_starts()].tolist()  # type: ignore[no-any-return]
        keys = self._keys
        return [keys[i] for i in self._key_starts()]

    def lookup(self, key: Any) -> list[tuple[Any, Time, int]]:
        """The ``(val, time, diff)`` updates of ``key``, sorted by ``(val, time)``.

        Runtime complexity: O(log n + k) for k results.

        >>> from deltaflow.framework.antichain import Antichain
        >>> d = Description(Antichain([0]), Antichain([9]))
        >>> b = Batch.from_updates([(1, "x", 0, 1), (2, "y", 3, 1)], d)
        >>> b.lookup(2), b.lookup(5)
        ([('y', 3, 1)], [])
        """
        lo = self._seek(key, 0)
        hi = self._after(key, lo)
        return self._rows(lo, hi)

    def iter_keys(self) -> Iterator[tuple[Any, list[tuple[Any, Time, int]]]]:
        """Each distinct key with its ``(val, time, diff)`` updates, in key order.

        Runtime complexity: O(n) in total.

        >>> from deltaflow.framework.antichain import Antichain
        >>> d = Description(Antichain([0]), Antichain([9]))
        >>> list(Batch.from_updates([(1, 0, 0, 1), (1, 0, 1, 1)], d).iter_keys())
        [(1, [(0, 0, 1), (0, 1, 1)])]
        """
        n = len(self._keys)
        if n == 0:
            return
        starts = self._key_starts()
        ks, vs, ts, ds = self._object_columns()
        if self._columnar:
            starts_list: list[int] = starts.tolist()
        else:
            starts_list = starts
        ends = [*starts_list[1:], n]
        for lo, hi in zip(starts_list, ends):
            if vs is None:
                rows = list(zip(repeat((), hi - lo), ts[lo:hi], ds[lo:hi]))
            else:
                rows = list(zip(vs[lo:hi], ts[lo:hi], ds[lo:hi]))
            yield ks[lo], rows

    def updates(self) -> Iterator[tuple[Any, Any, Time, int]]:
        """Every ``(key, val, time, diff)``, in order.

        Runtime complexity: O(n).
        """
        ks, vs, ts, ds = self._object_columns()
        if vs is None:
            return zip(ks, repeat(()), ts, ds)
        return zip(ks, vs, ts, ds)

    @property
    def nbytes(self) -> int:
        """An estimate of the memory the batch holds, in bytes.

        Exact for numpy columns; for list columns, the lists plus the average size of a sample
        of their elements.
        """
        base = 200
        if self._columnar:
            total = base + self._keys.nbytes + self._times.nbytes + self._diffs.nbytes
            if self._vals is not None:
                total += self._vals.nbytes
            return int(total)
        total = base
        for col in (self._keys, self._vals, self._times, self._diffs):
            if col is not None:
                total += sys.getsizeof(col) + _sample_size(col)
        return total

    def __repr__(self) -> str:
        return (
            f"Batch(lower={self.description.lower!r}, upper={self.description.upper!r}, "
            f"since={self.description.since!r}, len={len(self)}, columnar={self._columnar})"
        )

    # ---------------------------------------------------------- internals (cursors, mergers)

    def _key_starts(self) -> Any:
        """Index of the first update of each distinct key (numpy array or list)."""
        k = self._keys
        n = len(k)
        if self._columnar:
            if n == 0:
                return np.zeros(0, dtype=np.int64)
            change = np.flatnonzero(k[1:] != k[:-1])
            change += 1
            return np.concatenate((np.zeros(1, dtype=np.int64), change))
        if n == 0:
            return []
        return [0, *(i for i in range(1, n) if k[i] != k[i - 1])]

    def _key_at(self, i: int) -> Any:
        key = self._keys[i]
        return key.item() if self._columnar else key

    def _seek(self, key: Any, lo: int) -> int:
        """First index ``>= lo`` whose key does not sort before ``key``."""
        if self._columnar:
            return self._int_bound(key, lo, False)
        return _order.bisect_left(self._keys, key, lo, len(self._keys), self._natural)

    def _after(self, key: Any, lo: int) -> int:
        """First index ``>= lo`` whose key sorts after ``key``."""
        if self._columnar:
            return self._int_bound(key, lo, True)
        return _order.bisect_right(self._keys, key, lo, len(self._keys), self._natural)

    def _int_bound(self, key: Any, lo: int, right: bool) -> int:
        k = self._keys
        n: int = len(k)
        c = key.__class__
        if c is int or c is bool:
            x = int(key)
        elif isinstance(key, numbers.Real):
            f = float(key)
            if f != f:  # NaN: unordered, matches nothing
                return n
            if math.isinf(f):
                return n if f > 0 else lo
            # Among ints, "k >= x" is "k >= ceil(x)" and "k > x" is "k > floor(x)".
            x = int(math.floor(key) if right else math.ceil(key))
        else:
            return n  # every non-number sorts after every number
        if x > _I64_MAX:
            return n
        if x < _I64_MIN:
            return lo
        side: Literal["left", "right"] = "right" if right else "left"
        if lo == 0:
            return int(np.searchsorted(k, x, side))
        return lo + int(np.searchsorted(k[lo:], x, side))

    def _rows(self, lo: int, hi: int) -> list[tuple[Any, Time, int]]:
        if hi <= lo:
            return []
        if self._columnar:
            ts = self._times[lo:hi].tolist()
            ds = self._diffs[lo:hi].tolist()
            if self._vals is None:
                return list(zip(repeat((), hi - lo), ts, ds))
            return list(zip(self._vals[lo:hi].tolist(), ts, ds))
        if self._vals is None:
            return list(zip(repeat((), hi - lo), self._times[lo:hi], self._diffs[lo:hi]))
        return list(zip(self._vals[lo:hi], self._times[lo:hi], self._diffs[lo:hi]))

    def _object_columns(self) -> tuple[list[Any], list[Any] | None, list[Any], list[int]]:
        """The columns as Python lists (converted from numpy when columnar)."""
        if self._columnar:
            vs = None if self._vals is None else self._vals.tolist()
            return self._keys.tolist(), vs, self._times.tolist(), self._diffs.tolist()
        return self._keys, self._vals, self._times, self._diffs

    # ------------------------------------------------------------------ invariants

    def _check(self) -> None:
        """Assert the batch invariants (sorted, consolidated, times within the description)."""
        desc = self.description
        desc._check()
        n = len(self._keys)
        assert len(self._times) == n and len(self._diffs) == n
        assert self._vals is None or len(self._vals) == n
        lower, upper, since = desc.lower, desc.upper, desc.since
        check_upper = since.dominates(lower)
        if self._columnar:
            k, v, t, d = self._keys, self._vals, self._times, self._diffs
            for col in (k, v, t, d):
                assert col is None or (col.dtype == np.int64 and col.ndim == 1)
            assert bool(np.all(d != 0))
            if n > 1:
                after = t[1:] > t[:-1]
                if v is not None:
                    after = (v[1:] > v[:-1]) | ((v[1:] == v[:-1]) & after)
                after = (k[1:] > k[:-1]) | ((k[1:] == k[:-1]) & after)
                assert bool(np.all(after)), "columns not strictly sorted by (key, val, time)"
            if n:
                tmin, tmax = int(t.min()), int(t.max())
                for e in lower:
                    assert isinstance(e, int) and tmin >= e, (tmin, lower)
                for e in since:
                    assert isinstance(e, int) and tmin >= e, (tmin, since)
                if check_upper:
                    for e in upper:
                        assert isinstance(e, int) and tmax < e, (tmax, upper)
            return
        assert self._natural == _order.is_safe(self._keys)
        assert all(d.__class__ is int and d != 0 for d in self._diffs)
        prev = None
        for key, val, time, _diff in self.updates():
            current = (_order.ukey(key), _order.ukey(val), _order.ukey(time))
            assert prev is None or prev < current, "updates not strictly sorted"
            prev = current
            assert lower.less_equal(time), (time, lower)
            assert since.is_empty() or advance_by(time, since) == time, (time, since)
            if check_upper:
                assert not upper.less_equal(time), (time, upper)


# ---------------------------------------------------------------------- column helpers


def _describe(col: Any) -> str:
    types = sorted({type(x).__name__ for x in (col.tolist() if hasattr(col, "tolist") else col)})
    return "values of type " + ", ".join(types)


def _all_unit(vals: Sequence[Any], n: int) -> bool:
    if isinstance(vals, (list, tuple)):
        return vals.count(()) == n and set(map(type, vals)) == {tuple}
    return all(v == () and v.__class__ is tuple for v in vals)


def _as_int64(col: Any) -> np.ndarray[Any, Any] | None:
    """``col`` as a fresh int64 array, or None if it holds anything but plain 64-bit ints."""
    if isinstance(col, np.ndarray):
        kind = col.dtype.kind
        if kind == "i":
            return np.array(col, dtype=np.int64)
        if kind == "u":
            if col.size and int(col.max()) > _I64_MAX:
                return None
            return np.array(col, dtype=np.int64)
        if kind == "O":
            return _as_int64(col.tolist())
        return None
    if set(map(type, col)) != {int}:
        return None
    try:
        return np.array(col, dtype=np.int64)
    except OverflowError:
        return None


def _small_int_columns(
    keys: Sequence[Any], vals: Any, times: Any, diffs: Any
) -> tuple[Any, Any, Any, Any] | None:
    """The small-batch path of :meth:`Batch.from_columns` for all-int lists, or None."""
    cols = (keys, times, diffs) if vals is None else (keys, vals, times, diffs)
    for col in cols:
        if not isinstance(col, (list, tuple)) or set(map(type, col)) != {int}:
            return None
        for x in col:
            if not _I64_MIN <= x <= _I64_MAX:
                return None
    return _small_int_arrays(
        list(keys), None if vals is None else list(vals), list(times), list(diffs)
    )


def _pack(k: Any, v: Any, t: Any) -> Any:
    """Pack ``(k, v, t)`` into one int64 whose order is their lexicographic order, or None."""
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


def _sort_consolidate_int(k: Any, v: Any, t: Any, d: Any) -> tuple[Any, Any, Any, Any]:
    """Sort int64 columns by ``(k, v, t)``, sum diffs of equal triples and drop zeros.

    The input arrays must be owned by the caller (they may be reused in the result).
    """
    n = k.shape[0]
    if n <= _SMALL:
        if n > 1 or (n == 1 and not d[0]):
            return _small_int_arrays(
                k.tolist(), None if v is None else v.tolist(), t.tolist(), d.tolist()
            )
        return k, v, t, d
    if n > 1:
        p = _pack(k, v, t)
        if p is None:
            order = np.lexsort((t, k) if v is None else (t, v, k))
            k, t, d = k[order], t[order], d[order]
            if v is not None:
                v = v[order]
            same = (k[1:] == k[:-1]) & (t[1:] == t[:-1])
            if v is not None:
                same &= v[1:] == v[:-1]
        else:
            if bool((p[1:] < p[:-1]).any()):
                order = np.argsort(p, kind="stable")
                p = p[order]
                k, t, d = k[order], t[order], d[order]
                if v is not None:
                    v = v[order]
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


def _small_int_arrays(
    ks: list[int], vs: list[int] | None, ts: list[int], ds: list[int]
) -> tuple[Any, Any, Any, Any]:
    """Sort and consolidate a few int updates in plain Python (numpy calls cost more here)."""
    if vs is None:
        rows = sorted(zip(ks, ts, ds))
        ok: list[int] = []
        ot: list[int] = []
        od: list[int] = []
        for key, time, diff in rows:
            if od and ok[-1] == key and ot[-1] == time:
                od[-1] += diff
            else:
                if od and not od[-1]:
                    ok.pop()
                    ot.pop()
                    od.pop()
                ok.append(key)
                ot.append(time)
                od.append(diff)
        if od and not od[-1]:
            ok.pop()
            ot.pop()
            od.pop()
        arr = np.array
        return arr(ok, dtype=np.int64), None, arr(ot, dtype=np.int64), arr(od, dtype=np.int64)
    rows4 = sorted(zip(ks, vs, ts, ds))
    ok, ot, od = [], [], []
    ov: list[int] = []
    for key, val, time, diff in rows4:
        if od and ok[-1] == key and ov[-1] == val and ot[-1] == time:
            od[-1] += diff
        else:
            if od and not od[-1]:
                ok.pop()
                ov.pop()
                ot.pop()
                od.pop()
            ok.append(key)
            ov.append(val)
            ot.append(time)
            od.append(diff)
    if od and not od[-1]:
        ok.pop()
        ov.pop()
        ot.pop()
        od.pop()
    arr = np.array
    return (
        arr(ok, dtype=np.int64),
        arr(ov, dtype=np.int64),
        arr(ot, dtype=np.int64),
        arr(od, dtype=np.int64),
    )


def _consolidate_objects(
    keys: list[Any], vals: list[Any] | None, times: list[Any], diffs: list[int]
) -> tuple[list[Any], list[Any] | None, list[Any], list[int]]:
    """Consolidate list columns with a dict, then sort them in the universal order."""
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
        return [], (None if vals is None else []), [], []
    natural = _order.is_safe(keys) and (vals is None or _order.is_safe(vals))
    _order.sort_pairs(items, natural)
    triples, ds = zip(*items)
    if vals is None:
        ks, ts = zip(*triples)
        return list(ks), None, list(ts), list(ds)
    ks, vs, ts = zip(*triples)
    return list(ks), list(vs), list(ts), list(ds)


def _sample_size(col: Sequence[Any]) -> int:
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
