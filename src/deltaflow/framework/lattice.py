"""Timestamps and their lattice: ``less_equal``, ``join``, ``meet`` and ``advance_by``.

A deltaflow time is either a plain ``int`` (the outer, totally ordered time) or a
:class:`Product` of two times (the product partial order used inside ``iterate``; nested loops
nest products: ``Product(Product(t, i), j)``).

The *partial order* is only ever asked through :func:`less_equal` / :func:`less_than`. The
dunder comparisons of :class:`Product` (``<``, ``<=``, ...) are a *total* order — lexicographic
on ``(outer, inner)`` — which is a linear extension of the partial order. It exists for sorting
(``sorted``, ``bisect``, heaps) and must never be used to decide "has time ``a`` happened before
``b``". Python tuples have exactly this trap, which is why a product time is a class and never a
bare tuple.

    >>> a, b = Product(3, 7), Product(4, 6)
    >>> less_equal(a, b), less_equal(b, a)      # incomparable in the partial order
    (False, False)
    >>> a < b                                   # but ordered for sorting
    True
    >>> join(a, b), meet(a, b)
    (Product(outer=4, inner=7), Product(outer=3, inner=6))
    >>> advance_by(Product(0, 3), [Product(2, 0)])
    Product(outer=2, inner=3)
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Union

import attrs

if TYPE_CHECKING:
    from typing_extensions import TypeAlias

__all__ = [
    "Product",
    "Time",
    "advance_by",
    "chain_decomposition",
    "depth",
    "join",
    "join_all",
    "join_closure",
    "less_equal",
    "less_than",
    "meet",
    "meet_all",
    "minimum_like",
    "sort_key",
]


@attrs.frozen(order=False, repr=True)
class Product:
    """A product timestamp: ``(outer, inner)`` ordered coordinate-wise.

    ``Product(a, b) <= Product(c, d)`` in the *partial* order iff ``a <= c`` and ``b <= d``
    (:func:`less_equal`). The comparison operators implement the lexicographic *total* order
    used for sorting only.

    >>> less_equal(Product(1, 2), Product(1, 3)), less_equal(Product(1, 2), Product(0, 3))
    (True, False)
    >>> sorted([Product(1, 0), Product(0, 5)])
    [Product(outer=0, inner=5), Product(outer=1, inner=0)]
    """

    outer: Any
    inner: Any

    def _key(self) -> tuple[Any, Any]:
        return (self.outer, self.inner)

    def __lt__(self, other: Product) -> bool:
        return (self.outer, self.inner) < (other.outer, other.inner)

    def __le__(self, other: Product) -> bool:
        return (self.outer, self.inner) <= (other.outer, other.inner)

    def __gt__(self, other: Product) -> bool:
        return (self.outer, self.inner) > (other.outer, other.inner)

    def __ge__(self, other: Product) -> bool:
        return (self.outer, self.inner) >= (other.outer, other.inner)


if TYPE_CHECKING:
    Time: TypeAlias = Union[int, Product]
else:
    Time = Union[int, Product]


def less_equal(a: Time, b: Time) -> bool:
    """The lattice's partial order: ``a`` happens no later than ``b``.

    >>> less_equal(2, 3), less_equal(Product(2, 9), Product(3, 1))
    (True, False)
    """
    if a.__class__ is int:
        return a <= b  # type: ignore[operator]
    return less_equal(a.outer, b.outer) and less_equal(a.inner, b.inner)  # type: ignore[union-attr]


def less_than(a: Time, b: Time) -> bool:
    """Strictly before in the partial order: ``less_equal(a, b) and a != b``."""
    return a != b and less_equal(a, b)


def join(a: Time, b: Time) -> Time:
    """Least upper bound (coordinate-wise maximum).

    >>> join(Product(3, 7), Product(4, 6))
    Product(outer=4, inner=7)
    """
    if a.__class__ is int:
        return a if a >= b else b  # type: ignore[operator,return-value]
    return Product(join(a.outer, b.outer), join(a.inner, b.inner))  # type: ignore[union-attr]


def meet(a: Time, b: Time) -> Time:
    """Greatest lower bound (coordinate-wise minimum).

    >>> meet(Product(3, 7), Product(4, 6))
    Product(outer=3, inner=6)
    """
    if a.__class__ is int:
        return a if a <= b else b  # type: ignore[operator,return-value]
    return Product(meet(a.outer, b.outer), meet(a.inner, b.inner))  # type: ignore[union-attr]


def join_all(times: Iterable[Time]) -> Time:
    """Join of a non-empty iterable of times."""
    it = iter(times)
    acc = next(it)
    for t in it:
        acc = join(acc, t)
    return acc


def meet_all(times: Iterable[Time]) -> Time:
    """Meet of a non-empty iterable of times."""
    it = iter(times)
    acc = next(it)
    for t in it:
        acc = meet(acc, t)
    return acc


def advance_by(time: Time, frontier: Iterable[Time]) -> Time:
    """Compact ``time`` against ``frontier``: the meet over ``f`` in frontier of ``join(time, f)``.

    The result is indistinguishable from ``time`` by any time beyond ``frontier``: for every
    ``u`` with some ``f <= u``, ``time <= u`` iff ``advance_by(time, frontier) <= u``; and it is
    the largest time with that property (see the roadmap seed for the proof). An empty frontier
    means no time can be read any more; ``time`` is then returned unchanged.

    Runtime complexity: O(len(frontier)) lattice operations.

    >>> advance_by(3, [5])
    5
    >>> advance_by(Product(0, 0), [Product(2, 1), Product(1, 4)])
    Product(outer=1, inner=1)
    """
    it = iter(frontier)
    first = next(it, None)
    if first is None:
        return time
    result = join(time, first)
    for f in it:
        result = meet(result, join(time, f))
    return result


def depth(time: Time) -> int:
    """How many nested :class:`Product` levels ``time`` has (0 for an int).

    >>> depth(4), depth(Product(Product(1, 2), 3))
    (0, 2)
    """
    d = 0
    while time.__class__ is Product:
        time = time.outer  # type: ignore[union-attr]
        d += 1
    return d


def sort_key(time: Time) -> tuple[int, ...]:
    """A flat tuple that orders times lexicographically, outermost coordinate first.

    Times of the same shape compare exactly as the :class:`Product` total order does; times of
    different nesting depths still compare (a shorter tuple sorts before its extensions).

    >>> sort_key(Product(Product(1, 2), 3))
    (1, 2, 3)
    """
    if time.__class__ is int:
        return (time,)  # type: ignore[return-value]
    return sort_key(time.outer) + sort_key(time.inner)  # type: ignore[union-attr]


def minimum_like(time: Time) -> Time:
    """The least time of the same shape as ``time`` (all coordinates 0).

    >>> minimum_like(Product(Product(5, 2), 3))
    Product(outer=Product(outer=0, inner=0), inner=0)
    """
    if time.__class__ is int:
        return 0
    return Product(minimum_like(time.outer), minimum_like(time.inner))  # type: ignore[union-attr]


def chain_decomposition(times: Iterable[Time]) -> list[list[Time]]:
    """Partition the distinct ``times`` into chains, each ascending in the partial order.

    For ints there is one chain. For two-coordinate products (``Product(int, int)``) the number
    of chains is the minimum possible (the width of the set, by Dilworth's theorem): times are
    visited in lexicographic order and each goes onto the chain whose last inner coordinate is
    the largest one not above its own ("patience sorting"). Other shapes use the same greedy
    rule on the partial order, which gives valid chains but not always the fewest.

    Runtime complexity: O(n log n) for ints and two-coordinate products; O(n * chains) for
    deeper shapes.

    >>> chain_decomposition([Product(0, 1), Product(1, 0), Product(1, 1), Product(0, 1)])
    [[Product(outer=0, inner=1), Product(outer=1, inner=1)], [Product(outer=1, inner=0)]]
    """
    distinct = sorted(set(times))
    if not distinct:
        return []
    first = distinct[0]
    if first.__class__ is int:
        return [distinct]
    if first.outer.__class__ is int and first.inner.__class__ is int:  # type: ignore[union-attr]
        return _patience_chains(distinct)  # type: ignore[arg-type]
    chains: list[list[Time]] = []
    for t in distinct:
        for chain in chains:
            if less_equal(chain[-1], t):
                chain.append(t)
                break
        else:
            chains.append([t])
    return chains


def _patience_chains(distinct: Sequence[Product]) -> list[list[Time]]:
    # ``tails`` holds the chains' last inner coordinates in ascending order, and ``order`` the
    # chain index for each tail position. Visiting times in lexicographic order means every
    # chain tail has outer <= the current outer, so only the inner coordinate decides.
    tails: list[int] = []
    order: list[int] = []
    chains: list[list[Time]] = []
    for t in distinct:
        pos = bisect.bisect_right(tails, t.inner) - 1
        if pos < 0:
            chains.append([t])
            tails.insert(0, t.inner)
            order.insert(0, len(chains) - 1)
        else:
            idx = order[pos]
            chains[idx].append(t)
            del tails[pos]
            del order[pos]
            new_pos = bisect.bisect_right(tails, t.inner)
            tails.insert(new_pos, t.inner)
            order.insert(new_pos, idx)
    return chains


def join_closure(times: Iterable[Time]) -> set[Time]:
    """All joins of non-empty subsets of ``times``.

    Built incrementally: the closure of a set plus one new time ``t`` is the old closure, ``t``,
    and ``join(t, c)`` for every ``c`` in the old closure. Times are added in lexicographic
    order, and a join that lands on a time already present adds nothing, so the work is
    proportional to (number of times) x (size of the closure) - linear in the output when the
    closure is small, as for times lying on few lines, and never worse than the pairwise
    bound times the answer.

    >>> sorted(join_closure([Product(0, 1), Product(1, 0)]))
    [Product(outer=0, inner=1), Product(outer=1, inner=0), Product(outer=1, inner=1)]
    """
    closure: set[Time] = set()
    for t in sorted(set(times)):
        if t in closure:
            continue
        new = {join(t, c) for c in closure}
        new.add(t)
        closure |= new
    return closure
