"""Totally ordered (``int``) times: a sweep of each key's new updates in time order.

Like a ``count_total``: with totally ordered times the interesting times of a key are just the
times of its new updates, so the operator keeps each key's accumulated input and output at the
frontier (``accs`` and ``outs``) and sweeps the key's buffered updates in time order: no
interesting-times search, no input history. Updates at or beyond the frontier stay buffered.
(With ``total_order=False`` int times take the chain path instead, where they are one line.)
Large batches of ints for ``count``, ``distinct`` and ``threshold`` take the numpy kernel of
:mod:`.columnar` instead, on the same state.
"""

from __future__ import annotations

from operator import itemgetter
from typing import TYPE_CHECKING, Any

from .accumulation import record, sweep_to
from .columnar import correct_counts

if TYPE_CHECKING:
    from deltaflow.framework.antichain import Antichain
    from deltaflow.framework.lattice import Time

    from .operator import ReduceOperator

__all__ = ["correct_total"]

_first = itemgetter(0)


def _later(swept: list[tuple[Any, Any, int]], i: int) -> list[tuple[Any, Any, int]]:
    """The updates of ``swept`` from ``i`` on (not yet due), as ``(val, time, diff)`` with
    the diffs of equal ``(time, val)`` summed and zeros dropped, in time order: updates
    waiting for a later time (a temporal filter's retractions, a window's closing) are
    carried from round to round, and summed they stay one per time and value.

    >>> _later([(1, "a", 1), (5, "b", -1), (5, "b", -1), (5, "c", 1), (5, "c", -1)], 1)
    [('b', 5, -2)]
    """
    if len(swept) - i == 1:
        t, v, d = swept[i]
        return [(v, t, d)]
    sums: dict[tuple[Any, Any], int] = {}
    get = sums.get
    for j in range(i, len(swept)):
        t, v, d = swept[j]
        tv = (t, v)
        sums[tv] = get(tv, 0) + d
    return [(v, t, d) for (t, v), d in sums.items() if d]


def correct_total(op: ReduceOperator, upper: Antichain) -> dict[Time, list[tuple[Any, Any, int]]]:
    """The int-time sweep: apply each key's buffered updates below ``upper`` in order.

    Runtime complexity: per key, O(u log u) for its u new updates plus one ``logic`` call
    (and a sort of its live values) per distinct new time.
    """
    bound: Any = upper.elements[0] if upper.elements else None
    kernel = op.kernel
    if kernel is not None:
        incoming = op.incoming
        # Batches received for the kernel, or many keys whose updates an earlier frontier
        # left waiting (each holds one update or more: their number stands for the updates').
        if incoming or (op.buffered_low is not None and op.domain.count_kernel(len(op.buffered))):
            op.incoming = []
            fixes = correct_counts(op, kernel, [batch for _, batch in incoming], bound)
            if fixes is not None:
                return fixes
            op.buffer(incoming)  # not all ints: the per-key sweep, below
    buffered, op.buffered = op.buffered, {}
    accs = op.accs
    outs = op.outs
    deltas = op.acc_deltas
    evaluate = op.evaluate
    corrections: dict[Time, list[tuple[Any, Any, int]]] = {}
    low: int | None = None
    for key, rows in buffered.items():
        # (time, val, diff) in time order: the layout sweep_to adds up to a time.
        swept = [(t, v, d) for v, t, d in rows]
        if len(swept) > 1:
            swept.sort(key=_first)
        acc = accs.get(key)
        if acc is None:
            acc = {}
        held = len(acc)
        n = len(swept)
        i = 0
        changed = False
        out = outs.get(key)
        while i < n:
            t = swept[i][0]
            if bound is not None and t >= bound:
                rest = _later(swept, i)
                if rest:
                    op.buffered[key] = rest
                    t = rest[0][1]
                    if low is None or t < low:
                        low = t
                break
            i = sweep_to(swept, i, t, acc)
            desired = evaluate(key, acc)
            current = out if out is not None else {}
            if desired != current:
                record(corrections, t, key, desired, current)
                out = desired
                changed = True
        if i:
            op.acc_rows += len(acc) - held
            for _, v, d in swept[:i]:
                deltas.add(key, (v, d))
        if acc:
            accs[key] = acc
        else:
            accs.pop(key, None)
        if changed:
            if out:
                outs[key] = out
            else:
                outs.pop(key, None)
    op.buffered_low = low
    deltas.bound(op.acc_rows)
    return corrections
