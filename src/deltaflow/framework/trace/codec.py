"""Codecs: order-preserving maps between values of one shape and non-negative int64 codes.

A numpy batch (see :mod:`.batch`) stores each column as int64 *codes*. A :class:`Codec` maps a
value ``(c_1, ..., c_m)`` (a plain int, a tuple of plain ints, or a ``Product(int, int)``) to
``sum((c_i - offset_i) << shift_i)``, the components packed most significant first in fixed
bit widths. Packing preserves order (the lexicographic order of the components, which is the
universal order of int tuples and the total order of products), so sorting, searching and
consolidating codes is sorting, searching and consolidating the values.

Offsets are 0 for non-negative components and widths are rounded up to a multiple of 4 bits,
so that batches of similar data share one codec and merge without re-encoding. A column whose
components need more than 63 bits cannot be encoded. Codecs are interned
(:func:`make_codec`): two columns share a codec iff they are encoded identically, so compare
codecs with ``is``. Products are interned per codec (each distinct time is one object, its
hash computed once), so decoding a time costs a dict lookup, not a constructor call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

from .. import tuning
from ..lattice import Product, new_tuple
from ..tuning import CODECS_KEPT as _CODECS_LIMIT

__all__ = [
    "I64_MAX",
    "I64_MIN",
    "INT",
    "INT_CODEC",
    "INT_TYPES",
    "PRODUCT",
    "TUPLE",
    "Codec",
    "as_int64",
    "codec_for",
    "common_codec",
    "encode_column",
    "make_codec",
    "translate",
]

#: The range of int64.
I64_MIN = -(2**63)
I64_MAX = 2**63 - 1

#: Codec kinds: plain ints (the codes are the values), tuples of m plain ints, and
#: ``Product(int, int)``.
INT = 0
TUPLE = 1
PRODUCT = 2
#: ``set(map(type, column)) == INT_TYPES``: a column of plain ints (no bools).
INT_TYPES = frozenset({int})

# Bits a code may use (codes are non-negative int64 values).
_CODE_BITS = 63
# Component widths are rounded up to a multiple of this, so similar batches share a codec.
_ROUND_BITS = 4


@attrs.frozen(eq=False, repr=False)
class Codec:
    """An order-preserving map between values of one shape and non-negative int64 codes.

    Codecs are interned (:func:`make_codec`), so two columns share a codec iff they are
    encoded identically: compare them with ``is``. The plain-int codec :data:`INT_CODEC`
    maps every int to itself.

    >>> c = codec_for(PRODUCT, [(0, 5), (0, 9)])
    >>> c.widths, c.shifts
    ((4, 4), (4, 0))
    >>> codes = c.encode_arrays([np.array([2, 1]), np.array([7, 9])])
    >>> codes.tolist(), c.decode(codes)
    ([39, 25], [Product(outer=2, inner=7), Product(outer=1, inner=9)])
    >>> c._check()
    """

    #: Interned products kept per codec before the cache is emptied (it only saves
    #: allocations).
    CACHE_LIMIT: ClassVar[int] = tuning.CODEC_CACHE_LIMIT

    kind: int
    offsets: tuple[int, ...]
    widths: tuple[int, ...]
    shifts: tuple[int, ...]
    highs: tuple[int, ...]  # the largest component value each position can encode
    cache: dict[int, Any]  # interned products, by code

    @property
    def arity(self) -> int:
        """Number of components (1 for the plain-int codec)."""
        return len(self.offsets) if self.kind != INT else 1

    def __repr__(self) -> str:
        names = {INT: "int", TUPLE: "tuple", PRODUCT: "product"}
        return f"Codec({names[self.kind]}, offsets={self.offsets}, widths={self.widths})"

    # -------------------------------------------------------------- arrays

    def encode_arrays(self, comps: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        """Codes of int64 component columns (each within this codec's ranges).

        Runtime complexity: O(n * arity), vectorised.
        """
        if self.kind == INT:
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
        if self.kind == INT:
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
        if kind == INT:
            return codes.tolist()  # type: ignore[no-any-return]
        if kind == PRODUCT:
            return self._products(codes.tolist())
        return list(zip(*[c.tolist() for c in self.decode_arrays(codes)]))

    def _products(self, codes: list[int]) -> list[Any]:
        cache = self.cache
        try:
            return [cache[c] for c in codes]
        except KeyError:
            pass
        if len(cache) > self.CACHE_LIMIT:
            cache.clear()
        for c in set(codes).difference(cache):
            cache[c] = self.decode_one(c)
        return [cache[c] for c in codes]

    # -------------------------------------------------------------- scalars

    def decode_one(self, code: int) -> Any:
        """The Python value of one code."""
        kind = self.kind
        if kind == INT:
            return code
        if kind == PRODUCT:
            p = self.cache.get(code)
            if p is None:
                so, wi = self.shifts[0], self.widths[1]
                oo, oi = self.offsets
                p = new_tuple(Product, ((code >> so) + oo, (code & ((1 << wi) - 1)) + oi))
                if len(self.cache) <= self.CACHE_LIMIT:
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
        if self.kind == INT:
            assert self is INT_CODEC and not self.offsets
            return
        assert self.kind in (TUPLE, PRODUCT) and self.offsets
        assert self.kind == TUPLE or len(self.offsets) == 2
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


_CODECS: dict[tuple[int, tuple[int, ...], tuple[int, ...]], Codec] = {}


def make_codec(kind: int, offsets: tuple[int, ...], widths: tuple[int, ...]) -> Codec:
    """The interned codec of ``kind`` with these component offsets and bit widths."""
    key = (kind, offsets, widths)
    codec = _CODECS.get(key)
    if codec is None:
        if len(_CODECS) > _CODECS_LIMIT:
            # Forgetting codecs is safe: an equal codec made later is merely not identical,
            # so merges of batches holding either re-encode (correct, a little slower).
            _CODECS.clear()
            _CODECS[_INT_KEY] = INT_CODEC
        shifts = []
        s = 0
        for w in reversed(widths):
            shifts.append(s)
            s += w
        shifts.reverse()
        highs = tuple(off + (1 << w) - 1 for off, w in zip(offsets, widths))
        codec = _CODECS[key] = Codec(kind, offsets, widths, tuple(shifts), highs, {})
    return codec


_INT_KEY: tuple[int, tuple[int, ...], tuple[int, ...]] = (INT, (), ())
INT_CODEC = make_codec(*_INT_KEY)


def codec_for(kind: int, bounds: Sequence[tuple[int, int]]) -> Codec | None:
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
    return make_codec(kind, tuple(offsets), tuple(widths))


def _fits(offsets: Sequence[int], widths: Sequence[int]) -> bool:
    if sum(widths) > _CODE_BITS:
        return False
    return all(off >= I64_MIN and off + (1 << w) - 1 <= I64_MAX for off, w in zip(offsets, widths))


def common_codec(
    codecs: Sequence[Codec], extra: Sequence[tuple[int, int]] | None = None
) -> Codec | None:
    """One codec for columns of ``codecs`` (same kind and arity) and the ``extra`` bounds."""
    first = codecs[0]
    kind = first.kind
    if kind == INT:
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
    return codec_for(kind, bounds)


def translate(codes: np.ndarray[Any, Any], src: Codec, dst: Codec) -> np.ndarray[Any, Any]:
    """``codes`` of ``src`` re-encoded with ``dst`` (which must cover ``src``'s ranges)."""
    if src is dst:
        return codes
    return dst.encode_arrays(src.decode_arrays(codes))


def encode_column(col: Any, small: bool, kinds: tuple[int, ...]) -> tuple[Codec, Any] | None:
    """``(codec, codes)`` for a column whose values all have one encodable shape, else None.

    ``kinds`` lists the shapes allowed. Codes are a Python list when ``small`` (and ``col`` is
    not a numpy array), an int64 array otherwise.
    """
    if isinstance(col, np.ndarray):
        if col.dtype.kind != "O":
            arr = as_int64(col)
            return None if arr is None else (INT_CODEC, arr)
        col = col.tolist()
    types = set(map(type, col))
    if len(types) != 1:
        return None
    tp = types.pop()
    if tp is int:
        if small:
            if min(col) < I64_MIN or max(col) > I64_MAX:
                return None
            return INT_CODEC, list(col)
        arr = as_int64(col)
        return None if arr is None else (INT_CODEC, arr)
    comps: list[Sequence[Any]]
    if tp is tuple and TUPLE in kinds:
        lengths = set(map(len, col))
        if len(lengths) != 1:
            return None
        m = lengths.pop()
        if not m:
            return None
        comps = list(zip(*col))
        kind = TUPLE
    elif tp is Product and PRODUCT in kinds:
        comps = [[t.outer for t in col], [t.inner for t in col]]
        kind = PRODUCT
    else:
        return None
    for c in comps:
        if set(map(type, c)) != INT_TYPES:
            return None
    codec = codec_for(kind, [(min(c), max(c)) for c in comps])
    if codec is None:
        return None
    if small:
        offsets, widths = codec.offsets, codec.widths
        codes = [x - offsets[0] for x in comps[0]] if offsets[0] else list(comps[0])
        for c, off, w in zip(comps[1:], offsets[1:], widths[1:]):
            codes = [(acc << w) | (x - off) for acc, x in zip(codes, c)]
        return codec, codes
    return codec, codec.encode_arrays([np.array(c, dtype=np.int64) for c in comps])


def as_int64(col: Any) -> np.ndarray[Any, Any] | None:
    """``col`` as a fresh int64 array, or None if it holds anything but plain 64-bit ints."""
    if isinstance(col, np.ndarray):
        kind = col.dtype.kind
        if kind == "i":
            return np.array(col, dtype=np.int64)
        if kind == "u":
            if col.size and int(col.max()) > I64_MAX:
                return None
            return np.array(col, dtype=np.int64)
        if kind == "O":
            return as_int64(col.tolist())
        return None
    if set(map(type, col)) != {int}:
        return None
    try:
        return np.array(col, dtype=np.int64)
    except OverflowError:
        return None
