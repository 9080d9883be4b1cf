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
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..framework.lattice import join as time_join
from .base import Interest, Operator, UpdateBatch

if TYPE_CHECKING:
    from ..framework.trace.batch import Batch
    from ..framework.trace.spine import Spine, TraceReader
    from .base import Capability, OperatorContext

__all__ = ["JoinOperator"]


class _Work:
    """A batch still to be joined against a snapshot of the other side's batches."""

    __slots__ = ("cap", "items", "matches", "others", "pos", "row", "swap")

    def __init__(self, cap: Capability, batch: Batch, others: list[Batch], swap: bool) -> None:
        self.cap = cap
        self.items = list(batch.iter_keys())
        self.pos = 0
        self.row = 0
        self.matches: list[tuple[Any, Any, int]] | None = None
        self.others = others
        self.swap = swap


class JoinOperator(Operator):
    """Join two arrangements with ``logic(key, val1, val2) -> iterable of outputs``.

    ``logic`` returns an iterable of output data (``join_map`` wraps a one-result function).
    """

    interest = Interest.ALWAYS
    #: Output updates produced per activation before yielding to other actors.
    BUDGET = 100_000

    def __init__(
        self,
        name: str,
        left: Spine,
        right: Spine,
        logic: Callable[[Any, Any, Any], Iterable[Any]],
    ) -> None:
        self.name = name
        self.logic = logic
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
        for side in (0, 1):
            other = 1 - side
            for time, batch in ctx.messages(side):
                others = self._acknowledged_batches(other)
                if others and len(batch):
                    self.work.append(_Work(ctx.capability(time), batch, others, side == 1))
                self.acknowledged[side] = batch.upper
                self.readers[side].set_physical_compaction(batch.upper)
            # Empty batches are inserted into the trace but never sent. Once the input
            # frontier has passed the trace's upper, every batch below it has been drained
            # here, so the whole trace can be acknowledged (and merged).
            upper = self.spines[side].upper
            if upper != self.acknowledged[side] and upper.dominates(ctx.frontier(side)):
                self.acknowledged[side] = upper
                self.readers[side].set_physical_compaction(upper)
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
        while self.work and budget > 0:
            item = self.work[0]
            out: dict[Any, tuple[list[Any], list[int]]] = {}
            items = item.items
            others = item.others
            swap = item.swap
            while item.pos < len(items) and budget > 0:
                key, rows = items[item.pos]
                matches = item.matches
                if matches is None:
                    matches = item.matches = [m for b in others for m in b.lookup(key)]
                # A key with many matches is split across activations, row by row.
                while item.row < len(rows) and matches and budget > 0:
                    v1, t1, r1 = rows[item.row]
                    item.row += 1
                    for v2, t2, r2 in matches:
                        t = time_join(t1, t2)
                        slot = out.get(t)
                        if slot is None:
                            slot = out[t] = ([], [])
                        results = logic(key, v2, v1) if swap else logic(key, v1, v2)
                        r = r1 * r2
                        for d in results:
                            slot[0].append(d)
                            slot[1].append(r)
                            budget -= 1
                if item.row >= len(rows) or not matches:
                    item.pos += 1
                    item.row = 0
                    item.matches = None
            for t in sorted(out):
                data, diffs = out[t]
                if data:
                    ctx.send(0, t, UpdateBatch(data, diffs))
            if item.pos >= len(items):
                item.cap.drop()
                self.work.popleft()
        if self.work:
            ctx.activate()
