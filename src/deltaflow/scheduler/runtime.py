"""Running a pipeline: ``open()`` inside a trio program, ``run()`` for a batch of updates.

    >>> import deltaflow as df
    >>> class Double(df.Pipeline):
    ...     def build(self, xs):
    ...         return xs.map(lambda x: 2 * x)
    >>> df.run(Double(), xs=[(1, 0, 1), (5, 1, 1), (1, 2, -1)])
    [(2, 0, 1), (10, 1, 1), (2, 2, -1)]

Inside trio, ``async with df.open(Double()) as job`` gives a :class:`Job`: feed its
``inputs``, ``await job.advance_to(t)`` to close the times before ``t``, and read
``job.output``. The workers run as tasks of a nursery the job opens; leaving the ``async
with`` block closes the inputs and waits until every output is complete.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import trio

from ..errors import JobClosedError, SubscriptionOverflowError
from ..operators.collection import DataflowBuilder, Pipeline
from ..operators.delta.build import statistics as delta_statistics
from ..operators.values import as_count as _integer
from . import observe
from .collector import GC_THRESHOLD, check_gc_threshold, collector_tuned
from .frames import is_frame, updates_from_frame
from .plan import make_plan
from .transport import InProcessTransport, Transport
from .worker import Worker

if sys.version_info < (3, 11):  # pragma: no cover - the builtin from 3.11 on
    from exceptiongroup import BaseExceptionGroup

if TYPE_CHECKING:
    from types import TracebackType

    from ..framework.lattice import Time
    from ..operators.io import InputFeed, OutputStore

__all__ = [
    "InputHandle",
    "Job",
    "OutputHandle",
    "Subscription",
    "open",
    "run",
]


def _require_pipeline(pipeline: object) -> Pipeline:
    if not isinstance(pipeline, Pipeline):
        msg = f"expected a deltaflow Pipeline instance, got {pipeline!r}"
        raise TypeError(msg)
    return pipeline


def _require_int(time: object, where: str) -> int:
    t = _integer(time)
    if t is None:
        msg = f"{where}({time!r}): times are ints"
        raise TypeError(msg)
    return t


def _check_hashable(input_name: str, data: Any) -> None:
    try:
        hash(data)
    except TypeError:
        msg = f"input {input_name!r}: data {data!r} is not hashable (use tuples, not lists)"
        raise TypeError(msg) from None


def _check_diff(input_name: str, data: Any, diff: Any) -> int:
    """``diff`` as an ``int`` (numpy integers accepted), or a TypeError naming the input."""
    if diff.__class__ is int:
        return diff
    r = _integer(diff)
    if r is None:
        msg = f"input {input_name!r}: diff {diff!r} for {data!r} must be an int"
        raise TypeError(msg)
    return r


class InputHandle:
    """Feeds one named input of a running job.

    ``insert(d)``, ``remove(d)`` and ``update(d, diff)`` change the input at its current time
    (the job's time: 0 at first, then whatever ``job.advance_to`` set); ``update_at`` at a
    later time. Updates are validated when fed: a bad one raises and nothing else is lost.
    """

    def __init__(self, job: Job, name: str, feeds: list[InputFeed]) -> None:
        self._job = job
        self.name = name
        self._feeds = feeds
        self._data: list[Any] = []
        self._diffs: list[int] = []
        self._later: dict[Any, tuple[list[Any], list[int]]] = {}
        self.closed = False

    @property
    def time(self) -> int:
        """The time updates fed now are stamped with."""
        return self._job.time

    def _check_open(self) -> None:
        if self.closed:
            msg = f"input {self.name!r} is closed"
            raise JobClosedError(msg)
        self._job._check_usable()

    def insert(self, data: Any) -> None:
        """Add one ``data`` at the current time."""
        self._check_open()
        _check_hashable(self.name, data)
        self._data.append(data)
        self._diffs.append(1)

    def remove(self, data: Any) -> None:
        """Remove one ``data`` at the current time."""
        self._check_open()
        _check_hashable(self.name, data)
        self._data.append(data)
        self._diffs.append(-1)

    def update(self, data: Any, diff: int = 1) -> None:
        """Change the count of ``data`` by ``diff`` at the current time."""
        self._check_open()
        _check_hashable(self.name, data)
        diff = _check_diff(self.name, data, diff)
        self._data.append(data)
        self._diffs.append(diff)

    def update_at(self, data: Any, time: Time, diff: int = 1) -> None:
        """Change the count of ``data`` by ``diff`` at a ``time`` not before the current one."""
        self._check_open()
        _check_hashable(self.name, data)
        diff = _check_diff(self.name, data, diff)
        time = self._job._check_time(self.name, data, time)
        if time == self._job.time:
            self._data.append(data)
            self._diffs.append(diff)
            return
        slot = self._later.get(time)
        if slot is None:
            slot = self._later[time] = ([], [])
        slot[0].append(data)
        slot[1].append(diff)

    def insert_many(self, data: Iterable[Any], diffs: Iterable[int] | None = None) -> None:
        """Change many data at the current time at once (diff 1 each, or ``diffs``).

        ``data`` may be a pandas DataFrame: its columns other than ``time`` and ``diff``, in
        order, form each datum (one column: its value; several: a tuple); its ``time``
        column (default: the current time) and ``diff`` column (default 1) place them.

        Validated as a whole before anything is kept: a bad datum or diff raises and
        nothing of this call is fed.
        """
        self._check_open()
        if is_frame(data):
            self._insert_frame(data, diffs)
            return
        data, new_diffs = self._columns(data, diffs)
        self._data.extend(data)
        self._diffs.extend(new_diffs)

    def _insert_frame(self, frame: Any, diffs: object) -> None:
        if diffs is not None:
            msg = f"input {self.name!r}: a DataFrame brings its own diff column; diffs= is not used"
            raise TypeError(msg)
        columns = [str(c) for c in frame.columns]
        if "time" not in columns:
            frame = frame.assign(time=self._job.time)
        by_time = _validate(self.name, updates_from_frame(self.name, frame))
        for time, (data, _) in by_time.items():
            self._job._check_time(self.name, data[0], time)
        for time, (data, new_diffs) in sorted(by_time.items()):
            self._extend(data, new_diffs, time)

    def extend(self, data: Iterable[Any], diffs: Iterable[int], time: Time | None = None) -> None:
        """Feed columns in bulk at ``time`` (the current time when ``None``), validated as a
        whole before anything is kept, like :meth:`insert_many`."""
        self._check_open()
        data, new_diffs = self._columns(data, diffs)
        if time is not None:
            time = self._job._check_time(self.name, data[0] if data else None, time)
        self._extend(data, new_diffs, time)

    def _columns(
        self, data: Iterable[Any], diffs: Iterable[int] | None
    ) -> tuple[list[Any], list[int]]:
        """``data`` and ``diffs`` as lists, every datum hashable and every diff an int."""
        if isinstance(data, (str, bytes)):
            msg = f"input {self.name!r}: expected an iterable of data, not {data!r}"
            raise TypeError(msg)
        data = list(data)
        try:
            list(map(hash, data))
        except TypeError:
            for d in data:
                _check_hashable(self.name, d)
        if diffs is None:
            return data, [1] * len(data)
        new_diffs = list(diffs)
        if len(new_diffs) != len(data):
            msg = f"input {self.name!r}: {len(data)} data but {len(new_diffs)} diffs"
            raise ValueError(msg)
        if not all(r.__class__ is int for r in new_diffs):
            new_diffs = [_check_diff(self.name, d, r) for d, r in zip(data, new_diffs)]
        return data, new_diffs

    def _extend(self, data: list[Any], diffs: list[int], time: Time | None = None) -> None:
        """:meth:`extend` of columns already validated (:func:`run` checks them first)."""
        self._check_open()
        if time is None or time == self._job.time:
            self._data.extend(data)
            self._diffs.extend(diffs)
        else:
            slot = self._later.get(time)
            if slot is None:
                self._later[time] = (list(data), list(diffs))
            else:
                slot[0].extend(data)
                slot[1].extend(diffs)

    def _flush(self) -> None:
        """Hand everything fed so far to the workers' input operators."""
        feeds = self._feeds
        batches = []
        if self._data:
            batches.append((self._job.time, self._data, self._diffs))
            self._data, self._diffs = [], []
        if self._later:
            later, self._later = self._later, {}
            batches.extend((t, d, r) for t, (d, r) in later.items())
        n = len(feeds)
        for time, data, diffs in batches:
            if n == 1:
                feeds[0].push(time, data, diffs)
                continue
            size = -(-len(data) // n)
            for w in range(n):
                part = data[w * size : (w + 1) * size]
                if part:
                    feeds[w].push(time, part, diffs[w * size : (w + 1) * size])

    def close(self) -> None:
        """No more updates for this input (the job keeps running for the others)."""
        if self.closed:
            return
        self._flush()
        self.closed = True
        for feed in self._feeds:
            feed.closed = True
        self._job._activate_inputs(self.name)


class OutputHandle:
    """Reads one output of a running job."""

    def __init__(self, job: Job, store: OutputStore) -> None:
        self._job = job
        self._store = store
        self.name = store.name
        self._subscribers: list[trio.MemorySendChannel[tuple[Any, list[tuple[Any, int]]]]] = []
        # The subscriptions with a max_buffer, by their channel: told when they overflow
        # (weakly, so that a subscription dropped unread still stops its deliveries).
        self._bounded: weakref.WeakValueDictionary[Any, Subscription] = (
            weakref.WeakValueDictionary()
        )
        self._captures: list[list[tuple[Any, list[tuple[Any, int]]]]] = []
        #: How many (consolidated) updates this output has published (the progress line's).
        self.published = 0
        store.on_complete = self._publish

    def _publish(self, time: Any, updates: list[tuple[Any, int]]) -> None:
        self.published += len(updates)
        if observe.logger.isEnabledFor(logging.DEBUG):
            observe.logger.debug(
                "output %r: time %r complete, %d updates", self.name, time, len(updates)
            )
        for captured in self._captures:
            captured.append((time, updates))
        for chan in list(self._subscribers):
            try:
                chan.send_nowait((time, updates))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._subscribers.remove(chan)
            except trio.WouldBlock:
                # A reader this far behind fails alone: the job (and other readers) go on.
                self._subscribers.remove(chan)
                subscription = self._bounded.pop(chan, None)
                if subscription is not None:
                    subscription._overflow(time)
                chan.close()

    def at(self, time: Time) -> dict[Any, int]:
        """The output collection at a complete ``time``, as ``{data: count}``."""
        _require_int(time, f"output {self.name!r}: at")
        return self._store.at(time)

    def updates(self) -> list[tuple[Any, Any, int]]:
        """Every update published so far, ``(data, time, diff)``, consolidated per time."""
        return self._store.updates()

    def is_complete(self, time: Time) -> bool:
        """True once no update at ``time`` can still arrive."""
        return self._store.is_complete(time)

    @property
    def frontier(self) -> Any:
        """The output's frontier: times beyond it may still change."""
        return self._store.frontier

    def capture(self) -> list[tuple[Any, list[tuple[Any, int]]]]:
        """A list that receives ``(time, consolidated updates)`` for each time completing from
        now on, in time order: :meth:`subscribe` without a task, for tests and scripts.
        """
        captured: list[tuple[Any, list[tuple[Any, int]]]] = []
        self._captures.append(captured)
        return captured

    def subscribe(self, max_buffer: int | None = None) -> Subscription:
        """``(time, consolidated updates)`` for each time that completes from the call on, as
        an async iterator: ``async for time, updates in job.output.subscribe()``.

        Times whose updates cancel out entirely are not reported. The iteration ends when the
        job finishes (at once for a job that has already finished), and raises the
        :class:`~deltaflow.OperatorError` of a job that fails.

        ``max_buffer``: at most this many times wait for the reader; one more fails this
        subscription (its iteration raises :class:`~deltaflow.SubscriptionOverflowError`
        after the times it holds) while the job goes on. ``None``: no limit.

        Raises:
            JobClosedError: the job failed before the call.
            ValueError: ``max_buffer`` is not a positive int or None.
        """
        if max_buffer is not None and (max_buffer.__class__ is not int or max_buffer < 1):
            msg = f"subscribe: max_buffer must be a positive int or None, not {max_buffer!r}"
            raise ValueError(msg)
        job = self._job
        if job.error is not None:
            job._check_usable()
        size = math.inf if max_buffer is None else max_buffer
        send, recv = trio.open_memory_channel[tuple[Any, list[tuple[Any, int]]]](size)
        subscription = Subscription(job, recv, max_buffer, self.name)
        if job.closed or job.failed or job._finished():
            send.close()
        else:
            self._subscribers.append(send)
            if max_buffer is not None:
                self._bounded[send] = subscription
        return subscription

    def _close(self) -> None:
        for chan in self._subscribers:
            chan.close()
        self._subscribers.clear()
        self._bounded.clear()


class Subscription:
    """What :meth:`OutputHandle.subscribe` returns: an async iterator of ``(time, updates)``.

    It is registered when made, so no time completing after ``subscribe()`` is missed, even
    before the first ``__anext__``. ``aclose()`` (or dropping it) stops the deliveries.
    """

    def __init__(
        self,
        job: Job,
        recv: trio.MemoryReceiveChannel[Any],
        max_buffer: int | None = None,
        output: str = "output",
    ) -> None:
        self._job = job
        self._recv = recv
        self._max_buffer = max_buffer
        self._output = output
        self._overflowed_at: Any = None
        # A subscription dropped without aclose() (a loop left by break) stops receiving:
        # the next delivery finds the channel closed and forgets it.
        weakref.finalize(self, recv.close)

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> tuple[Any, list[tuple[Any, int]]]:
        try:
            item: tuple[Any, list[tuple[Any, int]]] = await self._recv.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            self._recv.close()
            if self._overflowed_at is not None:
                msg = (
                    f"output {self._output!r}: this subscription fell more than "
                    f"{self._max_buffer} times behind (time {self._overflowed_at!r} found its "
                    "buffer full); the job goes on. Read faster, subscribe with a larger "
                    "max_buffer, or read job.output.at(...) instead"
                )
                raise SubscriptionOverflowError(msg) from None
            if self._job.error is not None:
                self._job._raise_error()
            raise StopAsyncIteration from None
        return item

    def _overflow(self, time: Any) -> None:
        self._overflowed_at = time

    async def aclose(self) -> None:
        """Stop receiving (the job goes on)."""
        self._recv.close()


class Job:
    """A pipeline running inside a trio program (see :func:`open`)."""

    @staticmethod
    def make_transport() -> Transport:
        """The transport this job's workers talk through: in-process, every worker in the
        caller's trio loop. (The seam where another transport plugs in; the test suite's
        randomized delivery schedule replaces it.)"""
        return InProcessTransport()

    def __init__(
        self,
        pipeline: Pipeline,
        workers: int = 1,
        *,
        fuse: bool = True,
        history: int | None = None,
        profile: bool = False,
    ) -> None:
        pipeline = _require_pipeline(pipeline)
        if workers.__class__ is not int or workers < 1:
            msg = f"workers must be a positive int, not {workers!r}"
            raise ValueError(msg)
        if history is not None and (history.__class__ is not int or history < 0):
            msg = f"history must be a non-negative int or None, not {history!r}"
            raise ValueError(msg)
        self.pipeline = pipeline
        self.builder: DataflowBuilder = self._instantiate(pipeline, workers)
        self.plan = make_plan(self.builder.spec, fuse=fuse, workers=workers)
        self.time: int = 0
        self.transport = self.make_transport()
        self.workers = [
            Worker(i, workers, self.plan, self.transport, self) for i in self._hosted(workers)
        ]
        self.transport.attach(self.workers)
        self.inputs: dict[str, InputHandle] = _Named(
            "input",
            {name: InputHandle(self, name, feeds) for name, feeds in self.builder.feeds.items()},
        )
        self.outputs: dict[str, OutputHandle] = _Named(
            "output",
            {name: OutputHandle(self, store) for name, store in self.builder.stores.items()},
        )
        self._input_actors: dict[str, int] = {
            name: self.plan.physical_of[i]
            for i, node in enumerate(self.builder.spec.nodes)
            for name in [node.name.removeprefix("input:")]
            if node.name.startswith("input:")
        }
        self._waiters: list[tuple[Callable[[], bool], trio.Event]] = []
        self.error: BaseException | None = None
        self._error_reported = False
        self.failed = False
        self.closed = False
        for probe in self.builder.probes:
            probe._wait = self._wait_for
        #: How many times before the frontier the outputs stay answerable (None: all).
        self.history = history
        for store in self.builder.stores.values():
            store.keep = history
        # Counting wraps every activation: only when asked for, or when it will be logged.
        self._operator_counts: list[observe.OperatorCounts] | None = None
        if profile or observe.logger.isEnabledFor(logging.DEBUG):
            self._operator_counts = observe.count_operators(self)

    def _instantiate(self, pipeline: Pipeline, workers: int) -> DataflowBuilder:
        """Run the pipeline's ``build`` for ``workers`` workers."""
        return pipeline.instantiate(workers)

    def _hosted(self, workers: int) -> range:
        """The workers this process runs: all of them (a job spread over processes runs a
        block of them in each)."""
        return range(workers)

    async def _start(self) -> None:
        """Make the workers ready to run (a job in other processes starts them here)."""

    def _placement(self) -> str:
        """How many workers in how many processes, for the log: ``"2 workers, 1 process"``."""
        return f"{len(self.workers)} workers, 1 process"

    def _finished(self) -> bool:
        """True once every worker has stopped (finished, or stopped by a failure)."""
        return all(w.finished for w in self.workers)

    def _any_finished(self) -> bool:
        """True once some worker has stopped (every waiter then looks again)."""
        return any(w.finished for w in self.workers)

    # -- state -----------------------------------------------------------------------------
    @property
    def output(self) -> OutputHandle:
        """The single output (a pipeline whose ``build`` returned one collection)."""
        if list(self.outputs) != ["output"]:
            msg = f"this pipeline has several outputs {sorted(self.outputs)}: use job.outputs[name]"
            raise AttributeError(msg)
        return self.outputs["output"]

    def _check_usable(self) -> None:
        if self.error is not None:
            msg = f"the job failed: {self.error}"
            raise JobClosedError(msg) from self.error
        if self.closed:
            msg = "the job is closed"
            raise JobClosedError(msg)

    def _check_time(self, input_name: str, data: Any, time: Any) -> int:
        """``time`` as an ``int`` not before the job's time, or an error naming the input."""
        t = _integer(time)
        if t is None:
            msg = f"input {input_name!r}: time {time!r} for {data!r} must be an int"
            raise TypeError(msg)
        if t < self.time:
            msg = (
                f"input {input_name!r}: time {time!r} for {data!r} is before the input's "
                f"current time {self.time!r}"
            )
            raise ValueError(msg)
        return t

    def notify(self) -> None:
        """Wake the tasks whose awaited condition now holds (all of them once the job failed
        or a worker finished).

        Workers call this after every step, so the conditions are checked here rather than
        by waking each waiting task to check its own: a round of ``advance_to`` then costs
        the application one wake-up instead of one per worker step.
        """
        waiters = self._waiters
        if not waiters:
            return
        wake_all = self.failed or self._any_finished()
        keep = []
        for condition, event in waiters:
            if wake_all or condition():
                event.set()
            else:
                keep.append((condition, event))
        self._waiters = keep

    def fail(self, exc: BaseException) -> None:
        """Stop every worker and remember ``exc`` for the application."""
        if self.error is None:
            self.error = exc
        self.failed = True
        for w in self.workers:
            w.wake()
        for out in self.outputs.values():
            out._close()
        self.notify()

    def _stop(self) -> None:
        """The job was abandoned (cancelled, or its ``async with`` body raised): nothing more
        is taken in, subscriptions end."""
        self.failed = True
        self.closed = True
        for out in self.outputs.values():
            out._close()

    def _raise_error(self) -> None:
        assert self.error is not None
        self._error_reported = True
        raise self.error

    async def _wait_for(self, condition: Callable[[], bool]) -> None:
        while True:
            if self.error is not None:
                self._raise_error()
            if condition():
                return
            if self._finished():
                msg = "the job finished before the awaited condition held"
                raise JobClosedError(msg)
            waiter = (condition, trio.Event())
            self._waiters.append(waiter)
            try:
                await waiter[1].wait()
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def _activate_inputs(self, name: str | None = None) -> None:
        for input_name, node in self._input_actors.items():
            if name is None or input_name == name:
                for w in self.workers:
                    w.activate(node)

    # -- the application's side ------------------------------------------------------------
    async def advance_to(self, time: int) -> None:
        """Close every time before ``time`` and wait until every output is complete for them.

        Updates fed afterwards are stamped ``time``.

        Raises:
            ValueError: ``time`` is before the current time.
            OperatorError: user code in an operator failed (the job is stopped).
        """
        self._check_usable()
        time = _require_int(time, "advance_to")
        if time < self.time:
            msg = f"advance_to({time!r}): the inputs are already at time {self.time!r}"
            raise ValueError(msg)
        self.flush()
        self.time = time
        if observe.logger.isEnabledFor(logging.DEBUG):
            observe.logger.debug("inputs advanced to time %r", time)
        for handle in self.inputs.values():
            if not handle.closed:
                for feed in handle._feeds:
                    feed.time = time
        self._activate_inputs()
        await self._wait_for(lambda: self._complete_before(time))

    def flush(self) -> None:
        """Hand what was fed to the workers without advancing time."""
        for handle in self.inputs.values():
            if not handle.closed:
                handle._flush()
        self._activate_inputs()

    def _complete_before(self, time: int) -> bool:
        for out in self.outputs.values():
            for f in out._store.frontier:
                if f < time:
                    return False
        return True

    async def close(self) -> None:
        """Close every input and wait until the whole dataflow has finished."""
        if self.error is not None:
            if not self._error_reported:
                self._raise_error()
            return
        for handle in self.inputs.values():
            handle.close()
        self._activate_inputs()
        with contextlib.suppress(JobClosedError):
            await self._wait_for(self._finished)
        self.closed = True
        for out in self.outputs.values():
            out._close()
        if self._unreported_error():
            self._raise_error()

    def _unreported_error(self) -> bool:
        return self.error is not None and not self._error_reported

    def statistics(self) -> dict[str, Any]:
        """Counts for introspection: steps and activations per worker, actors, frontiers, and
        per operator (in plan order) its name and the updates its arrangements hold, with its
        activations, records received and seconds when the job counts them
        (``df.open(..., profile=True)``, or the ``deltaflow`` logger at ``DEBUG``); and
        ``arrangements`` and delta queries' ``proposals`` (see :func:`.delta_statistics`)."""
        counts = self._operator_counts
        operators = []
        for i, arranged in enumerate(observe.arrangement_sizes(self)):
            op: dict[str, Any] = {"name": self.plan.nodes[i].name, "arranged": arranged}
            if counts is not None:
                c = counts[i]
                op.update(activations=c.activations, records=c.records, seconds=c.seconds)
            operators.append(op)
        return {
            **delta_statistics(self.builder.spec),
            "workers": [
                {"steps": w.steps, "activations": w.activations, "actors": len(w.actors)}
                for w in self.workers
            ],
            "outputs": {n: list(o.frontier) for n, o in self.outputs.items()},
            "operators": operators,
        }


class _OpenJob:
    def __init__(self, job: Job, gc_threshold: int | None, progress: bool | float = False) -> None:
        self._job = job
        self._nursery_cm: Any = None
        self._collector = collector_tuned(gc_threshold)
        self._progress: observe.ProgressLine | None = None
        if progress is not False:
            after = 0.0 if progress is True else _check_progress(progress)
            self._progress = observe.ProgressLine(self._job, after=after)
        self._progress_scope = trio.CancelScope()
        self._started = 0.0

    async def _show_progress(self, line: observe.ProgressLine) -> None:
        with self._progress_scope:
            await line.run()

    async def __aenter__(self) -> Job:
        if self._nursery_cm is not None:
            msg = "this df.open(...) was already entered: call df.open() again for another job"
            raise RuntimeError(msg)
        await self._job._start()
        self._collector.__enter__()
        try:
            self._nursery_cm = trio.open_nursery()
            nursery = await self._nursery_cm.__aenter__()
        except BaseException:
            self._collector.__exit__(None, None, None)
            raise
        self._nursery = nursery
        job = self._job
        observe.logger.info("job %s started: %s", type(job.pipeline).__name__, job._placement())
        self._started = trio.current_time()
        nursery.start_soon(job.transport.run)
        for w in job.workers:
            nursery.start_soon(w.run)
        if self._progress is not None:
            nursery.start_soon(self._show_progress, self._progress)
        return job

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        job = self._job
        pending: BaseException | None = None
        if exc is None:
            try:
                await job.close()
            except BaseException as e:
                pending = e
        self._progress_scope.cancel()
        if exc is not None or pending is not None:
            job._stop()
            self._nursery.cancel_scope.cancel()
        try:
            await self._nursery_cm.__aexit__(None, None, None)
        except BaseExceptionGroup as group:
            self._log_stop(group)
            raise _unwrapped(group) from None
        finally:
            self._collector.__exit__(None, None, None)
            if self._progress is not None:
                self._progress.finish()
        self._log_stop(pending or exc)
        if pending is not None:
            raise pending
        return False

    def _log_stop(self, exc: BaseException | None) -> None:
        job = self._job
        name = type(job.pipeline).__name__
        elapsed = trio.current_time() - self._started
        if job._operator_counts is not None and observe.logger.isEnabledFor(logging.DEBUG):
            observe.log_operator_work(job._operator_counts)
        if exc is None:
            observe.logger.info("job %s finished in %.3f s: %s", name, elapsed, job._placement())
        else:
            observe.logger.info("job %s stopped after %.3f s: %r", name, elapsed, exc)


def _unwrapped(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """What the job's nursery raised, as the application should see it: a ``KeyboardInterrupt``
    (Ctrl-C, or raised by user code in a worker) or a ``trio.Cancelled`` as itself, so that
    ``except KeyboardInterrupt`` catches it; anything else stays grouped."""
    for kind in (KeyboardInterrupt, trio.Cancelled):
        match, _ = group.split(kind)
        if match is not None:
            first: BaseException = match
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]
            return first
    return group


def _check_progress(progress: object) -> float:
    if isinstance(progress, bool) or not isinstance(progress, (int, float)) or progress < 0:
        msg = f"progress must be True, False or a number of seconds >= 0, not {progress!r}"
        raise ValueError(msg)
    return float(progress)


def open(
    pipeline: Pipeline,
    workers: int | None = None,
    *,
    processes: int = 1,
    fuse: bool = True,
    gc_threshold: int | None = GC_THRESHOLD,
    history: int | None = None,
    profile: bool = False,
    progress: bool | float = False,
) -> _OpenJob:
    """Run ``pipeline`` inside the current trio program; use as ``async with``.

    Args:
        pipeline: the :class:`~deltaflow.Pipeline` instance to run.
        workers: how many workers (each with its own copy of the dataflow) to run; by
            default one per process.
        processes: ``1`` runs every worker in the caller's trio loop; ``P >= 2`` starts ``P``
            fresh interpreters hosting ``workers / P`` workers each (``P`` must divide
            ``workers``) and none in the caller (see :mod:`deltaflow.scheduler.processes`).
        fuse: run chains of linear operators as one actor (the default); ``False`` gives
            every operator its own actor, which only helps to measure what fusion saves.
        gc_threshold: while the job runs, the cyclic garbage collector's first threshold is
            at least this (restored when the last job ends; see
            :mod:`deltaflow.scheduler.collector`). ``None`` leaves the collector alone.
        history: keep each output answerable only for the last ``history`` times before its
            frontier (``job.output.at(t)`` for ``t >= job.time - history``; an older time is
            a ``ValueError``), older updates compacted into one, so that a long-running job's
            outputs take bounded memory. ``None`` (the default) keeps everything.
        profile: count each operator's activations, records and seconds for
            :meth:`Job.statistics` (also on when the ``deltaflow`` logger is at ``DEBUG``).
        progress: show a progress line on stderr (time reached, updates/s, elapsed): ``True``
            at once, a number of seconds once the job has run that long.

    Returns:
        An async context manager giving the running :class:`Job`.

    Raises:
        ValueError: ``workers``, ``processes`` or ``gc_threshold`` is not a positive int,
            ``processes`` does not divide ``workers``, ``history`` is not a non-negative
            int, or ``progress`` not a bool or a number of seconds.
    """
    if progress is not True and progress is not False:
        _check_progress(progress)
    gc_threshold = check_gc_threshold(gc_threshold)
    if processes != 1:
        from .processes import ProcessJob  # it builds on this module

        job: Job = ProcessJob(
            pipeline,
            processes if workers is None else workers,
            processes,
            fuse=fuse,
            gc_threshold=gc_threshold,
            history=history,
            profile=profile,
        )
    else:
        job = Job(
            pipeline, 1 if workers is None else workers, fuse=fuse, history=history, profile=profile
        )
    return _OpenJob(job, gc_threshold, progress=progress)


class _Named(dict[str, Any]):
    """A job's inputs or outputs by name; a missing name lists the ones there are."""

    def __init__(self, kind: str, items: dict[str, Any]) -> None:
        super().__init__(items)
        self.kind = kind

    def __missing__(self, name: str) -> Any:
        msg = f"no {self.kind} named {name!r}; this pipeline has {sorted(self)}"
        raise KeyError(msg)


def _validate(name: str, updates: Iterable[Any]) -> dict[int, tuple[list[Any], list[int]]]:
    """Group ``(data, time, diff)`` triples (or a DataFrame's rows) by time, rejecting the
    first malformed one."""
    if is_frame(updates):
        updates = updates_from_frame(name, updates)
    if isinstance(updates, (str, bytes, Mapping)):
        msg = f"input {name!r}: expected an iterable of (data, time, diff) triples, got {updates!r}"
        raise TypeError(msg)
    try:
        it = iter(updates)
    except TypeError:
        msg = f"input {name!r}: expected an iterable of (data, time, diff) triples, got {updates!r}"
        raise TypeError(msg) from None
    by_time: dict[int, tuple[list[Any], list[int]]] = {}
    get = by_time.get
    upd: Any = None
    try:
        for upd in it:
            # The fast check accepts exactly what the precise one below accepts.
            if upd.__class__ is not tuple or len(upd) != 3:
                raise _Malformed(upd)
            data, time, diff = upd
            if time.__class__ is not int or diff.__class__ is not int or time < 0:
                time, diff = _explain(name, upd)  # numpy integers pass, as ints
            hash(data)
            slot = get(time)
            if slot is None:
                slot = by_time[time] = ([], [])
            slot[0].append(data)
            slot[1].append(diff)
    except (_Malformed, TypeError) as exc:
        bad = exc.args[0] if isinstance(exc, _Malformed) else upd
        _explain(name, bad)
        raise  # pragma: no cover - _explain always raises for a rejected update
    return by_time


class _Malformed(Exception):
    """Internal: the fast validation loop found an update to explain."""


def _explain(name: str, upd: Any) -> tuple[int, int]:
    """Raise the precise error for a rejected update; an update whose time and diff are
    integers of another type (numpy's) passes, with them as ``int``."""
    if not isinstance(upd, tuple) or len(upd) != 3:
        msg = f"input {name!r}: expected a (data, time, diff) triple, got {upd!r}"
        raise ValueError(msg)
    data, time, diff = upd
    _check_hashable(name, data)
    t = _integer(time)
    if t is None:
        msg = f"input {name!r}: time {time!r} in {upd!r} must be an int"
        raise TypeError(msg)
    if t < 0:
        msg = f"input {name!r}: time {time!r} in {upd!r} must be >= 0"
        raise ValueError(msg)
    return t, _check_diff(name, data, diff)


def _sorted_updates(updates: list[tuple[Any, Any, int]]) -> list[tuple[Any, Any, int]]:
    try:
        return sorted(updates, key=lambda u: (u[1], u[0]))
    except TypeError:
        return sorted(updates, key=lambda u: (u[1], type(u[0]).__name__, repr(u[0])))


async def _run_to_end(
    job: Job, validated: dict[str, dict[int, tuple[list[Any], list[int]]]]
) -> dict[str, list[tuple[Any, Any, int]]]:
    """Feed inputs checked by :func:`_validate`, close the job, and return every output's
    consolidated updates sorted by time."""
    for name, by_time in validated.items():
        handle = job.inputs[name]
        for time in sorted(by_time):
            data, diffs = by_time[time]
            handle._extend(data, diffs, time)
    await job.close()
    return {name: _sorted_updates(out.updates()) for name, out in job.outputs.items()}


def run(
    pipeline: Pipeline,
    /,
    workers: int | None = None,
    *,
    processes: int = 1,
    fuse: bool = True,
    gc_threshold: int | None = GC_THRESHOLD,
    progress: bool | float = False,
    **inputs: Iterable[Any],
) -> Any:
    """Run ``pipeline`` over complete inputs and return its consolidated output updates.

    Each input is an iterable of ``(data, time, diff)`` with int times ``>= 0``, or a pandas
    DataFrame (its columns other than ``time`` and ``diff`` form the datum; those two default
    to 0 and 1); missing inputs are empty. Every time is processed as its own logical time
    (all at once, so this measures throughput). Returns a list of ``(data, time, diff)``
    sorted by time, with no two updates for the same ``(data, time)`` and no zero diff; a
    ``build()`` returning a dict of collections gives a dict of such lists. ``workers``,
    ``processes``, ``fuse``, ``gc_threshold`` and ``progress`` are as for :func:`open`.

    Raises:
        TypeError, ValueError: a malformed input, naming the input and the value.
        OperatorError: user code in an operator failed.
    """
    pipeline = _require_pipeline(pipeline)
    names = pipeline.input_names()
    taken = sorted(set(names) & {"workers", "processes", "fuse", "gc_threshold", "progress"})
    if taken:
        msg = (
            f"{type(pipeline).__name__}.build() has inputs named {taken}, which are run()'s own "
            "parameters: rename them, or feed the pipeline with df.open()"
        )
        raise TypeError(msg)
    unknown = sorted(set(inputs) - set(names))
    if unknown:
        msg = f"unknown input(s) {unknown}; {type(pipeline).__name__}.build() takes {names}"
        raise TypeError(msg)
    validated = {name: _validate(name, upds) for name, upds in inputs.items()}
    check_gc_threshold(gc_threshold)

    async def main() -> tuple[dict[str, list[tuple[Any, Any, int]]], bool]:
        async with open(
            pipeline,
            workers,
            processes=processes,
            fuse=fuse,
            gc_threshold=gc_threshold,
            progress=progress,
        ) as job:
            outputs = await _run_to_end(job, validated)
        return outputs, job.builder.single_output

    result, single = trio.run(main)
    if single:
        return result["output"]
    return result
