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
  acknowledges it too (it came from a durable checkpoint). A job without a checkpoint
  never resumes from an offset (started again, it reads its sources afresh), so it
  acknowledges each batch as soon as it is fed and written to the sinks.
* **Several inputs, one stream**: a :class:`MultiSource` (a database's tables read through
  one replication slot) given under several inputs' names is opened once for all of them
  (``open_inputs``); each batch it reads carries a part per input (``Batch.parts``), all fed
  at one time, so a transaction touching two tables is one time in both inputs. Its offset
  is saved once, under the inputs' names joined by ``+`` (``"customers+orders"``).

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

__all__ = [
    "Batch",
    "MultiSource",
    "Source",
    "SourceFeeds",
    "SourceReader",
    "check_sources",
    "group_key",
    "is_source",
]

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
    #: Of a :class:`MultiSource` feeding several inputs: each input's ``(data, diffs)`` in
    #: this batch, all fed at one time (``data`` and ``diffs`` are then empty).
    parts: Mapping[str, tuple[Sequence[Any], Sequence[int]]] | None = None

    @classmethod
    def of_inputs(
        cls, parts: Mapping[str, tuple[Sequence[Any], Sequence[int]]], offset: Any
    ) -> Batch:
        """A batch of several inputs: ``parts`` maps an input's name to its data and diffs.

        >>> Batch.of_inputs({"orders": ([(1, 9)], [1]), "customers": ([], [])}, 7).parts["orders"]
        ([(1, 9)], [1])
        """
        return cls((), (), offset, parts)


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


@runtime_checkable
class MultiSource(Protocol):
    """A :class:`Source` that can feed several inputs from one stream: given under each of
    their names in ``open(..., sources=)``, the job opens it once for all of them."""

    async def open(self, input: str, schema: Schema | None, offset: Any) -> SourceReader:
        """A reader for the one input ``input`` (as :meth:`Source.open`)."""
        ...

    async def open_inputs(self, inputs: Mapping[str, Schema | None], offset: Any) -> SourceReader:
        """One reader for the inputs named in ``inputs`` (with their declared schemas),
        continuing after ``offset``: its batches carry their data in ``Batch.parts``."""
        ...


