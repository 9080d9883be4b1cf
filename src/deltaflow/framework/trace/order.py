"""The total order in which traces store keys and values.

Batches are sorted by ``(key, val, time)``. Times have a total order of their own (``int`` and
the lexicographic dunders of :class:`~deltaflow.framework.lattice.Product`). Keys and values are
arbitrary hashable Python data, which Python does not always know how to compare (``1 < "a"``
raises), so deltaflow defines one deterministic total order over all of them, :func:`ukey`:

* numbers (``int``, ``float``, ``bool``, any ``numbers.Real``) first, by value;
* then ``str``, then ``bytes``, each by value;
* then tuples, element-wise by this same order (shorter prefixes first); a
  :class:`Product` is a pair, ordered (and equal) as the tuple ``(outer, inner)``;
* then ``None``;
* then frozensets and sets, by their sorted elements;
* then instances of other classes that define ``<``, grouped by class (module and qualified
  name) and ordered by their own ``<`` within a class;
* then instances of classes without ``<``, grouped by class and ordered by ``repr``.

Computing :func:`ukey` costs a Python call per value, so the natural ``<`` is used whenever it
gives the same answer: for the "safe" types (numbers, ``str``, ``bytes``, tuples, ``Product``)
every comparison that does not raise agrees with :func:`ukey`, so sorting and searching try the
natural order first and fall back to :func:`ukey` when a ``TypeError`` says the values were not
mutually comparable. The result is the same order either way, which is what lets batches that
were sorted differently be merged and searched together.

Footguns: ``float('nan')`` is not ordered by anything and must not be used as a key or value; a
tuple holding sets is compared naturally first, where ``<`` means "subset", which is not a total
order; keys of classes ordered by ``repr`` should have a ``repr`` consistent with ``==``.

    >>> sorted([3, "b", (1, 2), None, 1.5, "a"], key=ukey)
    [1.5, 3, 'a', 'b', (1, 2), None]
    >>> lt(2, "a"), lt("a", 2), lt((1, "x"), (1, 2))
    (True, False, False)
"""

from __future__ import annotations

import bisect
import numbers
from collections.abc import Iterable, Sequence
from typing import Any

from ..lattice import Product

__all__ = [
    "INCOMPARABLE",
    "SAFE_TYPES",
    "bisect_left",
    "bisect_right",
    "is_safe",
    "lt",
    "sort_pairs",
    "sort_values",
    "ukey",
]

#: Types whose natural ``<``, when it does not raise, agrees with :func:`ukey`.
SAFE_TYPES: frozenset[type] = frozenset({int, float, bool, str, bytes, tuple, Product})

#: What a failed natural comparison raises: ``TypeError`` for mismatched types (a user class's
#: ``<`` may raise ``AttributeError`` instead).
#: The exceptions a comparison of values of unrelated types raises.
INCOMPARABLE = (TypeError, AttributeError)

_ORDERABLE: dict[type, bool] = {}
_OBJECT_LT: object = object.__dict__["__lt__"]


def ukey(x: object) -> tuple[Any, ...]:
    """The universal sort key of ``x`` (see the module docstring for the order).

    Runtime complexity: O(size of ``x``).

    >>> ukey(3) < ukey("a") < ukey(()) < ukey(None)
    True
    """
    c = x.__class__
    if c is int or c is float or c is bool:
        return (0, x)
    if c is str:
        return (1, x)
    if c is tuple or c is Product:
        return (3, tuple(map(ukey, x)))  # type: ignore[call-overload]
    if c is bytes:
        return (2, x)
    if x is None:
        return (5,)
    return _ukey_other(x, c)


def _ukey_other(x: object, c: type) -> tuple[Any, ...]:
    if isinstance(x, numbers.Real):
        return (0, x)
    if isinstance(x, str):
        return (1, x)
    if isinstance(x, bytes):
        return (2, x)
    if isinstance(x, tuple):
        return (3, tuple(map(ukey, x)))
    if isinstance(x, (frozenset, set)):
        return (6, tuple(sorted(map(ukey, x))))
    orderable = _ORDERABLE.get(c)
    if orderable is None:
        lt_method: object = getattr(c, "__lt__", None)
        orderable = lt_method is not _OBJECT_LT
        _ORDERABLE[c] = orderable
    if orderable:
        return (7, c.__module__, c.__qualname__, _Native(x))
    return (8, c.__module__, c.__qualname__, repr(x))


