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
  :mod:`deltaflow.framework.trace._order`).
* ``count`` and ``threshold`` use an internal variant that sees every non-zero count,
  negative ones included, because their contract is about the key's total.

How it is computed
==================

The input is an *arrangement by key* (a stream of sealed trace batches plus the shared
:class:`~deltaflow.framework.trace.spine.Spine` they are inserted in). A
:class:`ReduceOperator` remembers, per key, the times of the new updates (*seeds*). When the
input frontier advances to ``upper`` it corrects every key that has seeds or *pending* times:

1. ``ready, deferred = interesting_times(seeds + pending, stored input times, upper)``: the
   times at which the key's output may change (joins of subsets of its times that contain a
   seed, see :mod:`.interesting_times`), split into those the frontier has passed and those it
   has not.
2. For each ready time ``t``, in a linear extension of the partial order: the input
   accumulated at ``t`` (from the input trace), ``desired = logic(key, vals)``, the output
   accumulated at ``t`` (from the output trace plus the corrections made earlier in this round
   at times ``<= t``); the difference is emitted at ``t``.
3. ``deferred`` becomes the key's pending times (*resumption tokens*). They must be kept even
   when nothing else records them: with updates at incomparable times ``a`` and ``b``,
   ``logic`` may output nothing at ``a`` and at ``b`` and something at ``join(a, b)``; no
   stored output witnesses that debt.

The round's corrections are sent downstream as update batches of ``(key, out_val)``, one per
time, and inserted into the operator's output trace as one batch (a round without corrections
inserts nothing, so that trace's ``upper`` may lag the frontier). Then the operator moves the
logical and physical compaction of both traces to ``upper``: from now on it only needs
accumulations at times beyond ``upper``, so the traces may advance older times (``advance_by``)
and cancel history. That keeps each key's history, and so the per-key work, bounded in long
runs and in loops. A round reads the histories of all its keys in one pass over the batches
(one vectorised search per int batch), not two binary searches per key per batch.

Capabilities: the operator holds one at the time of each message it has not yet processed and
one at each minimal pending time, and nothing else. When nothing is pending it holds nothing
(a loop whose reduce held a capability for no work would never finish).

**Totally ordered times** (``int``) take a fast path, like a ``count_total``: there the
interesting times of a key are just the times of its new updates, so the operator keeps each
key's accumulated input and output at the frontier in two dicts and sweeps the key's new
updates in time order: no trace lookups, no interesting-times search. The input trace is still
compacted for other readers; the output trace is kept only when someone can read it
(:func:`reduce_core` with ``arrange_output=True``). On the W1 count workload the operator
alone is about three times faster this way, the whole dataflow about 1.5x.

Footguns
========

* ``logic`` must be a function of ``(key, vals)`` only: it is called at many times, in any
  order compatible with the partial order, and possibly again at a time it already saw.
* Counts returned by ``logic`` must be ``int``; returning a value twice adds its counts.
* Per-key work is proportional to the key's (compacted) history and interesting times: one
  key with a huge history is evaluated in one piece (the operator does not yield inside a
  round).
* The int fast path keeps every key's live values in a dict besides the trace (about as much
  memory again as the compacted input trace).

    >>> from deltaflow.testing import example
    >>> example(lambda xs: count(xs), xs=[(("a", 1), 0, 1), (("a", 2), 0, 1), (("a", 1), 2, -1)])
    [(('a', 2), 0, 1), (('a', 1), 2, 1), (('a', 2), 2, -1)]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from numbers import Real
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from ..framework.antichain import Antichain
from ..framework.lattice import less_equal
from ..framework.trace._order import ukey
from ..framework.trace.batch import Batch
from ..framework.trace.description import Description
from ..framework.trace.spine import Spine
from .arrange import TraceRegistry
from .base import Interest, Operator, UpdateBatch, describe_callable
from .interesting_times import accumulate, interesting_times

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

_first = itemgetter(0)
_time_of = itemgetter(1)
_I64 = 2**63


