"""Product times as flat int tuples, and their decomposition into chains.

The interesting-times search and the accumulation work on times that are (nested) products
of ints. Flattened to int tuples (outermost coordinate first) they compare coordinate-wise
with C-level tuple operations, and a sorted list of them splits into ascending chains whose
coordinate columns are non-decreasing: every search along a chain is a :func:`bisect.bisect`.

>>> encode, decode = codec(Product(Product(1, 2), 3))
>>> encode(Product(Product(1, 2), 3)), decode((1, 2, 3)) == Product(Product(1, 2), 3)
((1, 2, 3), True)
>>> chains([(0, 1), (0, 3), (1, 0), (2, 2)])
[[(0, 1), (0, 3)], [(1, 0), (2, 2)]]
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from operator import le
from typing import TypeAlias

from deltaflow.framework.lattice import Product, Time

__all__ = ["Point", "chains", "codec", "join", "same_outer"]

Point = tuple[int, ...]
"""A product time flattened to its int coordinates, outermost first (ordered coordinate-wise)."""

_Shape: TypeAlias = "tuple[_Shape, _Shape] | None"


def _shape(time: Time) -> _Shape:
    if time.__class__ is int:
        return None
    return (_shape(time.outer), _shape(time.inner))  # type: ignore[union-attr]


def _flatten_into(time: Time, out: list[int]) -> None:
    if time.__class__ is int:
        out.append(time)
    else:
        _flatten_into(time.outer, out)  # type: ignore[union-attr]
        _flatten_into(time.inner, out)  # type: ignore[union-attr]


def _build(shape: _Shape, point: Point, pos: int) -> tuple[Time, int]:
    if shape is None:
        return point[pos], pos + 1
    outer, pos = _build(shape[0], point, pos)
    inner, pos = _build(shape[1], point, pos)
    return Product(outer, inner), pos


def codec(example: Time) -> tuple[Callable[[Time], Point], Callable[[Point], Time]]:
    """Encoder to flat int tuples and decoder back, for times shaped like ``example``."""
    shape = _shape(example)
    if shape == (None, None):
        return (
            lambda t: (t.outer, t.inner),
            lambda p: Product(p[0], p[1]),
        )
    if shape == ((None, None), None):
        return (
            lambda t: (t.outer.outer, t.outer.inner, t.inner),
            lambda p: Product(Product(p[0], p[1]), p[2]),
        )

    def encode(t: Time) -> Point:
        flat: list[int] = []
        _flatten_into(t, flat)
        return tuple(flat)

    def decode(p: Point) -> Time:
        return _build(shape, p, 0)[0]

    return encode, decode


def join(a: Point, b: Point) -> Point:
    """The coordinate-wise maximum of two points (unrolled for the common two and three
    coordinates: a quarter of the time of the general form, and the joins are most of what
    a chain crossing does)."""
    n = len(a)
    if n == 2:
        a0, a1 = a
        b0, b1 = b
        return (a0 if a0 >= b0 else b0, a1 if a1 >= b1 else b1)
    if n == 3:
        a0, a1, a2 = a
        b0, b1, b2 = b
        return (a0 if a0 >= b0 else b0, a1 if a1 >= b1 else b1, a2 if a2 >= b2 else b2)
    return tuple([x if x >= y else y for x, y in zip(a, b)])


def chains(ordered: Sequence[Point]) -> list[list[Point]]:
    """Partition distinct points, sorted lexicographically, into ascending chains.

    Points are visited in (lexicographic) order. For two coordinates each point goes onto the
    chain whose last second coordinate is the largest one not above its own, which gives the
    fewest chains (the same rule as ``lattice.chain_decomposition``); otherwise onto the first
    chain whose last point is below it.
    """
    if not ordered:
        return []
    found: list[list[Point]] = []
    if len(ordered[0]) == 2:
        # ``tails`` holds the chains' last second coordinates, ascending; ``ids`` the chain
        # index at each position. Replacing a tail by a larger value that is still below the
        # next tail keeps ``tails`` sorted.
        tails: list[int] = []
        ids: list[int] = []
        for p in ordered:
            pos = bisect_right(tails, p[1]) - 1
            if pos < 0:
                tails.insert(0, p[1])
                ids.insert(0, len(found))
                found.append([p])
            else:
                tails[pos] = p[1]
                found[ids[pos]].append(p)
        return found
    for p in ordered:
        for chain in found:
            if all(map(le, chain[-1], p)):
                chain.append(p)
                break
        else:
            found.append([p])
    return found


def same_outer(times: Iterable[Product], outer: Time) -> bool:
    """True when every one of ``times`` has outer coordinate ``outer``."""
    return all(t.outer == outer for t in times)
