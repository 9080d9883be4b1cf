"""A hash that is the same in every process, for routing updates to workers.

Python's built-in ``hash`` of ``str`` and ``bytes`` is salted per process (``PYTHONHASHSEED``),
so two worker processes would disagree on who owns the key ``"cat"``. :func:`stable_hash` is
deterministic across processes and machines for ints, floats, bools, ``None``, strings, bytes
and tuples / frozensets of those (named tuples, ``Product`` times among them, hash as the tuple
they equal); other values hash their ``repr``, which is stable for attrs/dataclass records of
such fields.

    >>> stable_hash(12345)
    12345
    >>> stable_hash("cat") == stable_hash("cat")
    True
    >>> stable_hash(("cat", 3)) % 4 in range(4)
    True
"""

from __future__ import annotations

import zlib
from collections.abc import Hashable

__all__ = ["stable_hash"]

_MASK = (1 << 61) - 1


def stable_hash(value: Hashable) -> int:
    """A non-negative hash of ``value`` that does not depend on the process."""
    cls = value.__class__
    if cls is int:
        return value & _MASK  # type: ignore[operator]
    if cls is str:
        return zlib.crc32(value.encode("utf-8", "surrogatepass"))  # type: ignore[attr-defined]
    if cls is tuple or isinstance(value, tuple):  # a Product (a pair) hashes as its tuple
        h = 0x345678
        for item in value:  # type: ignore[attr-defined]
            h = ((h * 1000003) ^ stable_hash(item)) & _MASK
        return h
    if cls is bytes:
        return zlib.crc32(value)  # type: ignore[arg-type]
    if cls is float or cls is bool or value is None:
        return hash(value) & _MASK  # numeric hashes are not salted
    if cls is frozenset:
        acc = 0
        for item in value:  # type: ignore[attr-defined]
            acc ^= stable_hash(item)
        return acc
    return zlib.crc32(repr(value).encode("utf-8", "surrogatepass"))
