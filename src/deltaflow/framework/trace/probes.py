"""Lookup keys prepared once for every batch that answers them (the probe strategies).

A spine's ``lookup_many`` asks each of its batches for the same keys. :class:`Probes` checks
and encodes those keys once per key codec, and indexes them by key once, so that each batch
picks the cheapest strategy for its size and layout (see :meth:`.batch.Batch.lookup_many`):

* a small batch with a dict index probes it once per key, or, when there are many more probes
  than keys it holds, looks its own keys up among the probes (:meth:`Probes.by_key`);
* a large numpy batch finds every probe's first and past-the-end positions with one
  ``searchsorted`` of their codes (:meth:`Probes.encoded`);
* keys of another type that may still equal a stored key (``1.0`` or ``True`` for an int, a
  tuple subclass for an int tuple) are looked up one by one.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from itertools import chain, compress
from operator import sub
from typing import Any, ClassVar, Literal

import numpy as np

from .. import tuning
from ..lattice import Product, Time
from . import order
from .codec import I64_MAX, I64_MIN, INT_CODEC, INT_TYPES, PRODUCT, Codec

__all__ = [
    "HASHED",
    "DecodedKeys",
    "Probes",
    "coded_bound",
    "int_bound",
    "item_rows",
    "make_readers",
]

#: Key classes whose ``==`` and ``hash`` agree with the universal order, so a dict finds
#: exactly the stored keys a lookup would find (given the footguns of :mod:`.order`).
HASHED: frozenset[type] = frozenset({int, float, bool, str, bytes, tuple, type(None), Product})


class Probes:
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

    #: Up to this many keys are checked and encoded in plain Python (numpy beyond).
    FEW_PROBES: ClassVar[int] = tuning.PROBES_FEW

    def __init__(self, keys: Iterable[Any]) -> None:
        self.keys: Sequence[Any] = keys if isinstance(keys, (list, tuple)) else list(keys)
        self._by_codec: dict[Codec, tuple[list[Any], Any, list[Any]]] = {}
        self._by_key: tuple[dict[Any, Any], list[Any]] | None = None

    def by_key(self) -> tuple[dict[Any, Any], list[Any]]:
        """``(first, rest)``: ``first`` maps each key of a :data:`HASHED` class to the first
        probe equal to it; ``rest`` lists the other keys (which need a search)."""
        got = self._by_key
        if got is None:
            first: dict[Any, Any] = {}
            rest: list[Any] = []
            setdefault = first.setdefault
            hashed = HASHED
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

    def encoded(self, kc: Codec) -> tuple[list[Any], Any, list[Any]]:
        """``(probes, search, others)`` for key codec ``kc`` (see the class docstring)."""
        got = self._by_codec.get(kc)
        if got is None:
            probes, codes, others = self._encode(kc)
            if isinstance(codes, list) and len(codes) <= self.FEW_PROBES:
                search = np.array(codes + [c + 1 for c in codes], dtype=np.int64)
            else:
                arr = np.asarray(codes, dtype=np.int64)
                search = np.concatenate((arr, arr + 1))
            got = self._by_codec[kc] = (probes, search, others)
        return got

    def _encode(self, kc: Codec) -> tuple[list[Any], Any, list[Any]]:
        keys = self.keys
        probes: list[Any]
        others: list[Any]
        # The largest int64 is left to a one-by-one lookup, so that code + 1 cannot overflow.
        if kc is INT_CODEC:
            if set(map(type, keys)) == INT_TYPES and I64_MIN <= min(keys) <= max(keys) < I64_MAX:
                probes = list(keys)
                return probes, probes, []
            probes = [k for k in keys if k.__class__ is int and I64_MIN <= k < I64_MAX]
            others = [
                k
                for k in keys
                if (k.__class__ is not int and isinstance(k, numbers.Real)) or k == I64_MAX
            ]
            return probes, probes, others
        m = kc.arity
        if len(keys) > self.FEW_PROBES:
            return self._encode_vectorised(kc)
        probes, codes, others = [], [], []
        offsets, highs, widths = kc.offsets, kc.highs, kc.widths
        int_types = INT_TYPES
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
                    if code < I64_MAX:
                        probes.append(key)
                        codes.append(code)
                    else:
                        others.append(key)
            elif isinstance(key, tuple):
                others.append(key)
        return probes, codes, others

    def _encode_vectorised(self, kc: Codec) -> tuple[list[Any], Any, list[Any]]:
        """:meth:`_encode` of many int-tuple keys, with numpy."""
        keys = self.keys
        m = kc.arity
        probes: list[Any] = []
        others: list[Any] = []
        arr: Any = None
        if set(map(type, keys)) == {tuple} and set(map(len, keys)) == {m}:
            flat = list(chain.from_iterable(keys))
            if set(map(type, flat)) == INT_TYPES:
                try:
                    arr = np.array(flat, dtype=np.int64).reshape(-1, m)
                    probes = list(keys)
                except OverflowError:
                    arr = None
        if arr is None:
            for k in keys:
                if k.__class__ is tuple:
                    if len(k) == m:
                        if set(map(type, k)) == INT_TYPES and all(
                            I64_MIN <= x <= I64_MAX for x in k
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
        ok &= codes < I64_MAX
        if not ok.all():
            others.extend(compress(probes, (codes == I64_MAX).tolist()))
            mask: list[bool] = ok.tolist()
            probes = list(compress(probes, mask))
            codes = codes[ok]
        return probes, codes, others


class DecodedKeys:
    """A read-only sequence view decoding a code column on access (for generic bisection)."""

    __slots__ = ("_codec", "_codes")

    def __init__(self, codes: np.ndarray[Any, Any], codec: Codec) -> None:
        self._codes = codes
        self._codec = codec

    def __len__(self) -> int:
        return len(self._codes)

    def __getitem__(self, i: int) -> Any:
        return self._codec.decode_one(int(self._codes[i]))


# ---------------------------------------------------------------------- one key at a time


def int_bound(keys: np.ndarray[Any, Any], key: Any, lo: int, right: bool) -> int:
    """Where ``key`` goes in the sorted int64 key column ``keys``, from ``lo`` on: the first
    index whose key does not sort before it (``right`` False) or sorts after it (``right``
    True), in the universal order (any number compares with the ints by value).

    Runtime complexity: O(log n), one ``searchsorted``.
    """
    n: int = len(keys)
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
    if x > I64_MAX:
        return n
    if x < I64_MIN:
        return lo
    side: Literal["left", "right"] = "right" if right else "left"
    if lo == 0:
        return int(keys.searchsorted(x, side))
    return lo + int(keys[lo:].searchsorted(x, side))


def coded_bound(keys: np.ndarray[Any, Any], kc: Codec, key: Any, lo: int, right: bool) -> int:
    """:func:`int_bound` for a column of int-tuple keys encoded with ``kc``.

    Runtime complexity: O(log n): one ``searchsorted`` for an int tuple of the codec's arity,
    a bisection decoding O(log n) keys for another tuple.
    """
    n: int = len(keys)
    if key.__class__ is tuple and len(key) == kc.arity and set(map(type, key)) == INT_TYPES:
        code, right = kc.probe(key, right)
        side: Literal["left", "right"] = "right" if right else "left"
        if lo == 0:
            return int(keys.searchsorted(code, side))
        return lo + int(keys[lo:].searchsorted(code, side))
    if isinstance(key, tuple):
        view = DecodedKeys(keys, kc)
        if right:
            return order.bisect_right(view, key, lo, n, True)  # type: ignore[arg-type]
        return order.bisect_left(view, key, lo, n, True)  # type: ignore[arg-type]
    # Numbers, strings and bytes sort before every tuple; everything else after.
    return lo if order.ukey(key)[0] < 3 else n


def make_readers(
    vals: np.ndarray[Any, Any] | None,
    times: np.ndarray[Any, Any],
    diffs: np.ndarray[Any, Any],
    vc: Codec,
    tc: Codec,
) -> tuple[Any, ...]:
    """The scalar accessors :func:`item_rows` reads a numpy batch's columns with."""
    return (
        times.item,
        diffs.item,
        tc.cache.get if tc.kind == PRODUCT else None,
        tc.decode_one,
        None if vals is None else vals.item,
        None if vc is INT_CODEC else vc.decode_one,
    )


def item_rows(
    readers: tuple[Any, ...],
    keys: Sequence[Any],
    los: Sequence[int],
    his: Sequence[int],
    out: dict[Any, list[tuple[Any, Time, int]]],
) -> None:
    """Set ``out[key]`` to the ``(val, time, diff)`` rows ``lo:hi`` of a numpy batch (read
    through its ``readers``, see :func:`make_readers`), for each non-empty range.

    Reads element by element: for a few rows ``ndarray.item`` and the codecs' scalar
    decoding (a dict probe for an interned product) cost less than any vectorised gather.

    Runtime complexity: O(k + r) Python steps for k ranges and r rows.
    """
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
