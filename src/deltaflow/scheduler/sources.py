"""Sources: inputs a job feeds itself, resuming from offsets kept in its checkpoints.

A :class:`Source` describes where an input's updates come from (a directory of files, a
database's replication stream, a Kafka topic). Opened at an *offset* it gives a
:class:`SourceReader`, which reads the next :class:`Batch` (its updates and the offset after
it). :meth:`Job.follow <deltaflow.Job.follow>` feeds each batch at its own time and advances
past it; the offset after every batch fed before a checkpoint's time is saved in that
checkpoint (its manifest), so a job resumed on it reopens each source where the checkpoint
left off: nothing lost, nothing fed twice, and no bookkeeping by the application.

The contract a source keeps:

* **Offsets** are JSON values (a manifest is JSON): a list of files consumed, an LSN, a
  ``{partition: offset}`` map. ``open(input, schema, None)`` starts from the beginning;
  ``open(input, schema, offset)`` continues right after the batch that gave ``offset``, and
  reads the same batches from there on as an uninterrupted reader would have (what is
  not yet read may of course grow).
* **Batches are atomic**: a batch is fed whole at one time, or (crash before the next
  checkpoint) not at all, and then read again after the restart.
* **Acknowledgement**: ``acknowledge(offset)`` says every batch up to ``offset`` is durable in
  the job's checkpoint; a source that holds data for its reader (a replication slot, a
  consumer group) may release it then, and never before. An ``open`` at an offset
  acknowledges it too (it came from a durable checkpoint).

    >>> import deltaflow as df, trio
    >>> class Double(df.Pipeline):
    ...     def build(self, xs):
    ...         return xs.map(lambda x: 2 * x)
    >>> async def main():
    ...     async with df.open(Double(), sources={"xs": df.sources.iterable([[1, 2], [3]])}) as job:
    ...         await job.follow()
    ...     return job.output.updates()
    >>> trio.run(main)
    [(2, 0, 1), (4, 0, 1), (6, 1, 1)]
"""

from __future__ import annotations

import inspect
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard, runtime_checkable

import attrs
import trio

if sys.version_info < (3, 11):  # pragma: no cover - the builtin from 3.11 on
    from exceptiongroup import BaseExceptionGroup

if TYPE_CHECKING:
    from ..framework.schema import Schema
    from .job import Job

__all__ = ["Batch", "Source", "SourceFeeds", "SourceReader", "check_sources", "is_source"]

logger = logging.getLogger("deltaflow")


@attrs.frozen
class Batch:
    """One batch a source read: ``data`` with their ``diffs`` (all fed at one time), and the
    ``offset`` after it (a JSON value).

    >>> Batch(["a", "b"], [1, -1], offset=2).offset
    2
    """

    data: Sequence[Any]
    diffs: Sequence[int]
    offset: Any


@runtime_checkable
class SourceReader(Protocol):
    """An open source, positioned after the batches already fed."""

    async def read(self, wait: bool) -> Batch | None:
        """The next batch. When none is there yet: with ``wait``, wait for one; without,
        ``None``. ``None`` after waiting: the source has ended (a batch source)."""
        ...

    def acknowledge(self, offset: Any) -> None:
        """Every batch up to ``offset`` is durable in the job's checkpoint."""
        ...

    async def aclose(self) -> None:
        """Release what the reader holds (files, connections)."""
        ...


@runtime_checkable
class Source(Protocol):
    """Where an input's updates come from: opened by :meth:`Job.follow
    <deltaflow.Job.follow>` for the input named ``input`` (its declared ``schema``, if any)."""

    async def open(self, input: str, schema: Schema | None, offset: Any) -> SourceReader:
        """A reader continuing after ``offset`` (``None``: from the beginning)."""
        ...


def is_source(obj: object) -> TypeGuard[Source]:
    """Whether ``obj`` is a :class:`Source`: its ``open`` a coroutine function (a
    ``pathlib.Path``, whose ``open`` is not, is no source).

    >>> import pathlib
    >>> is_source(pathlib.Path("in")), is_source(Batch([], [], 0))
    (False, False)
    """
    return isinstance(obj, Source) and inspect.iscoroutinefunction(type(obj).open)


def check_sources(sources: object, inputs: Sequence[str], pipeline: str) -> dict[str, Source]:
    """``open(..., sources=)`` checked: a mapping from input names to sources.

    Raises:
        TypeError: not a mapping, or a value that is not a source, naming it.
        ValueError: a name that is not one of the pipeline's inputs.
    """
    if sources is None:
        return {}
    if not isinstance(sources, Mapping):
        msg = f"sources must map input names to sources (df.sources.files(...)), not {sources!r}"
        raise TypeError(msg)
    out: dict[str, Source] = {}
    for name, source in sources.items():
        if name not in inputs:
            msg = f"sources: no input named {name!r}; {pipeline}.build() takes {list(inputs)}"
            raise ValueError(msg)
        if not is_source(source):
            msg = (
                f"sources[{name!r}]: {source!r} is not a source (it needs an async open(input, "
                "schema, offset) giving a reader; see df.sources)"
            )
            raise TypeError(msg)
        out[name] = source
    return out


