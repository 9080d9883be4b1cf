"""Keys whose interesting times form a chain: one sweep in chain order.

The common case inside ``iterate``: every new and pending time of a key is ``Product(x, _)``
for the round ``x`` being computed, with an int inner coordinate, and every stored input time
has an outer coordinate ``<= x``: the key's times lie on one *line*. Their interesting times
then form a chain ordered by the inner coordinate (:func:`.interesting_times.interesting_on_line`),
so one sweep in inner order accumulates input and output together and calls ``logic`` only where
either changed (:func:`sweep_line`). The usual single new time with all history below it is one
accumulation and one ``logic`` call, no sorting, no ``Product`` built except for the times
that get corrections (:func:`line`; :func:`count_line` sums counts). Int
times under ``total_order=False`` are one line too (``x`` is ``None``).

The transposed shape, a *row*, is that of a static run: every new time of the key is
``Product(_, y)`` for one iteration ``y`` and its history lies at iterations ``<= y`` (each
iteration brings new times from many rounds at once). The same sweep runs along the row,
ordered by the outer coordinate (:func:`pair_row`). In nested loops a row of times
``Product(Product(p, i), y)`` under one ``p`` is a chain along ``i`` (:func:`nested_row`): the
shape of a key whose new times come from several iterations of the enclosing loop at once.

Checking the shape costs one pass over the key's times; a key off a line or row takes the
general search (:mod:`.general`). The output history's positions count as interesting as well
as the input's (see :func:`sweep_line`), and every deferred position stays pending until the
frontier passes it.
"""

from __future__ import annotations

from operator import itemgetter
from typing import TYPE_CHECKING, Any

from deltaflow.framework.lattice import Product, less_equal, new_tuple

from .accumulation import (
    add_row,
    positions,
    record,
    sweep_to,
    without_zeros,
)
from .counting import ByCount, count_chain, count_debt
from .interesting_times import interesting_on_line

if TYPE_CHECKING:
    from deltaflow.framework.antichain import Antichain

    from .operator import ReduceOperator

__all__ = ["count_line", "least", "line", "nested_row", "pair_row", "sweep_line"]

_first = itemgetter(0)


def least(times: list[Any]) -> Any:
    """The smallest of a non-empty list of ints (the builtin is shadowed in the package).

    >>> least([3, 1, 2])
    1
    """
    low = times[0]
    for t in times:
        if t < low:
            low = t
    return low


def _changed_positions(rows: list[tuple[int, Any, int]]) -> list[int]:
    """The positions of ``(position, val, diff)`` rows where some value's diffs do not
    cancel."""
    sums: dict[tuple[int, Any], int] = {}
    for y, v, d in rows:
        k = (y, v)
        sums[k] = sums.get(k, 0) + d
    return [y for (y, _), d in sums.items() if d]


