"""Counting reductions: ``distinct`` and ``threshold`` corrected by summing plain ints.

A reduction by self whose every input value is ``()`` and whose output is ``()`` with a count
that depends on the key's input count alone (``by_count(key, n)``) needs no ``{val: count}``
accumulation and no ``logic`` call: the input and output counts at a time are sums of diffs.
The reduction's paths for ``Product(int, int)`` times hand such keys to the functions here:

* :func:`count_pairs` - a few interesting times of any shape (the general path's twin);
* :func:`count_chain` - a chain of positions, one running sum each for input and output (the
  chain sweep's twin);
* :func:`count_debt` - where, on a line, the output would be wrong with the input and output
  known now: a key whose output stays right above its one new position is done, instead of
  staying pending until the frontier passes each later one;
* :class:`RowCounts` - many keys on rows at once, in numpy columns (below).

Each is checked against the general path with ``by_count`` off in the tests.

**Rows in numpy columns.** When many rounds go through a loop together (a static run), a
reduction's activation gets new times for thousands of keys, each on one *row*: every new time
of the key is ``Product(x, y)`` for one iteration ``y``, and its history lies at iterations
``<= y`` (see :func:`.chains.pair_row`). A row is a chain ordered by ``x``, so for a counting
reduction (``distinct``, ``threshold``: values all ``()``, output count a function of the input
count) everything is a running sum along it:

* the interesting positions are the key's new positions and its stored input positions above
  the lowest new one (all of them ready when the frontier has passed the whole row);
* the input count ``n`` and the output count ``out`` at each are prefix sums of the key's
  updates sorted by position;
* with ``c = f(n) - out`` there, the correction at each position is ``c`` minus the ``c`` of
  the key's previous position (each correction is seen by every later position of the row).

:class:`RowCounts` queues such keys during an activation, then gathers them into flat columns
(C-level passes over all of them, no Python step per update) and does those sorts and sums
for all of them together. Only ``f`` may run per position (``distinct``'s is vectorised).

    >>> from deltaflow.framework.lattice import Product
    >>> batch = RowCounts()
    >>> batch.add("k", 3, [Product(0, 3), Product(2, 3)], [((), Product(0, 1), 1),
    ...           ((), Product(2, 3), -1), ((), Product(1, 2), 1)], None)
    >>> fixes = {}
    >>> batch.correct(lambda key, n: int(n > 0), fixes)  # distinct
    True
    >>> fixes
    {(0, 3): [('k', (), 1)]}
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from operator import itemgetter
from typing import Any

import numpy as np

from deltaflow.framework.lattice import Product, new_tuple
from deltaflow.framework.trace.batch import pack_int64

from .accumulation import add_row, total_at

__all__ = [
    "ByCount",
    "RowCounts",
    "count_chain",
    "count_debt",
    "count_pairs",
    "line_fixes",
    "on_row",
    "order_by",
    "prefix_sums",
]

ByCount = Callable[[Any, int], int]
"""``by_count(key, n) -> count``: a reduction by self's output count from its input count."""

Rows = list[tuple[Any, Any, int]]
Fixes = dict[Any, list[tuple[Any, Any, int]]]

_first, _second, _third, _fourth = (itemgetter(i) for i in range(4))


def count_pairs(
    by_count: ByCount,
    key: Any,
    ready: list[Any],
    ins: list[tuple[Any, Any, int]],
    outs: list[tuple[Any, Any, int]],
    corrections: dict[Any, list[tuple[Any, Any, int]]],
) -> None:
    """Correct a counting reduction's ``key`` at ``ready`` ``Product(int, int)`` times (or int
    pairs), given in a linear extension of the partial order: at each, the input count and
    the output count (stored, plus this round's earlier corrections below it) are plain sums.
    O(r * (h + r)) for r ready times and h stored updates."""
    counted: list[tuple[int, int, int]] = []
    for x, y in ready:
        n = total_at(outs, x, y)
        for mx, my, c in counted:
            if mx <= x and my <= y:
                n += c
        c = by_count(key, total_at(ins, x, y)) - n
        if c:
            counted.append((x, y, c))
            add_row(corrections, new_tuple(Product, (x, y)), key, (), c)


