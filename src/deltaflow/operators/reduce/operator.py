"""The reduction operator: per key, ``output[t] = logic(key, input[t])`` at every time.

How it is computed
==================

The input is an *arrangement by key*: a stream of sealed batches (and a shared
:class:`~deltaflow.framework.trace.spine.Spine`, which this operator does not read). A
:class:`ReduceOperator` remembers, per key, the times of the new updates (*seeds*). When the
input frontier advances to ``upper`` it corrects every key that has seeds or *pending* times
the frontier has passed:

1. ``ready, deferred = interesting_times(seeds + due pending, stored times, upper)``: the
   times at which the key's output may change (joins of subsets of its times that contain a
   seed, see :mod:`.interesting_times`), split into those the frontier has passed and those it
   has not. The stored times are those of the key's input history *and* of its output
   history: both are compacted, and compaction may cancel input updates (at two rounds that
   advance to one time) that the output has not caught up with yet, where a correction is
   still owed. Only the output history then shows where the key changed.
2. For each ready time ``t``, in a linear extension of the partial order: the input
   accumulated at ``t`` (from its input history, :mod:`.accumulation`),
   ``desired = logic(key, vals)``, the output accumulated at ``t`` (from the operator's own
   output history plus the corrections made earlier in this round at times ``<= t``); the
   difference is emitted at ``t``.
3. ``deferred`` joins the key's pending times (*resumption tokens*), every one of them
   until the frontier passes it. A pending time still beyond ``upper`` is no seed: it stays
   pending untouched (what it owes lies beyond ``upper``; its joins are found when it is
   due). They must be kept even when nothing else records them: with updates at
   incomparable times ``a`` and ``b``, ``logic`` may output nothing at ``a`` and at ``b`` and
   something at ``join(a, b)``; no stored output witnesses that debt.

Keys whose times form a chain (on one line or one row of ``Product`` times) take one sweep
along it (:mod:`.chains`); the others the general search (:mod:`.general`). Counting
reductions sum ints on those paths (:mod:`.counting`); at ``Product(int, int)`` times, an
activation bringing one whole row (a loop taking many rounds at once) corrects every touched
key in columns instead (:mod:`.pair_counts`, ``_pair_step``). Totally ordered (``int``) times
take a sweep of each key's new updates with no search at all (:mod:`.total`).

**Its input and its own output** the operator keeps in memory, in two
:class:`~deltaflow.operators.join.history.KeyedHistory` indexes ``{key: [(val, time, diff)]}``:
every update of every batch it receives, and everything it has sent. Appending there costs a
list append and reading a key a dict lookup, where reading the input trace would cost a search
per batch per round. Each key's list is compacted (times advanced to the previous frontier,
equal updates consolidated) when it grows beyond
:data:`~deltaflow.operators.join.history.COMPACT_WRITTEN` updates, and all of them when the total
has grown enough since the last such pass (keys that cancel disappear), so both stay
proportional to the live collections. An arrangement made for this operator alone then has no
trace reader, and keeps no trace at all (see :mod:`deltaflow.operators.arrange`). An output
trace is kept only when someone else reads it (:func:`.reductions.reduce_core` with
``arrange_output=True``); the round's corrections are then inserted into it as one batch (a
round without corrections inserts nothing, so that trace's ``upper`` may lag the frontier).

The corrections are sent downstream as update batches of ``(key, out_val)``, one per time.
Then the operator moves the logical compaction of the output trace it holds to ``upper``:
from now on it only needs accumulations at times beyond ``upper``, so older times may be
advanced (``advance_by``) and history cancel. That keeps each key's history, and so the
per-key work, bounded in long runs and in loops.

Capabilities: the operator holds one at the time of each message it has not yet processed and
one at each minimal pending time, and nothing else. When nothing is pending it holds nothing
(a loop whose reduce held a capability for no work would never finish).
"""

from __future__ import annotations

from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING, Any, ClassVar

