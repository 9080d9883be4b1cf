"""A batch's updates as int64 columns: what the numpy kernels read.

The kernels (the join's, :mod:`deltaflow.operators.join.kernel`, and the counting
reductions', :mod:`deltaflow.operators.reduce.columnar`) read the batches an arrangement
sends its readers: a :class:`~.batch.Batch` whose columns are int64 arrays already (a large
batch of int data), a list :class:`~.batch.Batch`, or an arrangement's ``RawBatch`` of Python
lists. :func:`read_columns` turns any of them into :class:`Columns` when its data are ints:
keys ints or pairs of ints (one int64 code per pair, :func:`pack_pairs`), times ints or
``Product`` of two ints, values ints or any Python values; whether they are is found once
per column (a pass over its types, in C), never per update. Columns already int64 are taken
as they are, not copied.

    >>> from deltaflow.framework.antichain import Antichain
    >>> from deltaflow.framework.lattice import Product
    >>> from .description import Description
    >>> def batch(k, v, t, d):  # a small list batch
    ...     return Batch.from_columns(k, v, t, d, Description(Antichain([0]), Antichain()))
    >>> cols = read_columns(batch([(1, 2), (1, 2)], ["a", "b"], [Product(0, 1)] * 2, [1, -1]))
    >>> cols.key_objects(np.array([1])), cols.times.tolist(), cols.vals
    ([(1, 2)], [[0, 1], [0, 1]], ['a', 'b'])
    >>> k, v, t, d = int_columns(batch([3, 1], [7, 7], [0, 2], [1, -1]))
    >>> k.tolist(), v.tolist(), t.tolist(), d.tolist()
    ([1, 3], [7, 7], [2, 0], [-1, 1])
    >>> int_columns(batch(["a"], None, [0], [1])) is None
    True
"""

from __future__ import annotations

from itertools import chain
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from ..lattice import Product
from .batch import Batch
from .codec import INT_CODEC, PRODUCT, TUPLE, as_int64

if TYPE_CHECKING:
    from ..time_domain import TimeDomain

__all__ = [
    "Columns",
    "IntColumns",
    "decode_keys",
    "gather",
    "int_columns",
    "key_codes",
    "lists_columns",
    "pack_pairs",
    "read_columns",
    "unpack_pairs",
]

IntColumns = tuple[np.ndarray, "np.ndarray | None", np.ndarray, np.ndarray]
"""``(keys, vals, times, diffs)`` int64 columns of plain ints; ``vals`` None: every value is
``()``."""

_PAIR_BOUND = 1 << 31
"""Components of a pair key within ``[-_PAIR_BOUND, _PAIR_BOUND)`` pack into one int64."""


@attrs.define(slots=True, eq=False)
class Columns:
    """One batch's updates as columns: int64 ``keys`` (ints, or the codes of int pairs, see
    :func:`pack_pairs`, then ``objs`` holds the pairs themselves; else None); ``vals`` an
    int64 array, a list of objects, or None (every value ``()``); ``times`` int64, of shape
    ``(n,)`` for int times or ``(n, 2)`` for ``Product(int, int)``; int64 ``diffs``."""

    keys: Any
    vals: Any
    times: Any
    diffs: Any
    objs: list[Any] | None = None

    def __len__(self) -> int:
        return len(self.keys)

    def take(self, order: Any) -> Columns:
        """The rows at ``order`` (an int array), in that order."""
        return Columns(
            self.keys[order],
            gather(self.vals, order),
            self.times[order],
            self.diffs[order],
            gather(self.objs, order),
        )

    def key_objects(self, rows: Any) -> list[Any]:
        """The keys at ``rows`` as Python values."""
        if self.objs is None:
            return self.keys[rows].tolist()  # type: ignore[no-any-return]
        return gather(self.objs, rows)  # type: ignore[no-any-return]


def gather(vals: Any, idx: Any) -> Any:
    """``vals`` (an array, a list, or None) at the int array ``idx``."""
    if vals is None:
        return None
    if isinstance(vals, np.ndarray):
        return vals[idx]
    return list(map(vals.__getitem__, idx.tolist()))