def count_debt(
    by_count: ByCount,
    key: Any,
    n: int,
    out: int,
    above: dict[int, int] | None,
    later: dict[int, int] | None,
) -> int | None:
    """The lowest position above a line's position ``low`` where a counting reduction's
    output would be wrong with the input and output known now, or None if it is right at
    every one.

    ``n`` and ``out`` are the input and output counts at ``low`` (``out`` as corrected
    there); ``above`` and ``later`` sum the stored input and output updates above ``low``
    per position (None: there are none). Both counts only change at those positions, so
    checking there checks every position of the line above ``low``. A key whose output is
    right everywhere above its one new position is done, instead of staying pending until
    the frontier passes each later one. O(h log h) for h updates.

    Those positions are beyond the frontier: their counts are a guess that later input may
    still change (in a loop a retraction may come before the insertion it cancels). A
    negative one is owed an evaluation there, and ``by_count`` is not asked about it now: a
    strict one would refuse a count that is no collection's yet.

    >>> distinct = lambda _key, n: int(n > 0)
    >>> count_debt(distinct, "k", 1, 1, {3: -1, 5: 1}, {5: -1})  # wrong at 3 (no output change)
    3
    >>> count_debt(distinct, "k", 1, 1, {3: -1, 5: 1}, {3: -1, 5: 1}) is None
    True
    >>> count_debt(distinct, "k", 0, 0, {3: -1, 5: 1}, None)  # negative at 3: owed there
    3
    """
    if later is None:  # the usual case: only the input changes above ``low``
        if above is None:
            return None
        for y in sorted(above) if len(above) > 1 else above:
            dn = above[y]
            if dn:
                n += dn
                if n < 0 or by_count(key, n) != out:
                    return y
        return None
    if above is None:
        above = {}
    get_in = above.get
    get_out = later.get
    for y in sorted(above.keys() | later.keys()):
        n += get_in(y, 0)
        out += get_out(y, 0)
        if n < 0 or by_count(key, n) != out:
            return y
    return None


def count_chain(
    by_count: ByCount,
    key: Any,
    x: Any,
    row: int | None,
    ready: list[int],
    inputs: list[tuple[int, Any, int]],
    outputs: list[tuple[int, Any, int]],
    fixes: dict[Any, list[tuple[Any, Any, int]]],
) -> None:
    """:func:`.chains.sweep_line`'s sweep for a counting reduction: ``inputs`` and
    ``outputs`` sorted by position, the counts at each ready position are running sums.
    O(r + h) for r ready positions and h updates."""
    n = out = 0
    i = j = 0
    ni, nj = len(inputs), len(outputs)
    for y in ready:
        while i < ni and inputs[i][0] <= y:
            n += inputs[i][2]
            i += 1
        while j < nj and outputs[j][0] <= y:
            out += outputs[j][2]
            j += 1
        fix = by_count(key, n) - out
        if fix:
            at = (y, row) if row is not None else y if x is None else (x, y)
            add_row(fixes, at, key, (), fix)
            out += fix


# --- many keys on rows, in numpy columns -----------------------------------------------------


