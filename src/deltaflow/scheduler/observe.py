"""What a running job tells the outside: log records, per-operator counts and a progress line.

* Log records go to the ``deltaflow`` logger: a job's start and stop (with its workers) at
  ``INFO``; each output frontier advance and, when the job stops, each operator's work at
  ``DEBUG``. The library never configures handlers: an application that wants the records
  calls ``logging.basicConfig(level=logging.DEBUG)`` or adds its own.
* Per-operator counts (activations, records received, seconds) are kept only when asked for
  (``profile=True``) or when the logger is enabled for ``DEBUG`` as the job starts: counting
  wraps every activation, which the hot path should not pay for otherwise.
* The progress line shows, on stderr, the time the outputs have reached, the output updates
  per second, the elapsed time and the records the inputs read and refused, rewritten in
  place on a terminal.

    >>> import logging
    >>> logger.name, any(isinstance(h, logging.NullHandler) for h in logger.handlers)
    ('deltaflow', True)
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

import attrs
import trio

if TYPE_CHECKING:
    from .runtime import Job

__all__ = ["OperatorCounts", "ProgressLine", "count_operators", "logger"]

logger = logging.getLogger("deltaflow")


@attrs.define
class OperatorCounts:
    """What one operator (an actor, on every worker together) did in a job.

    >>> OperatorCounts("map(f)", activations=2, records=10)
    OperatorCounts(name='map(f)', activations=2, records=10, seconds=0.0)
    """

    name: str
    activations: int = 0
    records: int = 0
    seconds: float = 0.0


def _counting(schedule: Callable[[Any], None], counts: OperatorCounts) -> Callable[[Any], None]:
    """``schedule`` (an operator's, bound), counting its activations, records and time."""

    def counted(ctx: Any) -> None:
        records = 0
        for box in ctx.mailboxes:
            for _, payload in box:
                try:
                    records += len(payload)
                except TypeError:
                    records += 1
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
    counts = [OperatorCounts(node.name) for node in job.plan.nodes]
    for worker in job.workers:
        for index, actor in enumerate(worker.actors):
            operator: Any = actor.operator
            try:
                # On the instance, so that the operator stays itself (isinstance and all).
                operator.schedule = _counting(operator.schedule, counts[index])
            except AttributeError:
                actor.operator = _Counted(operator, counts[index])  # type: ignore[assignment]
    return counts


def arrangement_sizes(job: Job) -> list[int]:
    """Per physical operator, the updates held by the arrangements it runs (every worker)."""
    sizes = []
    for node in job.plan.nodes:
        total = 0
        for logical in node.logical:
            registry = job.builder.spec.nodes[logical].traits.arrangement
            if registry is not None:
                total += sum(s.statistics().updates for s in registry.spines.values())
        sizes.append(total)
    return sizes


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