from deltaflow.framework.antichain import Antichain
from deltaflow.framework.durable.store import decode_frontier, encode_frontier
from deltaflow.framework.durable.tables import Rows
from deltaflow.framework.lattice import Product, less_equal, new_tuple
from deltaflow.framework.trace.batch import Batch
from deltaflow.framework.trace.codec import as_int64
from deltaflow.framework.trace.description import Description, least_since
from deltaflow.framework.trace.ints import key_codes
from deltaflow.framework.trace.order import ukey
from deltaflow.framework.trace.spine import Spine, TraceReader

from ...framework import tuning
from ..base import Interest, Operator, UpdateBatch
from ..durable import (
    Deltas,
    StateSink,
    StateSource,
    covering,
    fold_counts,
    restore_trace,
)
from ..join.history import AdvanceTo, KeyedHistory
from ..values import as_count
from .accumulation import difference
from .chains import least, pair_row
from .columnar import counting_kernel
from .counting import ByCount, RowCounts
from .logics import COLUMNS, FOLDS, Logic, negative, strict_count
from .pair_counts import PairCounts
from .paths import Activation, KeyPath, on_pairs, path_for
from .total import correct_total

if TYPE_CHECKING:
    from collections.abc import Sequence

    from deltaflow.framework.lattice import Time

    from ..base import Capability, OperatorContext

__all__ = ["ReduceOperator"]

_first = itemgetter(0)


#: A key's accumulation ``{val: count}`` as its rows ``(val, count)`` for a checkpoint (a
#: method in C: a checkpoint writing the accumulations whole takes it for every key).
_counts = dict.items


def _keyed_rows(index: dict[Any, list[Any]], columns: tuple[str, ...] | None) -> Rows:
    """``{key: [row, ...]}`` as a table with a ``key`` column (``columns=None``: each row is
    a bare time)."""
    keys = [k for k, rows in index.items() for _ in rows]
    flat = [r for rows in index.values() for r in rows]
    if columns is None:
        return Rows({"key": keys, "time": flat})
    return Rows({"key": keys, **{c: [r[i] for r in flat] for i, c in enumerate(columns)}})


