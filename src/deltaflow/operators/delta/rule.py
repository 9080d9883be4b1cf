"""The operator of one delta rule: :class:`RuleOperator` runs the lookup phases
(:mod:`.lookup`) on the records that arrive, once their indexes' frontiers allow, in chunks
and within a budget per activation, and keeps what arrived too early under a capability.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, ClassVar

from ...framework import tuning
from ...framework.antichain import Antichain
from ...framework.durable.tables import Rows
from ...framework.lattice import less_equal
from ..base import Interest, Operator, UpdateBatch
from ..durable import covering
from .lookup import Record, Runner, identity

if TYPE_CHECKING:
    from ..base import Capability, OperatorContext
    from ..durable import StateSink, StateSource
    from .index import IndexStore

__all__ = ["UNKNOWN", "RuleOperator"]

_binding = itemgetter(0)

UNKNOWN = object()
"""What :meth:`RuleOperator.lowest` says before it can tell."""


class _Job:
    """Records at ``time`` under way: ``todo`` is a stack of ``(phase, records, diffs)``,
    ``results`` the output summed so far per time and datum (``held`` records went in)."""

    __slots__ = ("held", "results", "time", "todo")

    def __init__(self, time: Any, recs: list[Record], diffs: list[int]) -> None:
        self.time = time
        self.todo: list[tuple[int, list[Record], list[int]]] = [(0, recs, diffs)]
        self.results: dict[Any, dict[Any, int]] = {}
        self.held = 0


class RuleOperator(Operator):
    """Run phases of a delta rule on the records that arrive, once their indexes allow.

    Input 0 carries the records (or, with ``first``, the data that start the rule: each
    becomes ``(prepare(datum), t, 0, 0)``, or ``(datum, t, 0, 0)`` without ``prepare``);
    inputs ``1..`` are the outputs of the indexes the phases read, followed only for their
    frontiers. ``waits[i] = (port, strict)``: a record at ``t``
    waits until no element of that port's frontier is before ``t`` (``strict``) or not after
    it. The result goes on at ``t`` to the next operator of the rule, or, with ``emit``, as
    ``emit(binding)`` (``emit(record)`` with ``whole``) at its ``t_out``, summed per time and
    datum.
    """

    #: Records made per activation before the others may run (and what was summed is
    #: sent): a hub's round is spread over activations instead of held at once.
    BUDGET: ClassVar[int] = tuning.DELTA_BUDGET
    #: Records a phase takes at once (see :meth:`_run`): small enough that a hub key's
    #: proposals for a chunk stay a few megabytes, large enough that per-chunk costs vanish.
    CHUNK: ClassVar[int] = tuning.DELTA_CHUNK

    interest = Interest.ALWAYS

    def __init__(
        self,
        name: str,
        runners: list[Runner],
        waits: list[tuple[int, bool]],
        *,
        first: bool,
        emit: Callable[[Any], Any] | None,
        whole: bool = False,
        stores: Sequence[IndexStore] = (),
        prepare: Callable[[Any], Any] | None = None,
        route: Callable[[Record], Any] | None = None,
        layout: tuple[int, int] = (0, 1),
        total: bool,
    ) -> None:
        self.name = name
        #: The times are ints (the time domain's ``total``): one sum per chunk, and a time
        #: not ready yet holds back every later one.
        self.total = total
        self.prepare = prepare
        #: The key a record is exchanged by into this operator (``None``: not exchanged),
        #: and which of how many operators of its rule this is: what a checkpoint needs to
        #: hand stashed records back to the right worker and operator.
        self.route = route
        self.layout = layout
        self.runners = runners
        self.waits = waits
        self.first = first
        self.emit = emit
        self.whole = whole
        self.stash: dict[Any, tuple[list[Record], list[int]]] = {}
        self.jobs: deque[_Job] = deque()
        self.caps: list[Capability] = []
        # The records' frontier when last scheduled (None: not yet): with what is stashed
        # and under way, how far back this operator may still look (``lowest``).
        self.seen: tuple[Any, ...] | None = None
        for store in stores:
            store.readers.append(self)

    def initialize(self, ctx: OperatorContext, capabilities: Sequence[Capability]) -> None:
        """Keep capabilities for records a restored state stashed (none on a fresh start)."""
        self.caps = covering(capabilities, self.stash)

    def save(self, sink: StateSink) -> None:
        """Hand the records waiting for their indexes to a checkpoint.

        Raises:
            RuntimeError: records are still being worked through (not quiescent).
        """
        if self.jobs:
            msg = f"{self.name}: records still under way at a checkpoint"
            raise RuntimeError(msg)
        route = self.route
        recs = [rec for rs, _ in self.stash.values() for rec in rs]
        sink.rows(
            "stash",
            Rows({
                "key": [None] * len(recs) if route is None else [route(rec) for rec in recs],
                "rec": recs,
                "time": [t for t, (rs, _) in self.stash.items() for _ in rs],
                "diff": [r for _, ds in self.stash.values() for r in ds],
            }),
            None if route is None else "key",
        )  # fmt: skip
        sink.value("layout", list(self.layout))

    def load(self, source: StateSource) -> None:
        """Take this worker's share of the stashed records back.

        Raises:
            ValueError: there are some, and the rule was split into operators otherwise when
                they were saved (a checkpoint of one worker resumed on several, or back).
        """
        rows = source.rows("stash")
        if rows is None or not len(rows):
            return
        layout = source.value("layout")
        if layout is not None and tuple(layout) != self.layout:
            msg = (
                f"{self.name}: the checkpoint holds records of this rule waiting for later "
                f"times as operator {layout[0]} of {layout[1]}, and this job splits the rule "
                f"into {self.layout[1]}: resume it with a worker count on the same side of one"
            )
            raise ValueError(msg)
        cols = rows.columns
        for rec, t, r in zip(cols["rec"], cols["time"], cols["diff"]):
            slot = self.stash.get(t)
            if slot is None:
                self.stash[t] = ([rec], [r])
            else:
                slot[0].append(rec)
                slot[1].append(r)

    def lowest(self) -> Any:
        """The least time this operator may still look its indexes up as of (``None``: never
        again; ``UNKNOWN`` before it first ran). A stale answer is only lower."""
        if self.seen is None:
            return UNKNOWN
        owed = [*self.seen, *self.stash, *(job.time for job in self.jobs)]
        return min(owed) if owed else None

    def _records(self, t: Any, data: list[Any]) -> list[Record]:
        """The records starting the rule from ``data`` at ``t``."""
        prepare = self.prepare
        if prepare is None:
            return [(d, t, 0, 0) for d in data]
        return [(prepare(d), t, 0, 0) for d in data]

    def _ready(self, ctx: OperatorContext, t: Any) -> bool:
        for port, strict in self.waits:
            for f in ctx.frontier(port).elements:
                if f < t or (not strict and f == t):
                    return False
        return True

    def schedule(self, ctx: OperatorContext) -> None:
        """Queue what may run now, stash the rest; work through the queue within
        :attr:`BUDGET`, holding capabilities at the least times still owed."""
        stash = self.stash
        jobs = self.jobs
        changed = False
        self.seen = ctx.frontier(0).elements
        for t, batch in ctx.messages(0):
            recs = self._records(t, batch.data) if self.first else batch.data
            if t in stash:
                slot = stash[t]
                slot[0].extend(recs)
                slot[1].extend(batch.diffs)
            elif self._ready(ctx, t):
                jobs.append(_Job(t, recs, batch.diffs))
            else:
                stash[t] = (list(recs), list(batch.diffs))
                self._hold(ctx, t)
        if stash:
            for t in sorted(stash):
                if self._ready(ctx, t):
                    recs, diffs = stash.pop(t)
                    jobs.append(_Job(t, recs, diffs))
                    changed = True
                elif self.total:
                    break  # later int times wait for the same frontiers
        budget = self.BUDGET
        while jobs and budget > 0:
            job = jobs[0]
            budget = self._work(ctx, job, budget)
            if not job.todo:
                jobs.popleft()
                changed = True
        if jobs:
            for job in jobs:
                self._hold(ctx, job.time)
            ctx.activate()
        if changed:
            self._rehold()

    def _hold(self, ctx: OperatorContext, t: Any) -> None:
        """Keep a capability at or before ``t`` (one per least time owed: the progress
        tracker's work grows with the capabilities held)."""
        caps = self.caps
        for cap in caps:
            if less_equal(cap.time, t):
                return
        keep = [ctx.capability(t)]
        for cap in caps:
            if less_equal(t, cap.time):
                cap.drop()
            else:
                keep.append(cap)
        self.caps = keep

    def _rehold(self) -> None:
        """Move the capabilities up to the least times still owed."""
        caps = self.caps
        owed = Antichain([*self.stash, *(job.time for job in self.jobs)]).elements
        new = [next(c for c in caps if less_equal(c.time, t)).delayed(t) for t in owed]
        for cap in caps:
            cap.drop()
        self.caps = new

    def _work(self, ctx: OperatorContext, job: _Job, budget: int) -> int:
        """Run the phases on ``job``'s records, depth first in chunks of :attr:`CHUNK` (what
        one phase makes goes through the rest before the next chunk, so a hub's proposals
        are never all held at once) until ``budget`` records were made; returns what is left
        of it. Results are summed, and sent when many or when the job is done."""
        runners = self.runners
        last = len(runners)
        emit = self.emit
        results = job.results
        todo = job.todo
        t = job.time
        while todo and budget > 0:
            phase, recs, diffs = todo.pop()
            if len(recs) > self.CHUNK:
                chunks = range(0, len(recs), self.CHUNK)
                todo.extend(
                    (phase, recs[i : i + self.CHUNK], diffs[i : i + self.CHUNK])
                    for i in reversed(chunks)
                )
                continue
            if phase < last:
                out, out_diffs = runners[phase](recs, diffs, t)
                budget -= len(out)
                if out:
                    todo.append((phase + 1, out, out_diffs))
            elif emit is None:
                ctx.send(0, t, UpdateBatch(recs, diffs))
            else:
                self._sum(results, recs, diffs, t)
                job.held += len(recs)
                if job.held > self.BUDGET:
                    self._flush(ctx, job)
        if not todo or budget <= 0:
            self._flush(ctx, job)
        return budget

    def _sum(
        self, results: dict[Any, dict[Any, int]], recs: list[Record], diffs: list[int], t: Any
    ) -> None:
        """Add what ``recs`` emit to ``results``, per time ``t_out`` and datum. At an int time
        every record's ``t_out`` is ``t`` (the times it met are not after it), so one sum
        takes the whole chunk, its data emitted by C-level maps."""
        emit = self.emit
        assert emit is not None
        if self.total:
            sums = results.get(t)
            if sums is None:
                sums = results[t] = {}
            get = sums.get
            data: Iterable[Any]
            if self.whole:
                data = map(emit, recs)
            else:
                data = map(_binding, recs)
                if emit is not identity:
                    data = map(emit, data)
            for d, r in zip(data, diffs):
                sums[d] = get(d, 0) + r
            return
        for rec, r in zip(recs, diffs):
            at = rec[1]
            sums = results.get(at)
            if sums is None:
                sums = results[at] = {}
            d = emit(rec) if self.whole else emit(rec[0])
            sums[d] = sums.get(d, 0) + r

    def _flush(self, ctx: OperatorContext, job: _Job) -> None:
        """Send the results summed so far."""
        results = job.results
        for at in sorted(results) if len(results) > 1 else results:
            self._send(ctx, at, results[at])
        results.clear()
        job.held = 0

    @staticmethod
    def _send(ctx: OperatorContext, t: Any, sums: dict[Any, int]) -> None:
        """Send the non-zero sums at ``t``, marked consolidated."""
        if 0 in sums.values():
            data = [d for d, r in sums.items() if r]
            if data:
                ctx.send(0, t, UpdateBatch(data, [r for r in sums.values() if r], True))
        elif sums:
            ctx.send(0, t, UpdateBatch(list(sums), list(sums.values()), True))