def pack_pairs(first: Any, second: Any) -> Any:
    """One int64 code per pair of int32-range components: equal codes iff equal pairs (the
    codes' order means nothing; runs are sorted by it only to be searched), or None if a
    component is out of range.

    >>> pack_pairs(np.array([1, 1]), np.array([2, -1])).tolist()
    [4294967298, 8589934591]
    """
    for part in (first, second):
        if len(part) and (int(part.min()) < -_PAIR_BOUND or int(part.max()) >= _PAIR_BOUND):
            return None
    return (first << 32) + (second & 0xFFFFFFFF)


def unpack_pairs(codes: Any) -> list[Any]:
    """The pairs that :func:`pack_pairs` made ``codes`` of.

    >>> unpack_pairs(pack_pairs(np.array([1, 1]), np.array([2, -1])))
    [(1, 2), (1, -1)]
    """
    second = codes & 0xFFFFFFFF
    second = np.where(second >= _PAIR_BOUND, second - (1 << 32), second)
    return list(zip((codes >> 32).tolist(), second.tolist()))


def read_columns(
    batch: Any, *, plain: bool = False, domain: TimeDomain | None = None
) -> Columns | None:
    """The batch as :class:`Columns` when its keys are ints or pairs of ints and its times ints
    or ``Product`` of two ints (with ``plain``: keys, values and times all plain ints); None
    otherwise (the caller keeps the row path). ``batch`` is a :class:`~.batch.Batch` or has
    ``object_columns()`` (an arrangement's ``RawBatch``). ``domain``: the time domain of the
    batch's scope, whose codec reads the times (every time is of its shape; without it the
    times' shape is found from the column).
    """
    if len(batch) == 0:
        return None
    if batch.__class__ is Batch and batch.encoded:
        return _encoded(batch, plain)
    return lists_columns(*batch.object_columns(), plain=plain, domain=domain)


def lists_columns(
    keys: Any,
    vals: Any,
    times: Any,
    diffs: Any,
    *,
    plain: bool = False,
    domain: TimeDomain | None = None,
) -> Columns | None:
    """:func:`read_columns` of four columns given as Python lists (``vals`` None: every value
    is ``()``)."""
    objs = None
    if keys[0].__class__ is tuple and not plain:
        k = pair_keys(keys)
        objs = keys
    else:
        k = as_int64(keys)
    if k is None:
        return None
    if plain:
        t = as_int64(times)
    elif domain is not None and not isinstance(times, np.ndarray):
        t = _domain_times(times, domain)
    else:
        t = _time_array(times)
    if t is None:
        return None
    d = as_int64(diffs)
    if d is None:
        return None
    if plain and vals is not None:
        vals = as_int64(vals)
        if vals is None:
            return None
    return Columns(k, vals, t, d, objs)


def _encoded(batch: Batch, plain: bool) -> Columns | None:
    """:func:`read_columns` of a batch whose columns are int64 codes."""
    keys, vcodes, tcodes, diffs = batch.columns
    if plain and not batch.columnar:
        return None
    objs = None
    kc = batch.key_codec
    if kc is not INT_CODEC:
        if kc.kind != TUPLE or kc.arity != 2:
            return None
        objs = kc.decode(keys)
        keys = pack_pairs(*kc.decode_arrays(keys))
        if keys is None:
            return None
    tc = batch.time_codec
    if tc is INT_CODEC:
        times = tcodes
    elif tc.kind == PRODUCT and tc.arity == 2:
        times = np.stack(tc.decode_arrays(tcodes), axis=1)
    else:
        return None
    if vcodes is None:
        vals = None
    elif batch.val_codec is INT_CODEC:
        vals = vcodes
    else:
        vals = batch.val_codec.decode(vcodes)
    return Columns(keys, vals, times, np.asarray(diffs, dtype=np.int64), objs)


def int_like(data: list[Any]) -> bool:
    """Whether every datum is a plain int, or every one a tuple of plain ints (a pass over
    the data's types, and their parts' when tuples).

    >>> int_like([1, 2]), int_like([(1, 2), (3,)]), int_like([1, (2, 3)]), int_like([1.0])
    (True, True, False, False)
    """
    types = set(map(type, data))
    if types == {int}:
        return True
    return types == {tuple} and set(map(type, chain.from_iterable(data))) == {int}


