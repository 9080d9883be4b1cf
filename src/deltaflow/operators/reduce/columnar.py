"""Counting reductions at int times as numpy kernels over whole batches.

With totally ordered (``int``) times, ``count``, ``distinct`` and ``threshold`` answer from a
key's *total* count alone: ``count`` outputs ``(n, 1)`` when the key's counts add up to
``n > 0``, ``distinct`` ``((), 1)`` when ``n > 0``, ``threshold(f)`` ``((), f(key, n))``. When
a batch's keys, values and times are plain ints
(:func:`~deltaflow.framework.trace.ints.int_columns`), the operator corrects
all of its keys at once (:func:`correct_counts`) instead of sweeping each key's updates in
Python (:mod:`.total`):

1. the updates the frontier has passed are sorted by ``(key, time)``;
2. a running sum of their diffs, started at each key from its count before the batch, gives
   the key's count ``n`` after each of its times;
3. where the output changes between a time and the key's previous one, the old output is
   retracted and the new one inserted at that time.

The operator's state stays the one :mod:`.total` keeps and reads (each key's accumulation
``{val: count}`` and output at the frontier, the updates beyond it), so the two paths take
turns batch by batch, and checkpoints see one state. Whether a batch takes the kernel is
decided once per batch, by the int domain
(:meth:`~deltaflow.framework.time_domain.TimeDomain.count_kernel`: its threshold and the kernel
mode) and by whether its columns are ints; which kernel, once per operator
(:func:`counting_kernel`).

    >>> from deltaflow.operators.arrange import RawBatch
    >>> k, v, t, d = int_columns(RawBatch([3, 1], [7, 7], [0, 2], [1, -1]))
    >>> k.tolist(), v.tolist(), t.tolist(), d.tolist()
    ([3, 1], [7, 7], [0, 2], [1, -1])
    >>> int_columns(RawBatch(["a"], None, [0], [1])) is None
    True
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import repeat
from typing import TYPE_CHECKING, Any, Final

import attrs
import numpy as np

from deltaflow.framework.trace.columns import all_unit, sort_consolidate_int
from deltaflow.framework.trace.ints import IntColumns as Columns, int_columns, lists_columns

from ...framework.tuning import KERNEL_MIN
from .counting import ByCount, order_by
from .logics import COLUMNS, count_logic, negative

if TYPE_CHECKING:
    from ..durable import Deltas
    from .operator import ReduceOperator

__all__ = ["KERNEL_MIN", "CountKernel", "correct_counts", "counting_kernel"]

Corrections = dict[Any, list[tuple[Any, Any, int]]]

# Counts the kernel sums stay below this in magnitude (checked before it runs), so no int64
# sum can overflow.
_SAFE: Final = 1 << 62


@attrs.frozen
class CountKernel:
    """How a counting reduction's output follows from a key's total count ``n``.

    ``by_count`` None: ``count`` (``(n, 1)`` when ``n > 0``); otherwise a reduction by self
    with output ``((), by_count(key, n))``, and ``columns`` is ``by_count`` on a numpy column
    of counts when it has one (``distinct``).
    """

    by_count: ByCount | None
    columns: Callable[[np.ndarray], np.ndarray] | None
    #: A negative total is an error (the operator's ``strict``).
    strict: bool = True


def counting_kernel(
    logic: Any,
    positive_only: bool,
    by_count: ByCount | None,
    strict: bool = True,
    columns: Callable[[np.ndarray], np.ndarray] | None = None,
) -> CountKernel | None:
    """The kernel for a reduction with this logic, or None when it has none (chosen once, when
    the operator is made); ``columns``: ``by_count``'s column form (default: looked up, for a
    ``by_count`` the operator has not wrapped).

    >>> counting_kernel(count_logic, False, None)
    CountKernel(by_count=None, columns=None, strict=True)
    >>> counting_kernel(count_logic, True, None) is None  # positive counts only: not a total
    True
    """
    if by_count is not None:
        return CountKernel(by_count, columns or COLUMNS.get(by_count), strict)
    if logic is count_logic and not positive_only:
        return CountKernel(None, None, strict)
    return None


def _buffered_columns(
    buffered: dict[Any, list[tuple[Any, int, int]]], unit: bool
) -> Columns | None:
    """The updates waiting beyond an earlier frontier (``{key: [(val, time, diff)]}``) as
    columns (``unit``: without the value column, every value being ``()``)."""
    keys = [k for k, rows in buffered.items() for _ in rows]
    rows = [r for rows in buffered.values() for r in rows]
    times = [r[1] for r in rows]
    diffs = [r[2] for r in rows]
    vals = [r[0] for r in rows]
    if unit and not all_unit(vals, len(vals)):
        return None
    cols = lists_columns(keys, None if unit else vals, times, diffs, plain=True)
    return None if cols is None else (cols.keys, cols.vals, cols.times, cols.diffs)


def correct_counts(
    op: ReduceOperator, kernel: CountKernel, batches: list[Any], bound: int | None
) -> Corrections | None:
    """Apply ``batches`` and the updates ``op`` buffered earlier up to ``bound`` (the
    frontier; None: everything), as :func:`.total.correct_total` would, in numpy columns.

    Returns the corrections by time, or None, having changed nothing, when the data are not
    all ints (or their counts could leave 64 bits): the caller then takes the per-key path.

    Runtime complexity: O(n log n) numpy work for n updates, plus a Python step per key
    touched, per output change, per distinct ``(key, val)`` (``count``) and per time with
    output, and one ``by_count`` call per ``(key, time)`` for a ``by_count`` without a column
    form (``threshold``).
    """
    parts: list[Columns] = []
    for batch in batches:
        cols = int_columns(batch)
        if cols is None:
            return None
        parts.append(cols)
    if op.buffered:
        # (Reductions by self hold only the value ``()``.)
        unit = parts[0][1] is None if parts else kernel.by_count is not None
        old = _buffered_columns(op.buffered, unit)
        if old is None:
            return None
        parts.append(old)
    if not parts:
        return None
    unit = parts[0][1] is None
    if any((p[1] is None) != unit for p in parts):
        return None
    if kernel.by_count is not None and not unit:
        return None
    k, v, t, d = _concat(parts, unit)
    if not len(k):
        return None
    if max(-int(d.min()), int(d.max())) * len(d) >= _SAFE:
        return None
    later: Columns | None = None
    if bound is not None:
        due = t < bound
        if not due.all():
            later = (k[~due], None if v is None else v[~due], t[~due], d[~due])
            k, t, d = k[due], t[due], d[due]
            if v is not None:
                v = v[due]
    if len(k):
        fixes = _apply(op, kernel, k, v, t, d)
        if fixes is None:
            return None
    else:
        fixes = {}
    op.buffered = {}
    op.buffered_low = None
    if later is not None:
        _buffer(op, *later)
    return fixes


def _concat(parts: list[Columns], unit: bool) -> Columns:
    if len(parts) == 1:
        return parts[0]
    cat = np.concatenate
    vals = None if unit else cat([p[1] for p in parts])
    return cat([p[0] for p in parts]), vals, cat([p[2] for p in parts]), cat([p[3] for p in parts])


def _buffer(
    op: ReduceOperator, k: np.ndarray, v: np.ndarray | None, t: np.ndarray, d: np.ndarray
) -> None:
    """Keep updates beyond the frontier in ``op.buffered``, summed per ``(key, val, time)``,
    as the per-key path does."""
    # (Masked copies: the sort may reuse them.)
    k, v, t, d = sort_consolidate_int(k, v, t, d, 0)
    if not len(k):
        return
    buffered = op.buffered
    vals = repeat(()) if v is None else v.tolist()
    for key, val, time, diff in zip(k.tolist(), vals, t.tolist(), d.tolist()):
        rows = buffered.get(key)
        if rows is None:
            buffered[key] = [(val, time, diff)]
        else:
            rows.append((val, time, diff))
    op.buffered_low = int(t.min())


def _apply(
    op: ReduceOperator,
    kernel: CountKernel,
    k: np.ndarray,
    v: np.ndarray | None,
    t: np.ndarray,
    d: np.ndarray,
) -> Corrections | None:
    """The kernel proper, over the updates the frontier has passed (module docstring)."""
    order = order_by(k, t)
    k, t, d = k[order], t[order], d[order]
    new_key = np.empty(len(k), dtype=bool)
    new_key[0] = True
    np.not_equal(k[1:], k[:-1], out=new_key[1:])
    starts = np.flatnonzero(new_key)
    keys: list[Any] = k[starts].tolist()
    accs = op.accs
    # Each key's count before the batch (the per-key path's accumulation at the frontier).
    if v is None:
        base = [acc.get((), 0) if (acc := accs.get(key)) else 0 for key in keys]
    else:
        base = [sum(acc.values()) if (acc := accs.get(key)) else 0 for key in keys]
    if base and max(map(abs, base)) >= _SAFE:
        return None
    counts = _Counts.of(t, d, new_key, starts, np.array(base, dtype=np.int64))
    final_n: list[int] = counts.after[counts.final].tolist()
    fixes = _fixes(op, kernel, keys, counts, final_n)
    if fixes is None:
        return None
    deltas = op.acc_deltas
    if v is None:
        for key, total, held in zip(keys, final_n, base):
            if total:
                accs[key] = {(): total}
            else:
                accs.pop(key, None)
            if total != held:
                op.acc_rows += bool(total) - bool(held)
                deltas.add(key, ((), total - held))
    else:
        op.acc_rows += _add_vals(accs, k, v[order], d, deltas)
    deltas.bound(op.acc_rows)
    return fixes


@attrs.frozen
class _Counts:
    """Each key's count after every time of a batch sorted by key and time: one entry per
    ``(key, time)``, in that order."""

    #: the entry's key, as an index into the batch's distinct keys
    group_key: np.ndarray
    #: the entry's time
    times: np.ndarray
    #: the key's count before the time, and after it
    prior: np.ndarray
    after: np.ndarray
    #: whether the entry is its key's first, and its key's last (its count at the frontier)
    first: np.ndarray
    final: np.ndarray

    @classmethod
    def of(
        cls,
        t: np.ndarray,
        d: np.ndarray,
        new_key: np.ndarray,
        starts: np.ndarray,
        before: np.ndarray,
    ) -> _Counts:
        """The counts of the updates ``(t, d)`` (sorted by key and time; ``new_key`` marks
        each key's first, at ``starts``), each key's count before them being ``before``."""
        # The last update of each (key, time): where the key's count after that time is read.
        last = np.empty(len(t), dtype=bool)
        last[-1] = True
        np.not_equal(t[1:], t[:-1], out=last[:-1])
        last[:-1] |= new_key[1:]
        running = np.cumsum(d)
        # The running sum just before each key's first update, to restart the sum per key.
        offset = before - (running[starts] - d[starts])
        ends = np.flatnonzero(last)
        group_key = np.cumsum(new_key)[ends] - 1
        after = running[ends] + offset[group_key]
        first = np.empty(len(ends), dtype=bool)
        first[0] = True
        np.not_equal(group_key[1:], group_key[:-1], out=first[1:])
        prior = np.empty_like(after)
        prior[1:] = after[:-1]
        prior[first] = before[group_key[first]]
        final = np.empty(len(ends), dtype=bool)
        final[:-1] = first[1:]
        final[-1] = True
        return cls(group_key, t[ends], prior, after, first, final)


def _fixes(
    op: ReduceOperator, kernel: CountKernel, keys: list[Any], counts: _Counts, final_n: list[int]
) -> Corrections | None:
    """The output's corrections for ``counts``, and each key's output at the frontier in
    ``op.outs`` (``final_n``: its count there); None: a count beyond 64 bits."""
    outs = op.outs
    by_count = kernel.by_count
    group_key, after, prior = counts.group_key, counts.after, counts.prior
    if after.size and after.min() < 0 and kernel.strict:
        # A negative total: count's rule, or the strict by_count's, names the key.
        i = int(np.argmin(after))
        key, n = keys[int(group_key[i])], int(after[i])
        if by_count is None:
            raise negative(op.name, key, n)
        by_count(key, n)
    if by_count is None:
        for key, total in zip(keys, final_n):
            if total > 0:
                outs[key] = {total: 1}
            else:
                outs.pop(key, None)
        return _count_fixes(keys, group_key, counts.times, prior, after)
    if kernel.columns is not None:
        now = kernel.columns(after)
        was = kernel.columns(prior)
    else:
        try:
            now, was = _by_count(by_count, keys, outs, group_key, counts.first, after)
        except OverflowError:  # a count beyond 64 bits: the per-key path's Python ints
            return None
    for key, c in zip(keys, now[counts.final].tolist()):
        if c:
            outs[key] = {(): c}
        else:
            outs.pop(key, None)
    return _unit_fixes(keys, group_key, counts.times, now - was)


def _by_count(
    by_count: ByCount,
    keys: list[Any],
    outs: dict[Any, dict[Any, int]],
    group_key: np.ndarray,
    first: np.ndarray,
    after: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """``by_count`` after each ``(key, time)`` and before it (the key's output before the
    batch for its first time): one call per ``(key, time)``, as the per-key path makes."""
    gk: list[int] = group_key.tolist()
    now = np.array([by_count(keys[i], n) for i, n in zip(gk, after.tolist())], dtype=np.int64)
    was = np.empty_like(now)
    was[1:] = now[:-1]
    starts = np.flatnonzero(first)
    current = [
        out.get((), 0) if (out := outs.get(keys[i])) else 0 for i in group_key[starts].tolist()
    ]
    was[starts] = current
    return now, was


def _count_fixes(
    keys: list[Any],
    group_key: np.ndarray,
    times: np.ndarray,
    prior: np.ndarray,
    after: np.ndarray,
) -> Corrections:
    """``count``'s corrections: at each ``(key, time)`` whose total changed, ``(prior, 1)``
    retracted if ``prior > 0`` and ``(after, 1)`` inserted if ``after > 0``."""
    changed = prior != after
    gone = changed & (prior > 0)
    came = changed & (after > 0)
    cat = np.concatenate
    at = cat([times[gone], times[came]])
    which = cat([group_key[gone], group_key[came]])
    vals = cat([prior[gone], after[came]])
    diffs = cat(
        [np.full(int(gone.sum()), -1, dtype=np.int64), np.ones(int(came.sum()), dtype=np.int64)]
    )
    return _by_time(keys, which, at, vals.tolist(), diffs)


def _unit_fixes(
    keys: list[Any], group_key: np.ndarray, times: np.ndarray, fix: np.ndarray
) -> Corrections:
    """A reduction by self's corrections ``((), fix)`` where ``fix`` is not zero."""
    nonzero = np.flatnonzero(fix)
    return _by_time(keys, group_key[nonzero], times[nonzero], None, fix[nonzero])


def _by_time(
    keys: list[Any], which: np.ndarray, at: np.ndarray, vals: list[Any] | None, diffs: np.ndarray
) -> Corrections:
    """Corrections ``(keys[which], val, diff)`` grouped by time (``vals`` None: ``()``)."""
    if not len(at):
        return {}
    order = np.argsort(at, kind="stable")
    at = at[order]
    ks = [keys[i] for i in which[order].tolist()]
    ds: list[int] = diffs[order].tolist()
    vs: Any = repeat(()) if vals is None else [vals[i] for i in order.tolist()]
    rows = list(zip(ks, vs, ds))
    cuts = np.flatnonzero(at[1:] != at[:-1]) + 1
    lows = [0, *cuts.tolist()]
    highs = [*lows[1:], len(rows)]
    ts: list[int] = at[lows].tolist()
    return {time: rows[lo:hi] for time, lo, hi in zip(ts, lows, highs)}


def _add_vals(
    accs: dict[Any, dict[Any, int]], k: np.ndarray, v: np.ndarray, d: np.ndarray, deltas: Deltas
) -> int:
    """Add the updates' diffs into each key's accumulation ``{val: count}`` (zeros dropped),
    noting each change in ``deltas``; the rows (counts) made, less those dropped."""
    order = order_by(k, v)
    k, v, d = k[order], v[order], d[order]
    cut = np.empty(len(k), dtype=bool)
    cut[0] = True
    cut[1:] = (k[1:] != k[:-1]) | (v[1:] != v[:-1])
    starts = np.flatnonzero(cut)
    sums = np.add.reduceat(d, starts)
    nonzero = sums != 0
    starts = starts[nonzero]
    made = 0
    for key, val, diff in zip(k[starts].tolist(), v[starts].tolist(), sums[nonzero].tolist()):
        deltas.add(key, (val, diff))
        acc = accs.get(key)
        if acc is None:
            accs[key] = {val: diff}
            made += 1
            continue
        c = acc.get(val, 0) + diff
        if c:
            made += val not in acc
            acc[val] = c
        else:
            made -= 1
            del acc[val]
            if not acc:
                del accs[key]
    return made