def line(
    op: ReduceOperator,
    key: Any,
    x: Any,
    times: list[Any],
    history: list[tuple[Any, Any, int]],
    written: list[tuple[Any, Any, int]] | None,
    bound: int | None,
    fixes: dict[Any, list[tuple[Any, Any, int]]],
) -> bool:
    """Correct one key whose times lie on one line; False (nothing done) if they do not.

    ``x`` is the line's outer coordinate, or ``None`` for int times (one line, the
    positions are the times). On a line: every one of ``times`` (new and pending) is
    ``Product(x, _)`` and every stored input time has an outer coordinate ``<= x``
    (module docstring); positions are inner coordinates. ``bound`` is the first position
    beyond the frontier (``None``: none is). Corrections go to ``fixes[position]`` for ints
    and ``fixes[(x, position)]`` on a line.

    Each history is read once, split at the lowest new position ``low``: what accumulates
    there, and the positions above it where it changes. With the one new position ``low``
    and every such position beyond the frontier (or none), the key is answered with one
    accumulation and one ``logic`` call, without sorting: the positions above are deferred,
    each to be evaluated once the frontier passes it. Otherwise one sweep evaluates the
    ready positions in order (:func:`sweep_line`).
    """
    if len(times) == 1:  # (one time is on line ``x``: it is where ``x`` came from)
        low = high = times[0] if x is None else times[0][1]
    else:
        span = _span(times, x)
        if span is None:
            return False
        low, high = span
    depth = op.domain.depth
    split = _split(history, x, low, depth, off_line_ends=True)
    if split is None:
        return False
    acc, changes = split
    next_above = least(changes) if changes else None
    # Where the output changed above ``low`` counts as where the input did (see
    # :func:`sweep_line`).
    current: dict[Any, int] = {}
    written_above: list[int] = []
    if written:
        out = _split(written, x, low, depth, off_line_ends=False)
        assert out is not None  # output times off the line are skipped, never the key
        current, written_above = without_zeros(out[0]), out[1]
    if written_above:
        lowest = least(written_above)
        if next_above is None or lowest < next_above:
            next_above = lowest
    if low != high or (next_above is not None and (bound is None or next_above < bound)):
        _sweep(op, key, x, times, changes, history, written, bound, fixes)
        return True
    if bound is not None and low >= bound:
        op.defer(key, [low if x is None else new_tuple(Product, (x, low))])
        return True
    desired = op.evaluate(key, without_zeros(acc))
    if desired != current:
        record(fixes, low if x is None else (x, low), key, desired, current)
    if next_above is not None:
        # Every position above ``low`` where the input or the output changed is
        # interesting (the seed's join with it) and beyond the frontier: each stays
        # pending until it is evaluated.
        later: list[Any] = sorted({*changes, *written_above})
        if x is not None:
            later = [new_tuple(Product, (x, y)) for y in later]
        op.defer(key, later)
    return True


def _span(times: list[Any], x: Any) -> tuple[int, int] | None:
    """The lowest and highest positions of ``times`` on line ``x`` (``None``: int times,
    the positions are the times), or None if one is off the line."""
    if x is None:
        low = high = times[0]
        for y in times:
            if y < low:
                low = y
            elif y > high:
                high = y
        return low, high
    low = high = times[0][1]
    for t in times:
        if t[0] != x:
            return None
        y = t[1]
        if y < low:
            low = y
        elif y > high:
            high = y
    return low, high


def _sweep(
    op: ReduceOperator,
    key: Any,
    x: Any,
    times: list[Any],
    changes: list[int],
    history: list[tuple[Any, Any, int]],
    written: list[tuple[Any, Any, int]] | None,
    bound: int | None,
    fixes: dict[Any, list[tuple[Any, Any, int]]],
) -> None:
    """:func:`sweep_line` along line ``x`` for a key that needs more than one evaluation now
    (``changes``: where the input changes above the lowest seed)."""
    if x is None:
        ys = times
        inputs = [(t, v, d) for v, t, d in history]
    else:
        ys = [t[1] for t in times]
        inputs = [(t[1], v, d) for v, t, d in history]
    outputs = positions(written, x, op.domain.depth) if written else []
    sweep_line(op, key, x, ys, changes, inputs, outputs, bound, fixes)


def _split(
    rows: list[tuple[Any, Any, int]], x: Any, low: int, depth: int, *, off_line_ends: bool
) -> tuple[dict[Any, int], list[int]] | None:
    """A key's history on line ``x`` split at its lowest new position ``low``: ``(what
    accumulates at low, the positions above it where the history changes)``.

    Only positions where the history changes on the line are interesting: updates that cancel
    there (once at an earlier round, once at a later one; compaction has not met them yet) are
    not. A time off the line (outer coordinate not ``<= x``) takes the key off the line when
    ``off_line_ends`` (an input time: the result is None); an output time there is below none
    of the line's times and is skipped. Products are pairs and are read by index.

    >>> rows = [("a", (0, 1), 1), ("a", (1, 3), -1), ("a", (0, 3), 1), ("b", (1, 4), 1)]
    >>> _split(rows, 1, 2, 1, off_line_ends=True)  # at 3 the updates cancel
    ({'a': 1}, [4])
    >>> _split(rows, 0, 2, 1, off_line_ends=True) is None
    True
    >>> _split(rows, 0, 2, 1, off_line_ends=False)
    ({'a': 1}, [3])
    """
    acc: dict[Any, int] = {}
    get = acc.get
    above: dict[Any, int] | None = None
    # ``depth`` is the scope's: ``x`` is None at depth 0, an int at depth 1.
    pairs = depth == 1
    nested = False
    if depth == 2:
        # A loop nested in another: every outer coordinate is a pair of ints too (one
        # operator's times share one shape), compared in place rather than by a call a row.
        nested = True
        xo, xi = x
    for v, r, d in rows:
        if x is None:
            ry = r
        elif (
            (r[0] <= x)
            if pairs
            else ((o := r[0])[0] <= xo and o[1] <= xi)
            if nested
            else less_equal(r[0], x)
        ):
            ry = r[1]
        elif off_line_ends:
            return None
        else:
            continue
        if ry <= low:
            acc[v] = get(v, 0) + d
        elif above is None:
            above = {(ry, v): d}
        else:
            k = (ry, v)
            above[k] = above.get(k, 0) + d
    return acc, [ry for (ry, _), d in above.items() if d] if above else []


