"""Hypothesis strategies shared by deltaflow's tests: times, antichains and update lists.

Times come in three *shapes*: ``"int"``, ``"product"`` (``Product(int, int)``) and ``"nested"``
(``Product(Product(int, int), int)``). Anything that combines several times (a lattice law, an
antichain, an update list) must draw them all from one shape; use :func:`times_of` with a
shape from :data:`SHAPES`, or the ``*_any_shape`` strategies that pick a shape first.

Coordinates are small by default so that equal and comparable times are common: the
interesting cases for a partial order are collisions and incomparable pairs, not big numbers.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from deltaflow.framework.antichain import Antichain
from deltaflow.framework.lattice import Product, Time

__all__ = [
    "SHAPES",
    "antichains",
    "data_values",
    "diffs",
    "ints",
    "nested_products",
    "nonnegative",
    "products",
    "shapes",
    "time_lists",
    "time_lists_any_shape",
    "times_of",
    "update_lists",
    "update_lists_any_shape",
]

SHAPES = ("int", "product", "nested")

Update = tuple[Any, Time, int]


def ints(max_value: int = 6) -> st.SearchStrategy[int]:
    """Integer times in ``[0, max_value]``."""
    return st.integers(min_value=0, max_value=max_value)


def products(max_value: int = 4) -> st.SearchStrategy[Product]:
    """``Product(int, int)`` times with both coordinates in ``[0, max_value]``."""
    return st.builds(Product, ints(max_value), ints(max_value))


def nested_products(max_value: int = 3) -> st.SearchStrategy[Product]:
    """``Product(Product(int, int), int)`` times (a loop nested in a loop)."""
    return st.builds(Product, products(max_value), ints(max_value))


def shapes() -> st.SearchStrategy[str]:
    """One of :data:`SHAPES`."""
    return st.sampled_from(SHAPES)


def times_of(shape: str, max_value: int | None = None) -> st.SearchStrategy[Time]:
    """Times of the given shape; ``max_value`` bounds every coordinate."""
    if shape == "int":
        return ints(6 if max_value is None else max_value)
    if shape == "product":
        return products(4 if max_value is None else max_value)
    if shape == "nested":
        return nested_products(3 if max_value is None else max_value)
    msg = f"unknown time shape {shape!r}; expected one of {SHAPES}"
    raise ValueError(msg)


def time_lists(
    shape: str, *, min_size: int = 0, max_size: int = 8, max_value: int | None = None
) -> st.SearchStrategy[list[Time]]:
    """Lists of times of one shape (duplicates allowed)."""
    return st.lists(times_of(shape, max_value), min_size=min_size, max_size=max_size)


def time_lists_any_shape(*, min_size: int = 0, max_size: int = 8) -> st.SearchStrategy[list[Time]]:
    """Lists of times of one shape, the shape itself drawn too."""
    return shapes().flatmap(lambda s: time_lists(s, min_size=min_size, max_size=max_size))


def antichains(shape: str, *, max_size: int = 6) -> st.SearchStrategy[Antichain]:
    """Antichains (frontiers) of the given shape, possibly empty."""
    return time_lists(shape, max_size=max_size).map(Antichain)


def data_values() -> st.SearchStrategy[Any]:
    """Small hashable data: a few ints and strings, so that updates collide."""
    return st.one_of(st.integers(min_value=0, max_value=4), st.sampled_from(["a", "b", "c"]))


def diffs(*, allow_zero: bool = False) -> st.SearchStrategy[int]:
    """Small signed counts, non-zero unless ``allow_zero``."""
    d = st.integers(min_value=-3, max_value=3)
    return d if allow_zero else d.filter(bool)


def update_lists(
    shape: str,
    *,
    data: st.SearchStrategy[Any] | None = None,
    max_size: int = 12,
    allow_zero: bool = False,
    max_value: int | None = None,
) -> st.SearchStrategy[list[Update]]:
    """Lists of ``(data, time, diff)`` updates whose times all have ``shape``."""
    return st.lists(
        st.tuples(
            data_values() if data is None else data,
            times_of(shape, max_value),
            diffs(allow_zero=allow_zero),
        ),
        max_size=max_size,
    )


def update_lists_any_shape(*, max_size: int = 12) -> st.SearchStrategy[list[Update]]:
    """Update lists of one drawn shape."""
    return shapes().flatmap(lambda s: update_lists(s, max_size=max_size))


def bottom(time: Time) -> Time:
    """The least time of ``time``'s shape: ``0``, ``Product(0, 0)``, ..."""
    if isinstance(time, Product):
        return Product(bottom(time.outer), bottom(time.inner))
    return 0


def nonnegative(updates: list[Update]) -> list[Update]:
    """``updates`` with, for each datum that has retractions, as many more insertions of it
    at the least time: its count is then >= 0 at every time of any partial order (a
    collection, as reductions require), and its retractions still retract.

    >>> nonnegative([("a", 2, -1), ("b", 1, 1), ("a", 3, -2)])
    [('a', 2, -1), ('b', 1, 1), ('a', 3, -2), ('a', 0, 3)]
    """
    retracted: dict[Any, int] = {}
    for d, _, r in updates:
        if r < 0:
            retracted[d] = retracted.get(d, 0) - r
    if not updates:
        return updates
    low = bottom(updates[0][1])
    return [*updates, *((d, low, n) for d, n in retracted.items())]
