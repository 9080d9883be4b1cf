"""Frontiers: :class:`Antichain`, the counted :class:`MutableAntichain`, and :class:`ChangeBatch`.

An *antichain* is a set of mutually incomparable times; used as a *frontier* it stands for every
time that is ``>=`` one of its elements ("beyond" the frontier). The empty antichain is the
frontier of a finished stream: no time is beyond it.

A :class:`MutableAntichain` keeps a multiset of times with signed counts (pointstamps:
capabilities held, messages in flight) and maintains the antichain of minimal times whose count
is positive. :meth:`MutableAntichain.update_iter` applies a batch of count changes and returns
how the frontier moved, recomputing the frontier only when a change could have moved it.

Each antichain compares its elements by the partial order of their
:class:`~deltaflow.framework.time_domain.TimeDomain`, chosen once when it is made (given by its
maker, such as the progress tracker, which knows each port's domain, or found from its least
element): no comparison tests which shape its times have.

A :class:`ChangeBatch` is the currency of progress: a lazily consolidated list of
``(item, delta)`` pairs.

    >>> f = MutableAntichain()
    >>> f.update_iter([(3, 1), (5, 1)])
    [(3, 1)]
    >>> f.update_iter([(3, -1)])
    [(3, -1), (5, 1)]
    >>> f.frontier()
    Antichain([5])
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Generic, TypeVar

import attrs

from .lattice import Time, join, less_equal, less_than
from .time_domain import TimeDomain, domain_for_depth, domain_of

__all__ = ["Antichain", "ChangeBatch", "MutableAntichain", "frontier_join"]


#: A partial order on times: ``le(a, b)`` iff ``a`` happens no later than ``b``.
Order = Callable[[Time, Time], bool]


_INT_ORDER = domain_for_depth(0).less_equal


def _order_of(elements: tuple[Time, ...] | list[Time]) -> Order:
    """The partial order of ``elements``' domain, found from the first (any order for none)."""
    return domain_of(elements[0]).less_equal if elements else less_equal


K = TypeVar("K", bound=Hashable)


@attrs.define(eq=False, repr=False)
class ChangeBatch(Generic[K]):
    """A multiset of ``(item, delta)`` changes, consolidated lazily.

    Updates are appended; equal items are summed and zeros dropped only when the batch is read,
    or when it has grown to twice its last consolidated size. That makes "decrement then
    increment" patterns cheap.

    Runtime complexity: ``update`` amortised O(1); reads O(n) after appends.

    >>> b = ChangeBatch()
    >>> b.update("a", 2); b.update("b", 1); b.update("a", -2)
    >>> b.drain()
    [('b', 1)]
    >>> b.is_empty()
    True
    """

    _updates: list[tuple[K, int]] = attrs.field(factory=list)
    _clean: int = 0

    def update(self, item: K, delta: int) -> None:
        """Add ``delta`` to ``item``'s count."""
        if delta:
            self._updates.append((item, delta))
            if len(self._updates) > 32 and len(self._updates) >> 1 >= self._clean:
                self.compact()

    def extend(self, changes: Iterable[tuple[K, int]]) -> None:
        """Add every ``(item, delta)`` of ``changes``."""
        for item, delta in changes:
            self.update(item, delta)

    def compact(self) -> None:
        """Sum equal items and drop zero counts."""
        if self._clean < len(self._updates):
            acc: dict[K, int] = {}
            for item, delta in self._updates:
                acc[item] = acc.get(item, 0) + delta
            self._updates = [(k, v) for k, v in acc.items() if v]
            self._clean = len(self._updates)

    def is_empty(self) -> bool:
        """True when every item's net count is zero."""
        if self._clean == len(self._updates) == 0:
            return True
        self.compact()
        return not self._updates

    def __len__(self) -> int:
        self.compact()
        return len(self._updates)

    def __iter__(self) -> Iterator[tuple[K, int]]:
        self.compact()
        return iter(list(self._updates))

    def drain(self) -> list[tuple[K, int]]:
        """Return the consolidated changes and empty the batch."""
        self.compact()
        out, self._updates, self._clean = self._updates, [], 0
        return out

    def _check(self) -> None:
        """Assert the invariants: no zero deltas; the clean prefix never outgrows the list."""
        assert all(delta != 0 for _, delta in self._updates)
        assert 0 <= self._clean <= len(self._updates)
        clean = [item for item, _ in self._updates[: self._clean]]
        assert len(set(clean)) == len(clean), "compacted prefix holds an item twice"

    def __repr__(self) -> str:
        return f"ChangeBatch({list(self)!r})"