def count_line(
    op: ReduceOperator,
    by_count: ByCount,
    key: Any,
    x: int,
    times: list[Any],
    history: list[tuple[Any, Any, int]],
    written: list[tuple[Any, Any, int]] | None,
    bound: int | None,
    fixes: dict[Any, list[tuple[Any, Any, int]]],
) -> bool:
    """:func:`line` for a counting reduction (every val ``()``): the counts at the
    lowest new position ``low`` and their changes above it, per position, from one pass over
    each history; False (nothing done) if a time is off line ``x``.

    With one new position and every change above it beyond the frontier, the key is
    deferred only to where, as things stand, its output would be wrong
    (:func:`.counting.count_debt`): until new input comes for it (which makes its own
    interesting times), nothing changes there.
    """
    if len(times) == 1:
        low = high = times[0][1]
    else:
        span = _span(times, x)
        if span is None:
            return False
        low, high = span
    n = 0  # the input count at ``low``
    above: dict[int, int] | None = None  # the input updates above ``low``, per position
    for _, r, d in history:
        if r[0] > x:
            return False
        ry = r[1]
        if ry <= low:
            n += d
        elif above is None:
            above = {ry: d}
        else:
            above[ry] = above.get(ry, 0) + d
    out = 0  # the output count at ``low``
    later: dict[int, int] | None = None  # the output updates above ``low``, per position
    if written:
        for _, r, d in written:
            if r[0] <= x:
                ry = r[1]
                if ry <= low:
                    out += d
                elif later is None:
                    later = {ry: d}
                else:
                    later[ry] = later.get(ry, 0) + d
    # The lowest position above ``low`` where the input or the output changes (the output's
    # count as well, see :func:`sweep_line`).
    next_above = None
    if above is not None:
        for ry, d in above.items():
            if d and (next_above is None or ry < next_above):
                next_above = ry
    if later is not None:
        for ry, d in later.items():
            if d and (next_above is None or ry < next_above):
                next_above = ry
    if low != high or (next_above is not None and (bound is None or next_above < bound)):
        changes = [ry for ry, d in above.items() if d] if above else []
        _sweep(op, key, x, times, changes, history, written, bound, fixes)
        return True
    if bound is not None and low >= bound:
        # Not final yet, so not corrected yet: deferred to the first position where the
        # output would be wrong (none: the key is done). A negative count here is a guess
        # (see count_debt): owed an evaluation, not handed to a strict by_count now.
        wrong = n < 0 or by_count(key, n) != out
        at = low if wrong else count_debt(by_count, key, n, out, above, later)
        if at is not None:
            op.defer(key, [new_tuple(Product, (x, at))])
        return True
    want = by_count(key, n)
    if want != out:
        add_row(fixes, (x, low), key, (), want - out)
    if next_above is not None:
        # Every change above ``low`` is beyond the frontier: the key is owed an evaluation
        # at the first of them where its output would be wrong once ``low`` is corrected
        # (the counts only change there, so that position is interesting).
        debt = count_debt(by_count, key, n, want, above, later)
        if debt is not None:
            op.defer(key, [new_tuple(Product, (x, debt))])
    return True


