"""Batches: immutable, sorted, consolidated runs of ``(key, val, time, diff)`` updates.

A :class:`Batch` is the unit a trace stores, merges and shares between readers. Its invariants:

* updates are sorted by ``(key, val, time)`` in deltaflow's total order (times by their total
  order; keys and values by the universal order of :mod:`.order`, which agrees with ``<``
  whenever ``<`` works);
* no two updates have equal ``(key, val, time)`` and no diff is zero (the batch is
  *consolidated*);
* every time is beyond ``description.lower``, and is left unchanged by
  ``advance_by(time, description.since)`` (it has been compacted to ``since``);
* it never changes after construction, so many readers may hold it at once.

A batch has one of two layouts, chosen by size first and by data second (see :mod:`.layout`):
Python lists, or ``int64`` columns of codes sorted and consolidated with numpy. Everything a
batch hands out is plain Python: ``int``, not numpy scalars.

    >>> from deltaflow.framework.antichain import Antichain
    >>> d = Description(Antichain([0]), Antichain([3]))
    >>> b = Batch.from_updates([(2, 7, 1, 1), (1, 5, 0, 1), (2, 7, 1, 2), (1, 5, 2, -1)], d)
    >>> list(b.updates())
    [(1, 5, 0, 1), (1, 5, 2, -1), (2, 7, 1, 3)]
    >>> b.lookup(2), b.encoded
    ([(7, 1, 3)], False)
    >>> big = Batch.from_updates([(k, 7, 1, 1) for k in range(100)], d)
    >>> big.lookup(2), big.encoded, big.columnar
    ([(7, 1, 1)], True, True)
    >>> from deltaflow.framework.lattice import Product
    >>> pd = Description(Antichain([Product(0, 0)]), Antichain([Product(1, 0)]))
    >>> rows = [((k, 2), (), Product(0, k % 4), 1) for k in range(40)]
    >>> p = Batch.from_updates(rows, pd)
    >>> p.lookup((1, 2)), p.encoded, p.columnar
    ([((), Product(outer=0, inner=1), 1)], True, False)
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from typing import Any, ClassVar

import attrs
import numpy as np

from .. import tuning
from ..antichain import Antichain
from ..lattice import Time, advance_by
from . import order
from .codec import (
    INT,
    INT_CODEC,
    PRODUCT,
    TUPLE,
    Codec,
    encode_column,
)
from .columns import (
    all_unit,
    index_lists,
    pack_int64,
    sample_size,
)
from .description import Description
from .layout import encoded_columns, list_columns, sorted_columns
from .probes import HASHED, Probes, coded_bound, int_bound, item_rows, make_readers

__all__ = ["Batch", "Update", "pack_int64"]

Update = tuple[Any, Any, Time, int]

_NOTHING: Any = object()  # equal to nothing but itself


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

    #: Up to this many updates, :meth:`from_columns` builds a list batch: sorting and
    #: consolidating a few rows in Python, and reading them through a dict, costs less than
    #: any numpy call.
    TINY: ClassVar[int] = tuning.BATCH_TINY
    #: Up to this many updates, int columns are sorted and consolidated in plain Python
    #: (the fixed cost of a dozen numpy calls is higher).
    SMALL: ClassVar[int] = tuning.BATCH_SMALL
    #: Up to this many rows found in a large numpy batch, lookups read them element by
    #: element (``ndarray.item``) instead of with vectorised gathers, whose fixed cost is
    #: higher.
    FEW: ClassVar[int] = tuning.BATCH_FEW
    #: A small batch answers a spine's lookup_many of more than ``MANY_PROBES`` keys by
    #: looking up its own keys among the probes when there are more than ``PROBES_PER_KEY``
    #: probes per key it holds.
    MANY_PROBES: ClassVar[int] = tuning.BATCH_MANY_PROBES
    PROBES_PER_KEY: ClassVar[int] = tuning.BATCH_PROBES_PER_KEY
    #: Batches up to this size keep a dict from key to rows once read (numpy batches also
    #: keep their decoded rows).
    CACHED_ROWS: ClassVar[int] = tuning.BATCH_CACHED_ROWS
    #: A small numpy batch builds that index (decoding every row) on its read after this many
    #: reads; until then reads decode only the rows they find (few reads never pay a full
    #: decode).
    CACHE_AFTER: ClassVar[int] = tuning.BATCH_CACHE_AFTER
    #: List batches up to this size may be encoded when they meet an encoded batch in a merge
    #: (so the merge stays vectorised); two list batches of at most this many updates in all
    #: merge in plain Python (encoding both would cost more).
    LIST_ROWS: ClassVar[int] = tuning.BATCH_LIST_ROWS

    description: Description
    _keys: Any
    _vals: Any  # None: every value is ()
    _times: Any
    _diffs: Any
    _columnar: bool  # numpy int64 code columns (plain ints or encoded); else Python lists
    _natural: bool  # object storage only: every key's type is one of order.SAFE_TYPES
    _kc: Codec = INT_CODEC
    _vc: Codec = INT_CODEC
    _tc: Codec = INT_CODEC
    # Small batches keep a rows-by-key index once read (numpy ones also their decoded rows;
    # the batch never changes); see _cache.
    _cached: tuple[list[Any] | None, dict[Any, tuple[Any, ...]] | None] | None = attrs.field(
        init=False, default=None
    )
    # Numpy batches keep their scalar accessors once read; see _make_readers.
    _readers: tuple[Any, ...] | None = attrs.field(init=False, default=None)
    # Reads of a small numpy batch so far (it builds its index after a few; see _use_index).
    _reads: int = attrs.field(init=False, default=0)

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
    def from_updates(
        cls, updates: Iterable[Update], description: Description, *, force_objects: bool = False
    ) -> Batch:
        """Sort and consolidate ``(key, val, time, diff)`` updates into a batch.

        Times are stored as given (callers advance them first if they want compaction).

        Args:
            updates: the updates; diffs must be ints.
            description: the interval the updates belong to.
            force_objects: store Python lists even when the data could be encoded (for tests
                and comparisons).

        Raises:
            ValueError: if an update is not a 4-tuple.
            TypeError: if a diff is not an int.

        Runtime complexity: O(n log n); vectorised numpy when the data can be encoded.

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
        return cls.from_columns(keys, vals, times, diffs, description, force_objects=force_objects)

    @classmethod
    def from_columns(
        cls,
        keys: Sequence[Any] | np.ndarray[Any, Any],
        vals: Sequence[Any] | np.ndarray[Any, Any] | None,
        times: Sequence[Time] | np.ndarray[Any, Any],
        diffs: Sequence[int] | np.ndarray[Any, Any],
        description: Description,
        *,
        force_objects: bool = False,
    ) -> Batch:
        """Sort and consolidate updates given as four equally long columns.

        ``vals=None`` means every value is ``()``. At most :attr:`Batch.TINY` updates make a list
        batch (see :mod:`.layout`). Beyond that, integer numpy arrays (or lists of plain
        ints, int tuples or ``Product(int, int)`` times) take the vectorised path. The inputs
        are copied, never kept. ``force_objects`` stores Python lists whatever the data.

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
        columns = sorted_columns(
            keys, vals, times, diffs, force_objects=force_objects, tiny=cls.TINY, small=cls.SMALL
        )
        return cls(description, *columns)

    @classmethod
    def from_sorted_lists(
        cls,
        description: Description,
        keys: list[Any],
        vals: list[Any] | None,
        times: list[Any],
        diffs: list[int],
        natural: bool,
    ) -> Batch:
        """A list batch of already sorted and consolidated columns (``natural``: see _natural)."""
        return cls(description, *list_columns(keys, vals, times, diffs, natural))

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
        """True when the columns are numpy ``int64`` arrays of plain ints (the all-int path).

        Its key column is then the sorted int64 array of the keys themselves.
        """
        return (
            self._columnar
            and self._kc is INT_CODEC
            and self._tc is INT_CODEC
            and (self._vals is None or self._vc is INT_CODEC)
        )

    @property
    def encoded(self) -> bool:
        """True when the columns are numpy ``int64`` code arrays (plain ints or encoded);
        False for the list layout (small batches and data that cannot be encoded).

        >>> from deltaflow.framework.antichain import Antichain
        >>> d = Description(Antichain([0]), Antichain([1]))
        >>> Batch.from_updates([((1, k), 0, 0, 1) for k in range(50)], d).encoded
        True
        >>> Batch.from_updates([((1, 2), 0, 0, 1)], d).encoded
        False
        """
        return self._columnar

    @property
    def unit_values(self) -> bool:
        """True when every value is ``()`` (the value column is not stored)."""
        return self._vals is None

    @property
    def columns(self) -> tuple[Any, Any, Any, Any]:
        """The stored ``(keys, vals, times, diffs)`` columns, shared, not copied.

        int64 code arrays (see :attr:`key_codec`, :attr:`val_codec`, :attr:`time_codec`)
        when :attr:`encoded`, Python lists otherwise; ``vals`` is None when
        :attr:`unit_values`. Callers must not change them.
        """
        return self._keys, self._vals, self._times, self._diffs

    @property
    def key_codec(self) -> Codec:
        """The codec of the key column (``INT_CODEC`` for plain ints and list batches)."""
        return self._kc

    @property
    def val_codec(self) -> Codec:
        """The codec of the value column (``INT_CODEC`` for plain ints and list batches)."""
        return self._vc

    @property
    def time_codec(self) -> Codec:
        """The codec of the time column (``INT_CODEC`` for plain ints and list batches)."""
        return self._tc

    @property
    def natural_keys(self) -> bool:
        """True when every key is of one of :data:`.order.SAFE_TYPES` (always, if encoded)."""
        return self._natural

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
            return self._kc.decode(self._keys[self._key_starts()])
        keys = self._keys
        return [keys[i] for i in self._key_starts()]

    def lookup(self, key: Any) -> list[tuple[Any, Time, int]]:
        """The ``(val, time, diff)`` updates of ``key``, sorted by ``(val, time)``.

        Runtime complexity: O(log n + k) for k results; O(k) for a batch of at most
        :attr:`Batch.CACHED_ROWS` updates (a dict probe, once its index is built in O(n)).

        >>> from deltaflow.framework.antichain import Antichain
        >>> d = Description(Antichain([0]), Antichain([9]))
        >>> b = Batch.from_updates([(1, "x", 0, 1), (2, "y", 3, 1)], d)
        >>> b.lookup(2), b.lookup(5)
        ([('y', 3, 1)], [])
        """
        if len(self._keys) <= self.CACHED_ROWS and key.__class__ in HASHED and self._use_index():
            index = self._cache()[1]
            if index is not None:
                try:
                    found = index.get(key)
                except TypeError:  # a tuple holding something unhashable
                    pass
                else:
                    return list(found) if found else []
        return self._search(key)

    def _search(self, key: Any) -> list[tuple[Any, Time, int]]:
        """:meth:`lookup` by binary search (no index)."""
        lo = self.seek(key, 0)
        hi = self.after(key, lo)
        return self.rows(lo, hi)

    def lookup_many(self, keys: Sequence[Any] | Probes) -> dict[Any, list[tuple[Any, Time, int]]]:
        """The ``(val, time, diff)`` updates of each of ``keys``; keys without any are absent.

        Equivalent to ``{k: self.lookup(k) for k in keys if self.lookup(k)}`` (each list is
        the caller's own), but cheaper. A batch of at most ``CACHED_ROWS`` updates keeps a
        dict from key to rows once read (numpy's fixed cost per call dominates there; a numpy
        batch builds it after a few reads, and also keeps its decoded rows), so each key costs
        one dict probe. For a larger (or rarely read) numpy batch, the keys of the batch's own
        shape (plain ints, or int tuples of its length) are encoded and found with one
        vectorised ``searchsorted`` of all their first and past-the-end positions, and the
        rows found are decoded together (element by element when few); other keys that
        may still be equal (``1.0``, ``True``, tuple subclasses) are looked up one by one.

        ``keys`` may also be a ``Probes`` (what :meth:`Spine.lookup_many` passes), which
        checks and encodes the keys once for all the batches sharing a key codec.

        Runtime complexity: O(k log n) in numpy plus O(k + r) Python work for k keys and r rows
        found; O(k + r) for a small batch (after an O(n) first use); O(k log n + r) with
        Python bisection for a large list batch.

        >>> from deltaflow.framework.antichain import Antichain
        >>> d = Description(Antichain([0]), Antichain([9]))
        >>> b = Batch.from_updates([(1, 5, 0, 1), (2, 6, 1, 1), (2, 7, 0, 1)], d)
        >>> b.lookup_many([2, 3, 1])
        {2: [(6, 1, 1), (7, 0, 1)], 1: [(5, 0, 1)]}
        """
        out: dict[Any, list[tuple[Any, Time, int]]] = {}
        n = len(self._keys)
        if not n:
            return out
        if n <= self.CACHED_ROWS and self._use_index():
            return self._lookup_small(keys)
        if not self._columnar:
            search = self._search
            for key in keys.keys if isinstance(keys, Probes) else keys:
                rows = search(key)
                if rows:
                    out[key] = rows
            return out
        if not isinstance(keys, Probes):
            keys = Probes(keys)
        probes, search, others = keys.encoded(self._kc)
        if probes:
            bounds = self._keys.searchsorted(search).tolist()
            m = len(probes)
            los, his = bounds[:m], bounds[m:]
            if los != his:
                if sum(his) - sum(los) <= self.FEW:  # rows found, over all probes
                    item_rows(self._readers or self._make_readers(), probes, los, his, out)
                else:
                    hits = [hit for hit in zip(probes, los, his) if hit[1] < hit[2]]
                    found, flos, fhis = zip(*hits)
                    for key, rows in zip(found, self._rows_many(flos, fhis)):
                        out[key] = rows
        if others:
            lookup = self.lookup
            for key in others:
                rows = lookup(key)
                if rows:
                    out[key] = rows
        return out

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
        ks, vs, ts, ds = self.object_columns()
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
        ks, vs, ts, ds = self.object_columns()
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
                total += sys.getsizeof(col) + sample_size(col)
        return total

    def __repr__(self) -> str:
        return (
            f"Batch(lower={self.description.lower!r}, upper={self.description.upper!r}, "
            f"since={self.description.since!r}, len={len(self)}, columnar={self.columnar})"
        )

    # ------------------------------------------------------ positions (cursors, mergers)

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

    def _use_index(self) -> bool:
        """Whether a read of this small batch goes through its dict index (see _cache).

        List batches always do; a numpy batch from its read after :attr:`Batch.CACHE_AFTER`
        (counting this one), so that a batch read only a few times never decodes every row.
        """
        if self._cached is not None or not self._columnar:
            return True
        reads = self._reads + 1
        object.__setattr__(self, "_reads", reads)
        return reads > self.CACHE_AFTER

    def _lookup_small(self, keys: Sequence[Any] | Probes) -> dict[Any, list[tuple[Any, Time, int]]]:
        """:meth:`lookup_many` of a small batch: one dict probe per key (see _cache), or per
        stored key when there are many more probes than stored keys."""
        out: dict[Any, list[tuple[Any, Time, int]]] = {}
        index = self._cache()[1]
        search = self._search
        if isinstance(keys, Probes):
            k = len(keys.keys)
            if index is not None and k > self.MANY_PROBES and len(index) * self.PROBES_PER_KEY < k:
                first, rest = keys.by_key()
                get_probe = first.get
                for key, stored in index.items():
                    probe = get_probe(key, _NOTHING)
                    if probe is not _NOTHING:
                        out[probe] = list(stored)
                for key in rest:
                    rows = search(key)
                    if rows:
                        out[key] = rows
                return out
            keys = keys.keys
        if index is None:
            for key in keys:
                rows = search(key)
                if rows:
                    out[key] = rows
            return out
        get = index.get
        hashed = HASHED
        for key in keys:
            if key.__class__ in hashed:
                # Equality of these agrees with the universal order (as lookup compares).
                try:
                    found: Any = get(key)
                except TypeError:  # a tuple holding something unhashable
                    found = search(key)
                if found:
                    out[key] = list(found)
            else:
                rows = search(key)
                if rows:
                    out[key] = rows
        return out

    def _cache(
        self,
    ) -> tuple[list[tuple[Any, Time, int]] | None, dict[Any, tuple[Any, ...]] | None]:
        """``(rows, index)`` of a small batch, built on first use.

        ``index`` maps each key to its rows; it is None for a list batch holding a key whose
        class is not in :data:`HASHED` (lookups then bisect). ``rows`` are the decoded rows
        of a numpy batch, None for a list batch (whose rows are its lists). Lookups of a batch
        of at most :attr:`Batch.CACHED_ROWS` updates are then dict probes and list slices instead
        of numpy calls, whose fixed cost dominates for small batches.
        """
        cached = self._cached
        if cached is None:
            keys = self._keys
            n = len(keys)
            if self._columnar:
                rows: list[tuple[Any, Time, int]] | None = self._decoded_rows(0, n)
                assert rows is not None
                starts: list[int] = self._key_starts().tolist()
                distinct = self._kc.decode(keys[starts])
                ends = [*starts[1:], n]
                index = {k: tuple(rows[a:b]) for k, a, b in zip(distinct, starts, ends)}
                cached = (rows, index)
            elif set(map(type, keys)) <= HASHED:
                cached = (None, index_lists(keys, self.rows(0, n)))
            else:
                cached = (None, None)
            object.__setattr__(self, "_cached", cached)
        return cached

    def redescribed(self, description: Description) -> Batch:
        """The same updates under another ``description`` (sharing columns and caches).

        The caller guarantees the updates satisfy the batch invariants for it.
        """
        b = Batch(
            description,
            self._keys,
            self._vals,
            self._times,
            self._diffs,
            self._columnar,
            self._natural,
            self._kc,
            self._vc,
            self._tc,
        )
        object.__setattr__(b, "_cached", self._cached)
        object.__setattr__(b, "_readers", self._readers)
        return b

    def as_encoded(self) -> Batch | None:
        """This batch in the numpy layout (same updates and description), or None when its
        data cannot be encoded (a numpy batch is returned as is).

        Runtime complexity: O(n), in Python (for list batches of a few hundred updates).
        """
        if self._columnar:
            return self
        columns = encoded_columns(self._keys, self._vals, self._times, self._diffs)
        return None if columns is None else Batch(self.description, *columns)

    def _rows_many(
        self, los: Sequence[int], his: Sequence[int]
    ) -> list[list[tuple[Any, Time, int]]]:
        """The rows of several index ranges at once (numpy batches), a list each.

        Decodes the span from the first range to the last in one go when the ranges cover
        much of it, and gathers just their rows with fancy indexing otherwise.
        """
        base, top = min(los), max(his)
        total = sum(his) - sum(los)
        if top - base <= 4 * total + 256:
            rows = self.rows(base, top)
            return [rows[a - base : b - base] for a, b in zip(los, his)]
        lo = np.array(los, dtype=np.int64)
        lens = np.array(his, dtype=np.int64)
        lens -= lo
        ends = np.cumsum(lens)
        starts = ends - lens
        pos = np.arange(total, dtype=np.int64)
        pos += np.repeat(lo - starts, lens)
        ts = self._tc.decode(self._times[pos])
        ds = self._diffs[pos].tolist()
        if self._vals is None:
            rows = list(zip(repeat((), total), ts, ds))
        else:
            rows = list(zip(self._vc.decode(self._vals[pos]), ts, ds))
        return [rows[a:b] for a, b in zip(starts.tolist(), ends.tolist())]

    def key_at(self, i: int) -> Any:
        """The key of update ``i`` (in sort order)."""
        key = self._keys[i]
        return self._kc.decode_one(int(key)) if self._columnar else key

    def seek(self, key: Any, lo: int) -> int:
        """First index ``>= lo`` whose key does not sort before ``key``."""
        if self._columnar:
            if self._kc is INT_CODEC:
                return int_bound(self._keys, key, lo, False)
            return coded_bound(self._keys, self._kc, key, lo, False)
        return order.bisect_left(self._keys, key, lo, len(self._keys), self._natural)

    def after(self, key: Any, lo: int) -> int:
        """First index ``>= lo`` whose key sorts after ``key``."""
        if self._columnar:
            if self._kc is INT_CODEC:
                return int_bound(self._keys, key, lo, True)
            return coded_bound(self._keys, self._kc, key, lo, True)
        return order.bisect_right(self._keys, key, lo, len(self._keys), self._natural)

    def rows(self, lo: int, hi: int) -> list[tuple[Any, Time, int]]:
        """The ``(val, time, diff)`` rows ``lo:hi`` (a fresh list)."""
        if hi <= lo:
            return []
        if self._columnar:
            cached = self._cached
            if cached is not None:
                rows = cached[0]
                assert rows is not None
                return rows[lo:hi]
            if hi - lo <= self.FEW:
                out: dict[Any, list[tuple[Any, Time, int]]] = {}
                item_rows(self._readers or self._make_readers(), (None,), (lo,), (hi,), out)
                return out[None]
            return self._decoded_rows(lo, hi)
        if self._vals is None:
            return list(zip(repeat((), hi - lo), self._times[lo:hi], self._diffs[lo:hi]))
        return list(zip(self._vals[lo:hi], self._times[lo:hi], self._diffs[lo:hi]))

    def _make_readers(self) -> tuple[Any, ...]:
        """The scalar accessors :func:`.probes.item_rows` uses, made once per numpy batch."""
        readers = make_readers(self._vals, self._times, self._diffs, self._vc, self._tc)
        object.__setattr__(self, "_readers", readers)
        return readers

    def _decoded_rows(self, lo: int, hi: int) -> list[tuple[Any, Time, int]]:
        """The ``(val, time, diff)`` rows ``lo:hi`` of a numpy batch, decoded."""
        ts = self._tc.decode(self._times[lo:hi])
        ds = self._diffs[lo:hi].tolist()
        if self._vals is None:
            return list(zip(repeat((), hi - lo), ts, ds))
        return list(zip(self._vc.decode(self._vals[lo:hi]), ts, ds))

    def object_columns(self) -> tuple[list[Any], list[Any] | None, list[Any], list[int]]:
        """The columns as Python lists (decoded from numpy when encoded)."""
        if self._columnar:
            vs = None if self._vals is None else self._vc.decode(self._vals)
            return (
                self._kc.decode(self._keys),
                vs,
                self._tc.decode(self._times),
                self._diffs.tolist(),
            )
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
            assert self._kc.kind in (INT, TUPLE) and self._tc.kind in (INT, PRODUCT)
            for codec in (self._kc, self._vc, self._tc):
                codec._check()
            if self._cached is not None:
                rows, index = self._cached
                assert rows == self._decoded_rows(0, n) and index is not None
                assert list(index.items()) == [(key, tuple(rs)) for key, rs in self.iter_keys()]
            for col, codec in ((k, self._kc), (v, self._vc), (t, self._tc)):
                if col is None or not n or codec is INT_CODEC:
                    continue
                assert int(col.min()) >= 0 and int(col.max()).bit_length() <= sum(codec.widths)
                decoded = codec.decode(col)
                assert encode_column(decoded, False, (codec.kind,)) is not None
                for value, code in zip(decoded, col.tolist()):
                    comps = (value.outer, value.inner) if codec.kind == PRODUCT else value
                    assert codec.probe(comps, False) == (code, False), (value, code, codec)
            if n and self._tc is INT_CODEC:
                tmin, tmax = int(t.min()), int(t.max())
                for e in lower:
                    assert isinstance(e, int) and tmin >= e, (tmin, lower)
                for e in since:
                    assert isinstance(e, int) and tmin >= e, (tmin, since)
                if check_upper:
                    for e in upper:
                        assert isinstance(e, int) and tmax < e, (tmax, upper)
            elif n:
                for time in self._tc.decode(np.unique(t)):
                    assert lower.less_equal(time), (time, lower)
                    assert since.is_empty() or advance_by(time, since) == time, (time, since)
                    if check_upper:
                        assert not upper.less_equal(time), (time, upper)
            return
        assert self._natural == order.is_safe(self._keys)
        assert all(d.__class__ is int and d != 0 for d in self._diffs)
        assert self._vals is None or not n or not all_unit(self._vals, n)
        if self._cached is not None:
            rows, index = self._cached
            assert rows is None
            if index is None:
                assert not set(map(type, self._keys)) <= HASHED
            else:
                assert list(index.items()) == [(key, tuple(rs)) for key, rs in self.iter_keys()]
        prev = None
        for key, val, time, _diff in self.updates():
            current = (order.ukey(key), order.ukey(val), order.ukey(time))
            assert prev is None or prev < current, "updates not strictly sorted"
            prev = current
            assert lower.less_equal(time), (time, lower)
            assert since.is_empty() or advance_by(time, since) == time, (time, since)
            if check_upper:
                assert not upper.less_equal(time), (time, upper)
