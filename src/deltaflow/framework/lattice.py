"""Timestamps and their lattice: ``less_equal``, ``join``, ``meet`` and ``advance_by``.

A deltaflow time is either a plain ``int`` (the outer, totally ordered time) or a
:class:`Product` of two times (the product partial order used inside ``iterate``; nested loops
nest products: ``Product(Product(t, i), j)``).

The *partial order* is only ever asked through :func:`less_equal` / :func:`less_than`. The
dunder comparisons of :class:`Product` (``<``, ``<=``, ...) are a *total* order — lexicographic
on ``(outer, inner)`` — which is a linear extension of the partial order. It exists for sorting
(``sorted``, ``bisect``, heaps) and must never be used to decide "has time ``a`` happened before
``b``". Python tuples have exactly this trap: a product time is its own class (a pair
underneath, for speed), never a bare tuple.

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
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

__all__ = [
    "Product",
    "Time",
    "advance_by",
    "advancer",
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
    "new_tuple",
    "sort_key",
]


class _Pair(NamedTuple):
    outer: Any
    inner: Any


class Product(_Pair):
    """A product timestamp: ``(outer, inner)`` ordered coordinate-wise.

    ``Product(a, b) <= Product(c, d)`` in the *partial* order iff ``a <= c`` and ``b <= d``
    (:func:`less_equal`). The comparison operators implement the lexicographic *total* order
    used for sorting only.

    A product is an immutable pair (a named tuple underneath, so hashing, equality, that
    total order and reading ``outer`` and ``inner`` run at C speed: times are dict keys on
    every hot path). It equals the plain tuple of its coordinates; times are never mixed with
    plain tuples.

    >>> less_equal(Product(1, 2), Product(1, 3)), less_equal(Product(1, 2), Product(0, 3))
    (True, False)
    >>> sorted([Product(1, 0), Product(0, 5)])
    [Product(outer=0, inner=5), Product(outer=1, inner=0)]
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Product(outer={self[0]!r}, inner={self[1]!r})"

    if TYPE_CHECKING:
        # What the type checker sees of tuple's comparisons: code compares times of one
        # shape only, whatever the static type says (``int | Product``).
        def __lt__(self, other: object) -> bool: ...
        def __le__(self, other: object) -> bool: ...
        def __gt__(self, other: object) -> bool: ...
        def __ge__(self, other: object) -> bool: ...


Time: TypeAlias = int | Product

#: ``tuple.__new__``. Hot paths build products as ``new_tuple(Product, (outer, inner))``: the
#: same object as ``Product(outer, inner)`` at half the cost (the named tuple's ``__new__`` is
#: Python code).
new_tuple = tuple.__new__


def less_equal(a: Time, b: Time) -> bool:
    """The lattice's partial order: ``a`` happens no later than ``b``.

    >>> less_equal(2, 3), less_equal(Product(2, 9), Product(3, 1))
    (True, False)
    """
    if a.__class__ is int:
        return a <= b
    # Indexing is the cheapest way into a Product (it is a pair: outer, inner).
    ao, ai = a  # type: ignore[misc]
    if ai.__class__ is int:
        if ao.__class__ is int:  # a loop's Product(round, iteration)
            return ao <= b[0] and ai <= b[1]  # type: ignore[index,no-any-return]
        # Nested loops nest in the outer coordinate: walk down that spine, one int per level,
        # in one call instead of one per level.
        while ai <= b[1]:  # type: ignore[index]
            b = b[0]  # type: ignore[index]
            if ao.__class__ is int:
                return ao <= b
            ao, ai = ao
            if ai.__class__ is not int:
                return less_equal(ao, b[0]) and less_equal(ai, b[1])  # type: ignore[index]
        return False
    return less_equal(ao, b[0]) and less_equal(ai, b[1])  # type: ignore[index]


def less_than(a: Time, b: Time) -> bool:
    """Strictly before in the partial order: ``less_equal(a, b) and a != b``."""
    return a != b and less_equal(a, b)