def sweep_line(
    op: ReduceOperator,
    key: Any,
    x: Any,
    seeds: list[Any],
    stored: list[int],
    inputs: list[tuple[int, Any, int]],
    outputs: list[tuple[int, Any, int]],
    bound: int | None,
    fixes: dict[Any, list[tuple[Any, Any, int]]],
    row: int | None = None,
    prefix: Any = None,
) -> None:
    """Correct one key whose times form a chain, given by int positions along it.

    ``x`` is the line's outer coordinate (``None``: the times are ints, positions are the
    times themselves); with ``row`` the chain is the row ``Product(_, row)`` instead and
    positions are outer coordinates (see :func:`pair_row`), or with ``prefix`` the inner
    coordinates of outer coordinates ``Product(prefix, position)`` (see :func:`nested_row`).
    ``seeds`` are the positions of new and pending times; ``stored`` the positions of the
    stored input times that may make interesting times; ``inputs`` and ``outputs`` the key's
    histories as ``(position, val, diff)`` (only updates at or below the chain). Every
    correction goes to ``fixes[position]`` for ints, ``fixes[(x, position)]`` on a line and
    ``fixes[(outer, row)]`` on a row.

    On a chain every earlier ready time is below the next, so one sweep in position order
    keeps the accumulated input and the output (stored plus this round's corrections) up
    to date; ``logic`` runs only where one of them changed since it last ran (a counting
    reduction sums ints instead of building accumulations).
    """
    # The output's positions count as well as the input's: compaction may cancel input
    # updates that the output has not caught up with, and then only the output history
    # still shows where the key changed. Every deferred position stays pending.
    changed = _changed_positions(outputs)
    ready, deferred = interesting_on_line(seeds, [*stored, *changed], bound)
    if prefix is not None:
        # Gathered by position, then moved to the outer coordinates they stand for.
        outer = fixes
        fixes = {}
    if deferred:
        if prefix is not None:
            op.defer(
                key,
                [new_tuple(Product, (new_tuple(Product, (prefix, y)), row)) for y in deferred],
            )
        elif row is not None:
            op.defer(key, [new_tuple(Product, (y, row)) for y in deferred])
        elif x is None:
            op.defer(key, deferred)  # type: ignore[arg-type]
        else:
            op.defer(key, [new_tuple(Product, (x, y)) for y in deferred])
    if not ready:
        return
    if len(inputs) > 1:
        inputs.sort(key=_first)
    if len(outputs) > 1:
        outputs.sort(key=_first)
    by_count = op.by_count
    if by_count is not None:
        count_chain(by_count, key, x, row, ready, inputs, outputs, fixes)
    else:
        _sweep_values(op, key, x, row, ready, inputs, outputs, fixes)
    if prefix is not None:
        for (y, r), rows in fixes.items():
            at = (new_tuple(Product, (prefix, y)), r)
            have = outer.get(at)
            if have is None:
                outer[at] = rows
            else:
                have.extend(rows)


def _sweep_values(
    op: ReduceOperator,
    key: Any,
    x: Any,
    row: int | None,
    ready: list[int],
    inputs: list[tuple[int, Any, int]],
    outputs: list[tuple[int, Any, int]],
    fixes: dict[Any, list[tuple[Any, Any, int]]],
) -> None:
    """:func:`sweep_line`'s sweep for any reduction: ``inputs`` and ``outputs`` sorted by
    position, ``logic`` run at each ready position where one of them changed."""
    i = j = 0
    acc: dict[Any, int] = {}
    current: dict[Any, int] = {}
    evaluate = op.evaluate
    fresh = True
    for y in ready:
        i_next = sweep_to(inputs, i, y, acc)
        j_next = sweep_to(outputs, j, y, current)
        moved = fresh or i_next != i or j_next != j
        i, j = i_next, j_next
        if not moved:
            # Neither the input nor the output changed since logic last ran: the output
            # there already equals logic's answer.
            continue
        fresh = False
        desired = evaluate(key, acc)
        if desired == current:
            continue
        at = (y, row) if row is not None else y if x is None else (x, y)
        record(fixes, at, key, desired, current)
        current = desired


