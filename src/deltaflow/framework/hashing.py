"""A hash that is the same in every process, for routing updates to workers.

Python's built-in ``hash`` of ``str`` and ``bytes`` is salted per process (``PYTHONHASHSEED``),
and before Python 3.12 the hash of ``None`` is its address, so two worker processes would
disagree on who owns the key ``"cat"``. :func:`stable_hash` is deterministic across processes
and machines, and agrees with ``==`` wherever Python's own ``hash`` does for:

* numbers of every type (``int``, ``bool``, ``float``, ``Fraction``, ``Decimal``, numpy
  scalars, int enums): ``1``, ``1.0`` and ``True`` are one key, ``-1`` and ``-1.0`` too.
  Python's numeric hash is not salted and is equal for equal numbers of any type;
* strings and bytes (subclasses such as str enums included), ``None``;
* tuples and frozensets of those (named tuples and ``Product`` times hash as the tuple they
  equal).

Other values hash their ``repr``, which is stable for attrs/dataclass records of such fields
(two such values that are equal with different reprs would be routed apart).

    >>> stable_hash(12345)
    12345
    >>> stable_hash("cat") == stable_hash("cat")
    True
    >>> stable_hash((-1, "a")) == stable_hash((-1.0, "a"))
    True
    >>> worker_of(7, 4), worker_of(7.0, 4)
    (3, 3)
"""

from __future__ import annotations

import numbers
import warnings
import zlib
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from .tuning import COLUMNS_FROM as COLUMNS_FROM

__all__ = ["SELF_HASHED_BELOW", "owner_column", "owners", "stable_hash", "worker_of"]

_MASK = (1 << 61) - 1
SELF_HASHED_BELOW = _MASK
"""An int ``0 <= k < SELF_HASHED_BELOW`` is its own :func:`stable_hash` (routing may skip the
call)."""
_NONE = 0x5EED_0F_4E0E  # any constant: ``hash(None)`` is an address before Python 3.12


def stable_hash(value: Hashable) -> int:
    """A non-negative hash of ``value`` that does not depend on the process, equal for equal
    values (module docstring)."""
    cls = value.__class__
    if cls is int or cls is float or cls is bool:
        return hash(value) & _MASK  # numeric hashes are not salted
    if cls is str:
        return zlib.crc32(value.encode("utf-8", "surrogatepass"))  # type: ignore[attr-defined]
    if cls is tuple or isinstance(value, tuple):  # a Product (a pair) hashes as its tuple
        h = 0x345678
        for item in value:  # type: ignore[attr-defined]
            if item.__class__ is int and 0 <= item < _MASK:  # its own hash: no call
                h = ((h * 1000003) ^ item) & _MASK
            else:
                h = ((h * 1000003) ^ stable_hash(item)) & _MASK
        return h
    if value is None:
        return _NONE
    if isinstance(value, numbers.Number):
        return hash(value) & _MASK
    if isinstance(value, str):
        return zlib.crc32(str.encode(value, "utf-8", "surrogatepass"))
    if isinstance(value, bytes):
        return zlib.crc32(value)
    if isinstance(value, frozenset):
        acc = 0
        for item in value:
            acc ^= stable_hash(item)
        return acc
    return zlib.crc32(repr(value).encode("utf-8", "surrogatepass"))


def worker_of(key: Hashable, peers: int) -> int:
    """The worker (``0 .. peers - 1``) that owns ``key``: ``stable_hash(key) % peers``.

    A non-negative int below 2**61 - 1 is its own hash, so it skips the call.
    """
    if key.__class__ is int and 0 <= key < SELF_HASHED_BELOW:
        return key % peers
    return stable_hash(key) % peers


def owners(keys: Sequence[Hashable], peers: int) -> Sequence[int]:
    """``worker_of(key, peers)`` for every key, in order.

    Many keys that are all small non-negative ints, or all tuples of as many of them (the
    usual keys of graphs and counts), are hashed as numpy columns (:func:`owner_column`);
    anything else key by key.

    >>> list(owners([(1, 2), (3, 4), 7, "cat"], 3)) == [worker_of(k, 3) for k in
    ...     [(1, 2), (3, 4), 7, "cat"]]
    True
    """
    if len(keys) >= COLUMNS_FROM:
        column = owner_column(keys, peers)
        if column is not None:
            return column.tolist()  # type: ignore[no-any-return]
    below = SELF_HASHED_BELOW
    h_of = stable_hash
    return [(k if k.__class__ is int and 0 <= k < below else h_of(k)) % peers for k in keys]


def owner_column(keys: Sequence[Hashable], peers: int) -> np.ndarray[Any, Any] | None:
    """``worker_of(key, peers)`` for every key as an int64 column, when the keys are all small
    non-negative ints or all tuples of as many of them; else ``None``.

    The same arithmetic as :func:`stable_hash` (which wraps at 2**61 - 1, so 64-bit products
    keep its low bits).

    >>> owner_column([(1, 2), (3, 4)], 3).tolist() == [worker_of((1, 2), 3), worker_of((3, 4), 3)]
    True
    >>> owner_column(["cat"], 3) is None
    True
    """
    if not keys:
        return None
    columns = _int_columns(keys)
    if columns is None:
        return None
    if columns.ndim == 1:
        return columns % peers
    h = np.full(len(keys), 0x345678, dtype=np.uint64)
    prime, mask = np.uint64(1000003), np.uint64(_MASK)
    for column in columns.T.astype(np.uint64):
        h = ((h * prime) ^ column) & mask
    return (h % np.uint64(peers)).astype(np.int64)


def _int_columns(keys: Sequence[Hashable]) -> np.ndarray[Any, Any] | None:
    """The keys as an int64 array (one column, or one per tuple field) when every key is a
    non-negative int below 2**61 - 1, or every key a tuple of as many such ints; else
    ``None``."""
    first = keys[0]
    if first.__class__ is not int and first.__class__ is not tuple:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ragged tuples: numpy warns, then we say no
            columns = np.array(keys)
    except (ValueError, OverflowError, TypeError):
        return None
    # Bools are ints that hash as themselves; floats, strings and objects are not ints.
    if columns.dtype.kind not in "iub" or columns.ndim != (1 if first.__class__ is int else 2):
        return None
    if columns.size and (columns.min() < 0 or columns.max() >= SELF_HASHED_BELOW):
        return None
    return columns.astype(np.int64, copy=False)