def join(a: Time, b: Time) -> Time:
    """Least upper bound (coordinate-wise maximum).

    >>> join(Product(3, 7), Product(4, 6))
    Product(outer=4, inner=7)
    """
    if a.__class__ is int:
        return a if a >= b else b
    ao, ai = a  # type: ignore[misc]
    if ao.__class__ is int and ai.__class__ is int:
        # Return an argument when it is the answer: no new Product to build.
        bo, bi = b  # type: ignore[misc]
        if ao >= bo:
            if ai >= bi:
                return a
            return b if ao == bo else new_tuple(Product, (ao, bi))
        return b if bi >= ai else new_tuple(Product, (bo, ai))
    if ai.__class__ is int:
        return _spine_join(a, b)  # type: ignore[arg-type]
    return Product(join(ao, b[0]), join(ai, b[1]))  # type: ignore[index]


def _spine_join(a: Product, b: Product) -> Time:
    """:func:`join` of nested-loop times (int inner coordinates down the outer spine), in one
    call instead of one per level."""
    inners = []
    while True:
        ao, ai = a
        bo, bi = b
        inners.append(ai if ai >= bi else bi)
        if ao.__class__ is not Product or ao[1].__class__ is not int:
            break
        a = ao
        b = bo
    top = join(ao, bo)
    for i in reversed(inners):
        top = new_tuple(Product, (top, i))
    return top


def meet(a: Time, b: Time) -> Time:
    """Greatest lower bound (coordinate-wise minimum).

    >>> meet(Product(3, 7), Product(4, 6))
    Product(outer=3, inner=6)
    """
    if a.__class__ is int:
        return a if a <= b else b
    return Product(meet(a.outer, b.outer), meet(a.inner, b.inner))  # type: ignore[union-attr]


def join_all(times: Iterable[Time]) -> Time:
    """Join of a non-empty iterable of times."""
    return _fold(join, times)


def meet_all(times: Iterable[Time]) -> Time:
    """Meet of a non-empty iterable of times.

    Ints, and loop times ``Product(int, int)``, take ``min`` per coordinate (the meet of a
    message's runs is taken for every message that holds several times).

    >>> meet_all([Product(3, 7), Product(4, 6), Product(5, 9)])
    Product(outer=3, inner=6)
    """
    if isinstance(times, list) and len(times) > 1:
        kinds = set(map(type, times))
        if kinds == _INT:
            return min(times)  # type: ignore[no-any-return]
        if kinds == _PRODUCT:
            outers = [t[0] for t in times]
            inners = [t[1] for t in times]
            if set(map(type, outers)) == _INT and set(map(type, inners)) == _INT:
                return new_tuple(Product, (min(outers), min(inners)))
    return _fold(meet, times)


_INT = {int}
_PRODUCT = {Product}


def _fold(op: Callable[[Time, Time], Time], times: Iterable[Time]) -> Time:
    """``op`` applied left to right over a non-empty iterable (StopIteration when empty)."""
    it = iter(times)
    acc = next(it)
    for t in it:
        acc = op(acc, t)
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


def advancer(frontier: Sequence[Time]) -> Callable[[Time], Time]:
    """``lambda t: advance_by(t, frontier)``, one function for many times of any shape.

    Compaction advances many times to one frontier. Times form a distributive lattice
    (products of totally ordered ints), where the meet of the joins with each element is the
    join with the frontier's meet: so every time takes one join with that meet (none when it
    is already beyond it). An empty frontier gives the identity, like :func:`advance_by`.
    This is the general domain's advancer; a scope's int and pair domains
    (:mod:`deltaflow.framework.time_domain`) have their own, written for their shape.

    >>> advancer([Product(2, 1), Product(1, 4)])(Product(0, 0))
    Product(outer=1, inner=1)
    """
    if not frontier:
        return _identity
    f = frontier[0] if len(frontier) == 1 else meet_all(frontier)
    if f.__class__ is int:
        return lambda t: t if t >= f else f
    return lambda t: t if less_equal(f, t) else join(t, f)


def _identity(t: Time) -> Time:
    return t


