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
from ..time_domain import TimeDomain

__all__ = [
    "Coords",
    "Counts",
    "Updater",
    "check_counted",
    "coords_le",
    "coords_map",
    "coords_reader",
    "from_coords",
    "minimal",
    "to_coords",
    "update_counted",
    "update_total",
    "updater_for",
]

#: The coordinates of a time, outermost first.
Coords = tuple[int, ...]
#: :func:`update_counted` or :func:`update_total`: one change applied to a counted frontier.
Updater = Callable[["Counts", list[Coords], Coords, int], "list[tuple[Coords, int]] | None"]


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


def coords_reader(
    domain: TimeDomain | None, times: dict[Coords, Time], where: str
) -> Callable[[Time], Coords]:
    """:func:`to_coords` for the times of one location, whose domain is ``domain``: a
    function that checks a time has the domain's shape (one test of what is expected, not a
    search among shapes), and remembers each Product in ``times`` under its coordinates (so
    reports give back the objects they were given). ``None``: the location's depth is
    unknown, any flat time is taken.

    Raises (the returned function):
        ValueError: naming ``where`` and the time, if the time is not of the domain.

    >>> from deltaflow.framework.time_domain import domain_for_depth
    >>> memo = {}
    >>> coords_reader(domain_for_depth(1), memo, "'map' input 0")(Product(2, 5)), memo
    ((2, 5), {(2, 5): Product(outer=2, inner=5)})
    """
    if domain is None:

        def read_any(time: Time) -> Coords:
            c = to_coords(time)
            if time.__class__ is not int:
                times[c] = time
            return c

        return read_any

    def wrong(time: Time) -> ValueError:
        shape = "an int" if domain.total else f"a flat Product of depth {domain.depth}"
        return ValueError(f"progress times at {where} must be {shape} ({domain!r}); got {time!r}")

    if domain.total:

        def read_int(time: Time) -> Coords:
            if time.__class__ is int:
                return (time,)
            raise wrong(time)

        return read_int
    if domain.pairs:

        def read_pair(time: Time) -> Coords:
            if time.__class__ is Product:
                outer, inner = time
                if outer.__class__ is int and inner.__class__ is int:
                    c = (outer, inner)
                    times[c] = time
                    return c
            raise wrong(time)

        return read_pair
    levels = domain.depth + 1

    def read_nested(time: Time) -> Coords:
        c = _nested_coords(time)
        if len(c) != levels:
            raise wrong(time)
        times[c] = time
        return c

    return read_nested


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

    def recount(self, t: Coords, old: int, new: int) -> None:
        """Keep :attr:`positive`, if it exists, in step with ``t``'s count moving from
        ``old`` to ``new``."""
        positive = self.positive
        if positive is not None and (old > 0) != (new > 0):
            if new > 0:
                positive.add(t)
            else:
                positive.remove(t)

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
    if counts.positive is not None:
        counts.recount(t, old, new)
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


def update_total(
    counts: Counts, frontier: list[Coords], t: Coords, d: int
) -> list[tuple[Coords, int]] | None:
    """:func:`update_counted` for a totally ordered domain (ints, the top scope's times): the
    frontier is the least positive time or nothing, and tuples' own order is the lattice's.

    >>> counts, frontier = Counts(), []
    >>> update_total(counts, frontier, (3,), 1), update_total(counts, frontier, (1,), 1)
    ([((3,), 1)], [((1,), 1), ((3,), -1)])
    >>> update_total(counts, frontier, (1,), -1), frontier
    ([((1,), -1), ((3,), 1)], [(3,)])
    """
    old = counts.get(t, 0)
    new = old + d
    if new:
        counts[t] = new
    else:
        del counts[t]
    if counts.positive is not None:
        counts.recount(t, old, new)
    if d > 0:
        if old > 0 or new <= 0:
            return None
        if not frontier:
            frontier.append(t)
            return [(t, 1)]
        f = frontier[0]
        if f <= t:
            return None
        frontier[0] = t
        return [(t, 1), (f, -1)]
    if old <= 0 or new > 0 or not frontier or frontier[0] != t:
        return None
    if not counts:
        frontier.pop()
        return [(t, -1)]
    # The least positive time left, if any, is exposed.
    least = None
    if len(counts) > Counts.SORTED_AT or counts.positive is not None:
        positive = counts.sorted_positive()
        if positive:
            least = positive[0]
    else:
        for u, c in counts.items():
            if c > 0 and (least is None or u < least):
                least = u
    if least is None:
        frontier.pop()
        return [(t, -1)]
    frontier[0] = least
    return [(t, -1), (least, 1)]


def updater_for(domain: TimeDomain | None) -> Updater:
    """The counted-frontier rule for a location whose times are of ``domain``:
    :func:`update_total` for a total order, :func:`update_counted` otherwise (or unknown)."""
    if domain is not None and domain.total:
        return update_total
    return update_counted


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