class _Native:
    """Wraps a value so that tuples holding it compare it with its own ``<`` and ``==``."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __lt__(self, other: _Native) -> bool:
        return bool(self.value < other.value)  # type: ignore[operator]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Native) and bool(self.value == other.value)

    def __hash__(self) -> int:
        return hash(self.value)


def is_safe(values: Iterable[object]) -> bool:
    """True when every value's type is one of :data:`SAFE_TYPES` (natural ``<`` may be tried).

    Runtime complexity: O(n), at C speed.

    >>> is_safe([1, "a", (2, 3)]), is_safe([frozenset()])
    (True, False)
    """
    return set(map(type, values)) <= SAFE_TYPES


def lt(a: object, b: object) -> bool:
    """``a`` sorts strictly before ``b`` in the universal order.

    >>> lt(1, 2), lt("a", 1), lt(None, 0)
    (True, False, False)
    """
    if a.__class__ in SAFE_TYPES and b.__class__ in SAFE_TYPES:
        try:
            return bool(a < b)  # type: ignore[operator]
        except INCOMPARABLE:
            pass
    return ukey(a) < ukey(b)


def sort_pairs(items: list[tuple[Any, Any]], natural: bool) -> None:
    """Sort ``(tuple_of_values, payload)`` pairs in place by the universal order of the tuple.

    The first elements must be distinct, so payloads are never compared. ``natural`` says the
    values are all of :data:`SAFE_TYPES`, so the natural ``<`` is tried first.

    Runtime complexity: O(n log n); O(n) when ``items`` is a few sorted runs.

    >>> items = [(("b", 1), "x"), ((2, 0), "y"), (("a", 5), "z")]
    >>> sort_pairs(items, natural=True)
    >>> [p for _, p in items]
    ['y', 'z', 'x']
    """
    if natural:
        try:
            items.sort()
            return
        except INCOMPARABLE:
            pass
    items.sort(key=_pair_key)


def _pair_key(item: tuple[Any, Any]) -> tuple[Any, ...]:
    return tuple(map(ukey, item[0]))


def sort_values(values: list[Any]) -> None:
    """Sort distinct values in place by the universal order.

    >>> v = [2, "a", 1]
    >>> sort_values(v)
    >>> v
    [1, 2, 'a']
    """
    if is_safe(values):
        try:
            values.sort()
            return
        except INCOMPARABLE:
            pass
    values.sort(key=ukey)


def bisect_left(seq: Sequence[Any], x: object, lo: int, hi: int, natural: bool) -> int:
    """First index in ``seq[lo:hi]`` whose value does not sort before ``x``.

    ``natural`` says ``seq`` holds only values of :data:`SAFE_TYPES`.

    Runtime complexity: O(log n) comparisons.

    >>> bisect_left([1, 3, "a"], 2, 0, 3, natural=False)
    1
    """
    if natural and x.__class__ in SAFE_TYPES:
        try:
            return bisect.bisect_left(seq, x, lo, hi)
        except INCOMPARABLE:
            pass
    return bisect.bisect_left(seq, ukey(x), lo, hi, key=ukey)


def bisect_right(seq: Sequence[Any], x: object, lo: int, hi: int, natural: bool) -> int:
    """First index in ``seq[lo:hi]`` whose value sorts strictly after ``x``.

    Runtime complexity: O(log n) comparisons.

    >>> bisect_right([1, 3, 3, "a"], 3, 0, 4, natural=False)
    3
    """
    if natural and x.__class__ in SAFE_TYPES:
        try:
            return bisect.bisect_right(seq, x, lo, hi)
        except INCOMPARABLE:
            pass
    return bisect.bisect_right(seq, ukey(x), lo, hi, key=ukey)
