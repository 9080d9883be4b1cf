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

A batch has one of two layouts, chosen by size first and by data second.

*Lists* (:attr:`Batch.encoded` False): four Python lists (the value list is ``None`` when every
value is ``()``). This is the layout of

* every batch :meth:`Batch.from_columns` builds from at most :data:`_TINY` updates, whatever
  the data: a few rows are sorted as tuples and consolidated by summing equal neighbours in
  less time than a single numpy call takes (when keys and values are not mutually comparable,
  they are consolidated with a dict and sorted in the universal order instead);
* every batch a :class:`~.merger.Merger` makes from at most ``Merger.SMALL_MERGE`` updates, or
  whose result is that small, or from two list batches of at most :data:`_LIST_ROWS` updates
  in all (see :mod:`.merger`);
* batches whose data cannot be encoded (strings, mixed types, huge ints, nested products,
  batches mixing int and product times), at any size, and ``force_objects=True``.

A list batch of at most :data:`_CACHED_ROWS` updates builds, the first time it is read, a dict
from each key to its rows (when its keys are of classes whose ``==`` agrees with the universal
order, :data:`_HASHED`), so a lookup is one dict probe: the batches a trace seals every round
and looks up right away never touch numpy. Larger ones are searched by bisection.

*Numpy* (:attr:`Batch.encoded` True): ``int64`` columns sorted and consolidated with vectorised
numpy (the sort columns are packed into one integer when their ranges fit in 62 bits, one
stable argsort; otherwise ``np.lexsort``). Batches of more than :data:`_TINY` updates whose
data allows it, and merges of those, use it:

* *plain ints*: every key, value and time a plain ``int`` (``bool`` excluded) within 64 bits;
  the four columns hold the values themselves (32 bytes per update). :attr:`Batch.columnar`
  is True exactly for these.
* *encoded*: keys that are plain ints or tuples of plain ints (all of one length), values that
  are plain ints, tuples of ints or ``Product(int, int)``, and times that are plain ints or
  ``Product(int, int)`` (the times inside ``iterate``). Each such column holds *codes*: a
  per-column :class:`_Codec` maps a value ``(c_1, ..., c_m)`` to
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
  element by element (``ndarray.item``), many with one vectorised gather. A numpy batch of at
  most :data:`_CACHED_ROWS` updates that is read more than :data:`_CACHE_AFTER` times decodes
  all its rows and builds the same dict index as a list batch.

A list batch of encodable data is encoded (O(n), no sorting: encoding preserves the order)
when it meets a numpy batch in a merge too large for plain Python, so the merge stays
vectorised. Everything a batch hands out is plain Python: ``int``, not numpy scalars.
Footgun: ``Batch.from_columns(..., force_objects=True)`` builds the list layout for the same
updates at any size; it is for tests and comparisons, it is never faster.

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
    >>> pd = Description(Antichain([Product(0, 0)]), Antichain([Product(1, 0)]))
    >>> rows = [((k, 2), (), Product(0, k % 4), 1) for k in range(40)]
    >>> p = Batch.from_updates(rows, pd)
    >>> p.lookup((1, 2)), p.encoded, p.columnar
    ([((), Product(outer=0, inner=1), 1)], True, False)
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, compress, repeat
from operator import sub
from typing import Any, Literal

import attrs
import numpy as np

from ..antichain import Antichain
from ..lattice import Product, Time, advance_by, new_tuple
from . import _order
from .description import Description

__all__ = ["Batch", "Update", "pack_int64"]

Update = tuple[Any, Any, Time, int]

_I64_MIN = -(2**63)
_I64_MAX = 2**63 - 1
# Bits available when packing (key, val, time) into one int64 sort key; one spare bit keeps
# the packed value non-negative.
_PACK_BITS = 62
# Up to this many updates, sorting and consolidating int columns in plain Python beats the fixed
# cost of a dozen numpy calls.
_SMALL = 48
# Up to this many rows found in a large numpy batch, lookups read them element by element
# (``ndarray.item``) instead of with vectorised gathers, whose fixed cost is higher.
_FEW = 32
# Up to this many lookup keys are checked and encoded in plain Python (numpy beyond).
_FEW_PROBES = 64
# A small batch answers a spine's lookup_many of more than _MANY_PROBES keys by looking up its
# own keys among the probes when there are more than _PROBES_PER_KEY probes per key it holds.
_MANY_PROBES = 16
_PROBES_PER_KEY = 4
# Batches up to this size keep a dict from key to rows once read (numpy batches also keep
# their decoded rows).
_CACHED_ROWS = 1024
# A small numpy batch builds that index (decoding every row) on its read after this many
# reads; until then reads decode only the rows they find (few reads never pay a full decode).
_CACHE_AFTER = 8
# Up to this many updates, from_columns builds a list batch: sorting and consolidating a few
# rows in Python, and reading them through a dict, costs less than any numpy call.
_TINY = 32
# List batches up to this size may be encoded when they meet an encoded batch in a merge (so
# the merge stays vectorised); two list batches of at most this many updates in all merge in
# plain Python (encoding both would cost more).
_LIST_ROWS = 256
# Key classes whose ``==`` and ``hash`` agree with the universal order, so a dict finds
# exactly the stored keys a lookup would find (given the footguns of :mod:`._order`).
_HASHED: frozenset[type] = frozenset({int, float, bool, str, bytes, tuple, type(None), Product})

# ---------------------------------------------------------------------- codecs