class RowCounts:
    """Keys of a counting reduction on rows, gathered as columns, corrected together.

    ``add`` queues a key; ``correct`` gathers the queued keys' columns and appends every key's
    corrections to ``fixes[(x, y)]`` as ``(key, (), diff)``. Keys must be distinct.

    Runtime complexity: O(m log m) numpy work for m queued times and updates in all, plus a
    C-level pass over them, a Python step per correction and one call of the counting
    function per interesting position (none for ``distinct``).
    """

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: list[tuple[Any, int, list[Any], Rows, Rows | None]] = []

    def __len__(self) -> int:
        return len(self._items)

    def add(self, key: Any, y: int, times: list[Any], history: Rows, written: Rows | None) -> None:
        """Queue ``key``, whose ``times`` (pairs, the new and pending ones) and input
        ``history`` lie on row ``y`` (:func:`on_row`), and whose row the frontier has passed
        entirely. ``written`` is the key's output history; updates above the row do not
        count on it.
        """
        self._items.append((key, y, times, history, written))

    def correct(
        self,
        by_count: Callable[[Any, int], int],
        fixes: Fixes,
        columns: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> bool:
        """Append the queued keys' corrections to ``fixes``; False (nothing done) if a time or
        a diff does not fit in 64 bits (the caller then corrects the keys one by one).

        ``columns``, if given, is ``by_count`` on a column of counts (for a ``by_count``
        that does not look at the key).
        """
        items = self._items
        # The columns of all queued keys, each gathered in one pass over all of them with
        # C-level iteration (no Python step per update): positions of the new times, the
        # input history's positions and diffs, and the output's; how many entries each key
        # has (its index repeated that many times is the key column).
        seeds = list(map(_third, items))
        inputs = list(map(_fourth, items))
        outputs = [written or () for _, _, _, _, written in items]
        new = list(chain.from_iterable(seeds))
        ins = list(chain.from_iterable(inputs))
        outs = list(chain.from_iterable(outputs))
        try:
            seed_p = _ints(map(_first, new), len(new))
            in_p = _ints(map(_first, map(_second, ins)), len(ins))
            in_d = _ints(map(_third, ins), len(ins))
            out_p = _ints(map(_first, map(_second, outs)), len(outs))
            out_y = _ints(map(_second, map(_second, outs)), len(outs))
            out_d = _ints(map(_third, outs), len(outs))
            ys = _ints(map(_second, items), len(items))
        except OverflowError:
            return False
        ks = np.arange(len(items), dtype=np.int64)
        seed_k = np.repeat(ks, list(map(len, seeds)))
        in_k = np.repeat(ks, list(map(len, inputs)))
        out_k = np.repeat(ks, list(map(len, outputs)))
        # Output updates above the key's row do not count on it.
        below = out_y <= ys[out_k]
        if not below.all():
            out_k, out_p, out_d = out_k[below], out_p[below], out_d[below]
        # Interesting positions: the new ones, and stored ones above the key's lowest new one.
        low = np.full(len(items), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(low, seed_k, seed_p)
        above = in_p > low[in_k]
        at_k = np.concatenate([seed_k, in_k[above]])
        at_p = np.concatenate([seed_p, in_p[above]])
        in_cols, out_cols = (in_k, in_p, in_d), (out_k, out_p, out_d)
        fix_k, fix_p, fix_d = line_fixes(
            at_k, at_p, in_cols, out_cols, by_count, columns, lambda: [it[0] for it in items]
        )
        for k, x, d in zip(fix_k.tolist(), fix_p.tolist(), fix_d.tolist()):
            key, y = items[k][:2]
            add_row(fixes, (x, y), key, (), d)
        return True

    def queued(self) -> list[tuple[Any, int, list[Any], Rows, Rows | None]]:
        """What was queued, as ``(key, y, times, history, written)``, in order."""
        return self._items


def on_row(y: int, times: list[Any], history: Rows) -> bool:
    """Whether a key's ``times`` (``Product(int, int)``) all lie on row ``y`` and its stored
    input ``history`` at or below it: then every interesting time is on the row.

    >>> on_row(2, [(0, 2), (3, 2)], [((), (1, 1), 1)]), on_row(2, [(0, 2)], [((), (1, 3), 1)])
    (True, False)
    """
    for t in times:
        if t[1] != y:
            return False
    for _, r, _ in history:  # noqa: SIM110 - a plain loop beats all() on this hot path
        if r[1] > y:
            return False
    return True


def _ints(values: Iterable[int], n: int) -> np.ndarray:
    """The ``n`` ``values`` as an int64 column (OverflowError if one does not fit)."""
    return np.fromiter(values, dtype=np.int64, count=n)


def line_fixes(
    at_k: np.ndarray,
    at_p: np.ndarray,
    inputs: tuple[np.ndarray, np.ndarray, np.ndarray],
    outputs: tuple[np.ndarray, np.ndarray, np.ndarray],
    by_count: ByCount,
    columns: Callable[[np.ndarray], np.ndarray] | None,
    names: Callable[[], Sequence[Any]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The corrections of counting keys each on one line, in columns: at each distinct
    interesting position ``(at_k[i], at_p[i])`` (key index, position; any order, repeats
    allowed), ``by_count`` of the input count there less the output count there, less what
    the key's previous position already owed. ``inputs`` and ``outputs`` are the keys'
    updates as columns ``(key index, position, diff)``; ``columns`` is ``by_count`` on a
    column of counts (if given); ``names()`` the keys by index (asked for only when
    ``by_count`` is called). Returns the nonzero corrections as ``(key index, position,
    diff)`` columns, by key then position.

    >>> ints = lambda *xs: np.array(xs, dtype=np.int64)
    >>> fix = line_fixes(ints(0, 0, 0), ints(2, 5, 2), (ints(0, 0), ints(1, 4), ints(1, 1)),
    ...                  (ints(), ints(), ints()), lambda key, n: int(n > 0), None, lambda: ["k"])
    >>> [c.tolist() for c in fix]
    [[0], [2], [1]]
    """
    order = order_by(at_k, at_p)
    at_k, at_p = at_k[order], at_p[order]
    first = np.ones(len(at_k), dtype=bool)
    first[1:] = (at_k[1:] != at_k[:-1]) | (at_p[1:] != at_p[:-1])
    at_k, at_p = at_k[first], at_p[first]
    n = prefix_sums(*inputs, at_k, at_p)
    out = prefix_sums(*outputs, at_k, at_p)
    if columns is not None:
        if n.size and n.min() < 0:  # by_count names the key (distinct's raises)
            i = int(np.argmin(n))
            by_count(names()[int(at_k[i])], int(n[i]))
        want = columns(n)
    else:
        keys = names()
        counts = zip(at_k.tolist(), n.tolist())
        want = np.array([by_count(keys[k], c) for k, c in counts], dtype=np.int64)
    # Each correction is seen at every later position of the key's line.
    owed = want - out
    fix = owed.copy()
    same_key = at_k[1:] == at_k[:-1]
    fix[1:][same_key] -= owed[:-1][same_key]
    nonzero = np.flatnonzero(fix)
    return at_k[nonzero], at_p[nonzero], fix[nonzero]


def prefix_sums(
    k: np.ndarray, p: np.ndarray, d: np.ndarray, at_k: np.ndarray, at_p: np.ndarray
) -> np.ndarray:
    """For each ``(at_k[i], at_p[i])`` (sorted), the sum of the ``d`` of updates of key
    ``at_k[i]`` at positions ``<= at_p[i]``."""
    if not len(k):
        return np.zeros(len(at_k), dtype=np.int64)
    # Updates and queries in one order (key, position, updates first); a running sum of the
    # diffs, restarted at each key, read at the queries.
    kind = np.concatenate([np.zeros(len(k), dtype=np.int8), np.ones(len(at_k), dtype=np.int8)])
    all_k = np.concatenate([k, at_k])
    order = order_by(all_k, np.concatenate([p, at_p]), kind)
    diffs = np.concatenate([d, np.zeros(len(at_k), dtype=np.int64)])[order]
    running = np.cumsum(diffs)
    keys = all_k[order]
    starts = np.ones(len(keys), dtype=bool)
    starts[1:] = keys[1:] != keys[:-1]
    # The running sum just before each key's first entry, carried over its entries.
    before = (running - diffs)[starts]
    base = np.repeat(before, np.diff(np.append(np.flatnonzero(starts), len(keys))))
    queries = kind[order] == 1
    return (running - base)[queries]  # type: ignore[no-any-return]


def order_by(k: np.ndarray, p: np.ndarray, kind: np.ndarray | None = None) -> np.ndarray:
    """The indices that sort by ``(k, p)``, or ``(k, p, kind)`` (stable): one ``argsort`` of
    them packed into an int64 when they fit
    (:func:`~deltaflow.framework.trace.batch.pack_int64`), else ``np.lexsort``.

    >>> order_by(np.array([1, 0, 1, 0]), np.array([5, 9, -2, 9]), np.array([1, 1, 0, 0]))
    array([3, 1, 2, 0])
    """
    if len(p):
        packed = pack_int64(k, None, p) if kind is None else pack_int64(k, p, kind)
        if packed is not None:
            return np.argsort(packed, kind="stable")
    return np.lexsort((p, k) if kind is None else (kind, p, k))