def pair_row(
    op: ReduceOperator,
    key: Any,
    y: int,
    times: list[Any],
    history: list[tuple[Any, Any, int]],
    written: list[tuple[Any, Any, int]] | None,
    bound: int | None,
    fixes: dict[Any, list[tuple[Any, Any, int]]],
) -> None:
    """Correct one key whose ``Product(int, int)`` times lie on row ``y`` (see
    :func:`.counting.on_row`); ``bound`` is the row's first position beyond the frontier
    (:func:`.interesting_times.row_bound`, ``None``: none is).

    On a row every one of ``times`` is ``Product(_, y)`` and every stored input time has an
    inner coordinate ``<= y``: a time's join with the others stays on the row, so the
    interesting times are a chain ordered by the outer coordinate, and each stored time
    counts from its outer coordinate on. This is the usual shape when many rounds go
    through a loop together (a static run): each iteration brings a key new times from
    several rounds at once, and its history is of earlier iterations.
    """
    xs = [t[0] for t in times]
    inputs = [(r[0], v, d) for v, r, d in history]
    stored = [p for p, _, _ in inputs]
    outputs = [(r[0], v, d) for v, r, d in written if r[1] <= y] if written else []
    sweep_line(op, key, None, xs, stored, inputs, outputs, bound, fixes, row=y)


def nested_row(
    op: ReduceOperator,
    key: Any,
    times: list[Any],
    history: list[tuple[Any, Any, int]],
    written: list[tuple[Any, Any, int]] | None,
    upper: Antichain,
    fixes: dict[Any, list[tuple[Any, Any, int]]],
) -> bool:
    """:func:`pair_row` for nested loops; False (nothing done) if the key's times are not on
    such a row.

    Times ``Product(Product(p, i), y)``: the key's times lie on row ``y`` under prefix ``p``
    when every one of ``times`` is ``Product(Product(p, _), y)`` and every stored input time
    ``Product(Product(q, j), z)`` has ``q <= p`` and ``z <= y``. Its join with a time of the
    row is then on the row (at ``max(i, j)``) and it counts from position ``j`` on: a chain
    along the inner coordinate of the outer loop. This is the shape of a nested loop's key
    whose new times come from several iterations of the enclosing loop at once (the inner
    loop of each iteration runs beside those of the others, round by round), as when a
    collection is first loaded. Output times not ``<=`` some time of the row are skipped.
    """
    first = times[0]
    y = first[1]
    prefix = first[0][0]
    for t in times:
        if t[1] != y:
            return False
        p = t[0][0]
        if p is not prefix and p != prefix:
            return False
    xs = [t[0][1] for t in times]
    inputs: list[tuple[int, Any, int]] = []
    for v, r, d in history:
        if r[1] > y:
            return False
        o = r[0]
        q = o[0]
        if q is not prefix and not less_equal(q, prefix):
            return False
        inputs.append((o[1], v, d))
    outputs: list[tuple[int, Any, int]] = []
    if written:
        for v, r, d in written:
            o = r[0]
            q = o[0]
            if r[1] <= y and (q is prefix or less_equal(q, prefix)):
                outputs.append((o[1], v, d))
    stored = [j for j, _, _ in inputs]
    bound = nested_row_bound(upper, prefix, y)
    sweep_line(op, key, None, xs, stored, inputs, outputs, bound, fixes, row=y, prefix=prefix)
    return True


def nested_row_bound(upper: Antichain, prefix: Any, y: int) -> int | None:
    """The smallest ``i`` with ``Product(Product(prefix, i), y)`` beyond ``upper``, or None.

    It is beyond an element ``Product(Product(q, j), z)`` iff ``q <= prefix``, ``z <= y``
    and ``j <= i``: the answer is the least such ``j``.

    >>> from deltaflow.framework.antichain import Antichain
    >>> u = Antichain([Product(Product(0, 4), 1), Product(Product(0, 2), 6)])
    >>> nested_row_bound(u, 0, 3), nested_row_bound(u, 0, 7), nested_row_bound(u, 0, 0)
    (4, 2, None)
    """
    bound: int | None = None
    for u in upper.elements:
        o = u[0]  # type: ignore[index]
        j = o[1]
        if u[1] <= y and (bound is None or j < bound) and less_equal(o[0], prefix):  # type: ignore[index]
            bound = j
    return bound