_INT = 0  # plain ints: the codes are the values
_TUPLE = 1  # tuples of m plain ints
_PRODUCT = 2  # Product(int, int)
# Bits a code may use (codes are non-negative int64 values).
_CODE_BITS = 63
# Component widths are rounded up to a multiple of this, so similar batches share a codec.
_ROUND_BITS = 4
# Interned products kept per codec before the cache is emptied (it only saves allocations).
_CACHE_LIMIT = 1 << 16
_INT_TYPES = frozenset({int})
_NOTHING: Any = object()  # equal to nothing but itself


@attrs.frozen(eq=False, repr=False)
class _Codec:
    """An order-preserving map between values of one shape and non-negative int64 codes.

    Codecs are interned (:func:`_make_codec`), so two columns share a codec iff they are
    encoded identically: compare them with ``is``. The plain-int codec :data:`_INT_CODEC`
    maps every int to itself.

    >>> c = _codec_for(_PRODUCT, [(0, 5), (0, 9)])
    >>> c.widths, c.shifts
    ((4, 4), (4, 0))
    >>> codes = c.encode_arrays([np.array([2, 1]), np.array([7, 9])])
    >>> codes.tolist(), c.decode(codes)
    ([39, 25], [Product(outer=2, inner=7), Product(outer=1, inner=9)])
    >>> c._check()
    """

    kind: int
    offsets: tuple[int, ...]
    widths: tuple[int, ...]
    shifts: tuple[int, ...]
    highs: tuple[int, ...]  # the largest component value each position can encode
    cache: dict[int, Any]  # interned products, by code

    @property
    def arity(self) -> int:
        """Number of components (1 for the plain-int codec)."""
        return len(self.offsets) if self.kind != _INT else 1

    def __repr__(self) -> str:
        names = {_INT: "int", _TUPLE: "tuple", _PRODUCT: "product"}
        return f"_Codec({names[self.kind]}, offsets={self.offsets}, widths={self.widths})"

    # -------------------------------------------------------------- arrays

    def encode_arrays(self, comps: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        """Codes of int64 component columns (each within this codec's ranges).

        Runtime complexity: O(n * arity), vectorised.
        """
        if self.kind == _INT:
            return comps[0]
        code: Any = None
        for c, off, w in zip(comps, self.offsets, self.widths):
            x = c - off if off else c.copy()
            if code is None:
                code = x
            else:
                if w:
                    code <<= w
                code |= x
        return code  # type: ignore[no-any-return]

    def decode_arrays(self, codes: np.ndarray[Any, Any]) -> list[np.ndarray[Any, Any]]:
        """The int64 component columns of ``codes`` (fresh arrays).

        Runtime complexity: O(n * arity), vectorised.
        """
        if self.kind == _INT:
            return [codes.copy()]
        out = []
        first = True
        for off, s, w in zip(self.offsets, self.shifts, self.widths):
            if first:
                x = codes >> s
                first = False
            else:
                x = (codes >> s) if s else codes.copy()
                x &= (1 << w) - 1
            if off:
                x += off
            out.append(x)
        return out

    def decode(self, codes: np.ndarray[Any, Any]) -> list[Any]:
        """The Python values of an array of codes.

        Runtime complexity: O(n); products cost a dict lookup each once interned.
        """
        kind = self.kind
        if kind == _INT:
            return codes.tolist()  # type: ignore[no-any-return]
        if kind == _PRODUCT:
            return self._products(codes.tolist())
        return list(zip(*[c.tolist() for c in self.decode_arrays(codes)]))

    def _products(self, codes: list[int]) -> list[Any]:
        cache = self.cache
        try:
            return [cache[c] for c in codes]
        except KeyError:
            pass
        if len(cache) > _CACHE_LIMIT:
            cache.clear()
        for c in set(codes).difference(cache):
            cache[c] = self.decode_one(c)
        return [cache[c] for c in codes]

    # -------------------------------------------------------------- scalars

    def decode_one(self, code: int) -> Any:
        """The Python value of one code."""
        kind = self.kind
        if kind == _INT:
            return code
        if kind == _PRODUCT:
            p = self.cache.get(code)
            if p is None:
                so, wi = self.shifts[0], self.widths[1]
                oo, oi = self.offsets
                p = new_tuple(Product, ((code >> so) + oo, (code & ((1 << wi) - 1)) + oi))
                if len(self.cache) <= _CACHE_LIMIT:
                    self.cache[code] = p
            return p
        return tuple(
            ((code >> s) & ((1 << w) - 1)) + off
            for off, s, w in zip(self.offsets, self.shifts, self.widths)
        )

    def probe(self, comps: Sequence[int], right: bool) -> tuple[int, bool]:
        """A code and side such that searching a sorted code column for it bounds ``comps``.

        ``comps`` (plain ints) may lie outside the codec's ranges. The first component that
        does is clamped (to the lowest or highest encodable tuple with the same prefix) and
        the side adjusted, so the search returns the position ``comps`` would have in the
        universal order: a lower bound when ``right`` is False, an upper bound otherwise.
        """
        code = 0
        clamp: bool | None = None
        for x, off, w, hi in zip(comps, self.offsets, self.widths, self.highs):
            if clamp is None:
                if x < off:
                    clamp, x = False, off
                elif x > hi:
                    clamp, x = True, hi
            else:
                x = hi if clamp else off
            code = (code << w) | (x - off)
        return code, (right if clamp is None else clamp)

    def _check(self) -> None:
        """Assert the codec's invariants (layout, ranges, interned products)."""
        if self.kind == _INT:
            assert self is _INT_CODEC and not self.offsets
            return
        assert self.kind in (_TUPLE, _PRODUCT) and self.offsets
        assert self.kind == _TUPLE or len(self.offsets) == 2
        assert _fits(self.offsets, self.widths)
        assert sum(self.widths) == self.shifts[0] + self.widths[0]
        for i in range(1, len(self.widths)):
            assert self.shifts[i - 1] == self.shifts[i] + self.widths[i]
        for off, w, hi in zip(self.offsets, self.widths, self.highs):
            assert hi == off + (1 << w) - 1
        for code, p in list(self.cache.items())[:64]:
            assert p.__class__ is Product and self.probe((p.outer, p.inner), False) == (code, False)

    def covers(self, bounds: Sequence[tuple[int, int]]) -> bool:
        """Every component range in ``bounds`` is encodable."""
        return all(
            off <= lo and hi <= top for (lo, hi), off, top in zip(bounds, self.offsets, self.highs)
        )


_CODECS: dict[tuple[int, tuple[int, ...], tuple[int, ...]], _Codec] = {}
_CODECS_LIMIT = 4096


def _make_codec(kind: int, offsets: tuple[int, ...], widths: tuple[int, ...]) -> _Codec:
    """The interned codec of ``kind`` with these component offsets and bit widths."""
    key = (kind, offsets, widths)
    codec = _CODECS.get(key)
    if codec is None:
        if len(_CODECS) > _CODECS_LIMIT:
            # Forgetting codecs is safe: an equal codec made later is merely not identical,
            # so merges of batches holding either re-encode (correct, a little slower).
            _CODECS.clear()
            _CODECS[_INT_KEY] = _INT_CODEC
        shifts = []
        s = 0
        for w in reversed(widths):
            shifts.append(s)
            s += w
        shifts.reverse()
        highs = tuple(off + (1 << w) - 1 for off, w in zip(offsets, widths))
        codec = _CODECS[key] = _Codec(kind, offsets, widths, tuple(shifts), highs, {})
    return codec


_INT_KEY: tuple[int, tuple[int, ...], tuple[int, ...]] = (_INT, (), ())
_INT_CODEC = _make_codec(*_INT_KEY)


def _codec_for(kind: int, bounds: Sequence[tuple[int, int]]) -> _Codec | None:
    """A codec of ``kind`` encoding components within ``bounds`` (``[(low, high), ...]``).

    Prefers offset 0 (or a power of two below a negative low) and widths rounded up to a
    multiple of :data:`_ROUND_BITS`, so that similar columns share a codec; falls back to the
    exact ranges; None when even those need more than 63 bits.
    """
    offsets = []
    widths = []
    for lo, hi in bounds:
        off = 0 if lo >= 0 else -(1 << (-lo - 1).bit_length())
        w = (hi - off).bit_length()
        offsets.append(off)
        widths.append(w + (-w % _ROUND_BITS))
    if not _fits(offsets, widths):
        offsets = [lo for lo, _ in bounds]
        widths = [(hi - lo).bit_length() for lo, hi in bounds]
        if not _fits(offsets, widths):
            return None
    return _make_codec(kind, tuple(offsets), tuple(widths))


def _fits(offsets: Sequence[int], widths: Sequence[int]) -> bool:
    if sum(widths) > _CODE_BITS:
        return False
    return all(
        off >= _I64_MIN and off + (1 << w) - 1 <= _I64_MAX for off, w in zip(offsets, widths)
    )


def _common_codec(
    codecs: Sequence[_Codec], extra: Sequence[tuple[int, int]] | None = None
) -> _Codec | None:
    """One codec for columns of ``codecs`` (same kind and arity) and the ``extra`` bounds."""
    first = codecs[0]
    kind = first.kind
    if kind == _INT:
        return first if all(c is first for c in codecs) else None
    m = len(first.offsets)
    if any(c.kind != kind or len(c.offsets) != m for c in codecs):
        return None
    if all(c is first for c in codecs) and (extra is None or first.covers(extra)):
        return first
    bounds = [
        (min(c.offsets[i] for c in codecs), max(c.highs[i] for c in codecs)) for i in range(m)
    ]
    if extra is not None:
        bounds = [(min(a, c), max(b, d)) for (a, b), (c, d) in zip(bounds, extra)]
    return _codec_for(kind, bounds)


def _translate(codes: np.ndarray[Any, Any], src: _Codec, dst: _Codec) -> np.ndarray[Any, Any]:
    """``codes`` of ``src`` re-encoded with ``dst`` (which must cover ``src``'s ranges)."""
    if src is dst:
        return codes
    return dst.encode_arrays(src.decode_arrays(codes))


def _encode_column(col: Any, small: bool, kinds: tuple[int, ...]) -> tuple[_Codec, Any] | None:
    """``(codec, codes)`` for a column whose values all have one encodable shape, else None.

    ``kinds`` lists the shapes allowed. Codes are a Python list when ``small`` (and ``col`` is
    not a numpy array), an int64 array otherwise.
    """
    if isinstance(col, np.ndarray):
        if col.dtype.kind != "O":
            arr = _as_int64(col)
            return None if arr is None else (_INT_CODEC, arr)
        col = col.tolist()
    types = set(map(type, col))
    if len(types) != 1:
        return None
    tp = types.pop()
    if tp is int:
        if small:
            if min(col) < _I64_MIN or max(col) > _I64_MAX:
                return None
            return _INT_CODEC, list(col)
        arr = _as_int64(col)
        return None if arr is None else (_INT_CODEC, arr)
    comps: list[Sequence[Any]]
    if tp is tuple and _TUPLE in kinds:
        lengths = set(map(len, col))
        if len(lengths) != 1:
            return None
        m = lengths.pop()
        if not m:
            return None
        comps = list(zip(*col))
        kind = _TUPLE
    elif tp is Product and _PRODUCT in kinds:
        comps = [[t.outer for t in col], [t.inner for t in col]]
        kind = _PRODUCT
    else:
        return None
    for c in comps:
        if set(map(type, c)) != _INT_TYPES:
            return None
    codec = _codec_for(kind, [(min(c), max(c)) for c in comps])
    if codec is None:
        return None
    if small:
        offsets, widths = codec.offsets, codec.widths
        codes = [x - offsets[0] for x in comps[0]] if offsets[0] else list(comps[0])
        for c, off, w in zip(comps[1:], offsets[1:], widths[1:]):
            codes = [(acc << w) | (x - off) for acc, x in zip(codes, c)]
        return codec, codes
    return codec, codec.encode_arrays([np.array(c, dtype=np.int64) for c in comps])


class _Probes:
    """Lookup keys, checked and encoded once per key codec for all the batches that share it.

    For a codec, :meth:`encoded` splits the keys into ``probes`` (the codec's exact shape,
    within its ranges), a ``search`` array (the probes' codes, then each code plus one: one
    ``searchsorted`` of it gives every probe's first and past-the-end positions), and
    ``others``: keys of another type that may still equal a stored key (``1.0`` or ``True``
    for an int, a tuple of floats or a tuple subclass for an int tuple), which need a
    one-by-one lookup. Keys in neither cannot match.

    For batches with a dict index and fewer keys than there are probes, :meth:`by_key`
    gives the probes as a dict, so that the batch can look up its own keys among them.
    """

    __slots__ = ("_by_codec", "_by_key", "keys")

    def __init__(self, keys: Iterable[Any]) -> None:
        self.keys: Sequence[Any] = keys if isinstance(keys, (list, tuple)) else list(keys)
        self._by_codec: dict[_Codec, tuple[list[Any], Any, list[Any]]] = {}
        self._by_key: tuple[dict[Any, Any], list[Any]] | None = None

    def by_key(self) -> tuple[dict[Any, Any], list[Any]]:
        """``(first, rest)``: ``first`` maps each key of a :data:`_HASHED` class to the first
        probe equal to it; ``rest`` lists the other keys (which need a search)."""
        got = self._by_key
        if got is None:
            first: dict[Any, Any] = {}
            rest: list[Any] = []
            setdefault = first.setdefault
            hashed = _HASHED
            for key in self.keys:
                if key.__class__ in hashed:
                    try:
                        setdefault(key, key)
                        continue
                    except TypeError:  # a tuple holding something unhashable
                        pass
                rest.append(key)
            got = self._by_key = (first, rest)
        return got

    def encoded(self, kc: _Codec) -> tuple[list[Any], Any, list[Any]]:
        """``(probes, search, others)`` for key codec ``kc`` (see the class docstring)."""
        got = self._by_codec.get(kc)
        if got is None:
            probes, codes, others = self._encode(kc)
            if isinstance(codes, list) and len(codes) <= _FEW_PROBES:
                search = np.array(codes + [c + 1 for c in codes], dtype=np.int64)
            else:
                arr = np.asarray(codes, dtype=np.int64)
                search = np.concatenate((arr, arr + 1))
            got = self._by_codec[kc] = (probes, search, others)
        return got

    def _encode(self, kc: _Codec) -> tuple[list[Any], Any, list[Any]]:
        keys = self.keys
        probes: list[Any]
        others: list[Any]
        # The largest int64 is left to a one-by-one lookup, so that code + 1 cannot overflow.
        if kc is _INT_CODEC:
            if set(map(type, keys)) == _INT_TYPES and _I64_MIN <= min(keys) <= max(keys) < _I64_MAX:
                probes = list(keys)
                return probes, probes, []
            probes = [k for k in keys if k.__class__ is int and _I64_MIN <= k < _I64_MAX]
            others = [
                k
                for k in keys
                if (k.__class__ is not int and isinstance(k, numbers.Real)) or k == _I64_MAX
            ]
            return probes, probes, others
        m = kc.arity
        if len(keys) > _FEW_PROBES:
            return self._encode_vectorised(kc)
        if m == 2:
            return self._encode_pairs(kc)
        probes, codes, others = [], [], []
        offsets, highs, widths = kc.offsets, kc.highs, kc.widths
        int_types = _INT_TYPES
        for key in keys:
            if key.__class__ is tuple:
                if len(key) != m:
                    continue
                if set(map(type, key)) != int_types:
                    others.append(key)
                    continue
                code = 0
                for x, off, hi, w in zip(key, offsets, highs, widths):
                    if x < off or x > hi:
                        break
                    code = (code << w) | (x - off)
                else:
                    if code < _I64_MAX:
                        probes.append(key)
                        codes.append(code)
                    else:
                        others.append(key)
            elif isinstance(key, tuple):
                others.append(key)
        return probes, codes, others

    def _encode_pairs(self, kc: _Codec) -> tuple[list[Any], list[int], list[Any]]:
        """:meth:`_encode` for pairs of ints (the common composite key), unrolled."""
        (o0, o1), (h0, h1), w1 = kc.offsets, kc.highs, kc.widths[1]
        probes: list[Any] = []
        codes: list[int] = []
        others: list[Any] = []
        for key in self.keys:
            if key.__class__ is tuple:
                if len(key) != 2:
                    continue
                a, b = key
                if a.__class__ is int and b.__class__ is int:
                    if o0 <= a <= h0 and o1 <= b <= h1:
                        code = ((a - o0) << w1) | (b - o1)
                        if code < _I64_MAX:
                            probes.append(key)
                            codes.append(code)
                        else:
                            others.append(key)
                else:
                    others.append(key)
            elif isinstance(key, tuple):
                others.append(key)
        return probes, codes, others

    def _encode_vectorised(self, kc: _Codec) -> tuple[list[Any], Any, list[Any]]:
        """:meth:`_encode` of many int-tuple keys, with numpy."""
        keys = self.keys
        m = kc.arity
        probes: list[Any] = []
        others: list[Any] = []
        arr: Any = None
        if set(map(type, keys)) == {tuple} and set(map(len, keys)) == {m}:
            flat = list(chain.from_iterable(keys))
            if set(map(type, flat)) == _INT_TYPES:
                try:
                    arr = np.array(flat, dtype=np.int64).reshape(-1, m)
                    probes = list(keys)
                except OverflowError:
                    arr = None
        if arr is None:
            for k in keys:
                if k.__class__ is tuple:
                    if len(k) == m:
                        if set(map(type, k)) == _INT_TYPES and all(
                            _I64_MIN <= x <= _I64_MAX for x in k
                        ):
                            probes.append(k)
                        else:
                            others.append(k)
                elif isinstance(k, tuple):
                    others.append(k)
            if not probes:
                return probes, [], others
            arr = np.array(probes, dtype=np.int64).reshape(-1, m)
        inside = (arr >= np.array(kc.offsets)) & (arr <= np.array(kc.highs))
        ok = inside.all(axis=1)
        codes = kc.encode_arrays([arr[:, i] for i in range(m)])
        ok &= codes < _I64_MAX
        if not ok.all():
            others.extend(compress(probes, (codes == _I64_MAX).tolist()))
            mask: list[bool] = ok.tolist()
            probes = list(compress(probes, mask))
            codes = codes[ok]
        return probes, codes, others


class _DecodedKeys:
    """A read-only sequence view decoding a code column on access (for generic bisection)."""

    __slots__ = ("_codec", "_codes")

    def __init__(self, codes: np.ndarray[Any, Any], codec: _Codec) -> None:
        self._codes = codes
        self._codec = codec

    def __len__(self) -> int:
        return len(self._codes)

    def __getitem__(self, i: int) -> Any:
        return self._codec.decode_one(int(self._codes[i]))


# ---------------------------------------------------------------------- batches


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
    _columnar: bool  # numpy int64 code columns (plain ints or encoded); else Python lists
    _natural: bool  # object storage only: every key's type is one of _order.SAFE_TYPES
    _kc: _Codec = _INT_CODEC
    _vc: _Codec = _INT_CODEC
    _tc: _Codec = _INT_CODEC
    # Small batches keep a rows-by-key index once read (numpy ones also their decoded rows;
    # the batch never changes); see _cache.
    _cached: tuple[list[Any] | None, dict[Any, tuple[Any, ...]] | None] | None = attrs.field(
        init=False, default=None
    )
    # Numpy batches keep their scalar accessors once read; see _item_rows.
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

        ``vals=None`` means every value is ``()``. At most :data:`_TINY` updates make a list
        batch (see the module docstring). Beyond that, integer numpy arrays (or lists of plain
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
        if vals is not None:
            if isinstance(vals, np.ndarray):
                if vals.dtype.kind == "O":
                    vals = vals.tolist()
            elif _all_unit(vals, n):
                vals = None
        if not force_objects and n > _TINY:
            small = n <= _SMALL and isinstance(keys, (list, tuple))
            if small and isinstance(keys, (list, tuple)):
                ints = _small_int_columns(keys, vals, times, diffs)
                if ints is not None:
                    k, v, t, d = ints
                    return cls(description, k, v, t, d, True, True)
            encoded = _encode_columns(keys, vals, times, small)
            if encoded is not None:
                (kc, k), vcoded, (tc, t) = encoded
                vc, v = (_INT_CODEC, None) if vcoded is None else vcoded
                if small and isinstance(k, list):
                    ds = diffs.tolist() if isinstance(diffs, np.ndarray) else list(diffs)
                    if set(map(type, ds)) != _INT_TYPES:
                        msg = f"diffs must be integers; got {_describe(ds)}"
                        raise TypeError(msg)
                    if isinstance(t, list) and (v is None or isinstance(v, list)):
                        k, v, t, d = _small_int_arrays(k, v, t, ds)
                        return cls(description, k, v, t, d, True, True, kc, vc, tc)
                k, v, t = (_as_array(c) for c in (k, v, t))
                d = _as_int64(diffs)
                if d is None:
                    msg = f"diffs must be integers; got {_describe(diffs)}"
                    raise TypeError(msg)
                assert k is not None and t is not None
                k, v, t, d = _sort_consolidate_int(k, v, t, d)
                return cls(description, k, v, t, d, True, True, kc, vc, tc)
        # The list layout. Consolidation reads the columns without keeping or changing them.
        ks = keys.tolist() if isinstance(keys, np.ndarray) else keys
        vs = vals.tolist() if isinstance(vals, np.ndarray) else vals
        ts = times.tolist() if isinstance(times, np.ndarray) else times
        ds = diffs.tolist() if isinstance(diffs, np.ndarray) else diffs
        if not set(map(type, ds)) <= _INT_TYPES:
            msg = f"diffs must be ints; got {_describe(ds)}"
            raise TypeError(msg)
        return cls._from_lists(description, *_consolidate_objects(ks, vs, ts, ds))

    @classmethod
    def _from_lists(
        cls,
        description: Description,
        keys: list[Any],
        vals: list[Any] | None,
        times: list[Any],
        diffs: list[int],
        natural: bool,
    ) -> Batch:
        """A list batch of already sorted and consolidated columns (``natural``: see _natural)."""
        if not keys:
            return cls(description, [], None, [], [], False, True)
        if vals is not None and _all_unit(vals, len(vals)):
            vals = None
        return cls(description, keys, vals, times, diffs, False, natural)

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
            and self._kc is _INT_CODEC
            and self._tc is _INT_CODEC
            and (self._vals is None or self._vc is _INT_CODEC)
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
        :data:`_CACHED_ROWS` updates (a dict probe, once its index is built in O(n)).

        >>> from deltaflow.framework.antichain import Antichain
        >>> d = Description(Antichain([0]), Antichain([9]))
        >>> b = Batch.from_updates([(1, "x", 0, 1), (2, "y", 3, 1)], d)
        >>> b.lookup(2), b.lookup(5)
        ([('y', 3, 1)], [])
        """
        if len(self._keys) <= _CACHED_ROWS and key.__class__ in _HASHED and self._use_index():
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
        lo = self._seek(key, 0)
        hi = self._after(key, lo)
        return self._rows(lo, hi)

    def lookup_many(self, keys: Sequence[Any] | _Probes) -> dict[Any, list[tuple[Any, Time, int]]]:
        """The ``(val, time, diff)`` updates of each of ``keys``; keys without any are absent.

        Equivalent to ``{k: self.lookup(k) for k in keys if self.lookup(k)}`` (each list is
        the caller's own), but cheaper. A batch of at most ``_CACHED_ROWS`` updates keeps a
        dict from key to rows once read (numpy's fixed cost per call dominates there; a numpy
        batch builds it after a few reads, and also keeps its decoded rows), so each key costs
        one dict probe. For a larger (or rarely read) numpy batch, the keys of the batch's own
        shape (plain ints, or int tuples of its length) are encoded and found with one
        vectorised ``searchsorted`` of all their first and past-the-end positions, and the
        rows found are decoded together (element by element when few); other keys that
        may still be equal (``1.0``, ``True``, tuple subclasses) are looked up one by one.

        ``keys`` may also be a ``_Probes`` (what :meth:`Spine.lookup_many` passes), which
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
        if n <= _CACHED_ROWS and self._use_index():
            return self._lookup_small(keys)
        if not self._columnar:
            search = self._search
            for key in keys.keys if isinstance(keys, _Probes) else keys:
                rows = search(key)
                if rows:
                    out[key] = rows
            return out
        if not isinstance(keys, _Probes):
            keys = _Probes(keys)
        probes, search, others = keys.encoded(self._kc)
        if probes:
            bounds = self._keys.searchsorted(search).tolist()
            m = len(probes)
            los, his = bounds[:m], bounds[m:]
            if los != his:
                if sum(his) - sum(los) <= _FEW:  # rows found, over all probes
                    self._item_rows(probes, los, his, out)
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
            f"since={self.description.since!r}, len={len(self)}, columnar={self.columnar})"
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

    def _use_index(self) -> bool:
        """Whether a read of this small batch goes through its dict index (see _cache).

        List batches always do; a numpy batch from its read after :data:`_CACHE_AFTER`
        (counting this one), so that a batch read only a few times never decodes every row.
        """
        if self._cached is not None or not self._columnar:
            return True
        reads = self._reads + 1
        object.__setattr__(self, "_reads", reads)
        return reads > _CACHE_AFTER

    def _lookup_small(
        self, keys: Sequence[Any] | _Probes
    ) -> dict[Any, list[tuple[Any, Time, int]]]:
        """:meth:`lookup_many` of a small batch: one dict probe per key (see _cache), or per
        stored key when there are many more probes than stored keys."""
        out: dict[Any, list[tuple[Any, Time, int]]] = {}
        index = self._cache()[1]
        search = self._search
        if isinstance(keys, _Probes):
            k = len(keys.keys)
            if index is not None and k > _MANY_PROBES and len(index) * _PROBES_PER_KEY < k:
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
        hashed = _HASHED
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
        class is not in :data:`_HASHED` (lookups then bisect). ``rows`` are the decoded rows
        of a numpy batch, None for a list batch (whose rows are its lists). Lookups of a batch
        of at most :data:`_CACHED_ROWS` updates are then dict probes and list slices instead
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
            elif set(map(type, keys)) <= _HASHED:
                cached = (None, _index_lists(keys, self._rows(0, n)))
            else:
                cached = (None, None)
            object.__setattr__(self, "_cached", cached)
        return cached

    def _redescribed(self, description: Description) -> Batch:
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

    def _as_encoded(self) -> Batch | None:
        """This batch in the numpy layout (same updates and description), or None when its
        data cannot be encoded (a numpy batch is returned as is).

        Runtime complexity: O(n), in Python (for list batches of a few hundred updates).
        """
        if self._columnar:
            return self
        if not self._keys:
            return None
        encoded = _encode_columns(self._keys, self._vals, self._times, False)
        if encoded is None:
            return None
        try:
            d = np.array(self._diffs, dtype=np.int64)
        except OverflowError:
            return None
        (kc, k), vcoded, (tc, t) = encoded
        vc, v = (_INT_CODEC, None) if vcoded is None else vcoded
        # The universal order of encodable values is the order of their codes: no sorting.
        return Batch(self.description, k, v, t, d, True, True, kc, vc, tc)

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
            rows = self._rows(base, top)
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

    def _key_at(self, i: int) -> Any:
        key = self._keys[i]
        return self._kc.decode_one(int(key)) if self._columnar else key

    def _seek(self, key: Any, lo: int) -> int:
        """First index ``>= lo`` whose key does not sort before ``key``."""
        if self._columnar:
            if self._kc is _INT_CODEC:
                return self._int_bound(key, lo, False)
            return self._coded_bound(key, lo, False)
        return _order.bisect_left(self._keys, key, lo, len(self._keys), self._natural)

    def _after(self, key: Any, lo: int) -> int:
        """First index ``>= lo`` whose key sorts after ``key``."""
        if self._columnar:
            if self._kc is _INT_CODEC:
                return self._int_bound(key, lo, True)
            return self._coded_bound(key, lo, True)
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
            return int(k.searchsorted(x, side))
        return lo + int(k[lo:].searchsorted(x, side))

    def _coded_bound(self, key: Any, lo: int, right: bool) -> int:
        """:meth:`_seek` / :meth:`_after` for a column of encoded int-tuple keys."""
        kc = self._kc
        k = self._keys
        n: int = len(k)
        if key.__class__ is tuple and len(key) == kc.arity and set(map(type, key)) == _INT_TYPES:
            code, right = kc.probe(key, right)
            side: Literal["left", "right"] = "right" if right else "left"
            if lo == 0:
                return int(k.searchsorted(code, side))
            return lo + int(k[lo:].searchsorted(code, side))
        if isinstance(key, tuple):
            view = _DecodedKeys(k, kc)
            if right:
                return _order.bisect_right(view, key, lo, n, True)  # type: ignore[arg-type]
            return _order.bisect_left(view, key, lo, n, True)  # type: ignore[arg-type]
        # Numbers, strings and bytes sort before every tuple; everything else after.
        return lo if _order.ukey(key)[0] < 3 else n

    def _rows(self, lo: int, hi: int) -> list[tuple[Any, Time, int]]:
        """The ``(val, time, diff)`` rows ``lo:hi`` (a fresh list)."""
        if hi <= lo:
            return []
        if self._columnar:
            cached = self._cached
            if cached is not None:
                rows = cached[0]
                assert rows is not None
                return rows[lo:hi]
            if hi - lo <= _FEW:
                out: dict[Any, list[tuple[Any, Time, int]]] = {}
                self._item_rows((None,), (lo,), (hi,), out)
                return out[None]
            return self._decoded_rows(lo, hi)
        if self._vals is None:
            return list(zip(repeat((), hi - lo), self._times[lo:hi], self._diffs[lo:hi]))
        return list(zip(self._vals[lo:hi], self._times[lo:hi], self._diffs[lo:hi]))

    def _item_rows(
        self,
        keys: Sequence[Any],
        los: Sequence[int],
        his: Sequence[int],
        out: dict[Any, list[tuple[Any, Time, int]]],
    ) -> None:
        """Set ``out[key]`` to the rows ``lo:hi`` of a numpy batch, for each non-empty range.

        Reads element by element: for a few rows ``ndarray.item`` and the codecs' scalar
        decoding (a dict probe for an interned product) cost less than any vectorised gather.

        Runtime complexity: O(k + r) Python steps for k ranges and r rows.
        """
        readers = self._readers
        if readers is None:
            readers = self._make_readers()
        titem, ditem, tget, tdecode, vitem, vdecode = readers
        # Only the non-empty ranges, found at C speed (most probes usually miss).
        for j in compress(range(len(los)), map(sub, his, los)):
            lo, hi = los[j], his[j]
            if tget is not None and vitem is None:
                # Unit values and product times: arrange_by_self inside a loop.
                rows = []
                for i in range(lo, hi):
                    c = titem(i)
                    p = tget(c)
                    rows.append(((), tdecode(c) if p is None else p, ditem(i)))
            else:
                rows = []
                for i in range(lo, hi):
                    t = titem(i)
                    if tget is not None:
                        p = tget(t)
                        t = tdecode(t) if p is None else p
                    if vitem is None:
                        rows.append(((), t, ditem(i)))
                    else:
                        v = vitem(i)
                        rows.append((v if vdecode is None else vdecode(v), t, ditem(i)))
            out[keys[j]] = rows

    def _make_readers(self) -> tuple[Any, ...]:
        """The scalar accessors :meth:`_item_rows` uses, made once per numpy batch."""
        tc, vals = self._tc, self._vals
        readers = (
            self._times.item,
            self._diffs.item,
            tc.cache.get if tc.kind == _PRODUCT else None,
            tc.decode_one,
            None if vals is None else vals.item,
            None if self._vc is _INT_CODEC else self._vc.decode_one,
        )
        object.__setattr__(self, "_readers", readers)
        return readers

    def _decoded_rows(self, lo: int, hi: int) -> list[tuple[Any, Time, int]]:
        """The ``(val, time, diff)`` rows ``lo:hi`` of a numpy batch, decoded."""
        ts = self._tc.decode(self._times[lo:hi])
        ds = self._diffs[lo:hi].tolist()
        if self._vals is None:
            return list(zip(repeat((), hi - lo), ts, ds))
        return list(zip(self._vc.decode(self._vals[lo:hi]), ts, ds))

    def _object_columns(self) -> tuple[list[Any], list[Any] | None, list[Any], list[int]]:
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
            assert self._kc.kind in (_INT, _TUPLE) and self._tc.kind in (_INT, _PRODUCT)
            for codec in (self._kc, self._vc, self._tc):
                codec._check()
            if self._cached is not None:
                rows, index = self._cached
                assert rows == self._decoded_rows(0, n) and index is not None
                assert list(index.items()) == [(key, tuple(rs)) for key, rs in self.iter_keys()]
            for col, codec in ((k, self._kc), (v, self._vc), (t, self._tc)):
                if col is None or not n or codec is _INT_CODEC:
                    continue
                assert int(col.min()) >= 0 and int(col.max()).bit_length() <= sum(codec.widths)
                decoded = codec.decode(col)
                assert _encode_column(decoded, False, (codec.kind,)) is not None
                for value, code in zip(decoded, col.tolist()):
                    comps = (value.outer, value.inner) if codec.kind == _PRODUCT else value
                    assert codec.probe(comps, False) == (code, False), (value, code, codec)
            if n and self._tc is _INT_CODEC:
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
        assert self._natural == _order.is_safe(self._keys)
        assert all(d.__class__ is int and d != 0 for d in self._diffs)
        assert self._vals is None or not n or not _all_unit(self._vals, n)
        if self._cached is not None:
            rows, index = self._cached
            assert rows is None
            if index is None:
                assert not set(map(type, self._keys)) <= _HASHED
            else:
                assert list(index.items()) == [(key, tuple(rs)) for key, rs in self.iter_keys()]
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


def _encode_columns(
    keys: Any, vals: Any, times: Any, small: bool
) -> tuple[tuple[_Codec, Any], tuple[_Codec, Any] | None, tuple[_Codec, Any]] | None:
    """Encode keys (ints, int tuples), values (any encodable shape or None) and times (ints,
    ``Product(int, int)``), or None when one of them cannot be encoded."""
    k = _encode_column(keys, small, (_TUPLE,))
    if k is None:
        return None
    t = _encode_column(times, small, (_PRODUCT,))
    if t is None:
        return None
    if vals is None:
        return k, None, t
    v = _encode_column(vals, small, (_TUPLE, _PRODUCT))
    if v is None:
        return None
    return k, v, t


def _as_array(col: Any) -> Any:
    if col is None or isinstance(col, np.ndarray):
        return col
    return np.array(col, dtype=np.int64)


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


def pack_int64(k: Any, v: Any, t: Any) -> Any:
    """Pack int columns ``(k, v, t)`` (``v`` may be None) into one int64 column whose order is
    their lexicographic order, or None when their ranges need more than 62 bits together.

    One stable ``argsort`` of the packed column then sorts the rows, about four times faster
    than ``np.lexsort``, which sorts once per column.

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
        p = pack_int64(k, v, t)
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
    keys: Sequence[Any],
    vals: Sequence[Any] | None,
    times: Sequence[Any],
    diffs: Sequence[int],
    safe_keys: bool | None = None,
) -> tuple[list[Any], list[Any] | None, list[Any], list[int], bool]:
    """Sort columns in the universal order and sum the diffs of equal ``(key, val, time)``.

    Returns fresh lists and whether every key left is of one of :data:`_order.SAFE_TYPES`
    (``safe_keys``, when known, says whether every key given is).
    When every key and value is of those types and their natural ``<`` does not raise, the
    rows are sorted as tuples and equal neighbours summed (fast for small inputs and sorted
    runs); otherwise they are consolidated with a dict, then sorted.

    Runtime complexity: O(n log n); O(n) for a few sorted runs.
    """
    if safe_keys is None:
        safe_keys = _order.is_safe(keys)
    if safe_keys and (vals is None or _order.is_safe(vals)):
        try:
            if vals is None:
                return _fold_sorted(sorted(zip(keys, times, diffs)))
            return _fold_sorted4(sorted(zip(keys, vals, times, diffs)))
        except _order._INCOMPARABLE:
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
    _order.sort_pairs(items, safe_keys and (vals is None or _order.is_safe(vals)))
    triples, dsum = zip(*items)
    vs: list[Any] | None = None
    if vals is None:
        kcol, tcol = zip(*triples)
    else:
        kcol, vcol, tcol = zip(*triples)
        vs = list(vcol)
    out = list(kcol)
    return out, vs, list(tcol), list(dsum), safe_keys or _order.is_safe(out)


def _fold_sorted(
    rows: list[tuple[Any, Any, int]],
) -> tuple[list[Any], None, list[Any], list[int], bool]:
    """The columns of sorted ``(key, time, diff)`` rows, with the diffs of equal neighbours
    summed and zero diffs dropped (see :func:`_consolidate_objects`).

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


def _index_lists(keys: list[Any], rows: list[tuple[Any, Time, int]]) -> dict[Any, tuple[Any, ...]]:
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