def group_key(names: Sequence[str]) -> str:
    """Where the offset of a source feeding the inputs ``names`` is saved: the names, in
    order, joined by ``+`` (an input's name is an identifier: no ``+`` in it).

    >>> group_key(["orders", "customers"]), group_key(["orders"])
    ('customers+orders', 'orders')
    """
    return "+".join(sorted(names))


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
    offset after every batch fed since, with the time it was fed at.

    Offsets are kept by *key*: an input's name, or for a :class:`MultiSource` feeding several
    inputs their :func:`group_key`."""

    job: Job
    sources: dict[str, Source]
    #: The offsets a resumed checkpoint held, and those every later checkpoint folded in.
    offsets: dict[str, Any] = attrs.field(factory=dict)
    #: ``(time, key, offset)`` for every batch fed since, in order.
    log: list[tuple[int, str, Any]] = attrs.field(factory=list)
    readers: dict[str, SourceReader] = attrs.field(factory=dict)

    def resume(self, saved: Mapping[str, Any]) -> None:
        """Stand at the offsets a checkpoint saved."""
        self.offsets = dict(saved)
        self.log = []

    def check_resume(self, manifest: Mapping[str, Any], where: str) -> None:
        """Refuse to resume on ``manifest`` (read from ``where``) a source that would feed
        twice what the checkpoint's state holds: one without a saved offset (it would start
        from its beginning) for an input fed before the checkpoint, or one grouped otherwise
        than the sources whose offsets the checkpoint saved (an offset saved under
        ``"orders"`` says nothing of where a source of ``"customers+orders"`` stands). A
        source of an input fed nothing before the checkpoint starts from its beginning.

        Raises:
            ValueError: naming the inputs, the source and what to do.
        """
        saved = manifest.get("sources", {})
        accounts = manifest.get("accounts") or {}
        time = int(manifest["time"])

        def fed(name: str) -> bool:
            # Each input's count of records read before the checkpoint's time; a manifest
            # that kept none (of an older deltaflow) says nothing: anything may be there.
            account = accounts.get(name)
            return time > 0 and (account is None or int(account["counts"].get("read", 0)) > 0)

        for key, (source, names) in self.groups().items():
            if key in saved:
                continue
            what = f"the {type(source).__name__} given for {_inputs(names)}"
            others = sorted(k for k in saved if set(k.split("+")) & set(names))
            if others:
                then = "; ".join(
                    f"{k!r}, of one source feeding {_inputs(k.split('+'))}" for k in others
                )
                msg = (
                    f"{where}: the checkpoint saved its sources' offsets under {then}, but "
                    f"{what} keeps its offset under {key!r}: the sources are grouped otherwise "
                    "than when the checkpoint was taken (a source given under several inputs' "
                    "names feeds them as one, its offset under their names joined by '+'), "
                    "and an offset of one grouping says nothing of where another stands. "
                    "Give the sources as they were when the checkpoint was taken, or start "
                    "over with fresh=True"
                )
                raise ValueError(msg)
            held = [name for name in names if fed(name)]
            if held:
                msg = (
                    f"{where}: the checkpoint (at time {time}) holds what was fed to "
                    f"{_inputs(held)}, but no offset of {what}: opened from its beginning, "
                    "it would feed that again (counted twice). Resume with the sources the "
                    "checkpoint was taken with (a source added since may only feed an input "
                    "fed nothing before it), or start over with fresh=True"
                )
                raise ValueError(msg)

    def groups(self) -> dict[str, tuple[Source, list[str]]]:
        """Each source once with the inputs it feeds, by key: a :class:`MultiSource` given
        under several names is one group (one reader, one offset); any other source is
        opened once per input it is given for."""
        out: dict[str, tuple[Source, list[str]]] = {}
        shared: dict[int, list[str]] = {}
        for name, source in self.sources.items():
            if _is_multi(source):
                shared.setdefault(id(source), []).append(name)
            else:
                out[name] = (source, [name])
        for names in shared.values():
            out[group_key(names)] = (self.sources[names[0]], names)
        return out

    def offsets_before(self, time: int) -> dict[str, Any]:
        """The offset of each source after every batch fed at a time before ``time``: what
        a checkpoint at ``time`` holds.

        Raises:
            TypeError: an offset that is not JSON, naming the input.
        """
        out = dict(self.offsets)
        for t, key, offset in self.log:
            if t < time:
                out[key] = offset
        for key, offset in out.items():
            try:
                json.dumps(offset)
            except (TypeError, ValueError):
                msg = f"source of input {key!r}: its offset {offset!r} is not a JSON value"
                raise TypeError(msg) from None
        return out

    def committed(self, time: int, saved: Mapping[str, Any]) -> None:
        """A checkpoint at ``time`` holding ``saved`` is durable: fold the log into the
        offsets and acknowledge the open readers."""
        self.offsets = dict(saved)
        self.log = [entry for entry in self.log if entry[0] >= time]
        for key, reader in self.readers.items():
            if key in saved:
                reader.acknowledge(saved[key])

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
        groups = self.groups()
        fed = 0
        try:
            for key, (source, names) in groups.items():
                offset = self.offsets_at(key)
                if len(names) == 1:
                    schema = job.pipeline.input_schema(names[0])
                    self.readers[key] = await source.open(names[0], schema, offset)
                else:
                    schemas = {n: job.pipeline.input_schema(n) for n in names}
                    multi: Any = source
                    self.readers[key] = await multi.open_inputs(schemas, offset)
            inputs = {key: names for key, (_, names) in groups.items()}
            if once:
                fed = await self._drain(inputs, checkpoint_every)
            else:
                fed = await self._stream(inputs, checkpoint_every)
        finally:
            readers, self.readers = self.readers, {}
            with trio.CancelScope(shield=True):
                for reader in readers.values():
                    await reader.aclose()
        return fed

    def offsets_at(self, key: str) -> Any:
        """Where source ``key`` stands: after the last batch fed."""
        offset = self.offsets.get(key)
        for _, k, o in self.log:
            if k == key:
                offset = o
        return offset

    async def _feed(
        self, key: str, names: list[str], batch: Batch, fed: int, every: int | None
    ) -> None:
        """Feed ``batch`` (to the inputs ``names``) at the job's time and advance past it
        (checkpointing every ``every`` batches). Every part is checked before any is fed:
        a part an input refuses feeds nothing of the batch."""
        job = self.job
        raw: object = batch
        if not isinstance(raw, Batch):
            msg = f"source of input {key!r}: read() gave {batch!r}, not a df.sources.Batch"
            raise TypeError(msg)
        parts = batch.parts
        if parts is None:
            if len(names) != 1:
                msg = (
                    f"source of inputs {names}: read() gave a batch without parts "
                    "(Batch.of_inputs): which input its data are for is not known"
                )
                raise TypeError(msg)
            parts = {names[0]: (batch.data, batch.diffs)}
        unknown = [n for n in parts if n not in names]
        if unknown:
            msg = f"source of inputs {names}: read() gave a batch for other inputs {unknown}"
            raise ValueError(msg)
        time = job.time
        checked = []
        for name, (data, diffs) in parts.items():
            handle = job.inputs[name]
            handle.check_open()
            checked.append((handle, *handle.checked_columns(data, diffs, time)))
        for handle, data, diffs in checked:
            handle.extend_checked(data, diffs)
        self.log.append((time, key, batch.offset))
        await job.advance_to(time + 1)
        if job.checkpointer is None:
            # No checkpoint, no resuming from an offset (started again, the job reads its
            # sources afresh): the batch, fed and written to the sinks, is released now.
            self.readers[key].acknowledge(batch.offset)
        elif every is not None and fed % every == 0:
            await job.checkpoint()

    async def _drain(self, inputs: dict[str, list[str]], every: int | None) -> int:
        """Round-robin over the sources until none has a batch now."""
        fed = 0
        active = list(self.readers)
        while active:
            for key in list(active):
                batch = await self.readers[key].read(False)
                if batch is None:
                    active.remove(key)
                    continue
                fed += 1
                await self._feed(key, inputs[key], batch, fed, every)
        return fed

    async def _stream(self, inputs: dict[str, list[str]], every: int | None) -> int:
        """Every source read by its own task, batches fed as they come, until all end."""
        send, receive = trio.open_memory_channel[tuple[str, Batch]](0)
        fed = 0

        async def pump(key: str, reader: SourceReader, out: trio.MemorySendChannel[Any]) -> None:
            async with out:
                while True:
                    batch = await reader.read(True)
                    if batch is None:
                        logger.info("source of input %r ended", key)
                        return
                    await out.send((key, batch))

        try:
            async with trio.open_nursery() as nursery:
                async with send:
                    for key, reader in self.readers.items():
                        nursery.start_soon(pump, key, reader, send.clone())
                async with receive:
                    async for key, batch in receive:
                        fed += 1
                        await self._feed(key, inputs[key], batch, fed, every)
        except BaseExceptionGroup as group:
            # One failure (a source's, or a batch the input refused) is raised as itself,
            # as ``follow(once=True)`` raises it.
            leaves = _leaves(group)
            if len(leaves) == 1:
                raise leaves[0] from None
            raise
        return fed


def _inputs(names: Sequence[str]) -> str:
    """``names`` for a message.

    >>> _inputs(["orders"]), _inputs(["orders", "customers"])
    ("input 'orders'", "inputs 'customers', 'orders'")
    """
    if len(names) == 1:
        return f"input {names[0]!r}"
    return "inputs " + ", ".join(repr(n) for n in sorted(names))


def _is_multi(source: object) -> bool:
    """Whether ``source`` is a :class:`MultiSource` (its ``open_inputs`` a coroutine
    function)."""
    return isinstance(source, MultiSource) and inspect.iscoroutinefunction(type(source).open_inputs)


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out
