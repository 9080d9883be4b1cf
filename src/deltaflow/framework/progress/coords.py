"""Times as coordinate tuples, and the counted-frontier rule the tracker applies to them.

The tracker keeps times as their coordinates, outermost first (``sort_key(time)``: ``(t,)``
for ``t``, ``(t, i)`` for ``Product(t, i)``): tuples hash and compare at C speed, and their
lexicographic order is a linear extension of the product partial order (:func:`coords_le`).

:func:`update_counted` is the one rule that keeps a *counted frontier* (a :class:`Counts` of
signed counts plus the list of its minimal positive-count times, the semantics of
:class:`~deltaflow.framework.antichain.MutableAntichain`) up to date under one change.

When a frontier element's count drops to zero, the positive times it hid may join the
frontier (they are *exposed*). Few times are counted at most locations, and a scan of them
finds those; a location that counts many (messages in flight at hundreds of times, as when
many rounds are known at once and workers exchange them) keeps its positive times sorted too
(:attr:`Counts.positive`), so that what an element's removal exposes is found from its place
in that order, usually at once, not by a scan of every count each time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sortedcontainers import SortedList  # type: ignore[import-untyped]

from .. import tuning
from ..lattice import Product, Time
from ..summary import PathSummary

__all__ = [
    "Coords",
    "Counts",
    "check_counted",
    "coords_le",
    "coords_map",
    "from_coords",
    "minimal",
    "to_coords",
    "update_counted",
]

#: The coordinates of a time, outermost first.
Coords = tuple[int, ...]


def to_coords(time: Time) -> Coords:
    """The coordinates of a flat-encoded time, outermost first (its ``sort_key``).

    Raises:
        ValueError: if ``time`` is not an int or a Product whose inner coordinates are ints.

    Runtime complexity: O(1) for an int or ``Product(int, int)``, O(depth) otherwise.
    """
    cls = time.__class__
    if cls is int:
        return (time,)  # type: ignore[return-value]
    if cls is Product:
        outer, inner = time.outer, time.inner  # type: ignore[union-attr]
        if outer.__class__ is int and inner.__class__ is int:
            return (outer, inner)
    return _nested_coords(time)


def _nested_coords(time: Time) -> Coords:
    """:func:`to_coords` for any depth."""
    out = []
    t = time
    while t.__class__ is Product:
        inner = t.inner
        if inner.__class__ is not int:
            break
        out.append(inner)
        t = t.outer
    else:
        if t.__class__ is int:
            out.append(t)
            out.reverse()
            return tuple(out)
    msg = (
        f"progress times must be ints or Products nesting in the outer coordinate with int "
        f"inner coordinates, such as Product(Product(t, i), j); got {time!r}"
    )
    raise ValueError(msg)


def from_coords(coords: Coords) -> Time:
    """The time with the given coordinates (inverse of :func:`to_coords`)."""
    t: Time = coords[0]
    for i in range(1, len(coords)):
        t = Product(t, coords[i])
    return t


def coords_le(a: Coords, b: Coords) -> bool:
    """The product partial order on coordinate tuples of equal length."""
    if len(a) == 2:
        return a[0] <= b[0] and a[1] <= b[1]
    for x, y in zip(a, b):  # noqa: SIM110 (a generator in all() is slower)
        if x > y:
            return False
    return True


def coords_map(summary: PathSummary) -> Callable[[Coords], Coords]:
    """``summary.results_in`` on coordinate tuples."""
    pop, add, push = summary.pop, summary.add, summary.push
    if not pop and not push:

        def advance(c: Coords) -> Coords:
            return (*c[:-1], c[-1] + add)

        return advance

    def apply(c: Coords) -> Coords:
        if pop:
            if len(c) <= pop:
                msg = f"{summary!r} applied to a time of depth {len(c) - 1}: {from_coords(c)!r}"
                raise ValueError(msg)
            c = c[:-pop]
        if add:
            c = (*c[:-1], c[-1] + add)
        return c + push

    return apply


class Counts(dict[Coords, int]):
    """The signed counts of a counted frontier, by time: a dict, which once it has held more
    than :data:`SORTED_AT` times also keeps its positive times in order (``positive``).

    >>> counts = Counts({(1, 0): 2, (0, 3): -1})
    >>> counts.positive is None, counts[(1, 0)]
    (True, 2)
    """

    __slots__ = ("positive",)

    #: Past this many counted times, the positive ones are kept sorted as well.
    SORTED_AT = tuning.COUNTS_SORTED_AT

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        #: The times with a positive count in lexicographic order, or ``None`` while the
        #: counts are few (:func:`update_counted` keeps it up to date once it exists).
        self.positive: SortedList | None = None

    def sorted_positive(self) -> SortedList:
        """:attr:`positive`, made now if it does not exist yet."""
        positive = self.positive
        if positive is None:
            positive = self.positive = SortedList(t for t, c in self.items() if c > 0)
        return positive


def update_counted(
    counts: Counts, frontier: list[Coords], t: Coords, d: int
) -> list[tuple[Coords, int]] | None:
    """Add ``d`` (non-zero) to the count of ``t`` and keep ``frontier`` its minimal positive times.

    ``frontier`` is updated in place. Returns its changes (``(time, +1 | -1)``), or ``None``
    when it did not move: an increment of a time already positive, or dominated by a frontier
    element; a decrement that leaves the count positive, or of a time not in the frontier.

    Runtime complexity: O(len(frontier)) comparisons, plus a scan of ``counts`` when a frontier
    element leaves.
    """
    old = counts.get(t, 0)
    new = old + d
    if new:
        counts[t] = new
    else:
        del counts[t]
    positive = counts.positive
    if positive is not None and (old > 0) != (new > 0):
        if new > 0:
            positive.add(t)
        else:
            positive.remove(t)
    le = coords_le
    if d > 0:
        if old > 0 or new <= 0:
            return None
        if not frontier:
            frontier.append(t)
            return [(t, 1)]
        # A lexicographic ``<=`` of the tuples, necessary for ``le``, is checked first at C
        # speed.
        for f in frontier:
            if f <= t and le(f, t):
                return None
        moved = [(t, 1)]
        if len(frontier) == 1:
            f = frontier[0]
            if t <= f and le(t, f):
                frontier[0] = t
                moved.append((f, -1))
            else:
                frontier.append(t)
            return moved
        kept = []
        for f in frontier:
            if t <= f and le(t, f):
                moved.append((f, -1))
            else:
                kept.append(f)
        kept.append(t)
        frontier[:] = kept
        return moved
    if old <= 0 or new > 0 or t not in frontier:
        return None
    frontier.remove(t)
    if len(counts) > len(frontier):
        return [(t, -1), *_exposed(counts, frontier, t)]
    # Every counted time is a frontier element: nothing can be exposed.
    return [(t, -1)]


def _exposed(counts: Counts, frontier: list[Coords], t: Coords) -> list[tuple[Coords, int]]:
    """Add to ``frontier`` the positive times that the removal of ``t`` exposed; return them.

    Only positive times above ``t`` can be exposed. They are visited in lexicographic order
    (a linear extension of the partial order, so a later one never dominates an earlier one):
    those of a scan of every count, or, for many counts, those from ``t``'s place in
    :attr:`Counts.positive` on, where the first one not dominated ends the search for one
    coordinate, and one with ``t``'s inner coordinate for two (every later candidate is
    above it).
    """
    le = coords_le
    if len(counts) > Counts.SORTED_AT or counts.positive is not None:
        positive = counts.sorted_positive()
        if len(t) > 2:
            return _expose(frontier, [u for u in positive.irange(minimum=t) if le(t, u)])
        moved: list[tuple[Coords, int]] = []
        if len(t) == 1:
            for u in positive.irange(minimum=t):  # a total order: the first one, if any
                frontier.append(u)
                return [(u, 1)]
            return moved
        t0, t1 = t
        best = None  # the least inner coordinate exposed so far
        for u in positive.irange(minimum=t):
            u1 = u[1]
            if u1 < t1 or (best is not None and u1 >= best):
                continue
            for f in frontier:
                if f[0] <= u[0] and f[1] <= u1:
                    break
            else:
                frontier.append(u)
                moved.append((u, 1))
                best = u1
                if u1 == t1:
                    break
        return moved
    if len(t) == 2:
        t0, t1 = t
        exposed = [u for u, c in counts.items() if c > 0 and t0 <= u[0] and t1 <= u[1]]
    else:
        exposed = [u for u, c in counts.items() if c > 0 and le(t, u)]
    if len(exposed) > 1:
        exposed.sort()
    return _expose(frontier, exposed)


def _expose(frontier: list[Coords], exposed: list[Coords]) -> list[tuple[Coords, int]]:
    """Add to ``frontier`` each of ``exposed`` (sorted) that no element dominates."""
    le = coords_le
    moved = []
    for u in exposed:
        for f in frontier:
            if le(f, u):
                break
        else:
            frontier.append(u)
            moved.append((u, 1))
    return moved


def minimal(times: list[Coords]) -> list[Coords]:
    """The minimal elements of ``times`` under :func:`coords_le`, without repeats."""
    if len(times) <= 1:
        return times
    # Lexicographic order is a linear extension: a time can only be dominated by earlier ones.
    out: list[Coords] = []
    for t in sorted(set(times)):
        for f in out:
            if coords_le(f, t):
                break
        else:
            out.append(t)
    return out


def check_counted(counts: Counts, frontier: list[Coords], where: str) -> None:
    """Assert that ``frontier`` holds exactly the minimal positive-count times of ``counts``."""
    assert all(c != 0 for c in counts.values()), (where, counts)
    positive = [t for t, c in counts.items() if c > 0]
    if counts.positive is not None:
        assert list(counts.positive) == sorted(positive), (where, counts.positive, positive)
    minimal = {t for t in positive if not any(u != t and coords_le(u, t) for u in positive)}
    assert len(frontier) == len(set(frontier)), (where, frontier)
    assert set(frontier) == minimal, (where, frontier, minimal)