@attrs.define(eq=False, repr=False, init=False)
class Antichain:
    """An immutable set of mutually incomparable times, used as a frontier.

    Construction keeps only the minimal elements of what it is given.

    Runtime complexity: construction O(n) comparisons when the least input is below all the
    others (one minimal element), else O(n log n + n * m) for m minimal elements.

    >>> a = Antichain([3, 5])
    >>> a
    Antichain([3])
    >>> a.less_equal(4), a.less_equal(2)
    (True, False)
    >>> from deltaflow.framework.lattice import Product
    >>> Antichain([Product(1, 2), Product(1, 5), Product(2, 2)]).elements
    (Product(outer=1, inner=2),)
    >>> Antichain([Product(1, 0), Product(0, 3)]).elements
    (Product(outer=0, inner=3), Product(outer=1, inner=0))

    Args:
        times: the times, of one domain.
        domain: their domain, if the caller knows it; else it is found from the least time.
    """

    _elements: tuple[Time, ...]
    _le: Order

    def __init__(self, times: Iterable[Time] = (), domain: TimeDomain | None = None) -> None:
        # The total order is a linear extension of the partial order: its least element is
        # minimal, and often (ints always, times on one chain) below every other one.
        times = list(times)
        if len(times) <= 1:
            self._elements = tuple(times)
            self._le = domain.less_equal if domain is not None else _order_of(times)
            return
        first = min(times)
        if domain is None:
            domain = domain_of(first)
        le = self._le = domain.less_equal
        if domain.total:
            self._elements = (first,)
            return
        for t in times:
            if not le(first, t):
                break
        else:
            self._elements = (first,)
            return
        # Sorted, an element can only be dominated by one kept before it, and the result
        # comes out sorted.
        ordered = sorted(times)
        elements = [first]
        for t in ordered[1:]:
            for e in elements:
                if le(e, t):
                    break
            else:
                elements.append(t)
        self._elements = tuple(elements)

    @classmethod
    def from_elem(cls, time: Time, domain: TimeDomain | None = None) -> Antichain:
        """The frontier holding exactly ``time`` (of ``domain``, if given)."""
        out = cls.__new__(cls)
        out._elements = (time,)
        out._le = (domain or domain_of(time)).less_equal
        return out

    @classmethod
    def from_sorted(cls, elements: tuple[Time, ...], domain: TimeDomain | None = None) -> Antichain:
        """The frontier of ``elements`` that are already mutually incomparable and sorted in
        the total order, as a frontier's own elements are.

        For code that keeps frontiers itself (the progress tracker, a mutable frontier) and
        hands out immutable ones: the elements are taken as they are, unchecked, where the
        constructor would reduce them to their minimal ones and sort them.

            >>> from deltaflow.framework.lattice import Product
            >>> Antichain.from_sorted((Product(0, 1), Product(1, 0))).elements
            (Product(outer=0, inner=1), Product(outer=1, inner=0))
        """
        out = cls.__new__(cls)
        out._elements = elements
        out._le = domain.less_equal if domain is not None else _order_of(elements)
        return out

    @property
    def elements(self) -> tuple[Time, ...]:
        """The minimal times, sorted in the total order."""
        return self._elements

    def less_equal(self, time: Time) -> bool:
        """True iff ``time`` is beyond the frontier: some element is ``<=`` it."""
        le = self._le
        for e in self._elements:  # noqa: SIM110 - a plain loop beats any() on this hot path
            if le(e, time):
                return True
        return False

    def less_than(self, time: Time) -> bool:
        """True iff some element is strictly ``<`` ``time``."""
        le = self._le
        return any(e != time and le(e, time) for e in self._elements)

    def dominates(self, other: Antichain) -> bool:
        """True iff every element of ``other`` is beyond this frontier (``self <= other``)."""
        mine = self._elements
        le = self._le
        for t in other._elements:
            for e in mine:
                if le(e, t):
                    break
            else:
                return False
        return True

    def is_empty(self) -> bool:
        """True for the frontier of a finished stream."""
        return not self._elements

    def __iter__(self) -> Iterator[Time]:
        return iter(self._elements)

    def __len__(self) -> int:
        return len(self._elements)

    def __bool__(self) -> bool:
        return bool(self._elements)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Antichain):
            a, b = self._elements, other._elements
            # Elements are kept sorted, so equal antichains have equal tuples; the set
            # comparison is only a safety net for elements with an inconsistent total order.
            if a == b:
                return True
            return len(a) == len(b) > 1 and set(a) == set(b)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(frozenset(self._elements))

    def _check(self) -> None:
        """Assert the invariants: elements sorted, distinct and mutually incomparable."""
        elements = self._elements
        assert list(elements) == sorted(elements)
        for i, a in enumerate(elements):
            for b in elements[i + 1 :]:
                assert not less_equal(a, b) and not less_equal(b, a), (a, b)

    def __repr__(self) -> str:
        return f"Antichain({list(self._elements)!r})"


