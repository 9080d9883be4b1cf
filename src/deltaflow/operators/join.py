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

Work is budgeted: a batch meeting a huge key produces at most :attr:`JoinOperator.BUDGET`
output updates per activation, then the operator keeps a capability, reschedules itself and
lets the other actors of the worker run.

    >>> import deltaflow as df
    >>> from deltaflow.testing import example
    >>> example(lambda a, b: a.join(b), a=[((1, "x"), 0, 1)], b=[((1, "y"), 1, 2)])
    [((1, ('x', 'y')), 1, 2)]
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..framework.lattice import join as time_join
from .base import Interest, Operator, UpdateBatch

if TYPE_CHECKING:
    from ..framework.trace.batch import Batch
    from ..framework.trace.spine import Spine, TraceReader
    from .base import Capability, OperatorContext

__all__ = ["JoinOperator"]


class _Work:
    """A batch still to be joined against a snapshot of the other side's batches.

    ``found`` holds the other side's rows for the keys ``items[pos:fetched]``, looked up a
    chunk of keys at a time (:data:`LOOKUP_CHUNK`) with one ``lookup_many`` per batch.
    """

    __slots__ = ("cap", "fetched", "found", "items", "others", "pos", "row", "swap")

    def __init__(self, cap: Capability, batch: Batch, others: list[Batch], swap: bool) -> None:
        self.cap = cap
        self.items = list(batch.iter_keys())
        self.pos = 0
        self.row = 0
        self.fetched = 0
        self.found: dict[Any, list[tuple[Any, Any, int]]] = {}
        self.others = others
        self.swap = swap

    def fetch(self) -> None:
        """Look up the next chunk of keys in the other side's batches."""
        start = self.pos
        self.fetched = start + LOOKUP_CHUNK
        keys = [key for key, _ in self.items[start : self.fetched]]
        found: dict[Any, list[tuple[Any, Any, int]]] = {}
        for batch in self.others:
            for key, rows in batch.lookup_many(keys).items():
                have = found.get(key)
                if have is None:
                    found[key] = rows
                else:
                    have.extend(rows)
        self.found = found


LOOKUP_CHUNK = 1024
"""Keys of an arriving batch looked up in the other side together (bounds what is held)."""


class JoinOperator(Operator):
    """Join two arrangements with ``logic(key, val1, val2) -> iterable of outputs``.

    ``logic`` returns an iterable of output data, or with ``single=True`` exactly one output
    datum (``join_map``'s function, called without wrapping its result in a tuple).
    """

    interest = Interest.ALWAYS
    #: Output updates produced per activation before yielding to other actors.
    BUDGET = 100_000

    def __init__(
        self,
        name: str,
        left: Spine,
        right: Spine,
        logic: Callable[[Any, Any, Any], Any],
        *,
        single: bool = False,
    ) -> None:
        self.name = name
        self.logic = logic
        self.single = single
        self.readers: tuple[TraceReader, TraceReader] = (left.reader(), right.reader())
        self.spines = (left, right)
        self.acknowledged = [left.lower, right.lower]
        for reader, spine in zip(self.readers, self.spines):
            reader.set_physical_compaction(spine.physical_compaction)
        self.work: deque[_Work] = deque()

    def _acknowledged_batches(self, side: int) -> list[Batch]:
        ack = self.acknowledged[side]
        return [b for b in self.spines[side].batches() if len(b) and b.upper.dominates(ack)]

    def schedule(self, ctx: OperatorContext) -> None:
        """Queue newly arrived batches, do budgeted work, move compaction holds."""
        acknowledged = self.acknowledged
        for side in (0, 1):
            other = 1 - side
            ack = acknowledged[side]
            for time, batch in ctx.messages(side):
                if len(batch):
                    others = self._acknowledged_batches(other)
                    if others:
                        self.work.append(_Work(ctx.capability(time), batch, others, side == 1))
                ack = batch.upper
            # Empty batches are inserted into the trace but never sent. Once the input
            # frontier has passed the trace's upper, every batch below it has been drained
            # here, so the whole trace can be acknowledged (and merged).
            upper = self.spines[side].upper
            if upper != ack and upper.dominates(ctx.frontier(side)):
                ack = upper
            if ack is not acknowledged[side]:
                acknowledged[side] = ack
                self.readers[side].set_physical_compaction(ack)
        if self.work:
            self._do_work(ctx)
        for side in (0, 1):
            frontier = ctx.frontier(1 - side)
            reader = self.readers[side]
            if reader.logical_compaction.dominates(frontier) and frontier:
                reader.set_logical_compaction(frontier)

    def _do_work(self, ctx: OperatorContext) -> None:
        budget = self.BUDGET
        logic = self.logic
        single = self.single
        while self.work and budget > 0:
            item = self.work[0]
            out: dict[Any, tuple[list[Any], list[int]]] = {}
            items = item.items
            n_items = len(items)
            swap = item.swap
            while item.pos < n_items and budget > 0:
                if item.pos >= item.fetched:
                    item.fetch()
                key, rows = items[item.pos]
                matches = item.found.get(key)
                # A key with many matches is split across activations, row by row.
                while item.row < len(rows) and matches and budget > 0:
                    v1, t1, r1 = rows[item.row]
                    item.row += 1
                    for v2, t2, r2 in matches:
                        t = time_join(t1, t2)
                        slot = out.get(t)
                        if slot is None:
                            slot = out[t] = ([], [])
                        r = r1 * r2
                        if single:
                            slot[0].append(logic(key, v2, v1) if swap else logic(key, v1, v2))
                            slot[1].append(r)
                            budget -= 1
                            continue
                        for d in logic(key, v2, v1) if swap else logic(key, v1, v2):
                            slot[0].append(d)
                            slot[1].append(r)
                            budget -= 1
                if item.row >= len(rows) or not matches:
                    item.pos += 1
                    item.row = 0
            for t in sorted(out) if len(out) > 1 else out:
                data, diffs = out[t]
                if data:
                    ctx.send(0, t, UpdateBatch(data, diffs))
            if item.pos >= n_items:
                item.cap.drop()
                self.work.popleft()
        if self.work:
            ctx.activate()
