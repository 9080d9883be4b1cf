"""Reductions: ``reduce(logic)`` and ``count``, ``distinct``, ``threshold``, ``min``, ``max``,
``top_k`` built on it.

A reduction keeps, for every key and at every time ``t``,
``output[key][t] = logic(key, input[key][t])``: the output is a *function of the accumulated
input*, not of its changes. ``logic(key, vals)`` gets the key's accumulated values as
``[(val, count), ...]`` and returns ``[(out_val, count), ...]``; the output holds
``(key, out_val)`` with that count.

What ``logic`` sees
===================

* Only values with a **positive** accumulated count, each once, with its count. Inside loops
  (and with inputs that retract more than they inserted) a value can transiently accumulate to
  a negative count; such values are left out, as are zero counts. A key with no positive value
  is absent: ``logic`` is not called for it and its output is empty.
* Sorted by value when the values are mutually comparable with ``<``, otherwise by deltaflow's
  deterministic universal order (numbers, then strings, bytes, tuples, ...; see
  :mod:`deltaflow.framework.trace.order`).
* ``count`` and ``threshold`` use an internal variant that sees every non-zero count,
  negative ones included, because their contract is about the key's total.

How it is computed
==================

The input is an *arrangement by key*: a stream of sealed batches (and a shared
:class:`~deltaflow.framework.trace.spine.Spine`, which this operator does not read). A
:class:`ReduceOperator` remembers, per key, the times of the new updates (*seeds*). When the
input frontier advances to ``upper`` it corrects every key that has seeds or *pending* times:

1. ``ready, deferred = interesting_times(seeds + pending, stored times, upper)``: the
   times at which the key's output may change (joins of subsets of its times that contain a
   seed, see :mod:`.interesting_times`), split into those the frontier has passed and those it
   has not. The stored times are those of the key's input history *and* of its output
   history: both are compacted, and compaction may cancel input updates (at two rounds that
   advance to one time) that the output has not caught up with yet, where a correction is
   still owed. Only the output history then shows where the key changed.
2. For each ready time ``t``, in a linear extension of the partial order: the input
   accumulated at ``t`` (from its input history), ``desired = logic(key, vals)``, the output
   accumulated at ``t`` (from the operator's own output history plus the corrections made
   earlier in this round at times ``<= t``); the difference is emitted at ``t``.
3. ``deferred`` becomes the key's pending times (*resumption tokens*), every one of them
   until the frontier passes it. They must be kept even when nothing else records them:
   with updates at incomparable times ``a`` and ``b``, ``logic`` may output nothing at ``a``
   and at ``b`` and something at ``join(a, b)``; no stored output witnesses that debt.

**Its input and its own output** the operator keeps in memory, in two
:class:`KeyedHistory` indexes ``{key: [(val, time, diff)]}``: every update of every batch it
receives, and everything it has sent. Appending there costs a list append and reading a key a
dict lookup, where reading the input trace cost a search per batch per round (and a private
output trace a batch build and merges too). Each key's list is compacted (times advanced to the
previous frontier, equal updates consolidated) when it grows beyond :data:`.history.COMPACT_WRITTEN`
updates, and all of them when the total has grown enough since the last such pass (keys that
cancel disappear), so both stay proportional to the live collections. An arrangement made for
this operator alone then has no trace reader, and keeps no trace at all (see
:mod:`.arrange`). An output trace is kept only when someone else reads it
(:func:`reduce_core` with ``arrange_output=True``); the round's corrections are then inserted
into it as one batch (a round without corrections inserts nothing, so that trace's ``upper``
may lag the frontier).

The corrections are sent downstream as update batches of ``(key, out_val)``, one per time.
Then the operator moves the logical compaction of the traces it holds (the output trace, and
the input trace on the int path) to ``upper``: from now on it only needs accumulations at
times beyond ``upper``, so older times may be advanced (``advance_by``) and history cancel.
That keeps each key's history, and so the per-key work, bounded in long runs and in loops. It
holds no physical compaction: it never reads batches separately.

Capabilities: the operator holds one at the time of each message it has not yet processed and
one at each minimal pending time, and nothing else. When nothing is pending it holds nothing
(a loop whose reduce held a capability for no work would never finish).

**Keys whose times lie on one line** (the common case inside ``iterate``: every new and
pending time of the key is ``Product(x, _)`` for the round ``x`` being computed, with an int
inner coordinate, and every stored input time has an outer coordinate ``<= x``) take a fast
path. Their interesting times form a chain ordered by the inner coordinate (see
:mod:`.interesting_times`), so one sweep in inner order accumulates input and output together
and calls ``logic`` only where either changed; the usual single new time with all history
below it is one accumulation and one ``logic`` call, no sorting, no ``Product`` built except
for the times that get corrections. Keys off a line take the general search. Checking costs one
pass over the key's times. On the W4 BFS load (100k nodes, all at outer time 0) the operator
went from about 7 s of CPU time to under 2 s with this and the output index (most of what is
left is reading the input trace).
``interesting_times.LINE_FAST_PATH = False`` switches it off (tests compare both paths).

**Keys whose times lie on one row** (every new time of the key is ``Product(_, y)`` for one
iteration ``y`` and its history lies at iterations ``<= y``: the shape of a static run, where
each iteration of the loop brings new times from many rounds at once) take the same sweep
along the row, ordered by the outer coordinate. For ``distinct`` and ``threshold`` (values
all ``()``, output count a function of the input count) the keys of an activation whose row
the frontier has passed entirely are corrected together, as numpy columns
(:mod:`.row_counts`). On W2's static run the two together made the whole run about 1.3x
faster (timed, alternating runs) and cost 1.39x fewer instructions.

**Reductions by self that only count** (``distinct``, ``threshold``: every input value is
``()``, the output is ``()`` with a count that depends on the key's input count alone) hand
the operator that function too (``by_count``). On ``Product(int, int)`` lines and small sets
of pairs it accumulates plain ints, input and output, instead of ``{val: count}`` dicts and a
``logic`` call: W2's ``distinct`` inside ``iterate`` got about 1.1x faster in interactive
rounds and 1.15x in one static run. For a key with a single new (or pending) position on
a line, such a reduction also knows, from the stored input and output alone, where its output
would be wrong as things stand; it keeps the key pending only at the first such position, or
not at all. Inside a loop this matters most for new input the frontier has not passed yet (a
join answers for several iterations at once): a key whose output stays right there is done at
once, instead of holding the loop back one iteration at a time until the frontier reaches it
(W2 interactive: 1.04x fewer instructions). With several new positions (the chain sweep)
every one the frontier has not passed stays pending: one of them may carry input that
cancels an older round's on this line, where the output has not caught up, and nothing
else would remember it.

**Totally ordered times** (``int``) take a faster path still, like a ``count_total``: there the
interesting times of a key are just the times of its new updates, so the operator keeps each
key's accumulated input and output at the frontier in two dicts and sweeps the key's new
updates in time order: no trace lookups, no interesting-times search, no input history. On
the W1 count workload the operator alone is about three times faster this way, the whole
dataflow about 1.5x. (With ``total_order=False`` int times go
through the general path, where they are one line.)

Footguns
========

* ``logic`` must be a function of ``(key, vals)`` only: it is called at many times, in any
  order compatible with the partial order, and possibly again at a time it already saw.
* Counts returned by ``logic`` must be ``int``; returning a value twice adds its counts.
* Per-key work is proportional to the key's (compacted) history and interesting times: one
  key with a huge history is evaluated in one piece (the operator does not yield inside a
  round).
* The int fast path keeps every key's live values in a dict besides the trace (about as much
  memory again as the compacted input trace); the general path keeps its input and output
  histories in dicts of lists (Python objects, more memory per update than a columnar trace).

    >>> from deltaflow.testing import example
    >>> example(lambda xs: count(xs), xs=[(("a", 1), 0, 1), (("a", 2), 0, 1), (("a", 1), 2, -1)])
    [(('a', 2), 0, 1), (('a', 1), 2, 1), (('a', 2), 2, -1)]
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import OperatorTypeError
from ..framework.antichain import Antichain
from ..framework.lattice import Product, less_equal, new_tuple
from ..framework.trace.batch import Batch
from ..framework.trace.description import Description
from ..framework.trace.order import ukey
from ..framework.trace.spine import Spine, TraceReader
from . import history as _history, interesting_times as _it
from .arrange import TraceRegistry
from .base import Interest, Operator, UpdateBatch, check_function, describe_callable
from .dataflow import NodeTraits
from .history import AdvanceTo, KeyedHistory
from .interesting_times import (
    accumulate,
    interesting_on_line,
    interesting_pairs_small,
    interesting_times,
    line_bound,
    row_bound,
    sweep_to,
)
from .row_counts import ROW_BATCH_MIN, RowCounts, on_row
from .values import as_count, check_ordered, find_incomparable

if TYPE_CHECKING:
    from ..framework.lattice import Time
    from .base import Capability, OperatorContext
    from .collection import Arranged, Collection

__all__ = [
    "Logic",
    "ReduceOperator",
    "count",
    "distinct",
    "max",
    "min",
    "reduce",
    "reduce_core",
    "threshold",
    "top_k",
]

Logic = Callable[[Any, list[tuple[Any, int]]], Iterable[tuple[Any, int]]]
"""``logic(key, [(val, count), ...]) -> [(out_val, count), ...]``."""

ByCount = Callable[[Any, int], int]
"""``by_count(key, n) -> count``: a reduction by self's output count from its input count."""