def int_data(data: list[Any], unit: bool) -> tuple[np.ndarray, np.ndarray | None] | None:
    """The keys and values of a message's data as int64 columns: ``unit``, data that are
    plain ints (keys; values None), else pairs (plain tuples of two) of plain ints; None for
    any other data (one pass over the data's types, never a test per datum).

    >>> k, v = int_data([(3, 4), (5, 6)], unit=False)
    >>> k.tolist(), v.tolist()
    ([3, 5], [4, 6])
    >>> int_data([(3, 4), (5, "a")], unit=False) is None
    True
    """
    if unit:
        keys = as_int64(data)
        return None if keys is None else (keys, None)
    if not data or set(map(type, data)) != {tuple}:
        return None
    pairs = _int_pairs(data)
    if pairs is None:
        return None
    return pairs[:, 0], pairs[:, 1]


def int_columns(batch: Any) -> IntColumns | None:
    """A batch's updates as int64 columns, or None when a key, value, time or diff is not a
    plain 64-bit int (one check per column, never per update). The columns returned may be
    the batch's own: callers must not change them."""
    cols = read_columns(batch, plain=True)
    return None if cols is None else (cols.keys, cols.vals, cols.times, cols.diffs)


def _int_pairs(pairs: list[Any]) -> Any:
    """An ``(n, 2)`` int64 array of a list of pairs (tuples) of plain ints, or None."""
    if set(map(len, pairs)) != {2} or set(map(type, chain.from_iterable(pairs))) != {int}:
        return None
    try:
        flat = np.fromiter(chain.from_iterable(pairs), dtype=np.int64, count=2 * len(pairs))
    except OverflowError:
        return None
    return flat.reshape(-1, 2)


def pair_keys(keys: list[Any]) -> Any:
    """Codes of a list of ``(int, int)`` keys (plain tuples), or None."""
    if set(map(type, keys)) != {tuple}:
        return None
    arr = _int_pairs(keys)
    return None if arr is None else pack_pairs(arr[:, 0], arr[:, 1])


def key_codes(keys: list[Any]) -> tuple[np.ndarray, bool] | None:
    """Keys as int64 codes, and whether they were pairs: plain ints as themselves,
    ``(int, int)`` tuples of 32-bit ints packed into one (:func:`pack_pairs`); None for any
    other keys (one pass over the column, no test per key).

    >>> key_codes([3, -1])
    (array([ 3, -1]), False)
    >>> codes, pairs = key_codes([(1, 2), (-1, 5)]); decode_keys(codes, pairs)
    [(1, 2), (-1, 5)]
    >>> key_codes([(1, "a")]) is None, key_codes([(1, 2, 3)]) is None
    (True, True)
    """
    if set(map(type, keys)) == {int}:
        ints = as_int64(keys)
        return None if ints is None else (ints, False)
    codes = pair_keys(keys)
    return None if codes is None else (codes, True)


def decode_keys(codes: np.ndarray, pairs: bool) -> list[Any]:
    """The keys :func:`key_codes` made ``codes`` of."""
    return unpack_pairs(codes) if pairs else codes.tolist()


def _domain_times(times: list[Any], domain: TimeDomain) -> np.ndarray | None:
    """Times of one scope as its domain's columns (None: it keeps them as objects); one time
    for all (the usual message) converted once."""
    n = len(times)
    first = times[0]
    if times.count(first) == n:
        one = domain.to_columns([first])
        return None if one is None else np.repeat(one, n, axis=0)
    return domain.to_columns(times)


def _time_array(times: Any) -> Any:
    """Times as int64 ``(n,)`` (ints) or ``(n, 2)`` (``Product`` of two ints), else None."""
    if isinstance(times, np.ndarray):
        return as_int64(times) if times.ndim == 1 else None
    n = len(times)
    first = times[0]
    if times.count(first) == n:  # one time for all (the usual message)
        kind = first.__class__
        if kind is int:
            return np.full(n, first, dtype=np.int64)
        if kind is Product and first[0].__class__ is int and first[1].__class__ is int:
            return np.tile(np.array(first, dtype=np.int64), (n, 1))
        return None
    kinds = set(map(type, times))
    if kinds == {int}:
        return as_int64(times)
    if kinds != {Product}:
        return None
    return _int_pairs(times)