@attrs.define(eq=False)
class SourceFeeds:
    """A job's sources and their offsets: those of the last checkpoint resumed from, and the
    offset after every batch fed since, with the time it was fed at."""

    job: Job
    sources: dict[str, Source]
    #: The offsets a resumed checkpoint held, and those every later checkpoint folded in.
    offsets: dict[str, Any] = attrs.field(factory=dict)
    #: ``(time, input, offset)`` for every batch fed since, in order.
    log: list[tuple[int, str, Any]] = attrs.field(factory=list)
    readers: dict[str, SourceReader] = attrs.field(factory=dict)

    def resume(self, saved: Mapping[str, Any]) -> None:
        """Stand at the offsets a checkpoint saved."""
        self.offsets = dict(saved)
        self.log = []

    def offsets_before(self, time: int) -> dict[str, Any]:
        """The offset of each source after every batch fed at a time before ``time``: what
        a checkpoint at ``time`` holds.

        Raises:
            TypeError: an offset that is not JSON, naming the input.
        """
        out = dict(self.offsets)
        for t, name, offset in self.log:
            if t < time:
                out[name] = offset
        for name, offset in out.items():
            try:
                json.dumps(offset)
            except (TypeError, ValueError):
                msg = f"source of input {name!r}: its offset {offset!r} is not a JSON value"
                raise TypeError(msg) from None
        return out

    def committed(self, time: int, saved: Mapping[str, Any]) -> None:
        """A checkpoint at ``time`` holding ``saved`` is durable: fold the log into the
        offsets and acknowledge the open readers."""
        self.offsets = dict(saved)
        self.log = [entry for entry in self.log if entry[0] >= time]
        for name, reader in self.readers.items():
            if name in saved:
                reader.acknowledge(saved[name])

    async def follow(self, *, once: bool, checkpoint_every: int | None) -> int:
        """Feed every source's batches, one time each, until all have ended (``once``: until
        none has a batch now); returns how many batches were fed."""
        job = self.job
        if not self.sources:
            msg = "follow(): this job has no sources (df.open(..., sources={name: source}))"
            raise ValueError(msg)
        if checkpoint_every is not None and (
            checkpoint_every.__class__ is not int or checkpoint_every < 1
        ):
            msg = (
                "follow(): checkpoint_every must be a positive int or None, not "
                f"{checkpoint_every!r}"
            )
            raise ValueError(msg)
        if self.readers:
            msg = "follow(): the job is following its sources already"
            raise RuntimeError(msg)
        fed = 0
        try:
            for name, source in self.sources.items():
                schema = job.pipeline.input_schema(name)
                self.readers[name] = await source.open(name, schema, self.offsets_at(name))
            if once:
                fed = await self._drain(checkpoint_every)
            else:
                fed = await self._stream(checkpoint_every)
        finally:
            readers, self.readers = self.readers, {}
            with trio.CancelScope(shield=True):
                for reader in readers.values():
                    await reader.aclose()
        return fed

    def offsets_at(self, name: str) -> Any:
        """Where source ``name`` stands: after the last batch fed."""
        offset = self.offsets.get(name)
        for _, n, o in self.log:
            if n == name:
                offset = o
        return offset

    async def _feed(self, name: str, batch: Batch, fed: int, every: int | None) -> None:
        """Feed ``batch`` at the job's time and advance past it (checkpointing every
        ``every`` batches)."""
        job = self.job
        raw: object = batch
        if not isinstance(raw, Batch):
            msg = f"source of input {name!r}: read() gave {batch!r}, not a df.sources.Batch"
            raise TypeError(msg)
        time = job.time
        job.inputs[name].extend(batch.data, batch.diffs)
        self.log.append((time, name, batch.offset))
        await job.advance_to(time + 1)
        if every is not None and job.checkpointer is not None and fed % every == 0:
            await job.checkpoint()

    async def _drain(self, every: int | None) -> int:
        """Round-robin over the sources until none has a batch now."""
        fed = 0
        active = list(self.readers)
        while active:
            for name in list(active):
                batch = await self.readers[name].read(False)
                if batch is None:
                    active.remove(name)
                    continue
                fed += 1
                await self._feed(name, batch, fed, every)
        return fed

    async def _stream(self, every: int | None) -> int:
        """Every source read by its own task, batches fed as they come, until all end."""
        send, receive = trio.open_memory_channel[tuple[str, Batch]](0)
        fed = 0

        async def pump(name: str, reader: SourceReader, out: trio.MemorySendChannel[Any]) -> None:
            async with out:
                while True:
                    batch = await reader.read(True)
                    if batch is None:
                        logger.info("source of input %r ended", name)
                        return
                    await out.send((name, batch))

        try:
            async with trio.open_nursery() as nursery:
                async with send:
                    for name, reader in self.readers.items():
                        nursery.start_soon(pump, name, reader, send.clone())
                async with receive:
                    async for name, batch in receive:
                        fed += 1
                        await self._feed(name, batch, fed, every)
        except BaseExceptionGroup as group:
            # One failure (a source's, or a batch the input refused) is raised as itself,
            # as ``follow(once=True)`` raises it.
            leaves = _leaves(group)
            if len(leaves) == 1:
                raise leaves[0] from None
            raise
        return fed


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out
