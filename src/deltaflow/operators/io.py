"""Where updates enter and leave a dataflow: inputs, outputs and probes.

* An :class:`InputOperator` holds a capability at its input's current time and sends what the
  application fed through the job's input handle (an :class:`InputFeed` per worker).
* An :class:`OutputOperator` writes every batch it receives into an :class:`OutputStore` shared
  by all workers, and tells the store how far its input frontier has moved: the times the
  frontier has passed are complete, and the store publishes them consolidated.
* A :class:`ProbeOperator` only watches a frontier, for :class:`ProbeHandle`.

These are plain data structures and operators; the scheduler wires them to the application.
"""

from __future__ import annotations

import bisect
import builtins
from collections.abc import Awaitable, Callable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from ..framework.antichain import Antichain
from ..framework.durable.tables import Rows
from ..framework.lattice import join, less_equal
from ..framework.trace.ints import int_like
from .base import Interest, Operator, RunsBatch, UpdateBatch
from .durable import Changes

if TYPE_CHECKING:
    from ..framework.durable.tables import Groups
    from ..framework.lattice import Time
    from .base import Capability, OperatorContext
    from .durable import StateSink

__all__ = [
    "InputFeed",
    "InputOperator",
    "OutputOperator",
    "OutputStore",
    "ProbeHandle",
    "ProbeOperator",
]


_time_of = itemgetter(1)


class InputFeed:
    """What one worker's input operator still has to send, filled by the job's input handle.

    ``pending`` maps a time to the data and diffs fed for it; ``time`` is where the input's
    capability should be; ``closed`` means the capability must be dropped. ``runs``: every
    reader of the input takes a :class:`~.base.RunsBatch` (the job finds out from its plan),
    so several times pending at once may go as one message.
    """

    def __init__(self) -> None:
        self.pending: dict[Any, tuple[list[Any], list[int]]] = {}
        self.time: Time = 0
        self.closed = False
        self.runs = False

    def push(self, time: Time, data: list[Any], diffs: list[int]) -> None:
        """Queue ``data``/``diffs`` to be sent at ``time``."""
        slot = self.pending.get(time)
        if slot is None:
            self.pending[time] = (data, diffs)
        else:
            slot[0].extend(data)
            slot[1].extend(diffs)

    def stand_at(self, time: Time, closed: bool) -> None:
        """Where a checkpoint left the input: its capability at ``time``, dropped if
        ``closed``."""
        self.time = time
        self.closed = closed


class InputOperator(Operator):
    """The source of one named input on one worker."""

    interest = Interest.NEVER
    stateless = True

    def __init__(self, name: str, feed: InputFeed) -> None:
        self.name = f"input:{name}"
        self.feed = feed
        self.cap: Capability | None = None

    def initialize(self, ctx: OperatorContext, capabilities: Sequence[Capability]) -> None:
        """Keep the output capability: the input may send from the least time on (from the
        time a resumed job resumed at; none for an input a checkpoint saved closed)."""
        self.cap = capabilities[0] if capabilities else None

    def schedule(self, ctx: OperatorContext) -> None:
        """Send queued batches, then move or drop the capability."""
        cap = self.cap
        if cap is None:
            return
        feed = self.feed
        if feed.pending:
            pending, feed.pending = feed.pending, {}
            if len(pending) > 1 and feed.runs:
                runs = _as_runs(pending)
                if runs is not None:
                    ctx.send(0, runs.times[0], runs)
                    pending = {}
            for time in sorted(pending):
                data, diffs = pending[time]
                if data:
                    ctx.send(0, time, UpdateBatch(data, diffs))
        if feed.closed:
            cap.drop()
            self.cap = None
        elif feed.time != cap.time:
            cap.downgrade(feed.time)


def _as_runs(pending: dict[Any, tuple[list[Any], list[int]]]) -> RunsBatch | None:
    """The updates of several times as one message, when they are int data (plain ints, or
    tuples of them: what the kernels read as columns); None for other data, which keep one
    message per time."""
    times = []
    lengths = []
    data: list[Any] = []
    diffs: list[int] = []
    for time in sorted(pending):
        d, r = pending[time]
        if d:
            times.append(time)
            lengths.append(len(d))
            data.extend(d)
            diffs.extend(r)
    if not int_like(data):
        return None
    return RunsBatch(times, lengths, data, diffs)


