"""The join family over two arrangements: ``join``, ``join_map``, ``semijoin``, ``antijoin``.

A :class:`JoinOperator` reads the batch streams of two arrangements of the same key. Each
batch that arrives on one side is joined with the other side's trace *as far as this operator
has acknowledged it* (the batches it has already received from that side): every pair of
updates ``(k, a, t1, r1)``, ``(k, b, t2, r2)`` is then produced exactly once, by whichever of
their two batches arrives second, as ``(logic(k, a, b), join(t1, t2), r1 * r2)``.

To keep "what has been acknowledged" sliceable, the operator holds the other trace's
*physical* compaction at its acknowledged frontier (batches beyond it are not merged with
those before it). Its *logical* compaction holds follow the input frontiers: an update that
arrives later on side 1 has a time beyond side 1's frontier, and joining with a trace time
advanced to that frontier gives the same output time.

A side whose arrangement this operator alone reads (the usual ``a.join(b)``) is not read from
a trace at all: the operator keeps the batches it received from that side in memory, per key
(:class:`~.history.KeyedHistory`), and the arrangement keeps no trace. Shared arrangements
(an ``Arranged`` passed to several joins) are read from their trace as above.

Such a side of int data starts as key-sorted int columns alone (:class:`.SortedRuns`,
``alone``): the kernel reads them whole, the row path looks an arriving batch's keys up in
them, and they are compacted as the history would be. The side builds its history from them,
once, and keeps it from then on, when the columns cannot serve: a batch without int columns
(stored, or arriving to read them), a compaction they cannot do, a checkpoint, kernels turned
off, or row-path readers and the conversions of small batches stored (a small side churned
by hundreds of updates a round, re-sorted whole every few rounds) that have cost as much as
building the history would (:data:`ROW_READ_COST`, :attr:`.SortedRuns.churn`). Until then a
single-update round looks its keys up in the columns, a binary search per run, and does
nothing that grows with the side.

The output of one work item is summed per time and datum as it is made (output data must be
hashable, as everywhere downstream), and sent marked consolidated: an arrangement that reads it
alone does not sum it again.

Work is budgeted: a batch meeting a huge key produces at most :attr:`JoinOperator.BUDGET`
output updates per activation, then the operator keeps a capability, reschedules itself and
lets the other actors of the worker run. A batch joined in the activation that drained it
(the usual case) needs no capability: it is sent under the right of its message.

    >>> import deltaflow as df
    >>> from deltaflow.testing import example
    >>> example(lambda a, b: a.join(b), a=[((1, "x"), 0, 1)], b=[((1, "y"), 1, 2)])
    [((1, ('x', 'y')), 1, 2)]
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...framework import kernels, tuning
from ...framework.antichain import Antichain
from ...framework.lattice import Product, join as time_join, new_tuple
from ...framework.tuning import JOIN_COMPACT_ABOVE, LOOKUP_CHUNK, ROW_READ_COST
from ..arrange import RawBatch
from ..base import Interest, Operator, UpdateBatch
from ..durable import StateSink, StateSource
from .history import AdvanceTo, KeyedHistory
from .kernel import (
    PAIRS_PER_ROW,
    Columns,
    SortedRuns,
    columns_of,
    count_pairs,
    joined,
    pair_up,
)

if TYPE_CHECKING:
    from ...framework.lattice import Time
    from ...framework.trace.batch import Batch
    from ...framework.trace.spine import Spine, TraceReader
    from ..base import Capability, OperatorContext

__all__ = ["JoinOperator"]


class _Work:
    """A batch still to be joined against the other side as it was when the batch arrived.

    The other side is a snapshot of its acknowledged trace batches, or the operator's own
    :class:`~.history.KeyedHistory` of it (which nothing changes from the time this item
    reaches the head of the queue until it is done: see :class:`JoinOperator`). ``found``
    holds the other side's rows for the keys ``items[pos:fetched]``: what the trace batches
    hold of them, looked up a chunk of keys at a time (:data:`LOOKUP_CHUNK`), or the history's
    own dict, which holds every key (its long lists are compacted as the join meets them).
    ``keep`` is the operator's own history of the batch's side, if it keeps one: the batch
    goes in there once it is joined.
    """

    __slots__ = (
        "batch", "cap", "cols", "fetched", "found", "items", "joins", "keep", "others", "pos",
        "row", "runs", "swap", "time",
    )  # fmt: skip

    def __init__(
        self,
        time: Time,
        batch: Batch | RawBatch,
        others: list[Batch] | list[SortedRuns] | KeyedHistory,
        swap: bool,
        keep: KeyedHistory | None = None,
    ) -> None:
        self.time = time
        # Held only while the item waits beyond the activation that drained its message.
        self.cap: Capability | None = None
        # False when the other side was empty as the batch arrived: the item then only adds
        # the batch to ``keep``, in order.
        joins = self.joins = bool(others)
        self.batch = batch
        self.items: list[tuple[Any, list[tuple[Any, Any, int]]]] | None = None if joins else []
        self.pos = 0
        self.row = 0
        self.fetched = 0
        self.found: dict[Any, list[tuple[Any, Any, int]]] = {}
        self.others = others
        self.swap = swap
        self.keep = keep
        # Taken by the kernel (chosen when the item reaches the head of the queue): the
        # batch's columns, the other side's runs, and ``pos`` counts rows, not keys.
        self.cols: Columns | None = None
        self.runs: list[Columns] = []

    def start(self) -> list[tuple[Any, list[tuple[Any, Any, int]]]]:
        """The batch's keys with their rows, read when the item reaches the head of the queue
        (none when the other side is a history that is still empty then)."""
        items = self.items
        if items is None:
            others = self.others
            if isinstance(others, KeyedHistory):
                items = list(self.batch.iter_keys()) if others.rows else []
                # The history itself: nothing changes it until this item is done (see the
                # class), and a dict lookup per key needs no chunks.
                self.found = others.rows
                self.fetched = len(items)
            else:
                items = list(self.batch.iter_keys())
            self.items = items
        return items

    def fetch(self) -> None:
        """Look up the next chunk of keys in the other side's trace batches."""
        start = self.pos
        self.fetched = start + LOOKUP_CHUNK
        keys = [key for key, _ in self.start()[start : self.fetched]]
        found: dict[Any, list[tuple[Any, Any, int]]] = {}
        others = self.others
        assert not isinstance(others, KeyedHistory)  # a history is found whole by start()
        for batch in others:
            for key, rows in batch.lookup_many(keys).items():
                have = found.get(key)
                if have is None:
                    found[key] = rows
                else:
                    have.extend(rows)
        self.found = found

    def finish(self, *, store: bool = True) -> None:
        """Release the capability and record the batch in its side's own history (unless
        not ``store``: the side is held as columns alone)."""
        if self.cap is not None:
            self.cap.drop()
        if self.keep is not None and store:
            if self.items:
                # The batch read by key already (all of it: the item is done). A batch that
                # an arrangement forwarded (a ``RawBatch``) groups into new lists each time.
                self.keep.extend_grouped(
                    self.items, owned=self.batch.__class__ is RawBatch, batch=self.batch
                )
            else:
                self.keep.extend(self.batch.updates(), self.batch)