def depth(time: Time) -> int:
    """How many nested :class:`Product` levels ``time`` has (0 for an int).

    >>> depth(4), depth(Product(Product(1, 2), 3))
    (0, 2)
    """
    d = 0
    while time.__class__ is Product:
        time = time.outer
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
        return (time,)
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

    A chain is a list of times each ``less_equal`` the next; together the chains hold every
    distinct time exactly once. Reductions accumulate updates along each chain in one pass,
    so fewer chains means less work.

    For ints there is one chain. For times that vary in at most two integer coordinates
    (``Product(int, int)``, or deeper products whose other coordinates are all equal) the
    number of chains is the minimum possible: the size of the largest antichain (Dilworth's
    theorem). Times are visited in lexicographic order and each goes onto the chain whose last
    inner coordinate is the largest one not above its own, starting a new chain only when no
    chain fits. This is patience sorting: the number of chains equals the length of the
    longest strictly decreasing run of inner coordinates in that order, and such a run (its
    outer coordinates then strictly increase) is an antichain, which no decomposition can
    cover with fewer chains. Other shapes use a first-fit greedy rule on the partial order,
    which gives valid chains but not always the fewest.

    Runtime complexity: O(n log n + n * chains) for ints and two varying coordinates (the
    second term is a fast list insert); O(n * chains) lattice comparisons otherwise.

    >>> chain_decomposition([Product(0, 1), Product(1, 0), Product(1, 1), Product(0, 1)])
    [[Product(outer=0, inner=1), Product(outer=1, inner=1)], [Product(outer=1, inner=0)]]
    >>> chain_decomposition([3, 1, 2, 1])
    [[1, 2, 3]]
    """
    distinct = sorted(set(times))
    if not distinct:
        return []
    first = distinct[0]
    if first.__class__ is int:
        return [distinct]
    if first.outer.__class__ is int and first.inner.__class__ is int:  # type: ignore[union-attr]
        return _patience_chains(distinct, [t.inner for t in distinct])  # type: ignore[union-attr]
    flats = [sort_key(t) for t in distinct]
    varying = _varying_coordinates(flats)
    if len(varying) <= 1:
        # At most one coordinate differs: the lexicographic order is the partial order.
        return [distinct]
    if len(varying) == 2:
        j = varying[1]
        return _patience_chains(distinct, [f[j] for f in flats])
    chains: list[list[Time]] = []
    tails: list[tuple[int, ...]] = []
    for t, f in zip(distinct, flats):
        for k, tail in enumerate(tails):
            if all(a <= b for a, b in zip(tail, f)):
                chains[k].append(t)
                tails[k] = f
                break
        else:
            chains.append([t])
            tails.append(f)
    return chains


def _patience_chains(distinct: Sequence[Time], inners: Sequence[int]) -> list[list[Time]]:
    # ``distinct`` is in lexicographic order and ``inners[i]`` is the second varying
    # coordinate of ``distinct[i]``; every chain tail seen so far has a first coordinate <= the
    # current one, so only the second decides. ``tails`` holds the chains' last second
    # coordinates in ascending order and ``order`` the chain index at each tail position.
    # Replacing tails[pos] (the largest tail <= y) by y keeps ``tails`` sorted, because the
    # next tail is > y.
    tails: list[int] = []
    order: list[int] = []
    chains: list[list[Time]] = []
    bisect_right = bisect.bisect_right
    for t, y in zip(distinct, inners):
        pos = bisect_right(tails, y) - 1
        if pos < 0:
            tails.insert(0, y)
            order.insert(0, len(chains))
            chains.append([t])
        else:
            tails[pos] = y
            chains[order[pos]].append(t)
    return chains


def _varying_coordinates(flats: Sequence[tuple[int, ...]]) -> list[int]:
    """Indices of the flat coordinates that are not equal across all of ``flats``."""
    return [i for i, column in enumerate(zip(*flats)) if min(column) != max(column)]


def _unflatten(flat: Iterator[int], template: Time) -> Time:
    """Rebuild a time shaped like ``template`` from its flat coordinates (see sort_key)."""
    if template.__class__ is int:
        return next(flat)
    return Product(
        _unflatten(flat, template.outer),  # type: ignore[union-attr]
        _unflatten(flat, template.inner),  # type: ignore[union-attr]
    )


def _closure_pairs(pairs: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The join closure of distinct integer pairs, given in lexicographic order.

    A subset's join is ``(max x, max y)``; the member with the largest ``x`` and the member
    with the largest ``y`` already produce it, so the closure is the set of pairwise joins.
    ``(x, y)`` is such a join iff some pair has first coordinate exactly ``x`` and second
    coordinate ``<= y`` (an anchor), and some pair has first coordinate ``<= x`` and second
    coordinate exactly ``y``. So the closure's points at ``x`` are the second coordinates of
    pairs with first coordinate ``<= x`` that are ``>=`` the smallest second coordinate at
    ``x``. Sweeping ``x`` downwards, that set only loses values; a union-find "next present
    value" structure over the ranks of the second coordinates enumerates each point of the
    answer in amortised near-constant time.
    """
    ys = sorted({y for _, y in pairs})
    rank = {y: r for r, y in enumerate(ys)}
    m = len(ys)
    live = [0] * m
    for _, y in pairs:
        live[rank[y]] += 1
    parent = list(range(m + 1))  # parent[r] == r iff rank r is present (m is a sentinel)

    def find(r: int) -> int:
        while parent[r] != r:
            parent[r] = parent[parent[r]]
            r = parent[r]
        return r

    out: list[tuple[int, int]] = []
    append = out.append
    end = len(pairs)
    while end:
        x = pairs[end - 1][0]
        start = end - 1
        while start and pairs[start - 1][0] == x:
            start -= 1
        r = find(rank[pairs[start][1]])
        while r < m:
            append((x, ys[r]))
            r = find(r + 1)
        for i in range(start, end):
            r = rank[pairs[i][1]]
            live[r] -= 1
            if not live[r]:
                parent[r] = r + 1
        end = start
    return out