class OutputStore:
    """The updates of one output, gathered from every worker and published by completed time.

    ``history`` holds the consolidated updates of every complete time, in time order;
    ``on_complete`` (set by the runtime) is called with ``(time, updates)`` for each newly
    complete time that has updates.

    With ``keep = h`` (``df.open(..., history=h)``) only times ``>= since`` stay answerable,
    ``since`` trailing the frontier by ``h``: older updates are folded into ``base`` at
    ``since``, as a trace compacts (``advance_by``), so a long job's store stays the size of
    its collection plus ``h`` times of changes.

    >>> store = OutputStore("out")
    >>> store.add(0, UpdateBatch(["a", "b", "a"], [1, 1, -1]))
    >>> store.advance(Antichain([1]))
    [(0, [('b', 1)])]
    >>> store.at(0)
    {'b': 1}
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.open: dict[Any, dict[Any, int]] = {}
        self.history: list[tuple[Any, Any, int]] = []
        self.frontier: Antichain = Antichain([0])
        self.current: dict[Any, int] = {}
        self.latest: Any = None  # the join of every published time
        self.on_complete: Callable[[Any, list[tuple[Any, int]]], None] | None = None
        self.keep: int | None = None
        self.since: int | None = None
        self.base: dict[Any, int] = {}  # the updates at times <= since, accumulated
        self._kept = 0  # len(history) after the last compaction
        #: The data whose count in ``current`` changed since a checkpoint last took it.
        self.changes = Changes()
        #: The time a resumed job resumed at (times before ``resumed_at - 1`` are not kept).
        self.resumed_at: int | None = None

    def add(self, time: Time, batch: UpdateBatch) -> None:
        """Record a batch received at ``time``."""
        acc = self.open.get(time)
        if acc is None:
            acc = self.open[time] = {}
        batch.sum_into(acc)

    def advance(self, frontier: Antichain) -> list[tuple[Any, list[tuple[Any, int]]]]:
        """Move to ``frontier`` (ignored unless it is later) and publish complete times."""
        if frontier is self.frontier or not self.frontier.dominates(frontier):
            return []  # (the tracker hands out one object per frontier until it moves)
        self.frontier = frontier
        done = [t for t in self.open if not frontier.less_equal(t)]
        done.sort()
        published = []
        current = self.current
        changed = self.changes.keys
        for t in done:
            acc = self.open.pop(t)
            updates = [(d, r) for d, r in acc.items() if r]
            if not updates:
                continue
            self.latest = t if self.latest is None else join(self.latest, t)
            for d, r in updates:
                self.history.append((d, t, r))
                n = current.get(d, 0) + r
                if n:
                    current[d] = n
                else:
                    del current[d]
            if changed is not None:
                changed.update([d for d, _ in updates])
            published.append((t, updates))
            if self.on_complete is not None:
                self.on_complete(t, updates)
        if self.keep is not None and frontier:
            least: Any = builtins.min(frontier)  # outputs are at the top: int times
            self.since = least - self.keep
            # Folding once the history has doubled keeps the work per update constant.
            if len(self.history) > 2 * self._kept + 64:
                self._compact()
        return published

    def _compact(self) -> None:
        """Fold the updates at times ``<= since`` into ``base``."""
        since = self.since
        history = self.history
        if since is None or not history or history[0][1] > since:
            return
        cut = bisect.bisect_right(history, since, key=_time_of)
        base = self.base
        for d, _, r in history[:cut]:
            n = base.get(d, 0) + r
            if n:
                base[d] = n
            else:
                del base[d]
        del history[:cut]
        self._kept = len(history)

    def is_complete(self, time: Time) -> bool:
        """True once the frontier has passed ``time``."""
        return not self.frontier.less_equal(time)

    def at(self, time: Time) -> dict[Any, int]:
        """The output collection at a complete ``time``: ``{data: count}``.

        Raises:
            ValueError: ``time`` is not complete yet, or is older than the history kept.
        """
        if not self.is_complete(time):
            msg = (
                f"output {self.name!r}: time {time!r} is not complete yet (frontier "
                f"{list(self.frontier)}); await job.advance_to(...) past it first"
            )
            raise ValueError(msg)
        if self.resumed_at is not None and time < self.resumed_at - 1:
            msg = (
                f"output {self.name!r}: time {time!r} is before the checkpoint this job resumed "
                f"from (at time {self.resumed_at}: its outputs hold times from "
                f"{self.resumed_at - 1} on)"
            )
            raise ValueError(msg)
        if self.since is not None and time < self.since:
            msg = (
                f"output {self.name!r}: time {time!r} is older than the history kept "
                f"(history={self.keep}: times from {self.since} on); open the job with a "
                "larger history= to read it"
            )
            raise ValueError(msg)
        if self.latest is None or less_equal(self.latest, time):
            return dict(self.current)
        out: dict[Any, int] = dict(self.base)
        for d, t, r in self.history:
            if less_equal(t, time):
                n = out.get(d, 0) + r
                if n:
                    out[d] = n
                else:
                    del out[d]
        return out

    # -- checkpoints ----------------------------------------------------------------------
    def save_current(self, sink: StateSink) -> None:
        """Hand the collection at the last complete time to a checkpoint (the data whose
        count changed since the previous one), and the frontier."""
        sink.index("current", self.current, ("count",), self.changes.take(), single=True)

    def save_open(self, sink: StateSink) -> None:
        """Hand the updates at times not complete yet to a checkpoint."""
        data = [d for acc in self.open.values() for d, r in acc.items() if r]
        times = [t for t, acc in self.open.items() for r in acc.values() if r]
        diffs = [r for acc in self.open.values() for r in acc.values() if r]
        sink.rows("open", Rows({"data": data, "time": times, "diff": diffs}), None)

    def restore(
        self,
        time: int,
        frontier: Antichain,
        current: Groups | None,
        pending: Rows | None,
    ) -> None:
        """Stand where a checkpoint at ``time`` left the output: complete before ``time``
        (the collection then is ``current``, answerable as ``at(time - 1)``; nothing older),
        its frontier, and the updates at later times already made (``pending``)."""
        self.resumed_at = time
        self.frontier = frontier
        if current is not None:
            self.base = current.values("count")
            self.current = dict(self.base)
            self.changes.keys = set()
        self.since = time - 1
        self.latest = time - 1
        if pending is not None:
            cols = pending.columns
            for d, t, r in zip(cols["data"], cols["time"], cols["diff"]):
                acc = self.open.get(t)
                if acc is None:
                    acc = self.open[t] = {}
                acc[d] = acc.get(d, 0) + r

    def updates(self) -> list[tuple[Any, Any, int]]:
        """Every published update ``(data, time, diff)``, consolidated per time; with a
        bounded history, those before ``since`` are at ``since`` (accumulated)."""
        if self.since is None:
            return list(self.history)
        self._compact()
        since = self.since
        return [(d, since, r) for d, r in self.base.items()] + self.history


class OutputOperator(Operator):
    """Write one worker's share of an output into the shared :class:`OutputStore`."""

    interest = Interest.ALWAYS
    stateless = True

    def __init__(self, store: OutputStore) -> None:
        self.name = f"output:{store.name}"
        self.store = store

    def schedule(self, ctx: OperatorContext) -> None:
        """Record batches, then report the frontier."""
        add = self.store.add
        for time, batch in ctx.messages(0):
            add(time, batch)
        self.store.advance(ctx.frontier(0))