def _histories(spine: Spine, keys: list[Any]) -> dict[Any, list[tuple[Any, Time, int]]]:
    """The ``(val, time, diff)`` updates of each of ``keys`` in ``spine`` (keys without any
    are absent), consolidated across batches but not sorted.

    One vectorised ``searchsorted`` per int batch answers every int key at once; other
    batches are searched per key. This is what makes a round's per-key reads cost a few
    microseconds instead of two binary searches per batch per key.

    Runtime complexity: O(b * k log n) for b batches, k keys, plus the updates found.

    >>> from deltaflow.framework.antichain import Antichain
    >>> spine = Spine(Antichain([0]))
    >>> spine.insert(Batch.from_updates([(1, 5, 0, 1), (2, 6, 0, 1)],
    ...                                 Description(Antichain([0]), Antichain([1]))))
    >>> _histories(spine, [2, 3])
    {2: [(6, 0, 1)]}
    """
    batches = [b for b in spine.batches() if len(b)]
    found: dict[Any, list[list[tuple[Any, Time, int]]]] = {}
    int_keys: Any = None
    for batch in batches:
        if batch.columnar:
            if int_keys is None:
                int_keys = [k for k in keys if k.__class__ is int and -_I64 <= k < _I64]
                query = np.array(int_keys, dtype=np.int64)
                # Other numbers (1.0, True) may equal an int key of an int batch.
                numbers = [
                    k for k in keys if k.__class__ is not int and isinstance(k, Real)
                ]
            for key in numbers:
                rows = batch.lookup(key)
                if rows:
                    found.setdefault(key, []).append(rows)
            column = batch._keys
            los = column.searchsorted(query, "left").tolist()
            his = column.searchsorted(query, "right").tolist()
            rows_of = batch._rows
            for key, lo, hi in zip(int_keys, los, his):
                if hi > lo:
                    lists = found.get(key)
                    if lists is None:
                        found[key] = [rows_of(lo, hi)]
                    else:
                        lists.append(rows_of(lo, hi))
        else:
            lookup = batch.lookup
            for key in keys:
                rows = lookup(key)
                if rows:
                    lists = found.get(key)
                    if lists is None:
                        found[key] = [rows]
                    else:
                        lists.append(rows)
    out: dict[Any, list[tuple[Any, Time, int]]] = {}
    for key, lists in found.items():
        if len(lists) == 1:
            out[key] = lists[0]
            continue
        acc: dict[tuple[Any, Time], int] = {}
        get = acc.get
        for rows in lists:
            for v, t, d in rows:
                vt = (v, t)
                acc[vt] = get(vt, 0) + d
        merged = [(v, t, d) for (v, t), d in acc.items() if d]
        if merged:
            out[key] = merged
    return out


def _least(times: list[Any]) -> Any:
    """The smallest of a non-empty list of ints (the builtin is shadowed by :func:`min`)."""
    low = times[0]
    for t in times:
        if t < low:
            low = t
    return low


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


