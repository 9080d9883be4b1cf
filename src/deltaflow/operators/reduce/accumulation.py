"""Accumulation: what a history of ``(val, time, diff)`` updates sums to at a time.

A reduction's input (and its own output) at time ``t`` is the sum of the diffs of every update
at a time ``<= t``. This module is the one home of that rule, in the forms the reduction's
paths need:

* :func:`accumulate` - at each of many times of any partial order (the general path): the
  query times are decomposed into chains; along a chain the set of updates ``<= t`` only
  grows, so each update is assigned to the first chain position it is ``<=`` (a binary search
  per coordinate column) and one sweep per chain accumulates incrementally. Int times and
  times on one line (one outer coordinate) are one chain, swept directly.
* :func:`sweep_to` - one step of such a sweep over rows sorted by position (a chain of times
  given as int positions along it).
* :func:`total_at` - a counting reduction's count at one time, by a scan of a key's few
  updates.

It also keeps the arithmetic of corrections: the :func:`difference` between two accumulations
and the ``{time: [(key, val, diff)]}`` lists a reduction's corrections are gathered in.

>>> from deltaflow.framework.lattice import Product
>>> accumulate([("a", Product(0, 1), 1), ("b", Product(1, 0), 1)], [Product(1, 1)])[0]["b"]
1
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable, Sequence
from operator import attrgetter, itemgetter
from typing import Any, TypeVar

from deltaflow.framework.lattice import Time, less_equal
from deltaflow.framework.time_domain import TimeDomain, domain_of

from ...framework.tuning import SMALL_ACCUMULATE
from .points import chains, codec, same_outer

__all__ = [
    "SMALL_ACCUMULATE",
    "accumulate",
    "add_into",
    "add_row",
    "add_rows",
    "difference",
    "positions",
    "record",
    "sweep_to",
    "total_at",
    "without_zeros",
]

V = TypeVar("V", bound=Hashable)

_first = itemgetter(0)
_inner = attrgetter("inner")


def accumulate(
    history: Sequence[tuple[V, Time, int]],
    times: Sequence[Time],
    *,
    lines: bool = True,
    small: int = SMALL_ACCUMULATE,
    domain: TimeDomain | None = None,
) -> list[dict[V, int]]:
    """The accumulated multiset of ``history`` at each of ``times``.

    Args:
        history: ``(val, time, diff)`` updates, in any order.
        times: the times to accumulate at (any order, repeats allowed).
        lines: take the one-line sweep when every time shares its outer coordinate (False:
            the general accumulation; tests compare the two).
        small: scan every update against every time when there are at most this many pairs
            of them (:data:`SMALL_ACCUMULATE`).
        domain: the shape of the times (an operator's, chosen by its scope; by default, that
            of the first time).

    Returns:
        One ``{val: count}`` dict per entry of ``times``, in the same order: the sum of the
        diffs of every update whose time is ``<=`` that time, zero counts dropped. Each dict
        is a fresh object.

    Runtime complexity: O((n + m) log(n + m) + output) for int times and for times on one
    line (all with the same outer coordinate); for other products,
    O(chains * n * d log m + output) for n updates, m distinct times in ``chains`` chains, and
    d coordinates.

    >>> accumulate([("x", 1, 1), ("y", 2, 1), ("x", 3, -1)], [3, 0, 2])
    [{'y': 1}, {}, {'x': 1, 'y': 1}]
    """
    if not times:
        return []
    distinct = set(times)
    first = next(iter(distinct))
    if domain is None:
        domain = domain_of(first)
    if domain.total:
        at = _accumulate_ints(history, distinct)  # type: ignore[arg-type]
    elif (
        lines and domain.loops and same_outer(distinct, first.outer)  # type: ignore[arg-type, union-attr]
    ):
        at = _accumulate_line(history, distinct, first.outer, domain.depth)  # type: ignore[union-attr]
    else:
        at = _accumulate_points(history, distinct, first, small, domain)
    out: list[dict[V, int]] = []
    seen: set[Time] = set()
    for t in times:
        if t in seen:
            out.append(dict(at[t]))
        else:
            seen.add(t)
            out.append(at[t])
    return out


def sweep_to(rows: Sequence[tuple[Any, V, int]], i: int, position: Any, acc: dict[V, int]) -> int:
    """Add ``rows[i:]`` up to ``position`` into ``acc``; return the index of the first row left.

    ``rows`` are ``(position, val, diff)`` sorted by position; the rows added are those whose
    position is ``<= position``. Zero counts are dropped from ``acc``. Sweeping increasing
    positions over one sorted list accumulates a chain of times in one pass.

    >>> acc = {}
    >>> sweep_to([(1, "x", 1), (2, "x", -1), (5, "y", 1)], 0, 2, acc), acc
    (2, {})
    """
    n = len(rows)
    while i < n and rows[i][0] <= position:
        _, val, diff = rows[i]
        i += 1
        count = acc.get(val, 0) + diff
        if count:
            acc[val] = count
        else:
            acc.pop(val, None)
    return i


def _accumulate_ints(
    history: Sequence[tuple[V, int, int]], distinct: set[int]
) -> dict[Time, dict[V, int]]:
    rows = sorted([(t, val, diff) for val, t, diff in history], key=_first)
    acc: dict[V, int] = {}
    at: dict[Time, dict[V, int]] = {}
    i = 0
    for t in sorted(distinct):
        i = sweep_to(rows, i, t, acc)
        at[t] = dict(acc)
    return at


# --- times on one line ----------------------------------------------------------------------


def _accumulate_line(
    history: Sequence[tuple[V, Time, int]], distinct: set[Time], outer: Time, depth: int
) -> dict[Time, dict[V, int]]:
    """Accumulate at times ``depth`` loops deep that all lie on line ``outer``: a sweep by
    inner coordinate over the updates whose outer coordinate is ``<= outer`` (the others are
    below none of the times)."""
    if depth == 1:
        rows = [(t.inner, v, d) for v, t, d in history if t.outer <= outer]  # type: ignore[union-attr]
    else:
        rows = [
            (t.inner, v, d)  # type: ignore[union-attr]
            for v, t, d in history
            if less_equal(t.outer, outer)  # type: ignore[union-attr]
        ]
    rows.sort(key=_first)
    acc: dict[V, int] = {}
    at: dict[Time, dict[V, int]] = {}
    i = 0
    for t in sorted(distinct, key=_inner):
        i = sweep_to(rows, i, t.inner, acc)  # type: ignore[union-attr]
        at[t] = dict(acc)
    return at


# --- pairs of ints: a coordinate sweep ----------------------------------------------------


def _accumulate_points(
    history: Sequence[tuple[V, Time, int]],
    distinct: set[Time],
    example: Time,
    small: int,
    domain: TimeDomain,
) -> dict[Time, dict[V, int]]:
    at: dict[Time, dict[V, int]] = {}
    if len(history) * len(distinct) <= small:
        for t in distinct:
            acc: dict[V, int] = {}
            for val, time, diff in history:
                if less_equal(time, t):
                    acc[val] = acc.get(val, 0) + diff
            at[t] = {val: count for val, count in acc.items() if count}
        return at
    encode = codec(example, domain)[0]
    updates = [(val, encode(time), diff) for val, time, diff in history if diff]
    original = {encode(t): t for t in distinct}
    for chain in chains(sorted(original)):
        length = len(chain)
        columns = [list(c) for c in zip(*chain)]
        buckets: list[list[tuple[V, int]]] = [[] for _ in range(length)]
        if len(columns) == 2:
            xs, ys = columns
            for val, (u0, u1), diff in updates:
                pos = bisect_left(xs, u0)
                p1 = bisect_left(ys, u1)
                if p1 > pos:
                    pos = p1
                if pos < length:
                    buckets[pos].append((val, diff))
        else:
            for val, u, diff in updates:
                pos = 0
                for col, x in zip(columns, u):
                    p = bisect_left(col, x)
                    if p > pos:
                        pos = p
                if pos < length:
                    buckets[pos].append((val, diff))
        acc = {}
        for point, bucket in zip(chain, buckets):
            for val, diff in bucket:
                count = acc.get(val, 0) + diff
                if count:
                    acc[val] = count
                else:
                    del acc[val]
            at[original[point]] = dict(acc)
    return at


# --- at one time, by a scan ---------------------------------------------------------------


def positions(rows: list[tuple[Any, Any, int]], x: Any, depth: int) -> list[tuple[int, Any, int]]:
    """``(position, val, diff)`` of the updates of ``rows`` at or below line ``x`` (``None``:
    int times, the position is the time), at a scope ``depth`` loops deep."""
    if x is None:
        return [(t, v, d) for v, t, d in rows]
    if depth == 1:  # Products are pairs: indexing is the cheapest way in
        return [(t[1], v, d) for v, t, d in rows if t[0] <= x]
    if depth == 2:
        xo, xi = x
        # A loop nested in another: every time's outer coordinate is such a pair too (one
        # operator's times share one shape), compared in place rather than by a call a row.
        return [(t[1], v, d) for v, t, d in rows if (o := t[0])[0] <= xo and o[1] <= xi]
    return [(t[1], v, d) for v, t, d in rows if less_equal(t[0], x)]


def total_at(rows: list[tuple[Any, Any, int]], x: int, y: int) -> int:
    """The sum of the diffs of ``(val, Product(int, int), diff)`` rows at or below ``(x, y)``."""
    n = 0
    for _, t, d in rows:
        if t[0] <= x and t[1] <= y:
            n += d
    return n


def without_zeros(acc: dict[Any, int]) -> dict[Any, int]:
    """``acc`` without its zero counts (``acc`` itself when it has none)."""
    if 0 in acc.values():
        return {v: c for v, c in acc.items() if c}
    return acc


def add_into(acc: dict[Any, int], changes: dict[Any, int]) -> None:
    """Add ``{val: diff}`` into the accumulation ``acc`` (zero counts dropped)."""
    for v, d in changes.items():
        c = acc.get(v, 0) + d
        if c:
            acc[v] = c
        else:
            del acc[v]


def difference(desired: dict[Any, int], current: dict[Any, int]) -> dict[Any, int]:
    """``desired - current`` as ``{val: diff}``, zeros left out."""
    fix = {v: c - current.get(v, 0) for v, c in desired.items() if c != current.get(v, 0)}
    for v, c in current.items():
        if v not in desired:
            fix[v] = -c
    return fix


def add_row(
    fixes: dict[Any, list[tuple[Any, Any, int]]], time: Any, key: Any, val: Any, diff: int
) -> None:
    """Append ``key``'s correction ``(val, diff)`` at ``time``."""
    rows = fixes.get(time)
    if rows is None:
        fixes[time] = [(key, val, diff)]
    else:
        rows.append((key, val, diff))


def add_rows(
    fixes: dict[Any, list[tuple[Any, Any, int]]], time: Any, key: Any, fix: dict[Any, int]
) -> None:
    """Append ``key``'s ``{val: diff}`` corrections at ``time``."""
    rows = fixes.get(time)
    if rows is None:
        rows = fixes[time] = []
    rows.extend([(key, v, d) for v, d in fix.items()])


def record(
    fixes: dict[Any, list[tuple[Any, Any, int]]],
    time: Any,
    key: Any,
    desired: dict[Any, int],
    current: dict[Any, int],
) -> None:
    """Append the corrections turning ``current`` into ``desired`` at ``time``."""
    add_rows(fixes, time, key, difference(desired, current))
