"""Sinks: outputs a job writes out itself, each closed time once.

A :class:`Sink` describes where an output goes (a database table, a topic). Opened for an
output it gives a :class:`SinkWriter`, which says the last time it holds (``written``) and
writes the consolidated updates of each time that closes after it. The job writes every
closed time to its sinks before :meth:`Job.advance_to <deltaflow.Job.advance_to>` returns,
so a checkpoint at time ``T`` is taken with every time before ``T`` already written; a
resumed job recomputes the times from ``T`` on and hands the writer only those after its
``written``: a sink that writes each time atomically with that mark (one database
transaction) holds every time exactly once, however the job was stopped.

The contract a sink keeps:

* ``written`` is the last time whose updates the sink holds durably (``None``: none), read
  when opened. A job starting afresh (not resumed from a checkpoint) that finds times there
  (of a run stopped before its first checkpoint, or of another job) calls the writer's
  ``reset()``, which empties the sink and sets ``written`` to ``None`` (a writer without
  one is refused): the sink holds one run's output, never a mix;
* ``write(time, updates)`` makes ``time``'s consolidated ``(datum, diff)`` updates and the
  new ``written`` durable together, or neither (raising); times come in increasing order,
  each after ``written``. Times whose updates cancel out are not written.

    >>> import deltaflow as df, trio
    >>> class Collect:
    ...     def __init__(self):
    ...         self.times = []
    ...     async def open(self, output):
    ...         return self
    ...     written = None
    ...     async def write(self, time, updates):
    ...         self.times.append((time, updates))
    ...         self.written = time
    ...     async def aclose(self):
    ...         pass
    >>> class Double(df.Pipeline):
    ...     def build(self, xs):
    ...         return xs.map(lambda x: 2 * x)
    >>> sink = Collect()
    >>> async def main():
    ...     async with df.open(Double(), sinks={"output": sink}) as job:
    ...         job.inputs["xs"].insert(1)
    ...         await job.advance_to(1)
    ...         job.inputs["xs"].insert(2)
    >>> trio.run(main)
    >>> sink.times
    [(0, [(2, 1)]), (1, [(4, 1)])]
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs
import trio

if TYPE_CHECKING:
    from .job import Job

__all__ = ["Sink", "SinkFeeds", "SinkWriter", "check_sinks"]

logger = logging.getLogger("deltaflow")


@runtime_checkable
class SinkWriter(Protocol):
    """An open sink: the last time it holds, and a way to write the next ones."""

    written: int | None

    async def write(self, time: int, updates: list[tuple[Any, int]]) -> None:
        """Make ``time``'s updates (and ``written = time``) durable, all or nothing."""
        ...

    async def aclose(self) -> None:
        """Release what the writer holds (connections)."""
        ...


@runtime_checkable
class Sink(Protocol):
    """Where an output's updates go: opened by the job for the output named ``output``."""

    async def open(self, output: str) -> SinkWriter:
        """A writer, with ``written`` the last time the sink holds."""
        ...


def check_sinks(sinks: object, outputs: Sequence[str], pipeline: str) -> dict[str, Sink]:
    """``open(..., sinks=)`` checked: a mapping from output names to sinks.

    Raises:
        TypeError: not a mapping, or a value that is not a sink, naming it.
        ValueError: a name that is not one of the pipeline's outputs.
    """
    if sinks is None:
        return {}
    if not isinstance(sinks, Mapping):
        msg = f"sinks must map output names to sinks (df.sinks.postgres(...)), not {sinks!r}"
        raise TypeError(msg)
    out: dict[str, Sink] = {}
    for name, sink in sinks.items():
        if name not in outputs:
            msg = f"sinks: no output named {name!r}; {pipeline} has outputs {list(outputs)}"
            raise ValueError(msg)
        if not isinstance(sink, Sink):
            msg = f"sinks[{name!r}]: {sink!r} is not a sink (it needs an async open(output))"
            raise TypeError(msg)
        out[name] = sink
    return out


@attrs.define(eq=False)
class SinkFeeds:
    """A job's sinks, the times each output closed since they were last written, and the
    open writers."""

    job: Job
    sinks: dict[str, Sink] = attrs.field(factory=dict)
    pending: dict[str, list[tuple[Any, list[tuple[Any, int]]]]] = attrs.field(factory=dict)
    writers: dict[str, SinkWriter] = attrs.field(factory=dict)

    def attach(self, sinks: dict[str, Sink]) -> None:
        """Write the outputs named in ``sinks`` there, every time closing from now on."""
        self.sinks = sinks
        self.pending = {name: self.job.outputs[name].capture() for name in sinks}

    async def drain(self) -> None:
        """Write every closed time not written yet to its sink (opening it the first time)."""
        for name, sink in self.sinks.items():
            writer = self.writers.get(name)
            if writer is None:
                opened: object = await sink.open(name)
                if not isinstance(opened, SinkWriter):
                    msg = f"sink of output {name!r}: open() gave {opened!r}, not a sink writer"
                    raise TypeError(msg)
                if opened.written is not None and self.job.resumed_at is None:
                    await self._reset(name, opened)
                self.writers[name] = writer = opened
            pending = self.pending[name]
            while pending:
                time, updates = pending[0]
                if updates and (writer.written is None or time > writer.written):
                    await writer.write(time, updates)
                pending.pop(0)

    async def _reset(self, name: str, writer: SinkWriter) -> None:
        """The job starts afresh, and the sink holds times of a run it does not continue
        (one stopped before its first checkpoint, or another job): empty it, or refuse."""
        reset = getattr(writer, "reset", None)
        if reset is None:
            await writer.aclose()
            msg = (
                f"sink of output {name!r}: it holds the times up to {writer.written} of an "
                "earlier run, and this job starts afresh (no checkpoint to resume), and the "
                "sink cannot be emptied (no reset()): empty it, or resume that checkpoint"
            )
            raise ValueError(msg)
        logger.info("sink of output %r: emptied, the job starts afresh", name)
        await reset()

    async def aclose(self) -> None:
        """Close every open writer."""
        writers, self.writers = self.writers, {}
        with trio.CancelScope(shield=True):
            for writer in writers.values():
                await writer.aclose()