class ReduceOperator(Operator):
    """Maintain ``output = logic(input)`` per key over an arrangement by key (module docstring).

    Args:
        name: the operator's name, shown in errors (include the user function).
        source: the input arrangement's spine on this worker.
        output: this operator's output spine (empty, starting where ``source`` starts), or
            ``None`` when nobody else reads it: the int-time fast path then keeps no output
            trace at all; the general path keeps a private one (it reads its own output).
        logic: ``logic(key, vals) -> [(out_val, count), ...]``.
        positive_only: hand ``logic`` only values with a positive count (the public
            contract); ``False`` hands it every non-zero count.
        key_only: send ``key`` instead of ``(key, out_val)`` downstream (arrangements by self:
            ``distinct``, ``threshold``). The output spine always holds ``(key, out_val)``.
        total_order: use the fast path for ``int`` times (``None``: whenever times are ints).
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
    ) -> None:
        self.name = name
        self.logic = logic
        self.positive_only = positive_only
        self.key_only = key_only
        self.source = source
        self.upper: Antichain = source.lower
        ints = all(t.__class__ is int for t in source.lower)
        self.total = ints if total_order is None else (total_order and ints)
        if output is None and not self.total:
            output = Spine(source.lower)
        if output is not None and output.upper != source.lower:
            msg = f"{name}: the output spine must start at {source.lower!r}, not {output.upper!r}"
            raise ValueError(msg)
        self.output = output
        self.readers = [source.reader()]
        if output is not None:
            self.readers.append(output.reader())
        for reader, spine in zip(self.readers, (source, output)):
            assert spine is not None
            reader.set_physical_compaction(spine.lower)
        # Partial orders: new update times per key, and pending (deferred) times per key and
        # per time (to find the keys whose pending times the frontier has passed).
        self.seeds: dict[Any, list[Time]] = {}
        self.pending: dict[Any, list[Time]] = {}
        self.pending_keys: dict[Time, set[Any]] = {}
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
            for time, batch in messages:
                unprocessed.add(time)
                for key, _val, t, _diff in batch.updates():
                    times = seeds.get(key)
                    if times is None:
                        seeds[key] = [t]
                    else:
                        times.append(t)

    # ------------------------------------------------------------------ evaluation

    def _evaluate(self, key: Any, acc: dict[Any, int]) -> dict[Any, int]:
        """``logic`` at one accumulation, consolidated into ``{out_val: count}``."""
        vals = _sorted_vals(acc, self.positive_only)
        if not vals:
            return {}
        result = self.logic(key, vals)
        out: dict[Any, int] = {}
        try:
            for out_val, n in result:
                if n.__class__ is not int:
                    raise TypeError
                c = out.get(out_val, 0) + n
                if c:
                    out[out_val] = c
                else:
                    del out[out_val]
        except (TypeError, ValueError):
            msg = (
                f"{self.name}: logic must return [(value, int count), ...]; for key {key!r} "
                f"it returned {result!r}"
            )
            raise TypeError(msg) from None
        return out

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
                    fix = corrections.get(t)
                    if fix is None:
                        fix = corrections[t] = []
                    for v, c in desired.items():
                        d = c - current.get(v, 0)
                        if d:
                            fix.append((key, v, d))
                    for v, c in current.items():
                        if v not in desired:
                            fix.append((key, v, -c))
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
        """Interesting times per key, evaluated in order against the input and output traces.

        Runtime complexity: per key, the interesting-times search and the accumulation over
        its compacted input and output histories, one ``logic`` call per ready time, and
        O(r^2) comparisons of the r ready times with this round's earlier corrections.
        """
        seeds, self.seeds = self.seeds, {}
        pending = self.pending
        pending_keys = self.pending_keys
        for t in [t for t in pending_keys if not upper.less_equal(t)]:
            for key in pending_keys.pop(t):
                if key not in seeds:
                    seeds[key] = []
        assert self.output is not None
        todo = list(seeds)
        source_histories = _histories(self.source, todo)
        output_histories = _histories(self.output, todo)
        evaluate = self._evaluate
        corrections: dict[Time, list[tuple[Any, Any, int]]] = {}
        for key, times in seeds.items():
            owed = pending.pop(key, None)
            if owed is not None:
                for t in owed:
                    keys = pending_keys.get(t)
                    if keys is not None:
                        keys.discard(key)
                        if not keys:
                            del pending_keys[t]
                times.extend(owed)
            history = source_histories.get(key, [])
            ready, deferred = interesting_times(times, [t for _, t, _ in history], upper)
            if deferred:
                pending[key] = deferred
                for t in deferred:
                    keys = pending_keys.get(t)
                    if keys is None:
                        pending_keys[t] = {key}
                    else:
                        keys.add(key)
            if not ready:
                continue
            inputs = accumulate(history, ready)
            outputs = accumulate(output_histories.get(key, []), ready)
            made: list[tuple[Time, dict[Any, int]]] = []
            for t, acc, current in zip(ready, inputs, outputs):
                for tm, fix in made:
                    if less_equal(tm, t):
                        for v, d in fix.items():
                            c = current.get(v, 0) + d
                            if c:
                                current[v] = c
                            else:
                                del current[v]
                desired = evaluate(key, acc)
                if desired == current:
                    continue
                fix = {}
                for v, c in desired.items():
                    d = c - current.get(v, 0)
                    if d:
                        fix[v] = d
                for v, c in current.items():
                    if v not in desired:
                        fix[v] = -c
                made.append((t, fix))
                rows = corrections.get(t)
                if rows is None:
                    rows = corrections[t] = []
                rows.extend([(key, v, d) for v, d in fix.items()])
        return corrections

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
        keys: list[Any] = []
        vals: list[Any] = []
        times: list[Time] = []
        diffs: list[int] = []
        send = ctx.send
        key_only = self.key_only
        for t in sorted(corrections):
            rows = corrections[t]
            ks = [r[0] for r in rows]
            vs = [r[1] for r in rows]
            ds = [r[2] for r in rows]
            keys.extend(ks)
            vals.extend(vs)
            times.extend([t] * len(rows))
            diffs.extend(ds)
            send(0, t, UpdateBatch(ks if key_only else list(zip(ks, vs)), ds))
        output = self.output
        if output is not None and (keys or not upper):
            description = Description(output.upper, upper)
            if keys:
                output.insert(Batch.from_columns(keys, vals, times, diffs, description))
            else:
                output.insert(Batch.empty(description))
        self.upper = upper
        self.unprocessed.clear()
        for reader in self.readers:
            reader.set_logical_compaction(upper)
            reader.set_physical_compaction(upper)

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
        if self.total:
            owed = self._owed()
            want: tuple[Time, ...] | list[Time] = [_least(owed)] if owed else []
        else:
            want = Antichain(self._owed()).elements
        if len(want) == len(caps) and all(c.time == t for c, t in zip(caps, want)):
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
) -> tuple[Collection, TraceRegistry | None]:
    """Add a :class:`ReduceOperator` reading ``arranged``; return its output and output trace.

    The collection holds ``(key, out_val)`` (or ``key`` with ``key_only``). With
    ``arrange_output`` the registry gives the output spine of each worker, an arrangement by
    key of the same data (its ``upper`` may lag the frontier by rounds without changes);
    without it the registry is ``None`` and int-time reductions keep no output trace.
    """
    from .collection import Collection

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
        )

    stream = Collection(arranged.builder, arranged.node, 0, arranged.scope)
    return stream._add(name, factory, [stream]), registry


def _build(
    arranged: Arranged,
    logic: Logic,
    name: str,
    *,
    positive_only: bool = True,
    key_only: bool = False,
) -> Collection:
    """The public reductions: the output trace is not handed out, so none is kept for ints."""
    return reduce_core(
        arranged,
        logic,
        name=name,
        positive_only=positive_only,
        key_only=key_only,
        arrange_output=False,
    )[0]


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


def distinct(collection: Collection) -> Collection:
    """Each datum with a positive count, once.

    >>> from deltaflow.testing import example
    >>> example(lambda xs: distinct(xs), xs=[("a", 0, 3), ("b", 0, -1)])
    [('a', 0, 1)]
    """
    return _build(collection.arrange_by_self(), _distinct_logic, "distinct", key_only=True)


def threshold(collection: Collection, f: Callable[[Any, int], int]) -> Collection:
    """Each datum with count ``f(datum, n)``, ``n`` its (non-zero, possibly negative) count.

    >>> from deltaflow.testing import example
    >>> example(lambda xs: threshold(xs, lambda d, n: n * n), xs=[("a", 0, 3), ("b", 0, -1)])
    [('a', 0, 9), ('b', 0, 1)]
    """

    def logic(key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
        return [((), f(key, vals[0][1]))]

    label = f"threshold({describe_callable(f)})"
    return _build(collection.arrange_by_self(), logic, label, positive_only=False, key_only=True)


def _min_logic(_key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    return [(vals[0][0], 1)]


def _max_logic(_key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
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


def top_k(
    collection: Collection, k: int, key: Callable[[Any], Any] | None = None
) -> Collection:
    """Each key's ``k`` smallest values counting multiplicity (``ORDER BY val LIMIT k``).

    ``key`` orders values by ``key(val)`` instead (ties keep the value order). Values are
    kept with the count they contribute: a value with count 3 that straddles the limit keeps
    the part that fits.

    >>> from deltaflow.testing import example
    >>> example(lambda xs: top_k(xs, 2), xs=[(("a", 5), 0, 1), (("a", 1), 0, 1), (("a", 3), 0, 1)])
    [(('a', 1), 0, 1), (('a', 3), 0, 1)]
    """
    if k.__class__ is not int or k < 0:
        msg = f"top_k: k must be a non-negative int, not {k!r}"
        raise ValueError(msg)
    sort_key = key

    def logic(_key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
        if sort_key is not None:
            vals = sorted(vals, key=lambda p: sort_key(p[0]))
        out = []
        room = k
        for v, c in vals:
            if room <= 0:
                break
            take = c if c < room else room
            out.append((v, take))
            room -= take
        return out

    label = "top_k" if key is None else f"top_k(key={describe_callable(key)})"
    return _build(collection.arrange_by_key(), logic, label)