def _unkeyed(rows: Rows | None, columns: tuple[str, ...] | None) -> dict[Any, list[Any]]:
    """The ``{key: [row, ...]}`` of a table :func:`_keyed_rows` made."""
    out: dict[Any, list[Any]] = {}
    if rows is None or not len(rows):
        return out
    cols = rows.columns
    values: Any = cols["time"] if columns is None else zip(*(cols[c] for c in columns))
    for key, value in zip(cols["key"], values):
        have = out.get(key)
        if have is None:
            out[key] = [value]
        else:
            have.append(value)
    return out


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
            ``None`` when nobody else reads it: then no output trace is kept at all (the
            operator reads its own output from its in-memory index, see the module docstring).
        logic: ``logic(key, vals) -> [(out_val, count), ...]``.
        positive_only: hand ``logic`` only values with a positive count (the public
            contract); ``False`` hands it every non-zero count.
        key_only: send ``key`` instead of ``(key, out_val)`` downstream (arrangements by self:
            ``distinct``, ``threshold``). The output spine always holds ``(key, out_val)``.
        total_order: use the fast path for ``int`` times (``None``: whenever times are ints).
        strict: a key whose accumulation holds a negative count (for ``count``, whose
            ``positive_only`` is False: whose total is negative) is an
            :class:`~deltaflow.errors.OperatorValueError` naming it (every public reduction
            but ``threshold``, through :func:`.reduce_core`), at any time the frontier has
            passed, inside loops too; False (the default here) hands such counts on, as
            ``positive_only`` says.
        by_count: for reductions over an arrangement by self (every value is ``()``) whose
            output is the single value ``()``: its count as a function of the key and the
            key's input count, ``by_count(key, n)`` (``distinct``, ``threshold``). The paths
            for ``Product(int, int)`` times then accumulate plain ints instead of
            ``{val: count}`` dicts; ``logic`` must agree with it (the other paths call it).
    """

    interest = Interest.ALWAYS

    ROW_BATCH_MIN: ClassVar[int] = tuning.ROW_BATCH_MIN
    """A counting reduction's activation with new times for at least this many keys corrects
    those on rows together (:class:`.counting.RowCounts`); for fewer, numpy's cost per call
    would outweigh the per-key Python work it saves."""

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
        strict: bool = False,
    ) -> None:
        self.name = name
        self.logic = logic
        self.positive_only = positive_only
        # Strict at every scope: the accumulation at a time the frontier has passed is the
        # collection the program defines there (loops included). Only a guess at a time
        # not yet complete may see a negative count, and no guess calls the check.
        self.strict = strict
        domain = source.domain
        self.key_only = key_only
        # The built-in reductions' answer straight from the accumulation (see .logics.FOLDS).
        builtin = FOLDS.get(logic)
        self.fold = builtin[0] if builtin and builtin[1] == positive_only else None
        #: ``by_count`` on a numpy column of counts, when it has one.
        self.columns = COLUMNS.get(by_count)
        if strict and by_count is not None:
            by_count = strict_count(name, by_count)
        self.by_count = by_count
        self.source = source
        self.upper: Antichain = source.lower
        ints = domain.total
        self.total = ints if total_order is None else (total_order and ints)
        # How a key of a partial order is corrected: one path for the shape of its times.
        self.path: KeyPath = path_for(domain)
        #: The shape of the times, chosen by the scope: what the paths compute with.
        self.domain = domain
        # Int times: the numpy kernel large batches of ints take, if this logic has one.
        self.kernel = (
            counting_kernel(logic, positive_only, by_count, strict, self.columns)
            if self.total
            else None
        )
        if output is not None and output.upper != source.lower:
            msg = f"{name}: the output spine must start at {source.lower!r}, not {output.upper!r}"
            raise ValueError(msg)
        self.output = output
        # Neither path reads the input trace (``inputs`` and ``accs`` hold what they need), so
        # the operator holds no reader on it: a trace nobody else reads is not kept at all.
        self.readers: list[TraceReader] = []
        if output is not None:
            self.readers.append(output.reader())
        self._start_empty(unit=by_count is not None)

    def _start_empty(self, *, unit: bool) -> None:
        """The state each path keeps, empty: for partial orders the waiting batches, times
        and histories; for totally ordered times the buffers and accumulations (``unit``:
        every value ``()``, as a reduction by count's histories hold)."""
        # Partial orders: the batches of messages the frontier has not passed yet, by their
        # time (see ``_due``), new update times per key, and pending (deferred) times per key
        # and per time (to find the keys whose pending times the frontier has passed).
        self.waiting: dict[Time, list[Any]] = {}
        self.seeds: dict[Any, list[Time]] = {}
        self.pending: dict[Any, list[Time]] = {}
        self.pending_keys: dict[Time, set[Any]] = {}
        # Partial orders: every input update received and every (val, time, diff) this
        # operator has output, per key (see KeyedHistory).
        self.inputs = KeyedHistory(domain=self.domain, unit=unit)
        self.outputs = KeyedHistory(domain=self.domain, unit=unit)
        # A counting reduction at ``Product(int, int)`` times: both histories in columns
        # while activations come one whole row at a time (see .pair_counts; None: in
        # ``inputs`` and ``outputs``).
        self.pairs: PairCounts | None = None
        # Totally ordered times: the batches a kernel may take, received since the last
        # correction (read whole when the frontier moves), each key's unapplied updates and
        # its accumulations so far.
        self.incoming: list[tuple[Time, Any]] = []
        self.buffered: dict[Any, list[tuple[Any, int, int]]] = {}
        self.accs: dict[Any, dict[Any, int]] = {}
        self.outs: dict[Any, dict[Any, int]] = {}
        self.buffered_low: int | None = None
        # Totally ordered times: the changes to the accumulations since a checkpoint last
        # took them, as rows ``(val, diff)`` by key, with the rows ``accs`` holds (see
        # .durable: a key's accumulation grows with its values).
        self.acc_deltas = Deltas()
        self.acc_rows = 0
        # Times of messages received but not yet processed.
        self.unprocessed: set[Time] = set()
        self.caps: list[Capability] = []

    def held(self) -> int:
        """What this reduction keeps: the updates of its input and output histories (at
        partially ordered times) and the keys it keeps accumulations of (totally ordered)."""
        pairs = self.pairs
        held = self.inputs.size + self.outputs.size + len(self.accs) + len(self.outs)
        return held if pairs is None else held + len(pairs.inputs) + len(pairs.outputs)

    def initialize(self, ctx: OperatorContext, capabilities: Sequence[Capability]) -> None:
        """Keep capabilities for what a restored state still owes (nothing on a fresh start)."""
        self.caps = covering(capabilities, self._owed())

    def schedule(self, ctx: OperatorContext) -> None:
        """Take in new batches; when the frontier moved, correct the output up to it."""
        messages = ctx.messages(0)
        if messages:
            self._receive(messages)
        frontier = ctx.frontier(0)
        if frontier != self.upper:
            if self.total:
                corrections = correct_total(self, frontier)
            else:
                corrections = self._process_partial(frontier)
            self._emit(ctx, frontier, corrections)
        self._hold(ctx)

    def _receive(self, messages: list[tuple[Time, Any]]) -> None:
        unprocessed = self.unprocessed
        if self.total:
            for time, _ in messages:
                unprocessed.add(time)
            # Batches a kernel may take wait whole for the frontier (see .total); the others'
            # updates are buffered per key now.
            kernel = self.kernel
            if kernel is not None:
                size = (
                    len(messages[0][1]) if len(messages) == 1 else sum(len(b) for _, b in messages)
                )
                if self.domain.count_kernel(size):
                    self.incoming.extend(messages)
                    return
            self.buffer(messages)
        else:
            waiting = self.waiting
            for time, batch in messages:
                unprocessed.add(time)
                batches = waiting.get(time)
                if batches is None:
                    waiting[time] = [batch]
                else:
                    batches.append(batch)

    def buffer(self, messages: list[tuple[Time, Any]]) -> None:
        """Int times: add the updates of the messages' batches to each key's unapplied
        ones."""
        buffered = self.buffered
        for _, batch in messages:
            for key, val, t, diff in batch.updates():
                rows = buffered.get(key)
                if rows is None:
                    buffered[key] = [(val, t, diff)]
                else:
                    rows.append((val, t, diff))

    # ------------------------------------------------------------------ evaluation

    def evaluate(self, key: Any, acc: dict[Any, int]) -> dict[Any, int]:
        """``logic`` at one accumulation, consolidated into ``{out_val: count}``.

        Raises:
            OperatorValueError: (``strict``) a negative count in ``acc``; for a reduction
                handed every count (``count``), a negative total.
        """
        if self.strict:
            self._check_counts(key, acc)
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

    def _check_counts(self, key: Any, acc: dict[Any, int]) -> None:
        if self.positive_only:
            for val, c in acc.items():
                if c < 0:
                    raise negative(self.name, key, c, None if val == () else val)
        else:
            total = sum(acc.values())
            if total < 0:
                raise negative(self.name, key, total)

    def correction(self, key: Any, acc: dict[Any, int], current: dict[Any, int]) -> dict[Any, int]:
        """``logic``'s output at input ``acc`` minus the output ``current`` there (empty: none)."""
        desired = self.evaluate(key, acc)
        return {} if desired == current else difference(desired, current)

    def _process_partial(self, upper: Antichain) -> dict[Time, list[tuple[Any, Any, int]]]:
        """Correct every key with new or due pending times up to ``upper``, each by the path
        chosen for this operator's times (:mod:`.paths`), against its input and output
        histories.

        Runtime complexity: per key, the interesting-times search and the accumulation over
        its compacted input and output histories, one ``logic`` call per ready time (on a
        chain: per ready time where the input or output changed), and for keys off a chain
        O(r^2) comparisons of the r ready times with this round's earlier corrections.
        """
        if self.by_count is not None and self.path is on_pairs:
            fixes = self._pair_step(upper)
            if fixes is not None:
                return fixes
            if self.pairs is not None:
                self.pairs.into(self.inputs, self.outputs)
                self.pairs = None
        seeds = self._due(upper)
        if not seeds:
            return {}
        by_count = self.by_count
        many = by_count is not None and len(seeds) >= self.ROW_BATCH_MIN
        act = Activation(upper, RowCounts() if many else None, self.domain)
        # Each key's input and output history, compacted to the previous frontier (every
        # time still to be read is beyond it) when long (see KeyedHistory.compacted).
        inputs = self.inputs
        outputs = self.outputs
        input_rows = inputs.rows
        output_rows = outputs.rows
        long_in = inputs.long()
        long_out = outputs.long()
        advance = AdvanceTo(self.upper.elements, self.domain)
        no_rows: list[tuple[Any, Time, int]] = []
        correct = self.path
        for key, times in seeds.items():
            history = input_rows.get(key, no_rows)
            if len(history) > long_in:
                history = inputs.compacted(key, history, advance)
            written = output_rows.get(key)
            if written is not None and len(written) > long_out:
                written = outputs.compacted(key, written, advance)
            correct(self, key, times, history, written, act)
        return self._gathered(act)

    def _pair_step(self, upper: Antichain) -> dict[Time, list[tuple[Any, Any, int]]] | None:
        """A counting reduction at ``Product(int, int)`` times: correct this activation in
        columns (:mod:`.pair_counts`) when its new updates are int data all on one row
        ``y`` that ``upper`` has passed entirely, nothing is pending and nothing stored
        lies above that row; else None (nothing done). Chosen per activation, by a pass
        over each column."""
        state = self.pairs
        if self.pending_keys or self.seeds:
            return None
        # Every update lies at or above its message's row: a frontier element at or below
        # one of those rows leaves that row partly unpassed (at iteration 0: every row, as
        # while rounds come one at a time).
        rows = [f[1] for f in upper.elements]  # type: ignore[index]
        low = min(rows) if rows else None
        if low == 0 and state is None:
            return None
        waiting = self.waiting
        passed = [t for t in waiting if not upper.less_equal(t)]
        if not passed:
            return {} if state is not None else None
        if low is not None and low <= max(t[1] for t in passed):  # type: ignore[index]
            # The frontier has passed part of a row (with several workers, the others' share
            # of the row may still be on its way): with the columns held and the passed
            # messages all on that row, they wait in ``waiting`` (held there by a
            # capability) until it passes the whole row, instead of the columns going back
            # into the histories for a partial step. What waits cannot come back to this
            # input before that row: a path back through the loop adds an iteration.
            wait = state is not None and len({t[1] for t in passed}) == 1  # type: ignore[index]
            return {} if wait else None
        batches = [b for t in passed for b in waiting[t]]
        size = sum(map(len, batches))
        if state is None:
            if not self.domain.count_kernel(size):
                return None
            # (A checkpoint logging what is appended reads the per-key histories.)
            if self.inputs.log.keys is not None or self.outputs.log.keys is not None:
                return None
        parts = [b.object_columns() for b in batches]
        codes = key_codes(list(chain.from_iterable(p[0] for p in parts)))
        pairs = self.domain.to_columns(list(chain.from_iterable(p[2] for p in parts)))
        diffs = as_int64(list(chain.from_iterable(p[3] for p in parts)))
        if codes is None or pairs is None or diffs is None or not size:
            return None
        keys, pair_keys = codes
        x, ys = pairs[:, 0].copy(), pairs[:, 1]
        y = int(ys[0])
        if (ys != y).any() or any(r <= y for r in rows):
            return None
        if state is None:
            state = self.pairs = PairCounts.take(self.inputs, self.outputs, pair_keys)
            if state is None:
                return None
        if state.high > y or state.pairs != pair_keys:
            return None
        for t in passed:
            del waiting[t]
        by_count = self.by_count
        assert by_count is not None
        return state.step(keys, x, diffs, y, by_count, self.columns)

    def _due(self, upper: Antichain) -> dict[Any, list[Time]]:
        """The keys to correct at ``upper`` with their seeds: the times of the updates of the
        messages the frontier has passed (stored now), and the pending times it has passed.

        What is still beyond ``upper`` waits, untouched: the corrections a time beyond
        ``upper`` stands for are at times ``>=`` it, all beyond ``upper`` too, so this round's
        search needs neither it nor its joins (they are found once it is due, with every time
        stored by then). A message still beyond ``upper`` (another worker's data for the next
        loop turn, arrived before this worker's frontier passed the current one) is not even
        stored: its updates are beyond every time read this round, and its times, stored,
        would only be joined with this round's seeds into times to defer. So each is searched
        once, when the frontier passes it. A key is corrected when it has new times or a due
        pending time."""
        waiting = self.waiting
        if waiting:
            store = self.inputs.extend_noting_times
            seeds = self.seeds
            for time in [t for t in waiting if not upper.less_equal(t)]:
                for batch in waiting.pop(time):
                    store(batch.updates(), seeds, batch)
        seeds, self.seeds = self.seeds, {}
        pending_keys = self.pending_keys
        if not pending_keys:
            return seeds
        due = [t for t in pending_keys if not upper.less_equal(t)]
        if not due:
            return seeds
        pending = self.pending
        touched: set[Any] = set()
        for t in due:
            touched.update(pending_keys.pop(t))
        passed = set(due)
        for key in touched:
            owed = pending.pop(key)
            kept = [t for t in owed if t not in passed]
            if kept:
                pending[key] = kept
                ready = [t for t in owed if t in passed]
            else:
                ready = owed
            times = seeds.get(key)
            if times is None:
                seeds[key] = ready
            else:
                times.extend(ready)
        return seeds

    def _gathered(self, act: Activation) -> dict[Time, list[tuple[Any, Any, int]]]:
        """The step's corrections by time, once the keys queued on rows are corrected too;
        recorded in the output history."""
        corrections = act.corrections
        line_fixes = act.line_fixes
        row_batch = act.row_batch
        if row_batch is not None and len(row_batch):
            by_count = self.by_count
            assert by_count is not None
            if not row_batch.correct(by_count, line_fixes, self.columns):
                for key, y, times, history, written in row_batch.queued():
                    pair_row(self, key, y, times, history, written, None, line_fixes)
        for (x, y), rows in line_fixes.items():
            t = new_tuple(Product, (x, y))
            fix = corrections.get(t)
            if fix is None:
                corrections[t] = rows
            else:
                fix.extend(rows)
        record = self.outputs.extend_at
        for at, rows in corrections.items():
            record(at, rows)
        return corrections

    def defer(self, key: Any, deferred: list[Time]) -> None:
        """Add ``deferred`` to the key's pending times (those not yet due stay there)."""
        pending_keys = self.pending_keys
        owed = self.pending.get(key)
        if owed is None:
            self.pending[key] = deferred
        else:
            deferred = [t for t in deferred if key not in pending_keys.get(t, ())]
            owed.extend(deferred)
        for t in deferred:
            keys = pending_keys.get(t)
            if keys is None:
                pending_keys[t] = {key}
            else:
                keys.add(key)

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
            description = Description(output.upper, upper, least_since(output.upper, output.domain))
            if keys:
                output.insert(Batch.from_columns(keys, vals, times, diffs, description))
            else:
                output.insert(Batch.empty(description))
        self.upper = upper
        self.unprocessed.clear()
        frontier = upper.elements
        if self.pairs is not None:
            if frontier:
                self.pairs.tidy(frontier)
            else:
                self.pairs = None
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
            owed.extend(self.waiting)
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
            want = [least(owed)]
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

    # ------------------------------------------------------------------ checkpoints

    def save(self, sink: StateSink) -> None:
        """Hand the state to a checkpoint (see :mod:`..durable`): per key its input and
        output (histories, or with int times the accumulations at the frontier alone: each
        key's output there is ``logic`` at its accumulation, which :meth:`load` evaluates
        again), and what waits for the frontier (updates at later times, owed times)."""
        sink.value("upper", encode_frontier(self.upper))
        if self.total:
            self.buffer(self.incoming)  # (one state to save: updates not yet applied)
            self.incoming = []
            deltas = self.acc_deltas.take(2)
            sink.history("accs", self.accs, ("val", "count"), deltas, self.acc_rows, _counts)
            sink.rows("buffered", _keyed_rows(self.buffered, ("val", "time", "diff")), "key")
        else:
            if self.pairs is not None:  # (one state to save: the per-key histories)
                self.pairs.into(self.inputs, self.outputs)
                self.pairs = None
            if self.waiting:
                # Messages the frontier has not passed are stored as updates and seeds, as
                # if read at once (a resumed job searches them when due, deferring what the
                # frontier has not passed): one state to save, not another kind of it.
                store = self.inputs.extend_noting_times
                for time, batches in self.waiting.items():
                    self.unprocessed.add(time)
                    for batch in batches:
                        store(batch.updates(), self.seeds, batch)
                self.waiting.clear()
            self.inputs.save(sink, "inputs")
            self.outputs.save(sink, "outputs")
            sink.rows("seeds", _keyed_rows(self.seeds, None), "key")
            sink.rows("pending", _keyed_rows(self.pending, None), "key")
        if self.output is not None:
            # (Its upper lags the frontier by rounds without corrections, on each worker
            # apart: resumed, it starts at the frontier, the operator's ``upper``.)
            sink.batches("trace", self.output.batches())

    def load(self, source: StateSource) -> None:
        """Take this worker's share of a checkpoint's state back (before the first
        activation)."""
        upper = source.value("upper")
        if upper is not None:
            self.upper = decode_frontier(upper)
        if self.total:
            accs = source.history("accs")
            if accs is not None:
                for k, rows in accs.items():
                    folded = {head[0]: c for head, c in fold_counts(rows).items()}
                    if folded:
                        self.accs[k] = folded
                        self.acc_rows += len(folded)
                self.acc_deltas.keys = []
            outs = source.index("outs")
            if outs is not None:  # (written by checkpoints that saved the outputs too)
                self.outs.update((k, dict(rows)) for k, rows in outs.items())
            else:
                # Each key's output at the frontier is ``logic`` at its accumulation there
                # (every path that applies updates keeps it so), the same code on the same
                # values: evaluated once here rather than written at every checkpoint.
                evaluate, outs_now = self.evaluate, self.outs
                for k, acc in self.accs.items():
                    out = evaluate(k, acc)
                    if out:
                        outs_now[k] = out
            self.buffered = _unkeyed(source.rows("buffered"), ("val", "time", "diff"))
            low = [t for rows in self.buffered.values() for _, t, _ in rows]
            self.buffered_low = min(low) if low else None
        else:
            self.inputs.load(source, "inputs")
            self.outputs.load(source, "outputs")
            self.seeds = _unkeyed(source.rows("seeds"), None)
            self.unprocessed = {t for times in self.seeds.values() for t in times}
            for key, times in _unkeyed(source.rows("pending"), None).items():
                self.defer(key, times)
        if self.output is not None and upper is not None:
            restore_trace(self.output, source.rows("trace"), upper)

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
