"""What a running job tells the outside: log records, per-operator counts and a progress line.

* Log records go to the ``deltaflow`` logger: a job's start and stop (with its workers) at
  ``INFO``; each output frontier advance and, when the job stops, each operator's work at
  ``DEBUG``. The library never configures handlers: an application that wants the records
  calls ``logging.basicConfig(level=logging.DEBUG)`` or adds its own.
* Per-operator counts (activations, records received, seconds) are kept only when asked for
  (``profile=True``) or when the logger is enabled for ``DEBUG`` as the job starts: counting
  wraps every activation, which the hot path should not pay for otherwise.
* What a live view needs beyond that (see :mod:`deltaflow.scheduler.dashboard`): the records
  each input port received (``ports``, with the per-operator counts), the updates each
  worker's arrangements hold and the memory of the process hosting it
  (:func:`worker_statistics`), grouped by process (:func:`processes_of`).
* The progress line shows, on stderr, the time the outputs have reached, the output updates
  per second, the elapsed time and the records the inputs read and refused, rewritten in
  place on a terminal.

    >>> import logging
    >>> logger.name, any(isinstance(h, logging.NullHandler) for h in logger.handlers)
    ('deltaflow', True)
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

import attrs
import trio

if TYPE_CHECKING:
    from .local.worker import Worker
    from .runtime import Job

__all__ = [
    "Advances",
    "OperatorCounts",
    "ProgressLine",
    "count_operators",
    "logger",
    "process_memory",
    "processes_of",
    "worker_statistics",
]

logger = logging.getLogger("deltaflow")


@attrs.define
class OperatorCounts:
    """What one operator (an actor, on every worker together) did in a job; ``ports``: the
    records each of its input ports received (they sum to ``records``).

    >>> OperatorCounts("map(f)", activations=2, records=10, ports=[10])
    OperatorCounts(name='map(f)', activations=2, records=10, seconds=0.0, ports=[10])
    """

    name: str
    activations: int = 0
    records: int = 0
    seconds: float = 0.0
    ports: list[int] = attrs.field(factory=list)


def _counting(schedule: Callable[[Any], None], counts: OperatorCounts) -> Callable[[Any], None]:
    """``schedule`` (an operator's, bound), counting its activations, records and time."""

    ports = counts.ports

    def counted(ctx: Any) -> None:
        records = 0
        boxes = ctx.mailboxes
        if len(ports) < len(boxes):  # counts made without their ports
            ports.extend([0] * (len(boxes) - len(ports)))
        for port, box in enumerate(boxes):
            here = 0
            for _, payload in box:
                try:
                    here += len(payload)
                except TypeError:
                    here += 1
            ports[port] += here
            records += here
        counts.activations += 1
        counts.records += records
        start = time.perf_counter()
        try:
            schedule(ctx)
        finally:
            counts.seconds += time.perf_counter() - start

    return counted


class _Counted:
    """An operator whose activations are counted, for operators whose instances take no new
    attributes (``__slots__``); everything else is the operator's."""

    def __init__(self, operator: Any, counts: OperatorCounts) -> None:
        self._operator = operator
        self.schedule = _counting(operator.schedule, counts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._operator, name)


def count_operators(job: Job) -> list[OperatorCounts]:
    """Count the work of every actor of ``job`` from now on, one entry per physical operator
    (in plan order), summed over the workers."""
    counts = [OperatorCounts(node.name, ports=[0] * len(node.inputs)) for node in job.plan.nodes]
    for worker in job.workers:
        for index, actor in enumerate(worker.actors):
            operator: Any = actor.operator
            try:
                # On the instance, so that the operator stays itself (isinstance and all).
                operator.schedule = _counting(operator.schedule, counts[index])
            except AttributeError:
                actor.operator = _Counted(operator, counts[index])  # type: ignore[assignment]
    return counts


def process_memory() -> int | None:
    """The resident memory of this process in bytes, or ``None`` where the system does not
    say (it is read from ``/proc``, so on Linux)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


def worker_statistics(job: Job, process: int = 0) -> list[dict[str, Any]]:
    """Per worker this process hosts: its steps, activations, actors, the data messages it
    sent and the pointstamp changes it reported, the updates each operator keeps on it (plan
    order; its arrangements' traces and its own state, see
    :meth:`~deltaflow.operators.base.Operator.held`), and the process it runs in (index, pid,
    resident memory)."""
    registries = [
        [
            registry
            for logical in node.logical
            if (registry := job.builder.spec.nodes[logical].traits.arrangement) is not None
        ]
        for node in job.plan.nodes
    ]
    pid, rss = os.getpid(), process_memory()
    shared = process_late(job)
    return [
        {
            "index": w.index,
            "steps": w.steps,
            "activations": w.activations,
            "actors": len(w.actors),
            "messages": w.messages,
            "pointstamps": w.pointstamps,
            "arranged": [
                sum(r.spines[w.index].statistics().updates for r in regs if w.index in r.spines)
                + _held(actor.operator)
                for regs, actor in zip(registries, w.actors)
            ],
            "process": process,
            "pid": pid,
            "rss": rss,
            "late": late_counts(w, shared if w is job.workers[0] else None),
        }
        for w in job.workers
    ]


def process_late(job: Job) -> dict[str, int]:
    """The late updates each window operator with a ``retention`` did not apply on this
    process (all its workers: see :class:`~deltaflow.operators.windows.specs.LateRows`), by
    operator name."""
    out: dict[str, int] = {}
    for node in job.builder.spec.nodes:
        late = node.traits.late
        if late is not None:
            out[node.name] = out.get(node.name, 0) + late.count
    return out


def late_counts(worker: Worker, shared: dict[str, int] | None = None) -> dict[str, int]:
    """The late updates each window operator with a watermark met on ``worker`` and did not
    apply, by operator name (see :mod:`deltaflow.operators.windows.watermarks`), and ``shared``
    (the process's retention counts, given to one worker of it: :func:`process_late`)."""
    out: dict[str, int] = dict(shared) if shared else {}
    for actor in worker.actors:
        late = getattr(actor.operator, "late", None)
        if late is not None:
            out[actor.name] = out.get(actor.name, 0) + late
    return out


def total_late(workers: list[dict[str, Any]]) -> dict[str, int]:
    """The late counts of :func:`worker_statistics`'s workers, summed by operator."""
    out: dict[str, int] = {}
    for w in workers:
        for name, n in w.get("late", {}).items():
            out[name] = out.get(name, 0) + n
    return out


def _held(operator: Any) -> int:
    held = getattr(operator, "held", None)  # (a counted slotted operator delegates it)
    return int(held()) if held is not None else 0


def processes_of(workers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The processes of a job from its workers' statistics: index, pid, resident memory (as
    each last reported it), the workers it hosts and the updates their arrangements hold.

    >>> processes_of([{"index": 0, "process": 0, "pid": 7, "rss": 10, "arranged": [1, 2]}])
    [{'process': 0, 'pid': 7, 'rss': 10, 'workers': [0], 'arranged': 3}]
    """
    out: dict[int, dict[str, Any]] = {}
    for w in workers:
        p = out.setdefault(
            w["process"],
            {
                "process": w["process"],
                "pid": w["pid"],
                "rss": w["rss"],
                "workers": [],
                "arranged": 0,
            },
        )
        p["workers"].append(w["index"])
        p["arranged"] += sum(w["arranged"])
    return [out[p] for p in sorted(out)]


@attrs.define
class Advances:
    """When the job's inputs advanced to each time (the last :attr:`KEEP`), so that an
    output's lag can be told in seconds: how long ago the inputs passed the least time it
    may still change at.

    >>> a = Advances()
    >>> a.record(3, at=10.0); a.record(5, at=12.0)
    >>> a.lag(4, now=13.0), a.lag(5, now=13.0), a.lag(0, now=13.0)
    (1.0, 0.0, 3.0)
    """

    #: How many advances are remembered (an older one counts as the oldest kept).
    KEEP = 1_024

    #: Whether anything reads the lags (a dashboard, set before the job's first advance):
    #: a job nobody watches records no advance.
    listened: bool = False
    _times: list[tuple[int, float]] = attrs.field(factory=list)

    def record(self, time_: int, at: float | None = None) -> None:
        """The inputs advanced to ``time_`` (now, or at monotonic second ``at``)."""
        times = self._times
        if times and times[-1][0] == time_:
            return
        times.append((time_, time.monotonic() if at is None else at))
        if len(times) > 2 * self.KEEP:
            del times[: -self.KEEP]

    def lag(self, frontier: int, now: float | None = None) -> float:
        """Seconds since the inputs first stood beyond ``frontier`` (0: they have not)."""
        now = time.monotonic() if now is None else now
        for t, at in self._times:
            if t > frontier:
                return max(0.0, now - at)
        return 0.0


def log_operator_work(counts: list[OperatorCounts]) -> None:
    """One ``DEBUG`` record per operator that did any work."""
    for c in counts:
        if c.activations:
            logger.debug(
                "operator %r: %d activations, %d records in, %.3f s",
                c.name,
                c.activations,
                c.records,
                c.seconds,
            )


def _reached(job: Job) -> str:
    """The least time an output may still change at, or ``done``."""
    least = None
    for out in job.outputs.values():
        for t in out.frontier:
            if least is None or t < least:
                least = t
    return "done" if least is None else str(least)


@attrs.define
class ProgressLine:
    """The job's progress on ``stream``: time reached, output updates per second, elapsed.

    ``after``: seconds before the first line (a job that ends sooner shows nothing).
    """

    job: Job
    after: float = 0.0
    every: float = 0.5
    stream: TextIO | None = None
    shown: bool = False
    _start: float = attrs.field(factory=time.perf_counter)

    def text(self) -> str:
        """The line as it reads now.

        >>> import deltaflow as df
        >>> class Same(df.Pipeline):
        ...     def build(self, xs):
        ...         return xs
        >>> line = ProgressLine(df.Job(Same()))
        >>> line.text().split(" | ")[:2]
        ['deltaflow: time 0', '0 updates out']
        >>> line.text().split(" | ")[-1]
        '0 read, 0 refused'
        """
        elapsed = time.perf_counter() - self._start
        updates = sum(out.published for out in self.job.outputs.values())
        rate = updates / elapsed if elapsed > 0 else 0.0
        read = refused = 0
        for account in self.job.accounts.values():
            counts = account.counts()
            read += counts["read"]
            refused += counts["refused"]
        return (
            f"deltaflow: time {_reached(self.job)} | {updates:,} updates out | "
            f"{rate:,.0f} updates/s | {elapsed:.1f} s | {read:,} read, {refused:,} refused"
        )

    def show(self, final: bool = False) -> None:
        """Write the line (on a terminal, over the previous one)."""
        stream = self.stream or sys.stderr
        tty = stream.isatty()
        end = "\n" if final or not tty else ""
        stream.write(("\r" if tty else "") + self.text() + end)
        stream.flush()
        self.shown = True

    async def run(self) -> None:
        """Show the line every ``every`` seconds from ``after`` on, until cancelled."""
        await trio.sleep(self.after)
        while True:
            self.show()
            await trio.sleep(self.every)

    def finish(self) -> None:
        """The last line (the job ended), unless the job ended before ``after``."""
        if self.shown or time.perf_counter() - self._start >= self.after:
            self.show(final=True)