@attrs.define(eq=False, repr=False)
class MutableAntichain:
    """A multiset of times with counts, and the antichain of its minimal positive-count times.

    Counts may go negative for a while (a "message consumed" can be seen before the matching
    "message produced"); only times with a positive count hold the frontier back.

    Runtime complexity: :meth:`update_iter` is O(k * w) comparisons for k changes that cannot
    move a frontier of w elements, and O(n log n + n * w) for a rebuild over n distinct times
    otherwise.

    >>> m = MutableAntichain()
    >>> m.update_iter([(1, 1), (1, 1), (2, 1)])
    [(1, 1)]
    >>> m.update_iter([(1, -1)])
    []
    >>> m.count_for(1), m.frontier()
    (1, Antichain([1]))
    """

    _counts: dict[Time, int] = attrs.field(factory=dict)
    _frontier: list[Time] = attrs.field(factory=list)
    _cached: Antichain | None = attrs.field(default=None, init=False)
    #: The times' order: their domain's, found once the frontier first holds a time (it is
    #: read only while the frontier holds one).
    _le: Order = attrs.field(default=less_equal, init=False)

    def update_iter(self, changes: Iterable[tuple[Time, int]]) -> list[tuple[Time, int]]:
        """Apply count changes; return the frontier's changes as ``(time, +1 | -1)`` pairs.

        The result is consolidated and sorted: each time appears at most once, ``-1`` for a time
        that left the frontier and ``+1`` for one that joined it, so applying it to the old
        frontier gives the new one.

        Runtime complexity: O(k * w) for k changes and a frontier of w elements when none can
        move the frontier; O(n log n + n * w) over the n counted times when one can.
        """
        counts = self._counts
        frontier = self._frontier
        le = self._le
        rebuild = False
        for time, delta in changes:
            if not delta:
                continue
            new = counts.get(time, 0) + delta
            if new:
                counts[time] = new
            else:
                del counts[time]
            if rebuild:
                continue
            if delta > 0:
                # An increment cannot move the frontier if some element (whose count is
                # positive) is already <= it.
                for f in frontier:
                    if le(f, time):
                        break
                else:
                    rebuild = True
            else:
                # A decrement matters only at a frontier element.
                if time in frontier and new <= 0:
                    rebuild = True
        if not rebuild:
            return []
        return self._rebuild()

    def _rebuild(self) -> list[tuple[Time, int]]:
        old = self._frontier
        new = [t for t, c in self._counts.items() if c > 0]
        if new and not old:
            self._le = _order_of(new)
        if len(new) > 1:
            # In sorted order (a linear extension) only an earlier time can dominate a later.
            new.sort()
            kept = [new[0]]
            le = self._le
            for t in new[1:]:
                for f in kept:
                    if le(f, t):
                        break
                else:
                    kept.append(t)
            new = kept
        if old == new:
            return []
        self._frontier = new
        self._cached = None
        if len(old) == 1 and len(new) == 1:
            o, n = old[0], new[0]
            return [(n, 1), (o, -1)] if n < o else [(o, -1), (n, 1)]
        old_set, new_set = set(old), set(new)
        changes = [(t, -1) for t in old if t not in new_set]
        changes.extend((t, 1) for t in new if t not in old_set)
        changes.sort()
        return changes

    def frontier(self) -> Antichain:
        """The current frontier as an immutable :class:`Antichain` (cached until it moves).

        Runtime complexity: O(1) when the frontier did not move since the last call; O(w)
        otherwise.
        """
        out = self._cached
        if out is None:
            out = self._cached = Antichain.from_sorted(tuple(self._frontier))
        return out

    @property
    def elements(self) -> list[Time]:
        """The frontier's elements (do not mutate)."""
        return self._frontier

    def less_equal(self, time: Time) -> bool:
        """True iff ``time`` is beyond the frontier (it could still be reached)."""
        le = self._le
        for f in self._frontier:  # noqa: SIM110 - a plain loop beats any() on this hot path
            if le(f, time):
                return True
        return False

    def less_than(self, time: Time) -> bool:
        """True iff some frontier element is strictly below ``time``."""
        le = self._le
        return any(f != time and le(f, time) for f in self._frontier)

    def count_for(self, time: Time) -> int:
        """The current count of exactly ``time``."""
        return self._counts.get(time, 0)

    def is_empty(self) -> bool:
        """True when no time has a positive count."""
        return not self._frontier

    def _check(self) -> None:
        """Assert the invariants: the frontier is the minimal positive-count times, sorted, and
        the cached :class:`Antichain` (if any) holds exactly it."""
        positive = [t for t, c in self._counts.items() if c > 0]
        expected = {t for t in positive if not any(less_than(u, t) for u in positive)}
        assert set(self._frontier) == expected, (self._frontier, expected)
        assert all(c != 0 for c in self._counts.values())
        assert self._frontier == sorted(self._frontier), self._frontier
        if self._cached is not None:
            assert self._cached.elements == tuple(self._frontier), (self._cached, self._frontier)

    def __repr__(self) -> str:
        return f"MutableAntichain(frontier={self._frontier!r}, counts={self._counts!r})"


def frontier_join(a: Antichain, b: Antichain) -> Antichain:
    """The least frontier beyond both ``a`` and ``b`` (pairwise joins, minimised).

    When one frontier is beyond the other (the usual case: compaction frontiers only
    advance) it is the join, found without building a new antichain.

    Runtime complexity: O(|a| * |b|) lattice operations.

        >>> from deltaflow.framework.lattice import Product
        >>> frontier_join(Antichain([Product(0, 2), Product(2, 0)]), Antichain([Product(1, 1)]))
        Antichain([Product(outer=1, inner=2), Product(outer=2, inner=1)])
    """
    if a is b:
        return a
    ea, eb = a.elements, b.elements
    if a._le is _INT_ORDER and len(ea) == 1 and len(eb) == 1:
        return a if ea[0] >= eb[0] else b
    if a.dominates(b):
        return b
    if b.dominates(a):
        return a
    return Antichain(join(x, y) for x in ea for y in eb)
