"""A batch's layout: Python lists or ``int64`` code columns, chosen by size first and by data
second, and the columns of each built sorted and consolidated.

*Lists* (:attr:`.Batch.encoded` False): four Python lists (the value list is ``None`` when every
value is ``()``). This is the layout of

* every batch :meth:`.Batch.from_columns` builds from at most :attr:`.Batch.TINY` updates, whatever
  the data: a few rows are sorted as tuples and consolidated by summing equal neighbours in
  less time than a single numpy call takes (when keys and values are not mutually comparable,
  they are consolidated with a dict and sorted in the universal order instead);
* every batch a :class:`~.merger.Merger` makes from at most ``Merger.SMALL_MERGE`` updates, or
  whose result is that small, or from two list batches of at most :attr:`.Batch.LIST_ROWS` updates
  in all (see :mod:`.merger`);
* batches whose data cannot be encoded (strings, mixed types, huge ints, nested products,
  batches mixing int and product times), at any size, and ``force_objects=True``.

A list batch of at most :attr:`.Batch.CACHED_ROWS` updates builds, the first time it is read, a dict
from each key to its rows (when its keys are of classes whose ``==`` agrees with the universal
order, :data:`HASHED`), so a lookup is one dict probe: the batches a trace seals every round
and looks up right away never touch numpy. Larger ones are searched by bisection.

*Numpy* (:attr:`.Batch.encoded` True): ``int64`` columns sorted and consolidated with vectorised
numpy (the sort columns are packed into one integer when their ranges fit in 62 bits, one
stable argsort; otherwise ``np.lexsort``). Batches of more than :attr:`.Batch.TINY` updates whose
data allows it, and merges of those, use it:

* *plain ints*: every key, value and time a plain ``int`` (``bool`` excluded) within 64 bits;
  the four columns hold the values themselves (32 bytes per update). :attr:`.Batch.columnar`
  is True exactly for these.
* *encoded*: keys that are plain ints or tuples of plain ints (all of one length), values that
  are plain ints, tuples of ints or ``Product(int, int)``, and times that are plain ints or
  ``Product(int, int)`` (the times inside ``iterate``). Each such column holds *codes*: a
  per-column :class:`Codec` maps a value ``(c_1, ..., c_m)`` to
  ``sum((c_i - offset_i) << shift_i)``, the components packed most significant first in
  fixed bit widths. Packing preserves order (the lexicographic order of the components, which
  is the universal order of int tuples and the total order of products), so sorting, searching
  and consolidating codes is sorting, searching and consolidating the values. Offsets are 0 for
  non-negative components and widths are rounded up to a multiple of 4 bits, so that batches of
  similar data share one codec and merge without re-encoding. A column whose components need
  more than 63 bits stays on the list layout. Lookups and iteration decode codes back to Python
  tuples and :class:`~deltaflow.framework.lattice.Product` objects; products are interned per
  codec (each distinct time is one object, its hash computed once), so handing out times costs
  a dict lookup, not a constructor call. A lookup decodes only the rows it finds: a few rows
  element by element (``ndarray.item``), many with one vectorised gather. A numpy batch of
  at most :attr:`.Batch.CACHED_ROWS` updates that is read more than
  :attr:`.Batch.CACHE_AFTER` times decodes all its rows and builds the same dict index as a
  list batch.

A list batch of encodable data is encoded (O(n), no sorting: encoding preserves the order)
when it meets a numpy batch in a merge too large for plain Python, so the merge stays
vectorised. Everything a batch hands out is plain Python: ``int``, not numpy scalars.
Footgun: ``Batch.from_columns(..., force_objects=True)`` builds the list layout for the same
updates at any size; it is for tests and comparisons, it is never faster.

The functions here return a batch's columns as :data:`Columns`, in the order of the batch's
fields (keys, values, times, diffs, numpy layout, natural keys, key, value and time codecs);
:class:`~.batch.Batch` is built from them.

    >>> cols = sorted_columns([2, 1, 2], None, [0, 0, 0], [1, 1, 1],
    ...                       force_objects=False, tiny=32, small=48)
    >>> cols[:5]
    ([1, 2], None, [0, 0], [1, 2], False)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..lattice import Time
from .codec import INT_CODEC, INT_TYPES, Codec, as_int64
from .columns import (
    all_unit,
    as_array,
    consolidate_objects,
    describe_types,
    encode_columns,
    small_int_arrays,
    small_int_columns,
    sort_consolidate_int,
)

__all__ = ["Columns", "encoded_columns", "list_columns", "sorted_columns"]

#: A batch's columns and layout, in the order of its fields: keys, values (``None``: every
#: value is ``()``), times, diffs, numpy layout, natural keys, key, value and time codecs.
Columns = tuple[Any, Any, Any, Any, bool, bool, Codec, Codec, Codec]


def sorted_columns(
    keys: Sequence[Any] | np.ndarray[Any, Any],
    vals: Sequence[Any] | np.ndarray[Any, Any] | None,
    times: Sequence[Time] | np.ndarray[Any, Any],
    diffs: Sequence[int] | np.ndarray[Any, Any],
    *,
    force_objects: bool,
    tiny: int,
    small: int,
) -> Columns:
    """The columns of a batch of the ``n >= 1`` updates given (four equally long columns),
    sorted and consolidated, in the layout their size and data allow.

    At most ``tiny`` updates, or ``force_objects``, make the list layout; beyond that, data
    that can be encoded takes numpy (at most ``small`` updates given as lists are sorted in
    plain Python first). See :meth:`.Batch.from_columns`.

    Raises:
        TypeError: if a diff is not an integer.
    """
    n = len(keys)
    if vals is not None:
        if isinstance(vals, np.ndarray):
            if vals.dtype.kind == "O":
                vals = vals.tolist()
        elif all_unit(vals, n):
            vals = None
    if not force_objects and n > tiny:
        few = n <= small and isinstance(keys, (list, tuple))
        if few and isinstance(keys, (list, tuple)):
            ints = small_int_columns(keys, vals, times, diffs)
            if ints is not None:
                k, v, t, d = ints
                return k, v, t, d, True, True, INT_CODEC, INT_CODEC, INT_CODEC
        encoded = encode_columns(keys, vals, times, few)
        if encoded is not None:
            (kc, k), vcoded, (tc, t) = encoded
            vc, v = (INT_CODEC, None) if vcoded is None else vcoded
            if few and isinstance(k, list):
                ds = diffs.tolist() if isinstance(diffs, np.ndarray) else list(diffs)
                if set(map(type, ds)) != INT_TYPES:
                    msg = f"diffs must be integers; got {describe_types(ds)}"
                    raise TypeError(msg)
                if isinstance(t, list) and (v is None or isinstance(v, list)):
                    k, v, t, d = small_int_arrays(k, v, t, ds)
                    return k, v, t, d, True, True, kc, vc, tc
            k, v, t = (as_array(c) for c in (k, v, t))
            d = as_int64(diffs)
            if d is None:
                msg = f"diffs must be integers; got {describe_types(diffs)}"
                raise TypeError(msg)
            assert k is not None and t is not None
            k, v, t, d = sort_consolidate_int(k, v, t, d, small)
            return k, v, t, d, True, True, kc, vc, tc
    # The list layout. Consolidation reads the columns without keeping or changing them.
    ks = keys.tolist() if isinstance(keys, np.ndarray) else keys
    vs = vals.tolist() if isinstance(vals, np.ndarray) else vals
    ts = times.tolist() if isinstance(times, np.ndarray) else times
    ds = diffs.tolist() if isinstance(diffs, np.ndarray) else diffs
    if not set(map(type, ds)) <= INT_TYPES:
        msg = f"diffs must be ints; got {describe_types(ds)}"
        raise TypeError(msg)
    return list_columns(*consolidate_objects(ks, vs, ts, ds))


def list_columns(
    keys: list[Any], vals: list[Any] | None, times: list[Any], diffs: list[int], natural: bool
) -> Columns:
    """The list layout of columns already sorted and consolidated (``natural``: every key's
    class is one whose ``<`` agrees with the universal order)."""
    if not keys:
        return [], None, [], [], False, True, INT_CODEC, INT_CODEC, INT_CODEC
    if vals is not None and all_unit(vals, len(vals)):
        vals = None
    return keys, vals, times, diffs, False, natural, INT_CODEC, INT_CODEC, INT_CODEC


def encoded_columns(
    keys: list[Any], vals: list[Any] | None, times: list[Any], diffs: list[int]
) -> Columns | None:
    """The numpy layout of list columns already sorted and consolidated, or None when their
    data cannot be encoded (or there are none).

    Runtime complexity: O(n), in Python (for list batches of a few hundred updates).
    """
    if not keys:
        return None
    encoded = encode_columns(keys, vals, times, False)
    if encoded is None:
        return None
    try:
        d = np.array(diffs, dtype=np.int64)
    except OverflowError:
        return None
    (kc, k), vcoded, (tc, t) = encoded
    vc, v = (INT_CODEC, None) if vcoded is None else vcoded
    # The universal order of encodable values is the order of their codes: no sorting.
    return k, v, t, d, True, True, kc, vc, tc
