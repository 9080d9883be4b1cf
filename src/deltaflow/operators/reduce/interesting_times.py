"""Interesting times of a reduction: where one key's output may change.

A reduction keeps ``output[t] = logic(input[t])`` for every time ``t`` of a partial order,
where ``input[t]`` accumulates every input update at a time ``<= t``. When a key's input
changes, the reduction must find the times at which its output may need a correction (the
*interesting times*) and evaluate them in an order compatible with the partial order. This
module answers the first question, which is about times only: where can the output of one
key change, and which of those times can be evaluated now (``ready``) and which must wait
(``deferred``)? (:func:`interesting_times`; what the input accumulates to there is
:mod:`.accumulation`'s.)

The mathematics
===============

**Joins of subsets.** Let ``T`` be the set of a key's input update times and, for a subset
``X`` of ``T``, let ``join(X)`` be its least upper bound. For any time ``t`` let
``X = {u in T : u <= t}`` and ``j = join(X)``. Then ``j <= t`` and exactly the same updates
are ``<= j`` as are ``<= t``, so ``input[j] == input[t]``. If the output only ever has updates
at times of the *join closure* ``J(T)`` (joins of non-empty subsets of ``T``), the same holds
for the output: an output time ``c = join(Y) <= t`` has ``Y`` inside ``X``, hence ``c <= j``.
So ``output[t] = output[j] = logic(input[j]) = logic(input[t])``: corrections at the times of
``J(T)`` suffice, and no other time ever needs one. Evaluating them in a linear extension of
the partial order (every ``t_i <= t_j`` first) lets each correction see all the corrections
below it.

**Only subsets that contain a seed.** A round starts with an output that is correct for the
old input everywhere, except at the *pending* times carried over from earlier rounds. The
round's *seeds* are the times of the new updates plus those pending times. The difference
between ``logic(input[t])`` and ``output[t]`` (the "debt") can only be non-zero at a time
``t`` that is ``>=`` some seed: at any other time no new update is ``<= t`` (the input there
is unchanged) and no pending obligation is ``<= t``, so the output there is already right.
A closure time ``x`` that is ``>=`` a seed ``s`` is itself the join of a subset containing a
seed (``x = join(X) = join(X + {s})``), and conversely. So the interesting times are
``{x in J(seeds + stored) : x >= some seed}`` - the joins of the subsets that contain at least
one seed. Joins of stored times alone were dealt with in the rounds that stored them.

**Deferred times must be kept.** A time beyond the frontier ``upper`` cannot be evaluated yet
(input may still arrive at or below it), so it is *deferred*: it stays pending, untouched,
and is handed back as a seed in the round whose frontier has passed it - a resumption token.
Nothing else would rediscover it: by then the updates of this round are *stored* times, and
joins of stored times alone are never interesting. Nor can it be recovered from the output:
with two updates at incomparable times ``a`` and ``b``, ``logic`` may give nothing at ``a`` and
at ``b`` (no output update there) and something at ``join(a, b)``. Dropping that pending time
loses a correction for ever.

**Collapsing stored history by the meet.** Every interesting time is ``>=`` some seed, hence
``>=`` the meet ``m`` of all seeds. A stored time ``r`` and ``join(r, m)`` are below exactly the
same such times, so stored times are first advanced to ``join(r, m)``; many collapse onto the
same time (or onto ``m`` itself, which then adds nothing).

The algorithm
=============

A *chain* (a list of times, each ``<=`` the next) is closed under join: the join of any of its
elements is its largest. So the join closure of a union of chains ``C1, ..., Ck`` is the set of
joins of at most one element from each chain, built by folding the chains in one at a time:
``Z <- Z + C + (Z v C)`` for seed chains and ``Z <- Z + (Z v C)`` for stored chains (stored
times alone are not interesting), where ``Z v C = {join(z, c)}``. ``Z v C`` is computed per
chain ``A`` of ``Z`` (a fresh chain decomposition of ``Z``) against the chain ``B = C`` by
walking the "matrix" ``M[i][j] = join(A[i], B[j])``, which is monotone along rows and columns:

* Row ``i`` is a chain; equal values form contiguous *runs*, and the run starting at ``j``
  with value ``v`` ends at the last ``B[m] <= v`` (a prefix property of the chain ``B``).
* Let ``k`` be the first column with ``A[i] <= join(A[i-1], B[k])``. From ``k`` on, row ``i``
  repeats row ``i - 1``. Before ``k``, every run is a value no earlier row has: if
  ``join(A[i], B[j]) = join(A[i'], B[m])`` for ``i' < i``, then ``m >= k`` and the run of that
  value in row ``i`` reaches column ``k``. So each row emits its runs left of ``k`` and stops
  at the first run that reaches ``k``. From the first column with ``B[g] >= A[i]`` on, the
  joins are the ``B[j]`` themselves, emitted as one slice.

Each emitted value and each row costs a few binary searches, so ``Z v C`` costs
``O((len(A) + output) log len(B))`` instead of ``len(A) * len(B)`` joins: linear in the answer
for times on a few lines (``old = (0, 0..n)``, ``new = (1, 0..n)`` gives the ``n`` times
``(1, j)``), and still the full quadratic answer for a grid (``(0, j)`` against ``(i, 0)``).
A short chain ``C`` is instead joined pairwise with ``Z``, which is cheaper than
re-decomposing ``Z``; so the fold is never slower than pairwise joining. Times that are
products of ints are flattened to int tuples ordered coordinate-wise, which makes every chain
a set of non-decreasing int columns and every search a C-level :func:`bisect.bisect`.

**Pairs of ints** (``Product(round, iteration)``, the times of one loop) take a shortcut to
the same answer. A time ``(x, y)`` is a join of times of ``T`` exactly when both its
coordinates are attained below it: some ``t <= (x, y)`` has ``t.outer == x`` and some has
``t.inner == y`` (the join of everything below ``(x, y)`` is then ``(x, y)`` itself). Sweeping
the lines ``x`` upwards, the heights ``y`` whose leftmost time lies at or left of ``x`` only
accumulate, so each line's interesting times are a suffix of a sorted list of heights (kept as
a few sorted runs, merged geometrically). That is ``O(n log^2 n + output)`` with the output
produced by list slices, already in order. The chain fold remains the general algorithm
(deeper products) and is tested on pairs too (:attr:`InterestingTimes.pair_sweep`).

**Int times** are totally ordered: the interesting times are the seeds and the stored times
above the smallest seed, with no joins to form.

**Times on one line** (the common case inside a loop, where every time of a key shares the
outer coordinate ``x`` of the current round) are just as simple. If every seed is
``Product(x, _)`` with an int inner coordinate and every stored time has an outer coordinate
``<= x``, then advancing the stored times by the seeds' meet ``Product(x, low)`` puts them all on
the line ``x``: a chain, ordered by the inner coordinate. The interesting times are then the
seeds and the stored times whose inner coordinate is above ``low``, exactly as for ints
(:func:`interesting_on_line`), and a time ``Product(x, y)`` is beyond ``upper`` iff ``y`` is at
least :func:`line_bound` (the smallest inner coordinate of an element of ``upper`` whose outer
coordinate is ``<= x``). Accumulating at times on one line filters the history to outer
coordinates ``<= x`` and sweeps it by inner coordinate. Both checks cost one pass over the
times, and both answers are the general ones (tested against them); ``x`` itself may be any
time (nested loops), only the inner coordinate must be an int.

Footguns
========

* ``Product``'s ``<`` is a lexicographic total order for sorting only; this module orders its
  results by it (a linear extension) but decides "before" only coordinate-wise.
* All times handed to one call share one shape (all ``int``, or all ``Product`` nested the same
  way).
* ``deferred`` is part of the answer, not a by-product: the caller must carry it.

>>> ready, deferred = interesting_times(
...     [Product(0, 1), Product(1, 0)], [], Antichain([Product(1, 1)]))
>>> ready
[Product(outer=0, inner=1), Product(outer=1, inner=0)]
>>> deferred
[Product(outer=1, inner=1)]
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from itertools import repeat
from operator import le
from typing import TYPE_CHECKING

import attrs

from deltaflow.framework.antichain import Antichain
from deltaflow.framework.lattice import Product, Time, less_equal, new_tuple
from deltaflow.framework.time_domain import domain_of

from .points import Point, chains, codec, join, same_outer

if TYPE_CHECKING:
    from deltaflow.framework.time_domain import TimeDomain

__all__ = [
    "SEARCH",
    "InterestingTimes",
    "interesting_on_line",
    "interesting_pairs_small",
    "interesting_times",
    "line_bound",
    "row_bound",
]


@attrs.frozen
class InterestingTimes:
    """The interesting-times search (:meth:`search`) with its thresholds and switches.

    The defaults are the search every reduction uses (:func:`interesting_times`); tests and
    benchmarks build one with other values to check the paths against one another.

    >>> InterestingTimes(pair_sweep=False).search([4, 2], [1, 3, 7], Antichain([5]))
    ([2, 3, 4], [7])
    """

    pairwise_below: int = 12
    """With fewer distinct times than this (seeds plus advanced stored), join pairwise
    directly."""
    short_chain: int = 6
    """A chain at most this long is joined pairwise with the closure instead of
    chain-by-chain."""
    pair_sweep: bool = True
    """Use the coordinate sweep for ``Product(int, int)`` times (False: the general chain
    fold)."""
    pairs_small: int = 16
    """``Product(int, int)`` times with at most this many seeds plus stored times are closed by
    :func:`interesting_pairs_small` (pairwise joins of int pairs) instead of the sweep."""
    line_fast_path: bool = True
    """Take the one-line shortcut when every time of a call shares its outer coordinate
    (False: always the general algorithms)."""

    def search(
        self,
        seeds: Iterable[Time],
        stored: Iterable[Time],
        upper: Antichain,
        domain: TimeDomain | None = None,
    ) -> tuple[list[Time], list[Time]]:
        """The times at which one key's output may change, split at the frontier ``upper``.

        The interesting times are the joins of the subsets of ``stored + seeds`` that contain at
        least one seed (see the module docstring for why).

        Args:
            seeds: times of the key's new input updates plus its pending times from earlier
                rounds.
            stored: times of the key's stored (already arranged, possibly compacted) input
                updates.
            upper: the input frontier; a time beyond it (``upper.less_equal(t)``) cannot be
                evaluated yet.
            domain: the shape of the times (an operator's, chosen by its scope; by default,
                that of the first seed).

        Returns:
            ``(ready, deferred)``: the interesting times not beyond ``upper``, to evaluate now, and
            those beyond it, to carry forward as pending seeds. Both are distinct and sorted in the
            total order, a linear extension of the partial order.

        Runtime complexity: O(n log n) for int times (n = seeds + stored) and for seeds on one line
        with the stored times at or below it; O(n log^2 n + output) for ``Product(int, int)``;
        otherwise O((n + output) log n) per pair of chains folded
        together, and never more than pairwise joining of the times with the closure.

        >>> interesting_times([4, 2], [1, 3, 7], Antichain([5]))
        ([2, 3, 4], [7])
        >>> interesting_times([Product(1, 0)], [Product(0, 2)], Antichain())
        ([Product(outer=1, inner=0), Product(outer=1, inner=2)], [])
        """
        seed_set = set(seeds)
        if not seed_set:
            return [], []
        first = next(iter(seed_set))
        if domain is None:
            domain = domain_of(first)
        if domain.total:
            return _interesting_ints(seed_set, stored, upper)  # type: ignore[arg-type]
        outer = first[0]  # type: ignore[index]
        depth = domain.depth
        if self.line_fast_path and domain.loops:
            stored = stored if isinstance(stored, (list, tuple)) else list(stored)
            if _on_line(seed_set, stored, outer, depth):  # type: ignore[arg-type]
                return _interesting_line(seed_set, stored, upper, outer, depth)  # type: ignore[arg-type]
        if domain.pairs:
            stored = stored if isinstance(stored, (list, tuple)) else list(stored)
            if len(seed_set) + len(stored) <= self.pairs_small:
                # Products are pairs: they serve as the int pairs asked for.
                pair_ready, pair_deferred = interesting_pairs_small(
                    seed_set,  # type: ignore[arg-type]
                    stored,  # type: ignore[arg-type]
                    upper.elements,  # type: ignore[arg-type]
                )
                return (
                    [new_tuple(Product, p) for p in pair_ready],
                    [new_tuple(Product, p) for p in pair_deferred],
                )
            if self.pair_sweep:
                return _interesting_pairs(seed_set, stored, upper)  # type: ignore[arg-type]
        encode, decode = codec(first, domain)
        ordered = self._closure({encode(s) for s in seed_set}, [encode(r) for r in stored])
        bounds = [encode(u) for u in upper.elements]
        ready: list[Time] = []
        deferred: list[Time] = []
        for p in ordered:
            for b in bounds:
                if all(map(le, b, p)):
                    deferred.append(decode(p))
                    break
            else:
                ready.append(decode(p))
        return ready, deferred

    def _fold(
        self, members: set[Point], ordered: list[Point], chain: list[Point], *, with_chain: bool
    ) -> list[Point]:
        """Fold a chain into the closure: ``Z <- Z + (Z v chain)`` (plus ``chain`` if
        ``with_chain``).

        ``members`` (updated in place) and ``ordered`` (returned anew) hold the same points, the
        latter sorted. Because the chain is totally ordered, ``z v c1 v c2 = z v c2`` for
        ``c1 <= c2``: joining the chain with the *old* closure is enough.
        """
        new: set[Point] = set()
        if with_chain:
            new.update(chain)
        if ordered:
            if len(chain) <= self.short_chain:
                for c in chain:
                    new.update([join(z, c) for z in ordered])
            else:
                for rows in chains(ordered):
                    _cross(rows, chain, new)
        new -= members
        if not new:
            return ordered
        members |= new
        merged = ordered + sorted(new)
        merged.sort()  # two sorted runs: a linear-time merge
        return merged

    def _closure(self, seeds: set[Point], stored: Iterable[Point]) -> list[Point]:
        """Sorted joins of the subsets of ``seeds + stored`` that contain a seed (seeds
        non-empty)."""
        low = tuple([min(c) for c in zip(*seeds)])
        advanced = {join(r, low) for r in stored}
        advanced.discard(low)
        advanced -= seeds
        members: set[Point] = set()
        if len(seeds) + len(advanced) < self.pairwise_below:
            for s in seeds:
                members |= {join(z, s) for z in members}
                members.add(s)
            for r in advanced:
                members |= {join(z, r) for z in members}
            return sorted(members)
        ordered: list[Point] = []
        for chain in chains(sorted(seeds)):
            ordered = self._fold(members, ordered, chain, with_chain=True)
        for chain in sorted(chains(sorted(advanced)), key=len, reverse=True):
            ordered = self._fold(members, ordered, chain, with_chain=False)
        return ordered


def interesting_pairs_small(
    seeds: set[tuple[int, int]],
    stored: Iterable[tuple[int, int]],
    bounds: Sequence[tuple[int, int]],
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """:func:`interesting_times` of ``Product(int, int)`` times given as int pairs, by a scan.

    Meant for a handful of times (:attr:`InterestingTimes.pairs_small`), where the sweep's
    set-up costs more than the answer. With ``T`` the seeds and the stored times advanced by the
    seeds' meet, ``(x, y)`` is a join of a subset of ``T`` containing a seed iff some time of
    ``T`` on column ``x`` and some on row ``y`` lie below it, and so does some seed (the module
    docstring); the scan checks every column of ``T`` against every row, in order.

    Args:
        seeds: the seeds as ``(outer, inner)`` pairs (non-empty).
        stored: the stored times as pairs.
        bounds: the frontier's elements as pairs; a pair at or above one is deferred.

    Returns:
        ``(ready, deferred)`` pairs, each distinct and sorted (lexicographic order is a linear
        extension of the product order).

    Runtime complexity: O(c * r * b) for c columns, r rows and b bounds.

    >>> interesting_pairs_small({(0, 1), (1, 0)}, [(0, 3)], [(1, 2)])
    ([(0, 1), (0, 3), (1, 0), (1, 1)], [(1, 3)])
    """
    low_x = min([x for x, _ in seeds])
    low_y = min([y for _, y in seeds])
    lowest_y: dict[int, int] = {}  # column x -> lowest y of a time on it
    leftmost_x: dict[int, int] = {}  # row y -> leftmost x of a time on it
    seed_y: dict[int, int] = {}  # column x -> lowest y of a seed on it
    for x, y in seeds:
        if lowest_y.get(x, y) >= y:
            lowest_y[x] = y
            seed_y[x] = y
        if leftmost_x.get(y, x) >= x:
            leftmost_x[y] = x
    for x, y in stored:
        if x < low_x:
            x = low_x
        if y < low_y:
            y = low_y
        if lowest_y.get(x, y) >= y:
            lowest_y[x] = y
        if leftmost_x.get(y, x) >= x:
            leftmost_x[y] = x
    rows = sorted(leftmost_x.items())
    ready: list[tuple[int, int]] = []
    deferred: list[tuple[int, int]] = []
    seed_low: int | None = None  # lowest y of a seed left of or on the current column
    for x in sorted(lowest_y):
        sy = seed_y.get(x)
        if sy is not None and (seed_low is None or sy < seed_low):
            seed_low = sy
        if seed_low is None:
            continue
        lo = lowest_y[x]
        if lo < seed_low:
            lo = seed_low
        for y, left in rows:
            if y < lo or left > x:
                continue
            for bx, by in bounds:
                if bx <= x and by <= y:
                    deferred.append((x, y))
                    break
            else:
                ready.append((x, y))
    return ready, deferred


def interesting_on_line(
    seeds: Iterable[int], stored: Iterable[int], bound: int | None
) -> tuple[list[int], list[int]]:
    """:func:`interesting_times` of a chain, given as int positions along it.

    The times of a chain are totally ordered, so the join of a subset is its largest element
    and the interesting times are the seeds and the stored positions above the smallest seed.

    Args:
        seeds: positions of the seeds (non-empty).
        stored: positions of the stored times.
        bound: positions ``>= bound`` are beyond the frontier (``None``: none is).

    Returns:
        ``(ready, deferred)`` positions, distinct and ascending.

    Runtime complexity: O(n log n) for n positions.

    >>> interesting_on_line([4, 2], [1, 3, 7], 5)
    ([2, 3, 4], [7])
    """
    seed_set = seeds if isinstance(seeds, set) else set(seeds)
    low = min(seed_set)
    found = set(seed_set)
    found.update([r for r in stored if r > low])
    ordered = sorted(found)
    if bound is None:
        return ordered, []
    cut = bisect_left(ordered, bound)
    return ordered[:cut], ordered[cut:]


def row_bound(upper: Antichain, inner: int) -> int | None:
    """The smallest outer coordinate ``x`` with ``Product(x, inner)`` beyond ``upper``, or None.

    The transpose of :func:`line_bound`, for rows of ``Product(int, int)`` times:
    ``Product(x, inner)`` is beyond ``upper`` iff some element ``u`` has ``u.inner <= inner``
    and ``u.outer <= x``; so the answer is the least such ``u.outer``. Elements must be
    products of ints.

    Runtime complexity: O(len(upper)) comparisons.

    >>> row_bound(Antichain([Product(5, 0), Product(1, 2)]), 1)
    5
    >>> row_bound(Antichain([Product(0, 3)]), 1) is None
    True
    """
    bound: int | None = None
    for u in upper.elements:
        if u.inner <= inner and (bound is None or u.outer < bound):  # type: ignore[union-attr]
            bound = u.outer  # type: ignore[union-attr]
    return bound


def line_bound(upper: Antichain, outer: Time, depth: int) -> int | None:
    """The smallest inner coordinate ``y`` with ``Product(outer, y)`` beyond ``upper``, or None
    (times ``depth`` loops deep: ``outer`` is an int at depth 1).

    ``Product(outer, y)`` is beyond ``upper`` iff some element ``u`` has ``u.outer <= outer``
    and ``u.inner <= y``; so the answer is the least such ``u.inner``. Elements must be
    products with int inner coordinates.

    Runtime complexity: O(len(upper)) comparisons.

    >>> line_bound(Antichain([Product(0, 5), Product(2, 1)]), 1, depth=1)
    5
    >>> line_bound(Antichain([Product(3, 0)]), 1, depth=1) is None
    True
    """
    bound: int | None = None
    if depth == 1:
        for u in upper.elements:
            if u.outer <= outer and (bound is None or u.inner < bound):  # type: ignore[union-attr]
                bound = u.inner  # type: ignore[union-attr]
    else:
        for u in upper.elements:
            if less_equal(u.outer, outer) and (bound is None or u.inner < bound):  # type: ignore[union-attr]
                bound = u.inner  # type: ignore[union-attr]
    return bound


# --- int times ------------------------------------------------------------------------------


def _interesting_ints(
    seeds: set[int], stored: Iterable[int], upper: Antichain
) -> tuple[list[Time], list[Time]]:
    bound = min(upper.elements) if upper.elements else None
    ready, deferred = interesting_on_line(seeds, stored, bound)  # type: ignore[arg-type]
    return ready, deferred  # type: ignore[return-value]


def _on_line(seeds: set[Product], stored: Sequence[Product], outer: Time, depth: int) -> bool:
    """True when every seed lies on line ``outer`` and every stored time is at or below it
    (times ``depth`` loops deep)."""
    if not same_outer(seeds, outer):
        return False
    if depth == 1:
        return all(r.outer <= outer for r in stored)
    return all(less_equal(r.outer, outer) for r in stored)


def _interesting_line(
    seeds: set[Product], stored: Sequence[Product], upper: Antichain, outer: Time, depth: int
) -> tuple[list[Time], list[Time]]:
    ready, deferred = interesting_on_line(
        [s.inner for s in seeds], [r.inner for r in stored], line_bound(upper, outer, depth)
    )
    return (
        [new_tuple(Product, (outer, y)) for y in ready],
        [new_tuple(Product, (outer, y)) for y in deferred],
    )


def _interesting_pairs(
    seeds: set[Product], stored: Iterable[Product], upper: Antichain
) -> tuple[list[Time], list[Time]]:
    """:func:`interesting_times` for ``Product(int, int)`` times, by a sweep over ``outer``.

    With ``T`` the seeds and the (meet-advanced) stored times, ``(x, y)`` is a join of a subset
    of ``T`` iff both coordinates are attained below it: some ``t <= (x, y)`` has
    ``t.outer == x`` (i.e. ``first_y[x] <= y``) and some ``t <= (x, y)`` has ``t.inner == y``
    (``first_x[y] <= x``). It is interesting iff also some seed is below it
    (``min seed.inner over seed.outer <= x`` is ``<= y``). Sweeping ``x`` upwards, the heights
    ``y`` with ``first_x[y] <= x`` only accumulate; they are kept in a few sorted runs of
    geometrically decreasing length, so each line ``x`` reads its answer as sorted suffixes.
    """
    low_x = min([s.outer for s in seeds])
    low_y = min([s.inner for s in seeds])
    first_y: dict[int, int] = {}  # line x -> lowest y of a time on it
    first_x: dict[int, int] = {}  # height y -> leftmost x of a time at it
    seed_y: dict[int, int] = {}  # line x -> lowest y of a seed on it
    for s in seeds:
        x = s.outer
        y = s.inner
        if first_y.get(x, y) >= y:
            first_y[x] = y
        if first_x.get(y, x) >= x:
            first_x[y] = x
        if seed_y.get(x, y) >= y:
            seed_y[x] = y
    for r in stored:
        x = r.outer if r.outer > low_x else low_x
        y = r.inner if r.inner > low_y else low_y
        if first_y.get(x, y) >= y:
            first_y[x] = y
        if first_x.get(y, x) >= x:
            first_x[y] = x
    arriving: dict[int, list[int]] = {}
    for y, x in first_x.items():
        arriving.setdefault(x, []).append(y)
    bounds = sorted([(u.outer, u.inner) for u in upper.elements])  # type: ignore[union-attr]
    n_bounds = len(bounds)
    runs: list[list[int]] = []
    ready: list[Time] = []
    deferred: list[Time] = []
    lowest_seed: int | None = None
    threshold: int | None = None  # times on this line at or above it are beyond upper
    b = 0
    for x in sorted(first_y):
        group = arriving.get(x)
        if group is not None:
            group.sort()
            runs.append(group)
            while len(runs) > 1 and len(runs[-2]) <= 2 * len(runs[-1]):
                top = runs.pop()
                merged = runs.pop() + top
                merged.sort()  # two sorted runs: a linear-time merge
                runs.append(merged)
        sy = seed_y.get(x)
        if sy is not None and (lowest_seed is None or sy < lowest_seed):
            lowest_seed = sy
        while b < n_bounds and bounds[b][0] <= x:
            if threshold is None or bounds[b][1] < threshold:
                threshold = bounds[b][1]
            b += 1
        if lowest_seed is None:
            continue
        lo = first_y[x] if first_y[x] > lowest_seed else lowest_seed
        if len(runs) == 1:
            run = runs[0]
            ys = run[bisect_left(run, lo) :]
        else:
            ys = []
            for run in runs:
                ys.extend(run[bisect_left(run, lo) :])
            ys.sort()
        cut = len(ys) if threshold is None else bisect_left(ys, threshold)
        ready.extend([new_tuple(Product, (x, y)) for y in ys[:cut]])
        if cut < len(ys):
            deferred.extend([new_tuple(Product, (x, y)) for y in ys[cut:]])
    return ready, deferred


# --- product times: the chain fold --------------------------------------------------------


def _cross(rows: list[Point], cols: list[Point], out: set[Point]) -> None:
    """Add ``{join(a, b) : a in rows, b in cols}`` to ``out``, for two ascending chains.

    Walks the monotone join matrix row by row; see the module docstring for why emitting only
    the runs left of ``k`` loses nothing and repeats nothing. The run at ``j`` reaches ``k``
    iff ``cols[k] <= v`` (one comparison); otherwise it ends before ``k``, found by binary
    search in each coordinate column after a one-step check for the common run of length one.
    From the first ``cols[g] >= a`` on, every join is ``cols[j]`` itself: a slice.
    """
    n = len(cols)
    columns = [list(c) for c in zip(*cols)]
    d = len(columns)
    prev: Point | None = None
    add = out.add
    for a in rows:
        k = n
        if prev is not None:
            k = 0
            for col, x, p in zip(columns, a, prev):
                if x > p:
                    kx = bisect_left(col, x)
                    if kx > k:
                        k = kx
            if not k:
                prev = a
                continue
        prev = a
        g = max(map(bisect_left, columns, a))
        stop = cols[k] if k < n else None
        j = 0
        while j < k and j < g:
            v = join(a, cols[j])
            if stop is not None and all(map(le, stop, v)):
                j = k
                break
            add(v)
            j += 1
            if j < k and all(map(le, cols[j], v)):
                j = min(map(bisect_right, columns, v, repeat(j, d), repeat(k, d)))
        if j < k:
            out.update(cols[j:k])


SEARCH = InterestingTimes()
"""The interesting-times search every reduction uses."""

interesting_times = SEARCH.search
"""The times at which one key's output may change (:meth:`InterestingTimes.search` with the
default tunables)."""