def join_closure(times: Iterable[Time]) -> set[Time]:
    """All joins of non-empty subsets of ``times`` (which must all have the same shape).

    These are the times at which a function of the accumulated collection can change: the
    *interesting times* of a reduction.

    When the times vary in at most two integer coordinates (ints, ``Product(int, int)``, or
    deeper products whose other coordinates are equal - the usual case inside one loop) the
    closure is found by one sweep that only ever touches points of the answer: times on a
    few lines give a linear-size closure in near-linear time, and a grid gives its quadratic
    closure in time linear in that output. In the general case times are added in
    lexicographic order, each joined with the closure so far (a join landing on a known time
    adds nothing) - at most (number of times) x (size of the closure) joins, never more than
    joining every pair of closure elements.

    Runtime complexity: O(n log n + |closure|) for at most two varying coordinates;
    O(n * |closure|) joins otherwise.

    >>> sorted(join_closure([Product(0, 1), Product(1, 0)]))
    [Product(outer=0, inner=1), Product(outer=1, inner=0), Product(outer=1, inner=1)]
    >>> lines = [Product(0, i) for i in range(1000)] + [Product(1, i) for i in range(1000)]
    >>> len(join_closure(lines))
    2000
    """
    distinct = set(times)
    if len(distinct) <= 1:
        return distinct
    first = next(iter(distinct))
    if first.__class__ is int:
        return distinct
    if first.outer.__class__ is int and first.inner.__class__ is int:  # type: ignore[union-attr]
        pairs = sorted([(t.outer, t.inner) for t in distinct])  # type: ignore[union-attr]
        return set(map(Product, *zip(*_closure_pairs(pairs))))
    flats = sorted([sort_key(t) for t in distinct])
    varying = _varying_coordinates(flats)
    if len(varying) <= 1:
        return distinct  # a chain is closed under join
    if len(varying) == 2:
        i, j = varying
        base = list(flats[0])
        result: set[Time] = set()
        for x, y in _closure_pairs([(f[i], f[j]) for f in flats]):
            base[i] = x
            base[j] = y
            result.add(_unflatten(iter(base), first))
        return result
    closure: set[tuple[int, ...]] = set()
    for t in flats:
        if t in closure:
            continue
        new = {tuple(map(max, t, c)) for c in closure}
        new.add(t)
        closure |= new
    return {_unflatten(iter(f), first) for f in closure}
