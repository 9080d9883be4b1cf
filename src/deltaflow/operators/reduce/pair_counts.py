"""Counting reductions at ``Product(int, int)`` times, a whole activation at once, in columns.

When many rounds go through a loop together (a static run), a counting reduction's (``distinct``,
``threshold``: values all ``()``, output count a function ``by_count(key, n)`` of the input
count) activations come one iteration at a time: every new update is at ``Product(x, y)`` for
one iteration ``y``, the frontier has passed that whole *row*, and everything stored lies at
iterations ``<= y``. Each key's interesting times are then on row ``y`` (joins with a new time
``(x, y)`` keep ``y``), and a row is a chain ordered by ``x``: the input and output counts at
each position are prefix sums of the key's updates sorted by ``x``, and the correction at a
position is ``f(n) - out`` there minus the same at the key's previous position (see
:class:`.counting.RowCounts`, the per-key twin of this).

:class:`PairCounts` keeps such a reduction's input and output histories as int64 columns ``(key,
x, y, diff)`` instead of the per-key lists of
:class:`~deltaflow.operators.join.history.KeyedHistory`, and corrects all the keys of an activation
with one pass of sorts and prefix sums (:meth:`PairCounts.step`): no Python step per stored
update. It holds the operator's state while activations keep that shape; the operator moves
the state back into its per-key histories (:meth:`PairCounts.into`) before any other activation
and before a checkpoint, so either path, and a checkpoint, sees one state.

    >>> from deltaflow.operators.join.history import KeyedHistory
    >>> from deltaflow.framework.time_domain import PAIR
    >>> inputs, outputs = KeyedHistory(domain=PAIR, unit=True), KeyedHistory(domain=PAIR, unit=True)
    >>> state = PairCounts.take(inputs, outputs, False)
    >>> new = np.array([7, 7, 8]), np.array([0, 2, 1]), np.array([1, -1, 1])
    >>> fixes = state.step(*new, 0, lambda key, n: int(n > 0))
    >>> sorted((t, rows) for t, rows in fixes.items())
    [(Product(outer=0, inner=0), [(7, (), 1)]), (Product(outer=1, inner=0), [(8, (), 1)]), \
(Product(outer=2, inner=0), [(7, (), -1)])]
    >>> state.into(inputs, outputs); sorted(outputs.rows[7])
    [((), Product(outer=0, inner=0), 1), ((), Product(outer=2, inner=0), -1)]
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from deltaflow.framework.lattice import Product, new_tuple
from deltaflow.framework.time_domain import PAIR
from deltaflow.framework.trace.codec import as_int64
from deltaflow.framework.trace.ints import decode_keys, key_codes

from ...framework.tuning import PAIR_COMPACT_MIN as COMPACT_MIN
from .counting import ByCount, line_fixes

if TYPE_CHECKING:
    from deltaflow.framework.lattice import Time

    from ..join.history import KeyedHistory

__all__ = ["PairCounts"]

Fixes = dict[Any, list[tuple[Any, Any, int]]]
Array = np.ndarray[Any, Any]

_EMPTY = np.zeros(0, dtype=np.int64)


@attrs.define(slots=True)
class _Columns:
    """Updates ``(key, x, y, diff)`` of unit values at ``Product(x, y)``, as int64 columns."""

    k: Array = _EMPTY
    x: Array = _EMPTY
    y: Array = _EMPTY
    d: Array = _EMPTY

    def __len__(self) -> int:
        return len(self.k)

    def append(self, k: Array, x: Array, y: Array, d: Array) -> None:
        """Add updates (columns of one length)."""
        if len(self.k):
            self.k = np.concatenate([self.k, k])
            self.x = np.concatenate([self.x, x])
            self.y = np.concatenate([self.y, y])
            self.d = np.concatenate([self.d, d])
        else:
            self.k, self.x, self.y, self.d = k, x, y, d

    def of(self, keys: Array) -> tuple[Array, Array, Array]:
        """The updates of ``keys`` (sorted, distinct): each one's index in ``keys``, its
        position ``x`` and its diff."""
        # (A search of each stored key among the few touched ones: no sort of the store.)
        at = np.searchsorted(keys, self.k)
        np.minimum(at, len(keys) - 1, out=at)
        pick = np.flatnonzero(keys[at] == self.k)
        return at[pick], self.x[pick], self.d[pick]

    def advance(self, frontier: tuple[Time, ...]) -> None:
        """Advance every time to ``frontier`` (``Product`` of ints; ``advance_by``: the meet
        of its joins with each element) and consolidate; zeros are dropped."""
        if not len(self.k):
            return
        # (Each coordinate totally ordered: advancing is a maximum with the frontier's meet.)
        bound = PAIR.to_columns(frontier)
        assert bound is not None and len(bound)
        fx, fy = bound.min(axis=0).tolist()
        x = np.maximum(self.x, fx)
        y = np.maximum(self.y, fy)
        order = np.lexsort((y, x, self.k))
        k, x, y, d = self.k[order], x[order], y[order], self.d[order]
        first = np.ones(len(k), dtype=bool)
        first[1:] = (k[1:] != k[:-1]) | (x[1:] != x[:-1]) | (y[1:] != y[:-1])
        starts = np.flatnonzero(first)
        d = np.add.reduceat(d, starts)
        keep = d != 0
        self.k, self.x, self.y, self.d = k[starts][keep], x[starts][keep], y[starts][keep], d[keep]

    def rows(self, pairs: bool) -> tuple[list[Any], list[Any], list[int]]:
        """Keys (``pairs``: decoded from pair codes), ``Product`` times and diffs as lists."""
        times = list(map(new_tuple, repeat(Product), zip(self.x.tolist(), self.y.tolist())))
        return decode_keys(self.k, pairs), times, self.d.tolist()


def _columns_of(history: KeyedHistory, pairs: bool) -> _Columns | None:
    """A unit history's updates as columns, or None if a key (ints, or with ``pairs`` int
    pairs) or a time is not int data."""
    rows = history.rows
    if not rows:
        return _Columns()
    codes = key_codes([key for key, kept in rows.items() for _ in kept])
    if codes is None or codes[1] != pairs:
        return None
    flat = list(chain.from_iterable(rows.values()))
    times = history.domain.to_columns([t for _, t, _ in flat])
    d = as_int64([diff for _, _, diff in flat])
    if times is None or d is None:
        return None
    return _Columns(codes[0], times[:, 0].copy(), times[:, 1].copy(), d)


@attrs.define(slots=True)
class PairCounts:
    """A counting reduction's input and output histories in columns (module docstring).

    ``pairs``: the keys are ``(int, int)`` tuples, held as codes
    (:func:`~deltaflow.framework.trace.ints.key_codes`), else ints. ``high`` is the highest
    iteration stored (an activation whose new updates are all on that row or a higher one,
    with the whole row passed, can be corrected here).
    """

    pairs: bool
    inputs: _Columns
    outputs: _Columns
    high: int
    kept: int = 0

    @classmethod
    def take(cls, inputs: KeyedHistory, outputs: KeyedHistory, pairs: bool) -> PairCounts | None:
        """Move a counting reduction's per-key histories into columns (emptying them), or
        None (both untouched) if a key (ints, or with ``pairs`` int pairs) or a time is not
        int data."""
        ins = _columns_of(inputs, pairs)
        outs = _columns_of(outputs, pairs) if ins is not None else None
        if ins is None or outs is None:
            return None
        inputs.tidy((), force=True)  # (an empty frontier drops everything)
        outputs.tidy((), force=True)
        ys = [int(c.y.max()) for c in (ins, outs) if len(c)]
        return cls(pairs, ins, outs, max(ys, default=-(1 << 62)), len(ins) + len(outs))

    def into(self, inputs: KeyedHistory, outputs: KeyedHistory) -> None:
        """Move the columns back into the per-key histories (empty: :meth:`take` emptied
        them); this state is not to be used again."""
        for columns, history in ((self.inputs, inputs), (self.outputs, outputs)):
            if len(columns):
                keys, times, diffs = columns.rows(self.pairs)
                history.extend(zip(keys, repeat(()), times, diffs))

    def step(
        self,
        k: Array,
        x: Array,
        d: Array,
        y: int,
        by_count: ByCount,
        columns: Callable[[Array], Array] | None = None,
    ) -> Fixes:
        """Store new input updates ``(k, Product(x, y), d)`` (``k``: key codes; ``y >=
        high``; the frontier has passed all of row ``y``), correct every key they touch on
        row ``y``, store the corrections and return them by time as ``(key, (), diff)`` rows.

        ``columns``, if given, is ``by_count`` on a column of counts.

        Runtime complexity: O(s + m log m) numpy work for s stored updates and m updates of
        the touched keys, plus a Python step per correction.
        """
        n_new = len(k)
        self.inputs.append(k, x, np.full(n_new, y, dtype=np.int64), d)
        self.high = max(self.high, y)
        keys = np.unique(k)
        in_k, in_x, in_d = self.inputs.of(keys)
        out_k, out_x, out_d = self.outputs.of(keys)
        # Interesting positions: every stored position of a touched key at or above its
        # lowest new one (the joins with a new time lie there; extra positions correct
        # nothing).
        low = np.full(len(keys), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(low, np.searchsorted(keys, k), x)
        above_in = in_x >= low[in_k]
        above_out = out_x >= low[out_k]
        at_k = np.concatenate([in_k[above_in], out_k[above_out]])
        at_x = np.concatenate([in_x[above_in], out_x[above_out]])
        ins, outs = (in_k, in_x, in_d), (out_k, out_x, out_d)
        fix_k, fix_x, fix_d = line_fixes(
            at_k, at_x, ins, outs, by_count, columns, lambda: decode_keys(keys, self.pairs)
        )
        fix_k = keys[fix_k]
        self.outputs.append(fix_k, fix_x, np.full(len(fix_k), y, dtype=np.int64), fix_d)
        return _by_time(decode_keys(fix_k, self.pairs), fix_x, fix_d, y)

    def tidy(self, frontier: tuple[Time, ...]) -> None:
        """Compact both histories to ``frontier`` (every time still to be read is beyond it)
        once they have doubled since the last compaction."""
        size = len(self.inputs) + len(self.outputs)
        if size <= max(COMPACT_MIN, 2 * self.kept) or not size:
            return
        for columns in (self.inputs, self.outputs):
            columns.advance(frontier)
        self.kept = len(self.inputs) + len(self.outputs)
        ys = [int(c.y.max()) for c in (self.inputs, self.outputs) if len(c)]
        self.high = max(ys, default=self.high)


def _by_time(keys: list[Any], x: Array, d: Array, y: int) -> Fixes:
    """Corrections at ``Product(x, y)`` as ``{time: [(key, (), diff), ...]}``."""
    fixes: Fixes = {}
    if not keys:
        return fixes
    order = np.argsort(x, kind="stable")
    xs = x[order]
    cuts = np.flatnonzero(xs[1:] != xs[:-1]) + 1
    bounds = [0, *cuts.tolist(), len(xs)]
    ks, ds, firsts = [keys[i] for i in order.tolist()], d[order].tolist(), xs[bounds[:-1]].tolist()
    for at, lo, hi in zip(firsts, bounds, bounds[1:]):
        fixes[new_tuple(Product, (at, y))] = list(zip(ks[lo:hi], repeat(()), ds[lo:hi]))
    return fixes