class ProbeHandle:
    """Observes the frontier of a collection: which times are complete there.

    ``less_equal(t)`` is True while ``t`` may still change; ``done()`` once the stream ended.
    Inside a running job, ``await probe.wait_past(t)`` returns once ``t`` is complete.
    """

    def __init__(self, initial: Time = 0) -> None:
        self.frontier: Antichain = Antichain([initial])
        self._wait: Callable[[Callable[[], bool]], Awaitable[None]] | None = None

    def attach(self, wait: Callable[[Callable[[], bool]], Awaitable[None]]) -> None:
        """Wait through ``wait`` (a running job's: it awaits a condition, looked at as the job
        wakes its waiters); the job attaches its probes as it is built."""
        self._wait = wait

    def advance(self, frontier: Antichain) -> None:
        """Record a later frontier (earlier reports from lagging workers are ignored)."""
        if self.frontier.dominates(frontier):
            self.frontier = frontier

    def less_equal(self, time: Time) -> bool:
        """True while ``time`` is beyond the frontier (it may still change)."""
        return self.frontier.less_equal(time)

    def less_than(self, time: Time) -> bool:
        """True while some frontier time is strictly before ``time``."""
        return self.frontier.less_than(time)

    def done(self) -> bool:
        """True once no more updates can arrive."""
        return self.frontier.is_empty()

    async def wait_past(self, time: Time) -> None:
        """Wait until ``time`` is complete at this probe."""
        if self._wait is None:
            msg = "this probe is not part of a running job"
            raise RuntimeError(msg)
        await self._wait(lambda: not self.frontier.less_equal(time))


class ProbeOperator(Operator):
    """Report an input frontier to a :class:`ProbeHandle`, and pass batches through."""

    interest = Interest.ALWAYS
    stateless = True
    name = "probe"

    def __init__(self, handle: ProbeHandle) -> None:
        self.handle = handle

    def schedule(self, ctx: OperatorContext) -> None:
        """Forward data and record the frontier."""
        for time, batch in ctx.messages(0):
            ctx.send(0, time, batch)
        self.handle.advance(ctx.frontier(0))