class JoinOperator(Operator):
    """Join two arrangements with ``logic(key, val1, val2) -> iterable of outputs``.

    ``logic`` returns an iterable of output data, or with ``single=True`` exactly one output
    datum (``join_map``'s function, called without wrapping its result in a tuple).

    ``own[side]``: this operator is the only reader of that side's arrangement, so instead of
    reading its trace it keeps every batch it received from that side in a
    :class:`~.history.KeyedHistory` (one dict lookup per key instead of a search per trace
    batch), and the arrangement keeps no trace. Exactly-once pairing then rests on order: work
    items run first in, first out, and a batch enters its side's history only when its own
    item is done, so an item sees exactly the other side's batches that arrived before it.
    The history is compacted to the other side's input frontier: a key's long list as it is
    read (to that frontier and the times of the other side's queued items, which are drained
    and so no longer in it), and all of it when it has grown enough and no work is queued.
    """

    interest = Interest.ALWAYS
    #: Output updates produced per activation before yielding to other actors.
    BUDGET = tuning.JOIN_BUDGET

    def __init__(
        self,
        name: str,
        left: Spine,
        right: Spine,
        logic: Callable[[Any, Any, Any], Any],
        *,
        single: bool = False,
        own: tuple[bool, bool] = (False, False),
    ) -> None:
        self.name = name
        self.logic = logic
        self.single = single
        self.spines = (left, right)
        # The shape of both sides' times (one scope): ints, or pairs joined inline.
        domain = self.domain = left.domain
        self.total = domain.total
        self.pairs = domain.pairs
        self.histories = tuple(
            KeyedHistory(JOIN_COMPACT_ABOVE, domain=domain) if o else None for o in own
        )
        # The same updates as columns, for the kernel (see :mod:`.join_kernel`): the side's
        # only copy (``alone``) until the history is needed (see :meth:`_build_history`).
        columns = kernels.mode() != "never"
        # (None once given up beside a history: that side keeps the row path for good.)
        self.sorted_runs = [SortedRuns(alone=columns, domain=domain) if o else None for o in own]
        # Batches the row path has looked up in each side held as columns alone.
        self.row_reads = [0, 0]  # (see :data:`ROW_READ_COST`)
        if all(own):
            # Nothing to acknowledge in a trace: a frontier that moves without a message
            # leaves no work (the histories only grow, and are tidied, when messages come).
            self.interest = Interest.NEVER
        self.readers: list[TraceReader | None] = [
            None if o else spine.reader() for o, spine in zip(own, self.spines)
        ]
        self.acknowledged = [left.lower, right.lower]
        for reader, spine in zip(self.readers, self.spines):
            if reader is not None:
                reader.set_physical_compaction(spine.physical_compaction)
        self.work: deque[_Work] = deque()
        # Per side with a history: the other side's and its own input frontier at its last
        # tidy call; at first, where they start (see :meth:`_worth_tidying`).
        lows = (left.lower.elements, right.lower.elements)
        self.tidied = [(lows[1], lows[0]), lows]

    def save(self, sink: StateSink) -> None:
        """Hand the histories this operator keeps of its sides to a checkpoint (a side read
        from a shared trace is saved by its arrangement).

        Raises:
            RuntimeError: work is still queued (the dataflow is not quiescent).
        """
        if self.work:
            msg = f"{self.name}: {len(self.work)} batches still to join at a checkpoint"
            raise RuntimeError(msg)
        for side, history in enumerate(self.histories):
            if history is not None:
                self._build_history(side)
                history.save(sink, f"side{side}")

    def load(self, source: StateSource) -> None:
        """Take this worker's share back: the histories of its own sides; a side read from a
        trace counts everything its arrangement restored as joined already."""
        for side, history in enumerate(self.histories):
            if history is not None:
                history.load(source, f"side{side}")
                runs = self.sorted_runs[side]
                if history.size and runs is not None and runs.alone:
                    runs.alone = False  # (noted from now on beside the history)
                    runs.drop()
                continue
            reader = self.readers[side]
            assert reader is not None
            upper = self.spines[side].upper
            self.acknowledged[side] = upper
            reader.set_physical_compaction(upper)

    def held(self) -> int:
        """The updates of both sides this operator holds itself (see :meth:`stored`)."""
        return self.stored(0) + self.stored(1)

    def stored(self, side: int) -> int:
        """How many updates this operator holds of ``side`` (0 when read from a trace)."""
        runs = self.sorted_runs[side]
        if runs is not None and runs.alone:
            return runs.size
        history = self.histories[side]
        return 0 if history is None else history.size

    def _build_history(self, side: int) -> None:
        """Give ``side`` its history, built from its columns, if it is held as columns alone;
        the columns stay beside it while they hold the same updates."""
        runs = self.sorted_runs[side]
        if runs is None or not runs.alone:
            return
        history = self.histories[side]
        assert history is not None
        history.extend(runs.updates())
        runs.beside_history()

    def _store(self, item: _Work) -> None:
        """Record ``item``'s batch (joined now) in its side's history or columns."""
        side = int(item.swap)
        runs = self.sorted_runs[side]
        if runs is None:
            item.finish()
            return
        alone = runs.alone
        item.finish(store=not alone)
        # A forwarded batch the row path has grouped by key (in lists made for it) waits in
        # the columns by key as it is.
        batch = item.batch
        grouped = item.items if alone and batch.__class__ is RawBatch else None
        runs.add(batch, item.cols, grouped)
        if alone and (not runs.valid or (runs.churn and self._history_earned(side, runs))):
            self._build_history(side)
        elif not alone and not runs.valid:
            self.sorted_runs[side] = None

    def _history_earned(self, side: int, runs: SortedRuns) -> bool:
        """Whether ``side``, held as columns alone, has cost as much as building its history
        would (:data:`ROW_READ_COST`): its row-path look-ups, and the conversions and merges
        of the small batches stored in it (:attr:`.SortedRuns.churn`)."""
        return self.row_reads[side] * ROW_READ_COST + runs.churn >= runs.size

    def _read_rows(self, item: _Work) -> None:
        """Before the row path reads ``item``'s other side: if that side is held as columns
        alone, look the batch's keys up in them, or build its history (see
        :data:`ROW_READ_COST`)."""
        side = 0 if item.swap else 1
        runs = self.sorted_runs[side]
        if runs is None or not runs.alone:
            return
        if not runs.size:
            return  # (nothing to join: the history is as empty)
        if kernels.mode() == "never" or self._history_earned(side, runs):
            self._build_history(side)
            return
        history = item.others
        assert isinstance(history, KeyedHistory)
        item.others = [runs]
        items = item.start()
        keys = [key for key, _ in items]
        if len(keys) > LOOKUP_CHUNK:
            readable = runs.readable_by(keys)  # (found a chunk at a time: see _Work.fetch)
        else:
            found = runs.find(keys)
            readable = found is not None
            if found is not None:
                item.found = found
                item.fetched = len(keys)
        if readable:
            self.row_reads[side] += 1
            return
        self._build_history(side)
        # Read as :meth:`_Work.start` reads a history.
        item.others = history
        item.found = history.rows
        item.fetched = len(items)

    def _other_side(self, side: int) -> list[Batch] | KeyedHistory:
        history = self.histories[side]
        if history is not None:
            return history
        ack = self.acknowledged[side]
        return [b for b in self.spines[side].batches() if len(b) and b.upper.dominates(ack)]

    def schedule(self, ctx: OperatorContext) -> None:
        """Queue newly arrived batches, do budgeted work, move compaction holds."""
        acknowledged = self.acknowledged
        work = self.work
        for side in (0, 1):
            other = 1 - side
            ack = acknowledged[side]
            keep = self.histories[side]
            for time, batch in ctx.messages(side):
                if len(batch):
                    others = self._other_side(other)
                    # With nothing to join now, a batch still joins its side's history in order.
                    if others or keep is not None:
                        work.append(_Work(time, batch, others, side == 1, keep))
                if keep is None:
                    ack = batch.upper
            if keep is not None:
                continue
            # Empty batches are inserted into the trace but never sent. Once the input
            # frontier has passed the trace's upper, every batch below it has been drained
            # here, so the whole trace can be acknowledged (and merged).
            upper = self.spines[side].upper
            if upper != ack and upper.dominates(ctx.frontier(side)):
                ack = upper
            if ack is not acknowledged[side]:
                acknowledged[side] = ack
                reader = self.readers[side]
                assert reader is not None  # sides without a history read the trace
                reader.set_physical_compaction(ack)
        if work:
            self._do_work(ctx)
        for side in (0, 1):
            frontier = ctx.frontier(1 - side)
            reader = self.readers[side]
            if reader is None:
                history = self.histories[side]
                if not work and history is not None and self._worth_tidying(side, ctx):
                    runs = self.sorted_runs[side]
                    if runs is not None and runs.alone:
                        if runs.tidy(frontier.elements):
                            continue
                        self._build_history(side)
                    history.tidy(frontier.elements)
            elif reader.logical_compaction.dominates(frontier) and frontier:
                reader.set_logical_compaction(frontier)

    def _worth_tidying(self, side: int, ctx: OperatorContext) -> bool:
        """Whether tidying ``side``'s history (compacting it to the other side's frontier)
        may do anything.

        Not when both input frontiers are as at the previous call (before the first: as they
        started), this side's is beyond the other's, and no pass is under way: every update
        added since came in a message this side's frontier was still waiting for, so its
        time is beyond the other side's frontier, where compaction leaves it as it is (it
        would only sum updates equal in value and time, which a join's batches rarely
        repeat). A run given many times at once, whose frontiers stand still while they flow
        through, would otherwise sweep the growing history over and over.
        """
        other = ctx.frontier(1 - side)
        own = ctx.frontier(side)
        seen = (other.elements, own.elements)
        if seen != self.tidied[side]:
            self.tidied[side] = seen
            return True
        history = self.histories[side]
        return history is None or history.sweeping or not other.dominates(own)

    def _read_frontier(self, ctx: OperatorContext, swap: bool) -> tuple[Any, ...]:
        """What the other side's history may be compacted to while an item of side
        ``int(swap)`` reads it: that side's input frontier and the times of its queued items
        (drained already, so no longer in the frontier)."""
        times = [w.time for w in self.work if w.swap is swap and w.joins]
        frontier = ctx.frontier(1 if swap else 0)
        if not times or all(frontier.less_equal(t) for t in times):
            return frontier.elements
        return Antichain([*frontier.elements, *times]).elements

    def _do_work(self, ctx: OperatorContext) -> None:
        budget = self.BUDGET
        # Per side, what its items may compact the other side's history to. Computed once per
        # activation (when a long list is first met) from the queue as it is then: items
        # finished meanwhile only make it lower than it could be, which compacts less but is
        # still safe.
        advances: dict[bool, AdvanceTo] = {}
        while self.work and budget > 0:
            item = self.work[0]
            if item.pos == 0 and item.row == 0 and item.cols is None and item.items is None:
                self._choose_kernel(item)
                if item.cols is None:
                    self._read_rows(item)
            if item.cols is not None:
                budget = self._kernel_item(ctx, item, budget)
                done = item.pos >= len(item.cols)
            else:
                out: dict[Any, dict[Any, int]] = {}
                budget = self._join_item(ctx, item, out, budget, advances)
                _send(ctx, out)
                done = item.pos >= len(item.start())
            if done:
                self._store(item)
                self.work.popleft()
        if self.work:
            # Items left for a later activation keep their time with a capability (those
            # drained now still have their message's right to mint one).
            for item in self.work:
                if item.joins and item.cap is None:
                    item.cap = ctx.capability(item.time)
            ctx.activate()

    def _choose_kernel(self, item: _Work) -> None:
        """Give ``item`` to the kernel (:mod:`.kernel`) if it is large enough (the domain's
        :meth:`~deltaflow.framework.time_domain.TimeDomain.join_kernel`), its other side is a
        history that the runs hold, both are int columns and, unless kernels are forced, it
        makes few pairs per update."""
        others = item.others
        if not isinstance(others, KeyedHistory):
            return
        n = len(item.batch)
        if not self.domain.join_kernel(n):
            return
        sorted_runs = self.sorted_runs[0 if item.swap else 1]
        if sorted_runs is None:
            return
        if sorted_runs.alone:
            if not sorted_runs.size:
                return
        elif not others.rows or not sorted_runs.usable(others.size):
            return
        runs = sorted_runs.runs()
        if not runs:
            return
        cols = columns_of(item.batch, self.domain)
        first = runs[0]
        if (
            cols is None
            or cols.times.ndim != first.times.ndim
            or (cols.objs is None) != (first.objs is None)
        ):
            return
        if kernels.mode() == "auto" and count_pairs(cols, runs) > PAIRS_PER_ROW * n:
            return
        item.cols = cols
        item.runs = list(runs)

    def _kernel_item(self, ctx: OperatorContext, item: _Work, budget: int) -> int:
        """Join ``item``'s rows from where it stopped with the kernel, about ``budget``
        output updates' worth, and send them; the budget left."""
        cols = item.cols
        assert cols is not None
        pairs, item.pos = pair_up(cols, item.runs, item.pos, budget)
        send = ctx.send
        for t, data, diffs in joined(pairs, cols, item.runs, self.logic, self.single, item.swap):
            send(0, t, UpdateBatch(data, diffs, True))
        return budget - max(1, sum(len(rows) for rows, _, _ in pairs))

    def _compacted(
        self,
        ctx: OperatorContext,
        history: KeyedHistory,
        key: Any,
        rows: list[tuple[Any, Any, int]],
        swap: bool,
        advances: dict[bool, AdvanceTo],
    ) -> list[tuple[Any, Any, int]]:
        """``key``'s long ``rows`` in the other side's ``history``, compacted as far as the
        items of side ``int(swap)`` allow (:meth:`_read_frontier`; ``advances`` holds it per
        side for the activation)."""
        advance = advances.get(swap)
        if advance is None:
            advance = advances[swap] = AdvanceTo(self._read_frontier(ctx, swap), self.domain)
        return history.compacted(key, rows, advance)

    def _join_item(
        self,
        ctx: OperatorContext,
        item: _Work,
        out: dict[Any, dict[Any, int]],
        budget: int,
        advances: dict[bool, AdvanceTo],
    ) -> int:
        """Join ``item`` from where it stopped until it is done or ``budget`` output updates
        are made, summing them into ``out`` (``{time: {datum: diff}}``); the budget left.

        The item's position is kept in locals while it runs (one attribute write per call,
        not per key): most keys of a large batch meet nothing and cost only their lookup.
        """
        logic = self.logic
        single = self.single
        items = item.start()
        n_items = len(items)
        swap = item.swap
        pos = item.pos
        row = item.row
        found = item.found
        others = item.others
        slot_time: Any = None
        row_time: Any = None
        whole = self.total
        pairs = self.pairs
        o1: Any = None
        i1: Any = None
        slot: dict[Any, int] = {}
        # Lists of the history longer than this are compacted as they are met (a trace's
        # batches are compacted by their spine).
        long = others.long() if isinstance(others, KeyedHistory) else 1 << 62
        while pos < n_items and budget > 0:
            if pos >= item.fetched:
                item.pos = pos
                item.fetch()
                found = item.found
            key, rows = items[pos]
            matches = found.get(key)
            if not matches:
                pos += 1
                continue
            if len(matches) > long and row == 0:
                assert isinstance(others, KeyedHistory)
                matches = self._compacted(ctx, others, key, matches, swap, advances)
                if not matches:
                    pos += 1
                    continue
            n_rows = len(rows)
            # A key with many matches is split across activations, row by row.
            while row < n_rows and budget > 0:
                v1, t1, r1 = rows[row]
                row += 1
                # Plain int times and a loop's times, Product(int, int) (both sides: one
                # scope), are joined here inline: a call per pair is a good share of its cost.
                # (A batch's rows mostly share their time: it is taken apart once for them.)
                if pairs and t1 is not row_time:
                    row_time = t1
                    o1 = t1[0]
                    i1 = t1[1]
                for v2, t2, r2 in matches:
                    if pairs:
                        o2 = t2[0]  # (a tuple subclass indexes faster than it unpacks)
                        i2 = t2[1]
                        if o2 <= o1:
                            if i2 <= i1:
                                t = t1
                            else:
                                t = t2 if o2 == o1 else new_tuple(Product, (o1, i2))
                        else:
                            t = t2 if i2 >= i1 else new_tuple(Product, (o2, i1))
                    elif whole:
                        t = t1 if t1 >= t2 else t2
                    else:
                        t = time_join(t1, t2)
                    if t is not slot_time:  # (pairs in a row mostly share their time)
                        got = out.get(t)
                        if got is None:
                            got = out[t] = {}
                        slot = got
                        slot_time = t
                    r = r1 * r2
                    if single:
                        d = logic(key, v2, v1) if swap else logic(key, v1, v2)
                        slot[d] = slot.get(d, 0) + r
                        budget -= 1
                        continue
                    for d in logic(key, v2, v1) if swap else logic(key, v1, v2):
                        slot[d] = slot.get(d, 0) + r
                        budget -= 1
            if row >= n_rows:
                pos += 1
                row = 0
        item.pos = pos
        item.row = row
        return budget


def _send(ctx: OperatorContext, out: dict[Any, dict[Any, int]]) -> None:
    """Send a work item's output, ``{time: {datum: diff}}``, one consolidated batch per time
    in time order (the sums that cancelled left out)."""
    for t in sorted(out) if len(out) > 1 else out:
        sums = out[t]
        if 0 in sums.values():  # pairs that cancelled (an edge retracted, say)
            data = [d for d, r in sums.items() if r]
            if data:
                diffs = [r for r in sums.values() if r]
                ctx.send(0, t, UpdateBatch(data, diffs, True))
        else:
            ctx.send(0, t, UpdateBatch(list(sums), list(sums.values()), True))