_first = itemgetter(0)
_time_of = itemgetter(1)
_UNKNOWN: Any = object()


def _least(times: list[Any]) -> Any:
    """The smallest of a non-empty list of ints (the builtin is shadowed by :func:`min`)."""
    low = times[0]
    for t in times:
        if t < low:
            low = t
    return low


def _positions(rows: list[tuple[Any, Any, int]], x: Any) -> list[tuple[int, Any, int]]:
    """``(position, val, diff)`` of the updates of ``rows`` at or below line ``x`` (``None``:
    int times, the position is the time)."""
    if x is None:
        return [(t, v, d) for v, t, d in rows]
    if x.__class__ is int:  # Products are pairs: indexing is the cheapest way in
        return [(t[1], v, d) for v, t, d in rows if t[0] <= x]
    return [(t.inner, v, d) for v, t, d in rows if less_equal(t.outer, x)]


def _accumulate_at(rows: list[tuple[Any, Any, int]], x: Any, y: int) -> dict[Any, int]:
    """The accumulation of ``rows`` at position ``y`` of line ``x`` (``None``: at int time
    ``y``), zero counts dropped."""
    acc: dict[Any, int] = {}
    get = acc.get
    if x is None:
        for v, t, d in rows:
            if t <= y:
                acc[v] = get(v, 0) + d
    elif x.__class__ is int:
        for v, t, d in rows:
            if t[1] <= y and t[0] <= x:
                acc[v] = get(v, 0) + d
    else:
        for v, t, d in rows:
            if t.inner <= y and less_equal(t.outer, x):
                acc[v] = get(v, 0) + d
    return _without_zeros(acc)


def _total_at(rows: list[tuple[Any, Any, int]], x: int, y: int) -> int:
    """The sum of the diffs of ``(val, Product(int, int), diff)`` rows at or below ``(x, y)``."""
    n = 0
    for _, t, d in rows:
        if t[0] <= x and t[1] <= y:
            n += d
    return n


