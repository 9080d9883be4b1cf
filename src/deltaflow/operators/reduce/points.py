"""Product times as flat int tuples, and their decomposition into chains.

The interesting-times search and the accumulation work on times that are (nested) products
of ints. Flattened to int tuples (outermost coordinate first) they compare coordinate-wise
with C-level tuple operations, and a sorted list of them splits into ascending chains whose
coordinate columns are non-decreasing: every search along a chain is a :func:`bisect.bisect`.

>>> from deltaflow.framework.time_domain import domain_for_depth
>>> encode, decode = codec(Product(Product(1, 2), 3), domain_for_depth(2))
>>> encode(Product(Product(1, 2), 3)), decode((1, 2, 3)) == Product(Product(1, 2), 3)
((1, 2, 3), True)
>>> chains([(0, 1), (0, 3), (1, 0), (2, 2)])
[[(0, 1), (0, 3)], [(1, 0), (2, 2)]]
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from operator import le
from typing import TYPE_CHECKING, TypeAlias

from deltaflow.framework.lattice import Product, Time

if TYPE_CHECKING:
    from deltaflow.framework.time_domain import TimeDomain

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


def codec(
    example: Time, domain: TimeDomain
) -> tuple[Callable[[Time], Point], Callable[[Point], Time]]:
    """Encoder to flat int tuples and decoder back, for the times of ``domain`` (a scope's
    times, by its depth; any other shape by that of ``example``)."""
    if domain.loops and domain.depth == 1:
        return (
            lambda t: (t.outer, t.inner),
            lambda p: Product(p[0], p[1]),
        )
    if domain.loops and domain.depth == 2:
        return (
            lambda t: (t.outer.outer, t.outer.inner, t.inner),
            lambda p: Product(Product(p[0], p[1]), p[2]),
        )
    if domain.loops:
        return _loop_codec(domain.depth)
    shape = _shape(example)

    def encode(t: Time) -> Point:
        flat: list[int] = []
        _flatten_into(t, flat)
        return tuple(flat)

    def decode(p: Point) -> Time:
        return _build(shape, p, 0)[0]

    return encode, decode


def _loop_codec(depth: int) -> tuple[Callable[[Time], Point], Callable[[Point], Time]]:
    """:func:`codec` for the times of a scope ``depth`` loops deep: ``Product(t, i)`` down to
    an int, read level by level."""
    levels = range(depth)

    def encode(t: Time) -> Point:
        flat: list[int] = []
        for _ in levels:
            flat.append(t[1])  # type: ignore[index]
            t = t[0]  # type: ignore[index]
        flat.append(t)  # type: ignore[arg-type]
        flat.reverse()
        return tuple(flat)

    def decode(p: Point) -> Time:
        t: Time = p[0]
        for i in p[1:]:
            t = Product(t, i)
        return t

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
