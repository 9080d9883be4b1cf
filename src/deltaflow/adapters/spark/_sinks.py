"""A Spark job's output into a deltaflow sink (``df.sinks.postgres``), each time exactly once.

:func:`to_sink` wraps sinks (:mod:`deltaflow.scheduler.sinks`) as a ``foreachBatch``-style
function for :func:`~deltaflow.adapters.spark.stream`, which hands it each micro-batch's
output changes (the schema's columns, ``time`` and ``diff``; every change of micro-batch
``b`` is at time ``b``), and as :meth:`SinkBatches.write` for the output of
:func:`~deltaflow.adapters.spark.run`. The changes are collected on the driver and written
time by time through the sink's writer: a time and the sink's ``written`` mark together, or
neither (for PostgreSQL: the time's rows and the progress row in one transaction).

Exactly once for streams: a query restarted on its checkpoint location may run again the
micro-batch it stopped in (sunk, not checkpointed), with the same changes; the writer's
``written`` already holds it, so it is not written twice. Micro-batch 0 is a query's first:
a sink holding an earlier run's times then is emptied first (``reset()``), so the sink holds
one query's output, never a mix. A run's output is written whole, after emptying the sink.

    from deltaflow.adapters import spark as dfspark

    revenue = dfspark.to_sink(df.sinks.postgres(dsn, "revenue", key="region"))
    query = dfspark.stream(Revenue(), spark, schema="region string, total long",
                           foreach_batch=revenue, checkpoint_location="state/", orders=stream)
    ...
    query.stop()
    revenue.close()
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ...scheduler.sinks import Sink, SinkWriter

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["SinkBatches", "to_sink"]


@attrs.define(eq=False)
class SinkBatches:
    """Writes a Spark job's output changes to sinks, by output name; make one with
    :func:`to_sink`. Each call runs the sinks' writers in a trio loop of its own."""

    sinks: dict[str, Sink]
    writers: dict[str, SinkWriter] = attrs.field(factory=dict)

    def __call__(self, frames: DataFrame | Mapping[str, DataFrame], batch_id: int) -> None:
        """Write micro-batch ``batch_id``'s changes (a ``foreachBatch`` function)."""
        trio.run(self._write, frames, batch_id == 0)

    def write(self, frames: DataFrame | Mapping[str, DataFrame]) -> None:
        """Write a run's output (every time, in order) to sinks emptied first, then close
        the writers."""

        async def whole() -> None:
            try:
                await self._write(frames, True)
            finally:
                await self._close()

        trio.run(whole)

    def close(self) -> None:
        """Close the writers (a stream's, once its query stopped)."""
        trio.run(self._close)

    async def _close(self) -> None:
        writers, self.writers = self.writers, {}
        for writer in writers.values():
            await writer.aclose()

    async def _write(self, frames: DataFrame | Mapping[str, DataFrame], fresh: bool) -> None:
        by_output: dict[str, DataFrame] = {}
        if isinstance(frames, Mapping):
            by_output.update(frames)
        else:
            by_output["output"] = frames
        for name, frame in by_output.items():
            if name not in self.sinks:
                continue
            writer = await self._writer(name)
            if fresh and writer.written is not None:
                reset = getattr(writer, "reset", None)
                if reset is None:
                    msg = (
                        f"sink of output {name!r}: it holds the times up to {writer.written} "
                        "of an earlier run and cannot be emptied (no reset()): empty it first"
                    )
                    raise ValueError(msg)
                await reset()
            for time, updates in sorted(_by_time(frame).items()):
                if writer.written is None or time > writer.written:
                    await writer.write(time, updates)

    async def _writer(self, name: str) -> SinkWriter:
        writer = self.writers.get(name)
        if writer is None:
            opened: object = await self.sinks[name].open(name)
            if not isinstance(opened, SinkWriter):
                msg = f"sink of output {name!r}: open() gave {opened!r}, not a sink writer"
                raise TypeError(msg)
            self.writers[name] = writer = opened
        return writer


def _by_time(frame: DataFrame) -> dict[int, list[tuple[Any, int]]]:
    """A frame of changes (the schema's columns, then ``time`` and ``diff``) as each time's
    consolidated ``(datum, diff)`` updates; a datum of one column is its value."""
    sums: dict[int, dict[Any, int]] = {}
    for row in frame.collect():
        *columns, time, diff = tuple(row)
        datum = columns[0] if len(columns) == 1 else tuple(columns)
        at = sums.setdefault(int(time), {})
        at[datum] = at.get(datum, 0) + int(diff)
    return {t: [(d, r) for d, r in at.items() if r] for t, at in sums.items()}


def to_sink(sink: Sink | Mapping[str, Sink]) -> SinkBatches:
    """A ``foreachBatch`` function for :func:`~deltaflow.adapters.spark.stream` writing its
    output to ``sink`` (``df.sinks.postgres(...)``; for a pipeline with several outputs, a
    dict of sinks by output name), each micro-batch's time once; its :meth:`~SinkBatches.write`
    writes a :func:`~deltaflow.adapters.spark.run` output. See the module.

    Raises:
        TypeError: not a sink, or a dict holding one that is not.
    """
    sinks: dict[str, Any] = dict(sink) if isinstance(sink, Mapping) else {"output": sink}
    for name, s in sinks.items():
        if not isinstance(s, Sink):
            msg = f"to_sink: {s!r} (output {name!r}) is not a sink (df.sinks.postgres(...))"
            raise TypeError(msg)
    return SinkBatches(sinks)