def _count_pairs(
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
        n = _total_at(outs, x, y)
        for mx, my, c in counted:
            if mx <= x and my <= y:
                n += c
        c = by_count(key, _total_at(ins, x, y)) - n
        if c:
            counted.append((x, y, c))
            _add_row(corrections, new_tuple(Product, (x, y)), key, (), c)


def _count_debt(
    by_count: ByCount,
    key: Any,
    x: int,
    low: int,
    n: int,
    want: int,
    above: dict[int, int],
    written: list[tuple[Any, Any, int]] | None,
) -> tuple[int, int | None]:
    """A counting reduction's output count at ``low`` on line ``x``, and the lowest position
    above ``low`` where its output would be wrong with the input and output known now (None
    if it is right everywhere above), once the output at ``low`` is corrected to ``want``.

    ``n`` is the input count at ``low``; ``above`` sums the stored input updates above
    ``low`` per position; ``written`` is the output history (read once for both
    answers). Both counts only change at the positions of those updates, so checking there
    checks every position of the line above ``low``. O(h log h) for h updates.
    """
    out = 0
    later: dict[int, int] | None = None  # the output updates above ``low``, per position
    if written:
        for _, t, d in written:
            if t[0] <= x:
                y = t[1]
                if y <= low:
                    out += d
                elif later is None:
                    later = {y: d}
                else:
                    later[y] = later.get(y, 0) + d
    at_low = out
    out = want
    if later is None:  # the usual case: only the input changes above ``low``
        for y in sorted(above) if len(above) > 1 else above:
            dn = above[y]
            if dn:
                n += dn
                if by_count(key, n) != out:
                    return at_low, y
        return at_low, None
    for y in sorted(above.keys() | later.keys()):
        n += above.get(y, 0)
        out += later.get(y, 0)
        if by_count(key, n) != out:
            return at_low, y
    return at_low, None


def _count_beyond(
    by_count: ByCount,
    key: Any,
    x: int,
    low: int,
    n: int,
    above: dict[int, int] | None,
    written: list[tuple[Any, Any, int]] | None,
) -> int | None:
    """The lowest position at or above ``low`` on line ``x`` where a counting reduction's
    output would be wrong with the input and output known now, or None if it is right at
    every one (``n`` is the input count at ``low``; see :func:`_count_debt`).

    For a key whose lowest new time the frontier has not passed yet: it cannot be corrected
    yet, and needs to be evaluated again only where something is wrong.
    """
    want = by_count(key, n)
    out, debt = _count_debt(by_count, key, x, low, n, want, above or {}, written)
    return debt if out == want else low


def _count_chain(
    by_count: ByCount,
    key: Any,
    x: Any,
    row: int | None,
    ready: list[int],
    inputs: list[tuple[int, Any, int]],
    outputs: list[tuple[int, Any, int]],
    fixes: dict[Any, list[tuple[Any, Any, int]]],
) -> None:
    """:meth:`ReduceOperator._sweep_line`'s sweep for a counting reduction: ``inputs`` and
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
            _add_row(fixes, at, key, (), fix)
            out += fix


def _changed_positions(rows: list[tuple[int, Any, int]], above: int | None) -> list[int]:
    """The positions of ``(position, val, diff)`` rows (above ``above``, if not None) where
    some value's diffs do not cancel."""
    sums: dict[tuple[int, Any], int] = {}
    for y, v, d in rows:
        if above is None or y > above:
            k = (y, v)
            sums[k] = sums.get(k, 0) + d
    return [y for (y, _), d in sums.items() if d]


def _stored_times(
    history: list[tuple[Any, Any, int]], output_history: list[tuple[Any, Any, int]] | None
) -> list[Any]:
    """The times of a key's input and output histories: where its output may need correcting
    once a seed below them changes it (the output's own times, because compaction may cancel
    input updates the output has not caught up with yet)."""
    times = [t for _, t, _ in history]
    if output_history:
        times.extend([t for _, t, _ in output_history])
    return times


def _without_zeros(acc: dict[Any, int]) -> dict[Any, int]:
    """``acc`` without its zero counts (``acc`` itself when it has none)."""
    if 0 in acc.values():
        return {v: c for v, c in acc.items() if c}
    return acc


def _universal_first(pair: tuple[Any, int]) -> Any:
    return ukey(pair[0])


def _sorted_vals(acc: dict[Any, int], positive_only: bool) -> list[tuple[Any, int]]:
    """The accumulation as ``[(val, count)]`` sorted by val (zero counts are never stored)."""
    if positive_only:
        vals = [item for item in acc.items() if item[1] > 0]
    else:
        vals = list(acc.items())
    if len(vals) > 1:
        try:
            vals.sort(key=_first)
        except TypeError:
            vals.sort(key=_universal_first)
    return vals


def _pair_bounds(upper: Antichain) -> list[tuple[int, int]] | None:
    """``upper``'s elements as int pairs, or None when they are not all ``Product(int, int)``."""
    out = []
    for u in upper.elements:
        if u.__class__ is not Product:
            return None
        if u.outer.__class__ is not int or u.inner.__class__ is not int:
            return None
        out.append((u.outer, u.inner))
    return out


def _difference(desired: dict[Any, int], current: dict[Any, int]) -> dict[Any, int]:
    """``desired - current`` as ``{val: diff}``, zeros left out."""
    fix = {v: c - current.get(v, 0) for v, c in desired.items() if c != current.get(v, 0)}
    for v, c in current.items():
        if v not in desired:
            fix[v] = -c
    return fix


def _accumulate_pairs(rows: list[tuple[Any, Any, int]], x: int, y: int) -> dict[Any, int]:
    """The accumulation at ``Product(x, y)`` of ``(val, Product(int, int), diff)`` rows."""
    acc: dict[Any, int] = {}
    for v, t, d in rows:
        if t[0] <= x and t[1] <= y:
            c = acc.get(v, 0) + d
            if c:
                acc[v] = c
            else:
                del acc[v]
    return acc


def _add_into(acc: dict[Any, int], changes: dict[Any, int]) -> None:
    """Add ``{val: diff}`` into the accumulation ``acc`` (zero counts dropped)."""
    for v, d in changes.items():
        c = acc.get(v, 0) + d
        if c:
            acc[v] = c
        else:
            del acc[v]


def _add_row(
    fixes: dict[Any, list[tuple[Any, Any, int]]], time: Any, key: Any, val: Any, diff: int
) -> None:
    """Append ``key``'s correction ``(val, diff)`` at ``time``."""
    rows = fixes.get(time)
    if rows is None:
        fixes[time] = [(key, val, diff)]
    else:
        rows.append((key, val, diff))


def _add_rows(
    fixes: dict[Any, list[tuple[Any, Any, int]]], time: Any, key: Any, fix: dict[Any, int]
) -> None:
    """Append ``key``'s ``{val: diff}`` corrections at ``time``."""
    rows = fixes.get(time)
    if rows is None:
        rows = fixes[time] = []
    rows.extend([(key, v, d) for v, d in fix.items()])


def _record(
    fixes: dict[Any, list[tuple[Any, Any, int]]],
    time: Any,
    key: Any,
    desired: dict[Any, int],
    current: dict[Any, int],
) -> None:
    """Append the corrections turning ``current`` into ``desired`` at ``time``."""
    _add_rows(fixes, time, key, _difference(desired, current))


class ReduceOperator(Operator):
    """Maintain ``output = logic(input)`` per key over an arrangement by key (module docstring).

    Args:
        name: the operator's name, shown in errors (include the user function).
        source: the input arrangement's spine on this worker.
        output: this operator's output spine (empty, starting where ``source`` starts), or
            ``None`` when nobody else reads it: then no output trace is kept at all (the
            operator reads its own output from its in-memory index, see the module docstring).
        logic: ``logic(key, vals) -> [(out_val, count), ...]``.
        positive_only: hand ``logic`` only values with a positive count (the public
            contract); ``False`` hands it every non-zero count.
        key_only: send ``key`` instead of ``(key, out_val)`` downstream (arrangements by self:
            ``distinct``, ``threshold``). The output spine always holds ``(key, out_val)``.
        total_order: use the fast path for ``int`` times (``None``: whenever times are ints).
        by_count: for reductions over an arrangement by self (every value is ``()``) whose
            output is the single value ``()``: its count as a function of the key and the
            key's input count, ``by_count(key, n)`` (``distinct``, ``threshold``). The paths
            for ``Product(int, int)`` times then accumulate plain ints instead of
            ``{val: count}`` dicts; ``logic`` must agree with it (the other paths call it).
    """

    interest = Interest.ALWAYS

    def __init__(
        self,
        name: str,
        source: Spine,
        output: Spine | None,
        logic: Logic,
        *,
        positive_only: bool = True,
        key_only: bool = False,
        total_order: bool | None = None,
        by_count: ByCount | None = None,
    ) -> None:
        self.name = name
        self.logic = logic
        self.positive_only = positive_only
        self.key_only = key_only
        # The built-in reductions' answer straight from the accumulation (see _FOLDS).
        builtin = _FOLDS.get(logic)
        self.fold = builtin[0] if builtin and builtin[1] == positive_only else None
        self.by_count = by_count
        self.source = source
        self.upper: Antichain = source.lower
        ints = all(t.__class__ is int for t in source.lower)
        self.total = ints if total_order is None else (total_order and ints)
        if output is not None and output.upper != source.lower:
            msg = f"{name}: the output spine must start at {source.lower!r}, not {output.upper!r}"
            raise ValueError(msg)
        self.output = output
        # Neither path reads the input trace (``inputs`` and ``accs`` hold what they need), so
        # the operator holds no reader on it: a trace nobody else reads is not kept at all.
        self.readers: list[TraceReader] = []
        if output is not None:
            self.readers.append(output.reader())
        # Partial orders: new update times per key, and pending (deferred) times per key and
        # per time (to find the keys whose pending times the frontier has passed).
        self.seeds: dict[Any, list[Time]] = {}
        self.pending: dict[Any, list[Time]] = {}
        self.pending_keys: dict[Time, set[Any]] = {}
        # Partial orders: every input update received and every (val, time, diff) this
        # operator has output, per key (see KeyedHistory).
        self.inputs = KeyedHistory(unit=by_count is not None)
        self.outputs = KeyedHistory(unit=by_count is not None)
        # Totally ordered times: each key's unapplied updates and its accumulations so far.
        self.buffered: dict[Any, list[tuple[Any, int, int]]] = {}
        self.accs: dict[Any, dict[Any, int]] = {}
        self.outs: dict[Any, dict[Any, int]] = {}
        self.buffered_low: int | None = None
        # Times of messages received but not yet processed.
        self.unprocessed: set[Time] = set()
        self.caps: list[Capability] = []

    # ------------------------------------------------------------------ activation

    def schedule(self, ctx: OperatorContext) -> None:
        """Take in new batches; when the frontier moved, correct the output up to it."""
        messages = ctx.messages(0)
        if messages:
            self._receive(messages)
        frontier = ctx.frontier(0)
        if frontier != self.upper:
            if self.total:
                corrections = self._process_total(frontier)
            else:
                corrections = self._process_partial(frontier)
            self._emit(ctx, frontier, corrections)
        self._hold(ctx)

    def _receive(self, messages: list[tuple[Time, Any]]) -> None:
        unprocessed = self.unprocessed
        if self.total:
            buffered = self.buffered
            for time, batch in messages:
                unprocessed.add(time)
                for key, val, t, diff in batch.updates():
                    rows = buffered.get(key)
                    if rows is None:
                        buffered[key] = [(val, t, diff)]
                    else:
                        rows.append((val, t, diff))
        else:
            seeds = self.seeds
            store = self.inputs.extend_noting_times
            for time, batch in messages:
                unprocessed.add(time)
                store(batch.updates(), seeds)

    # ------------------------------------------------------------------ evaluation

    def _evaluate(self, key: Any, acc: dict[Any, int]) -> dict[Any, int]:
        """``logic`` at one accumulation, consolidated into ``{out_val: count}``."""
        fold = self.fold
        if fold is not None:
            folded = fold(acc)
            if folded is not None:
                return folded
        vals = _sorted_vals(acc, self.positive_only)
        if not vals:
            return {}
        result = self.logic(key, vals)
        out: dict[Any, int] = {}
        try:
            for out_val, n in result:
                if n.__class__ is not int:
                    r = as_count(n)  # numpy integers count, as they do in inputs
                    if r is None:
                        raise TypeError
                    n = r
                c = out.get(out_val, 0) + n
                if c:
                    out[out_val] = c
                else:
                    out.pop(out_val, None)
        except (TypeError, ValueError) as exc:
            why = f" ({exc})" if str(exc) else ""  # unhashable value, not a pair...
            msg = (
                f"{self.name}: logic must return [(value, int count), ...]; for key {key!r} "
                f"it returned {result!r}{why}"
            )
            raise TypeError(msg) from None
        return out

    def _correction(self, key: Any, acc: dict[Any, int], current: dict[Any, int]) -> dict[Any, int]:
        """``logic``'s output at input ``acc`` minus the output ``current`` there (empty: none)."""
        desired = self._evaluate(key, acc)
        return {} if desired == current else _difference(desired, current)

    def _process_total(self, upper: Antichain) -> dict[Time, list[tuple[Any, Any, int]]]:
        """The int-time sweep: apply each key's buffered updates below ``upper`` in order.

        Runtime complexity: per key, O(u log u) for its u new updates plus one ``logic`` call
        (and a sort of its live values) per distinct new time.
        """
        bound: Any = upper.elements[0] if upper.elements else None
        buffered, self.buffered = self.buffered, {}
        accs = self.accs
        outs = self.outs
        evaluate = self._evaluate
        corrections: dict[Time, list[tuple[Any, Any, int]]] = {}
        low: int | None = None
        for key, rows in buffered.items():
            if len(rows) > 1:
                rows.sort(key=_time_of)
            acc = accs.get(key)
            if acc is None:
                acc = {}
            n = len(rows)
            i = 0
            changed = False
            out = outs.get(key)
            while i < n:
                t = rows[i][1]
                if bound is not None and t >= bound:
                    self.buffered[key] = rows[i:]
                    if low is None or t < low:
                        low = t
                    break
                while i < n:
                    val, ut, diff = rows[i]
                    if ut != t:
                        break
                    c = acc.get(val, 0) + diff
                    if c:
                        acc[val] = c
                    else:
                        del acc[val]
                    i += 1
                desired = evaluate(key, acc)
                current = out if out is not None else {}
                if desired != current:
                    _record(corrections, t, key, desired, current)
                    out = desired
                    changed = True
            if acc:
                accs[key] = acc
            else:
                accs.pop(key, None)
            if changed:
                if out:
                    outs[key] = out
                else:
                    outs.pop(key, None)
        self.buffered_low = low
        return corrections

    def _process_partial(self, upper: Antichain) -> dict[Time, list[tuple[Any, Any, int]]]:
        """Interesting times per key, evaluated in order against the input trace and the
        operator's own output history.

        Keys whose times lie on one line (module docstring) take :meth:`_line`, those on one
        row :meth:`_pair_row` (a counting reduction's, when the activation has many keys, all
        together: :mod:`.row_counts`); the others the general interesting-times search and
        accumulation (:meth:`_general`).

        Runtime complexity: per key, the interesting-times search and the accumulation over
        its compacted input and output histories, one ``logic`` call per ready time (on a
        line: per ready time where the input or output changed), and for keys off a line
        O(r^2) comparisons of the r ready times with this round's earlier corrections.
        """
        seeds, self.seeds = self.seeds, {}
        pending = self.pending
        pending_keys = self.pending_keys
        if pending_keys:
            for t in [t for t in pending_keys if not upper.less_equal(t)]:
                for key in pending_keys.pop(t):
                    if key not in seeds:
                        seeds[key] = []
        if not seeds:
            return {}
        # Each key's input and output history, compacted to the previous frontier (every
        # time still to be read is beyond it) when long (see KeyedHistory.read).
        inputs = self.inputs
        outputs = self.outputs
        input_rows = inputs.rows
        output_rows = outputs.rows
        long = _history.COMPACT_WRITTEN
        advance = AdvanceTo(self.upper.elements)
        no_rows: list[tuple[Any, Time, int]] = []
        corrections: dict[Time, list[tuple[Any, Any, int]]] = {}
        # Corrections of keys on a line, by (outer, inner); made into times once at the end.
        line_fixes: dict[tuple[Any, int], list[tuple[Any, Any, int]]] = {}
        bounds: dict[Any, int | None] = {}
        int_bound = None
        if upper.elements and upper.elements[0].__class__ is int:
            int_bound = upper.elements[0]
        on_line = self._line
        on_pair_line = self._pair_line
        on_pair_row = self._pair_row
        row_bounds: dict[int, int | None] = {}
        by_count = self.by_count
        row_batch = RowCounts() if by_count is not None and len(seeds) >= ROW_BATCH_MIN else None
        lines = _it.LINE_FAST_PATH
        pairs_small = _it.PAIRS_SMALL
        pair_bounds: list[tuple[int, int]] | None = None
        for key, times in seeds.items():
            if pending:
                owed = pending.pop(key, None)
                if owed is not None:
                    for t in owed:
                        keys = pending_keys.get(t)
                        if keys is not None:
                            keys.discard(key)
                            if not keys:
                                del pending_keys[t]
                    times.extend(owed)
            history = input_rows.get(key, no_rows)
            if len(history) > long:
                history = inputs.compacted(key, history, advance)
            written = output_rows.get(key)
            if written is not None and len(written) > long:
                written = outputs.compacted(key, written, advance)
            first = times[0]
            if lines:
                if first.__class__ is int:
                    on_line(key, None, times, history, written, int_bound, corrections)
                    continue
                if first.__class__ is Product and first[1].__class__ is int:
                    x = first[0]
                    bound = bounds.get(x, _UNKNOWN)
                    if bound is _UNKNOWN:
                        bound = bounds[x] = line_bound(upper, x)
                    line = on_pair_line if x.__class__ is int else on_line
                    if line(key, x, times, history, written, bound, line_fixes):
                        continue
                    if x.__class__ is int:
                        y = first[1]
                        if on_row(y, times, history):
                            row = row_bounds.get(y, _UNKNOWN)
                            if row is _UNKNOWN:
                                row = row_bounds[y] = row_bound(upper, y)
                            if row is None and row_batch is not None:
                                row_batch.add(key, y, times, history, written)
                            else:
                                on_pair_row(key, y, times, history, written, row, line_fixes)
                            continue
                    if x.__class__ is int and len(times) + len(history) <= pairs_small:
                        if pair_bounds is None:
                            pair_bounds = _pair_bounds(upper)
                        if pair_bounds is not None:
                            self._pairs(key, times, history, written, pair_bounds, corrections)
                            continue
            self._general(key, times, history, written or no_rows, upper, corrections)
        if row_batch is not None and len(row_batch):
            assert by_count is not None
            columns = _distinct_columns if by_count is _distinct_by_count else None
            if not row_batch.correct(by_count, line_fixes, columns):
                for key, y, times, history, written in row_batch.queued():
                    on_pair_row(key, y, times, history, written, None, line_fixes)
        for (x, y), rows in line_fixes.items():
            t = new_tuple(Product, (x, y))
            fix = corrections.get(t)
            if fix is None:
                corrections[t] = rows
            else:
                fix.extend(rows)
        record = outputs.extend_at
        for t, rows in corrections.items():
            record(t, rows)
        return corrections

    def _defer(self, key: Any, deferred: list[Time]) -> None:
        """Record ``deferred`` as the key's pending times (none were pending for it)."""
        self.pending[key] = deferred
        pending_keys = self.pending_keys
        for t in deferred:
            keys = pending_keys.get(t)
            if keys is None:
                pending_keys[t] = {key}
            else:
                keys.add(key)

    def _line(
        self,
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
        positions are the times); an int ``x`` takes :meth:`_pair_line`. On a line: every one
        of ``times`` (new and pending) is ``Product(x, _)`` and every stored input time has an
        outer coordinate ``<= x`` (module docstring); positions are inner coordinates.
        ``bound`` is the first position beyond the frontier (``None``: none is). Corrections
        go to ``fixes[position]`` for ints and ``fixes[(x, position)]`` on a line.

        The usual case inside a loop, a single new position with every stored update at or
        below it, is answered with one accumulation and one ``logic`` call, without sorting.
        """
        # The seeds' lowest and highest positions, and whether a stored position is above the
        # lowest (then it is interesting too).
        above = False
        if x is None:
            low = high = times[0]
            for y in times:
                if y < low:
                    low = y
                elif y > high:
                    high = y
            for _, r, _ in history:
                if r > low:
                    above = True
                    break
        else:
            low = high = times[0].inner
            for t in times:
                if t.outer != x:
                    return False
                y = t.inner
                if y < low:
                    low = y
                elif y > high:
                    high = y
            for _, r, _ in history:
                if not less_equal(r.outer, x):
                    return False
                if r.inner > low:
                    above = True
        if not above and written:
            above = any(y > low for y, _, _ in _positions(written, x))
        if above or low != high:
            if x is None:
                ys = times
                inputs = [(t, v, d) for v, t, d in history]
            else:
                ys = [t.inner for t in times]
                inputs = [(t.inner, v, d) for v, t, d in history]
            stored = [y for y, _, _ in inputs]
            outputs = _positions(written, x) if written else []
            self._sweep_line(key, x, ys, stored, inputs, outputs, bound, fixes)
            return True
        # One ready position, ``low``, and every stored update at or below it.
        if bound is not None and low >= bound:
            self._defer(key, [low if x is None else Product(x, low)])
            return True
        if len(history) == 1:
            v, _, d = history[0]
            acc = {v: d}
        else:
            acc = {}
            for v, _, d in history:
                acc[v] = acc.get(v, 0) + d
            acc = _without_zeros(acc)
        current = _accumulate_at(written, x, low) if written else {}
        desired = self._evaluate(key, acc)
        if desired != current:
            _record(fixes, low if x is None else (x, low), key, desired, current)
        return True

    def _pair_line(
        self,
        key: Any,
        x: int,
        times: list[Any],
        history: list[tuple[Any, Any, int]],
        written: list[tuple[Any, Any, int]] | None,
        bound: int | None,
        fixes: dict[Any, list[tuple[Any, Any, int]]],
    ) -> bool:
        """:meth:`_line` for ``Product(int, int)`` times (a loop's rounds and iterations).

        Besides the case of every stored update at or below the single new position ``low``,
        this one answers with one accumulation and one ``logic`` call when the positions above
        ``low`` where the input or the output changed are all beyond the frontier: they are
        deferred, each to be evaluated once the frontier passes it. The input history is
        scanned once: the accumulation at ``low`` and the positions above it together.
        Products are pairs and are read by index.
        """
        low = high = times[0][1]
        if len(times) > 1:  # (one time is on line ``x``: it is where ``x`` came from)
            for t in times:
                if t[0] != x:
                    return False
                y = t[1]
                if y < low:
                    low = y
                elif y > high:
                    high = y
        by_count = self.by_count
        acc: dict[Any, int] = {}
        n = 0  # the input count at ``low``, for a counting reduction (every val ``()``)
        # The updates above ``low`` summed per (position, val), or per position for a
        # counting reduction: only positions where the input changes on the line are
        # interesting. Updates that cancel there (once at an earlier round, once at a later
        # one; compaction has not met them yet) are not.
        above: dict[Any, int] | None = None
        if by_count is not None:
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
            changes = None  # listed only for the sweep
            next_above = None
            if above:
                for ry, d in above.items():
                    if d and (next_above is None or ry < next_above):
                        next_above = ry
        else:
            get = acc.get
            for v, r, d in history:
                if r[0] > x:
                    return False
                ry = r[1]
                if ry <= low:
                    acc[v] = get(v, 0) + d
                elif above is None:
                    above = {(ry, v): d}
                else:
                    k = (ry, v)
                    above[k] = above.get(k, 0) + d
            changes = [ry for (ry, _), d in above.items() if d] if above else []
            next_above = _least(changes) if changes else None
        # Where the output changed above ``low`` counts as where the input did (see
        # :meth:`_sweep_line`).
        written_above = _changed_positions(_positions(written, x), low) if written else []
        if written_above:
            lowest = _least(written_above)
            if next_above is None or lowest < next_above:
                next_above = lowest
        if low != high or (next_above is not None and (bound is None or next_above < bound)):
            if changes is None:
                changes = [ry for ry, d in above.items() if d] if above else []
            ys = [t[1] for t in times]
            inputs = [(t[1], v, d) for v, t, d in history]
            outputs = _positions(written, x) if written else []
            self._sweep_line(key, x, ys, changes, inputs, outputs, bound, fixes)
            return True
        if bound is not None and low >= bound:
            at: int | None = low
            if by_count is not None:
                # Not final yet, so not corrected yet: deferred to the first position where,
                # as things stand, the output would be wrong (none: the key is done). Input
                # that comes later at or below such a position makes its own interesting time.
                at = _count_beyond(by_count, key, x, low, n, above, written)
            if at is not None:
                self._defer(key, [new_tuple(Product, (x, at))])
            return True
        if by_count is not None:
            want = by_count(key, n)
            if next_above is None:
                fix = want - (_total_at(written, x, low) if written else 0)
                if fix:
                    _add_row(fixes, (x, low), key, (), fix)
                return True
            # Deferred only to where, as things stand, the output would still be wrong: until
            # new input comes for this key (which makes its own interesting times), nothing
            # changes there. A wrong output below the bound (where no input changes, so not
            # interesting) is left to the usual deferral.
            assert bound is not None
            out, debt = _count_debt(by_count, key, x, low, n, want, above or {}, written)
            if want != out:
                _add_row(fixes, (x, low), key, (), want - out)
            if debt is not None:
                at = debt if debt >= bound else next_above
                self._defer(key, [new_tuple(Product, (x, at))])
            return True
        acc = _without_zeros(acc)
        current = _accumulate_at(written, x, low) if written else {}
        desired = self._evaluate(key, acc)
        if desired != current:
            _record(fixes, (x, low), key, desired, current)
        if next_above is not None:
            # Every position above ``low`` where the input or the output changed is
            # interesting (the seed's join with it) and beyond the frontier: each stays
            # pending until it is evaluated.
            later = {*(changes or ()), *written_above}
            self._defer(key, [new_tuple(Product, (x, y)) for y in sorted(later)])
        return True

    def _sweep_line(
        self,
        key: Any,
        x: Any,
        seeds: list[Any],
        stored: list[int],
        inputs: list[tuple[int, Any, int]],
        outputs: list[tuple[int, Any, int]],
        bound: int | None,
        fixes: dict[Any, list[tuple[Any, Any, int]]],
        row: int | None = None,
    ) -> None:
        """Correct one key whose times form a chain, given by int positions along it.

        ``x`` is the line's outer coordinate (``None``: the times are ints, positions are the
        times themselves); with ``row`` the chain is the row ``Product(_, row)`` instead and
        positions are outer coordinates (see :meth:`_pair_row`). ``seeds`` are the positions
        of new and pending times; ``stored`` the positions of the stored input times that may
        make interesting times; ``inputs`` and ``outputs`` the key's histories as
        ``(position, val, diff)`` (only updates at or below the chain). Every correction goes
        to ``fixes[position]`` for ints, ``fixes[(x, position)]`` on a line and
        ``fixes[(position, row)]`` on a row.

        On a chain every earlier ready time is below the next, so one sweep in position order
        keeps the accumulated input and the output (stored plus this round's corrections) up
        to date; ``logic`` runs only where one of them changed since it last ran (a counting
        reduction sums ints instead of building accumulations).
        """
        # The output's positions count as well as the input's: compaction may cancel input
        # updates that the output has not caught up with, and then only the output history
        # still shows where the key changed. Every deferred position stays pending.
        changed = _changed_positions(outputs, None)
        ready, deferred = interesting_on_line(seeds, [*stored, *changed], bound)
        if deferred:
            if row is not None:
                self._defer(key, [new_tuple(Product, (y, row)) for y in deferred])
            elif x is None:
                self._defer(key, deferred)  # type: ignore[arg-type]
            else:
                self._defer(key, [new_tuple(Product, (x, y)) for y in deferred])
        if not ready:
            return
        if len(inputs) > 1:
            inputs.sort(key=_first)
        if len(outputs) > 1:
            outputs.sort(key=_first)
        by_count = self.by_count
        if by_count is not None:
            _count_chain(by_count, key, x, row, ready, inputs, outputs, fixes)
            return
        i = j = 0
        acc: dict[Any, int] = {}
        current: dict[Any, int] = {}
        evaluate = self._evaluate
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
            _record(fixes, at, key, desired, current)
            current = desired

    def _pair_row(
        self,
        key: Any,
        y: int,
        times: list[Any],
        history: list[tuple[Any, Any, int]],
        written: list[tuple[Any, Any, int]] | None,
        bound: int | None,
        fixes: dict[Any, list[tuple[Any, Any, int]]],
    ) -> None:
        """Correct one key whose ``Product(int, int)`` times lie on row ``y`` (see
        :func:`.row_counts.on_row`); ``bound`` is the row's first position beyond the frontier
        (:func:`.row_bound`, ``None``: none is).

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
        self._sweep_line(key, None, xs, stored, inputs, outputs, bound, fixes, row=y)

    def _pairs(
        self,
        key: Any,
        times: list[Any],
        history: list[tuple[Any, Any, int]],
        output_history: list[tuple[Any, Any, int]] | None,
        bounds: list[tuple[int, int]],
        corrections: dict[Time, list[tuple[Any, Any, int]]],
    ) -> None:
        """:meth:`_general` for a few ``Product(int, int)`` times, on plain int pairs.

        The interesting times come from :func:`interesting_pairs_small` and each accumulation
        compares int coordinates directly: for a handful of times and updates that is several
        times cheaper than the general search and chain-based accumulation (the static W2
        run, where each key has a few times spread over rounds and iterations, spends most
        of its time here).
        """
        # A Product is a pair: it serves as one where int pairs are asked for.
        ready, deferred = interesting_pairs_small(
            set(times), _stored_times(history, output_history), bounds
        )
        if deferred:
            self._defer(key, [new_tuple(Product, p) for p in deferred])
        if not ready:
            return
        ins = history
        outs = output_history or []
        if self.by_count is not None:
            _count_pairs(self.by_count, key, ready, ins, outs, corrections)
            return
        correct = self._correction
        made: list[tuple[int, int, dict[Any, int]]] = []
        for x, y in ready:
            acc = _accumulate_pairs(ins, x, y)
            current = _accumulate_pairs(outs, x, y)
            for mx, my, made_fix in made:
                if mx <= x and my <= y:
                    _add_into(current, made_fix)
            fix = correct(key, acc, current)
            if fix:
                made.append((x, y, fix))
                _add_rows(corrections, new_tuple(Product, (x, y)), key, fix)

    def _general(
        self,
        key: Any,
        times: list[Time],
        history: list[tuple[Any, Time, int]],
        output_history: list[tuple[Any, Time, int]],
        upper: Antichain,
        corrections: dict[Time, list[tuple[Any, Any, int]]],
    ) -> None:
        """Correct one key by the general interesting-times search (any partial order)."""
        ready, deferred = interesting_times(times, _stored_times(history, output_history), upper)
        if deferred:
            self._defer(key, deferred)
        if not ready:
            return
        if self.by_count is not None:
            first = ready[0]
            if first.__class__ is Product and first[0].__class__ is int:
                # Times of one scope share a shape: all of them are Product(int, int).
                _count_pairs(self.by_count, key, ready, history, output_history, corrections)
                return
        inputs = accumulate(history, ready)
        outputs = accumulate(output_history, ready)
        correct = self._correction
        made: list[tuple[Time, dict[Any, int]]] = []
        for t, acc, current in zip(ready, inputs, outputs):
            for tm, made_fix in made:
                if less_equal(tm, t):
                    _add_into(current, made_fix)
            fix = correct(key, acc, current)
            if fix:
                made.append((t, fix))
                _add_rows(corrections, t, key, fix)

    # ------------------------------------------------------------------ output and progress

    def _emit(
        self,
        ctx: OperatorContext,
        upper: Antichain,
        corrections: dict[Time, list[tuple[Any, Any, int]]],
    ) -> None:
        """Insert the round's corrections into the output trace, send them, move compaction.

        A round without corrections inserts nothing (an empty batch still costs a merge); the
        next batch then covers the skipped rounds too, so the output trace's ``upper`` may lag
        the operator's frontier by rounds that changed nothing.
        """
        output = self.output
        keep = output is not None
        keys: list[Any] = []
        vals: list[Any] = []
        times: list[Time] = []
        diffs: list[int] = []
        send = ctx.send
        key_only = self.key_only
        for t in sorted(corrections) if len(corrections) > 1 else corrections:
            rows = corrections[t]
            ks = [r[0] for r in rows]
            ds = [r[2] for r in rows]
            if key_only and not keep:
                send(0, t, UpdateBatch(ks, ds))
                continue
            vs = [r[1] for r in rows]
            send(0, t, UpdateBatch(ks if key_only else list(zip(ks, vs)), ds))
            if keep:
                keys.extend(ks)
                vals.extend(vs)
                times.extend([t] * len(rows))
                diffs.extend(ds)
        if output is not None and (keys or not upper):
            description = Description(output.upper, upper)
            if keys:
                output.insert(Batch.from_columns(keys, vals, times, diffs, description))
            else:
                output.insert(Batch.empty(description))
        self.upper = upper
        self.unprocessed.clear()
        frontier = upper.elements
        self.inputs.tidy(frontier)
        self.outputs.tidy(frontier)
        for reader in self.readers:
            reader.set_logical_compaction(upper)

    def _owed(self) -> list[Time]:
        """The times this operator may still send at: unprocessed messages and pending work."""
        owed = list(self.unprocessed)
        if self.total:
            if self.buffered_low is not None:
                owed.append(self.buffered_low)
        else:
            owed.extend(self.pending_keys)
        return owed

    def _hold(self, ctx: OperatorContext) -> None:
        """Hold exactly one capability per minimal owed time (none when nothing is owed)."""
        caps = self.caps
        owed = self._owed()
        want: tuple[Time, ...] | list[Time]
        if len(owed) <= 1:
            want = owed
        elif self.total:
            want = [_least(owed)]
        else:
            want = Antichain(owed).elements
        if len(want) == len(caps) == 1:
            cap = caps[0]
            if less_equal(cap.time, want[0]):  # the usual move along a loop, or none
                cap.downgrade(want[0])
                return
        elif len(want) == len(caps) and all(c.time == t for c, t in zip(caps, want)):
            return
        held = {c.time: c for c in caps}
        new = [held.pop(t) if t in held else ctx.capability(t) for t in want]
        for cap in held.values():
            cap.drop()
        self.caps = new

    def _check(self) -> None:
        """Assert the operator's invariants (capabilities cover owed work, indexes agree)."""
        owed = self._owed()
        frontier = Antichain(c.time for c in self.caps)
        assert all(frontier.less_equal(t) for t in owed), (owed, frontier)
        assert len(self.caps) == len(frontier), "held capabilities are not an antichain"
        for key, times in self.pending.items():
            assert times, key
            for t in times:
                assert key in self.pending_keys[t], (key, t)
                assert self.upper.less_equal(t), (t, self.upper)
        assert sum(map(len, self.pending_keys.values())) == sum(map(len, self.pending.values()))
        if self.output is not None:
            assert self.output.upper.dominates(self.upper), (self.output.upper, self.upper)
        for acc in (*self.accs.values(), *self.outs.values()):
            assert acc and all(acc.values())
        self.inputs.check()
        self.outputs.check()


# ---------------------------------------------------------------------- building dataflows


def reduce_core(
    arranged: Arranged,
    logic: Logic,
    *,
    name: str,
    positive_only: bool = True,
    key_only: bool = False,
    total_order: bool | None = None,
    arrange_output: bool = True,
    by_count: ByCount | None = None,
) -> tuple[Collection, TraceRegistry | None]:
    """Add a :class:`ReduceOperator` reading ``arranged``; return its output and output trace.

    The collection holds ``(key, out_val)`` (or ``key`` with ``key_only``). With
    ``arrange_output`` the registry gives the output spine of each worker, an arrangement by
    key of the same data (its ``upper`` may lag the frontier by rounds without changes);
    without it the registry is ``None`` and int-time reductions keep no output trace.
    ``by_count`` (see :class:`ReduceOperator`) needs an arrangement by self.
    """
    from .collection import Collection

    if by_count is not None and not arranged.by_self:
        msg = f"{name}: by_count needs an arrangement by self (every value ()), not by key"
        raise ValueError(msg)
    registry = TraceRegistry(name) if arrange_output else None
    source = arranged.registry

    def factory(w: int, _n: int) -> ReduceOperator:
        spine = source.spine(w)
        out = None
        if registry is not None:
            out = registry.spines[w] = Spine(spine.lower)
        return ReduceOperator(
            name,
            spine,
            out,
            logic,
            positive_only=positive_only,
            key_only=key_only,
            total_order=total_order,
            by_count=by_count,
        )

    stream = Collection(arranged.builder, arranged.node, 0, arranged.scope)
    # A reduction's output holds exact corrections: updates that cancel never leave it (a
    # loop with one on its cycle needs no other consolidation, see .iterate).
    return stream._add(name, factory, [stream], traits=NodeTraits(consolidates=True)), registry


def _build(
    arranged: Arranged,
    logic: Logic,
    name: str,
    *,
    positive_only: bool = True,
    key_only: bool = False,
    by_count: ByCount | None = None,
) -> Collection:
    """The public reductions: the output trace is not handed out, so none is kept for ints."""
    return reduce_core(
        arranged,
        logic,
        name=name,
        positive_only=positive_only,
        key_only=key_only,
        arrange_output=False,
        by_count=by_count,
    )[0]


def _distinct_fold(acc: dict[Any, int]) -> dict[Any, int] | None:
    for c in acc.values():
        if c > 0:
            return {(): 1}
    return {}


def _count_fold(acc: dict[Any, int]) -> dict[Any, int] | None:
    total = sum(acc.values())
    return {total: 1} if total > 0 else {}


def _min_fold(acc: dict[Any, int]) -> dict[Any, int] | None:
    vals = [v for v, c in acc.items() if c > 0]
    if not vals:
        return {}
    try:
        m = builtins.min(vals)
    except TypeError:  # incomparable values: logic names them
        return None
    for v in vals:
        if v != v:  # NaN: logic names the key
            return None
    return {m: 1}


def _max_fold(acc: dict[Any, int]) -> dict[Any, int] | None:
    vals = [v for v, c in acc.items() if c > 0]
    if not vals:
        return {}
    try:
        m = builtins.max(vals)
    except TypeError:
        return None
    for v in vals:
        if v != v:
            return None
    return {m: 1}


def reduce(collection: Collection, logic: Logic, name: str | None = None) -> Collection:
    """Per key of ``(key, val)`` data, ``(key, out_val)`` for each ``(out_val, n)`` of ``logic``.

    ``logic(key, vals)`` gets the key's accumulated ``[(val, count), ...]`` (positive counts
    only, sorted by val) and returns ``[(out_val, count), ...]``; it is not called for a key
    without positive values.

    >>> from deltaflow.testing import example
    >>> example(lambda xs: reduce(xs, lambda k, vs: [(len(vs), 1)]),
    ...         xs=[((1, "a"), 0, 1), ((1, "b"), 1, 1)])
    [((1, 1), 0, 1), ((1, 1), 1, -1), ((1, 2), 1, 1)]
    """
    check_function("reduce", "logic", logic, 2)
    raw: object = name
    if raw is not None and not isinstance(raw, str):
        msg = f"reduce: name must be a str or None, not {raw!r}"
        raise TypeError(msg)
    label = name or f"reduce({describe_callable(logic)})"
    return _build(collection.arrange_by_key(), logic, label)


def _count_logic(_key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    total = 0
    for _, c in vals:
        total += c
    return [(total, 1)] if total > 0 else []


def count(collection: Collection) -> Collection:
    """``(key, n)`` per key of ``(key, val)`` data: ``n`` sums the key's counts, if positive.

    >>> from deltaflow.testing import example
    >>> example(lambda xs: count(xs), xs=[(("a", 1), 0, 2), (("a", 2), 0, 1)])
    [(('a', 3), 0, 1)]
    """
    return _build(collection.arrange_by_key(), _count_logic, "count", positive_only=False)


def _distinct_logic(_key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    return [((), 1)]


def _distinct_by_count(_key: Any, n: int) -> int:
    return 1 if n > 0 else 0


def _distinct_columns(n: np.ndarray) -> np.ndarray:
    """:func:`_distinct_by_count` on a column of counts."""
    return (n > 0).astype(np.int64)


def distinct(collection: Collection) -> Collection:
    """Each datum with a positive count, once.

    >>> from deltaflow.testing import example
    >>> example(lambda xs: distinct(xs), xs=[("a", 0, 3), ("b", 0, -1)])
    [('a', 0, 1)]
    """
    return _build(
        collection.arrange_by_self(),
        _distinct_logic,
        "distinct",
        key_only=True,
        by_count=_distinct_by_count,
    )


def threshold(collection: Collection, f: Callable[[Any, int], int]) -> Collection:
    """Each datum with count ``f(datum, n)``, ``n`` its (non-zero, possibly negative) count.

    >>> from deltaflow.testing import example
    >>> example(lambda xs: threshold(xs, lambda d, n: n * n), xs=[("a", 0, 3), ("b", 0, -1)])
    [('a', 0, 9), ('b', 0, 1)]
    """
    check_function("threshold", "f", f, 2)
    label = f"threshold({describe_callable(f)})"
    logic, by_count = _threshold_functions(f, label)
    return _build(
        collection.arrange_by_self(),
        logic,
        label,
        positive_only=False,
        key_only=True,
        by_count=by_count,
    )


def _threshold_functions(f: Callable[[Any, int], int], label: str) -> tuple[Logic, ByCount]:
    """``threshold(f)``'s logic and its ``by_count`` (checking that ``f`` returns ints)."""

    def by_count(key: Any, n: int) -> int:
        if not n:
            return 0
        c = f(key, n)
        if c.__class__ is not int:
            r = as_count(c)  # numpy integers count, as they do in inputs
            if r is None:
                msg = f"{label}: f must return an int count; f({key!r}, {n}) returned {c!r}"
                raise TypeError(msg)
            return r
        return c

    def logic(key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
        return [((), by_count(key, vals[0][1]))]

    return logic, by_count


def _min_logic(key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    check_ordered("min", key, vals)
    return [(vals[0][0], 1)]


def _max_logic(key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    check_ordered("max", key, vals)
    return [(vals[-1][0], 1)]


def min(collection: Collection) -> Collection:
    """``(key, smallest val)`` per key of ``(key, val)`` data (values with positive counts).

    >>> from deltaflow.testing import example
    >>> example(lambda xs: min(xs), xs=[(("a", 3), 0, 1), (("a", 1), 1, 1)])
    [(('a', 3), 0, 1), (('a', 1), 1, 1), (('a', 3), 1, -1)]
    """
    return _build(collection.arrange_by_key(), _min_logic, "min")


def max(collection: Collection) -> Collection:
    """``(key, largest val)`` per key of ``(key, val)`` data (values with positive counts).

    >>> from deltaflow.testing import example
    >>> example(lambda xs: max(xs), xs=[(("a", 3), 0, 1), (("a", 1), 1, 1)])
    [(('a', 3), 0, 1)]
    """
    return _build(collection.arrange_by_key(), _max_logic, "max")


def top_k(collection: Collection, k: int, key: Callable[[Any], Any] | None = None) -> Collection:
    """Each key's ``k`` smallest values counting multiplicity (``ORDER BY val LIMIT k``).

    ``key`` orders values by ``key(val)`` instead (ties keep the value order). Values are
    kept with the count they contribute: a value with count 3 that straddles the limit keeps
    the part that fits.

    >>> from deltaflow.testing import example
    >>> example(lambda xs: top_k(xs, 2), xs=[(("a", 5), 0, 1), (("a", 1), 0, 1), (("a", 3), 0, 1)])
    [(('a', 1), 0, 1), (('a', 3), 0, 1)]
    """
    msg = f"top_k: k must be a non-negative int, not {k!r}"
    if k.__class__ is not int:
        raise TypeError(msg)
    if k < 0:
        raise ValueError(msg)
    if key is not None:
        check_function("top_k", "key", key, 1)
    sort_key = key

    label = "top_k" if key is None else f"top_k(key={describe_callable(key)})"

    def logic(group: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
        if sort_key is None:
            check_ordered("top_k", group, vals)
        else:
            vals = _sorted_by(label, group, vals, sort_key)
        out = []
        room = k
        for v, c in vals:
            if room <= 0:
                break
            take = c if c < room else room
            out.append((v, take))
            room -= take
        return out

    return _build(collection.arrange_by_key(), logic, label)


def _sorted_by(
    label: str, group: Any, vals: list[tuple[Any, int]], sort_key: Callable[[Any], Any]
) -> list[tuple[Any, int]]:
    """``vals`` sorted by ``sort_key`` of the value (stable), or an error naming the values
    whose sort keys do not compare or are NaN."""
    keyed = [(sort_key(v), v, c) for v, c in vals]
    try:
        keyed.sort(key=_first)
    except TypeError:
        pair = find_incomparable([k for k, _, _ in keyed])
        by_key = {id(k): v for k, v, _ in keyed}
        a, b = (by_key[id(pair[0])], by_key[id(pair[1])]) if pair else ("?", "?")
        msg = f"{label}: key {group!r} has values {a!r} and {b!r}, whose keys < cannot compare"
        raise OperatorTypeError(msg, operator=label) from None
    check_ordered(label, group, [(k, c) for k, _, c in keyed])
    return [(v, c) for _, v, c in keyed]


_FOLDS: dict[Any, tuple[Callable[[dict[Any, int]], dict[Any, int] | None], bool]] = {
    _distinct_logic: (_distinct_fold, True),
    _count_logic: (_count_fold, False),
    _min_logic: (_min_fold, True),
    _max_logic: (_max_fold, True),
}
"""The built-in logics with an equivalent fold of the accumulation ``{val: count}`` straight
to the output ``{out_val: count}`` (skipping the sorted value list and the result checks), and
the ``positive_only`` they are used with. A fold returns None to fall back on ``logic`` (values
that ``<`` cannot order)."""
