"""A running job: :class:`Job`, which owns the workers and the handles the application feeds
and reads them through. :class:`~.running.OpenJob` (re-exported here) is the ``async with``
that runs the workers as tasks of a nursery.

    >>> import deltaflow as df, trio
    >>> class Double(df.Pipeline):
    ...     def build(self, xs):
    ...         return xs.map(lambda x: 2 * x)
    >>> async def main():
    ...     async with df.open(Double()) as job:   # a Job
    ...         job.inputs["xs"].insert(3)
    ...     return job.output.updates()
    >>> trio.run(main)
    [(6, 0, 1)]
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable
from typing import Any

import attrs
import trio

from ..errors import JobClosedError
from ..framework.durable.store import encode_frontier
from ..operators.builder import DataflowBuilder
from ..operators.delta.build import statistics as delta_statistics
from ..operators.pipeline import Pipeline
from . import observe
from .accounting import Rejected, make_accounts
from .checkpoint import Checkpointer
from .handles import InputHandle, OutputHandle
from .local.plan import make_plan
from .local.worker import Worker
from .placement import InProcess, Placement
from .running import OpenJob, check_progress
from .sinks import SinkFeeds, check_sinks
from .sources import SourceFeeds, check_sources
from .state_layout import StateLayout, check_code, check_pipeline, state_layout
from .validation import require_int, require_pipeline

__all__ = ["Job", "OpenJob", "check_progress"]


class Job:
    """A pipeline running inside a trio program (see :func:`open`), its workers where
    ``placement`` says (every one in this trio loop by default: see :mod:`.placement`)."""

    #: Where the job's live dashboard is served (``df.open(..., dashboard=PORT)``), with
    #: its token when it needs one; ``None``: no dashboard.
    dashboard_url: str | None = None

    def __init__(
        self,
        pipeline: Pipeline,
        workers: int = 1,
        *,
        placement: Placement | None = None,
        fuse: bool = True,
        history: int | None = None,
        profile: bool = False,
        checkpoint: Any = None,
        fresh: bool = False,
        allow_code_change: bool = False,
        on_bad: Any = None,
    ) -> None:
        pipeline = require_pipeline(pipeline)
        _check_options(
            workers, history, checkpoint, fresh=fresh, allow_code_change=allow_code_change
        )
        self.pipeline = pipeline
        #: Where the workers run, and all that follows from it (see :mod:`.placement`).
        self.placement: Placement = InProcess() if placement is None else placement
        placement = self.placement
        #: Where this job keeps its checkpoints (``None``: it keeps none).
        self.checkpointer: Checkpointer | None = (
            None if checkpoint is None else Checkpointer(checkpoint, placement.writer)
        )
        #: The time the job resumed at from a checkpoint (``None``: it started afresh).
        self.resumed_at: int | None = None
        self._checkpointing = False
        self._started = False  # made ready to run already (see start)
        # The checkpoint location: locked at open, started over on request, code checked.
        # (One attribute for both: past 30 attributes CPython 3.11 gives a job a dict of its
        # own, for which no call of a job's method is specialized: a worker's notify after
        # every step included.)
        self._opening = _Opening(fresh=fresh, allow_code_change=allow_code_change)
        self._layout: StateLayout | None = None
        #: How many workers the job has in all (in every process).
        self.total_workers = workers
        self.builder: DataflowBuilder = placement.instantiate(pipeline, workers)
        self.plan = make_plan(self.builder.spec, fuse=fuse, workers=workers)
        self.time: int = 0
        self.transport = placement.transport(self)
        self.workers = [
            Worker(i, workers, self.plan, self.transport, self) for i in placement.hosted(workers)
        ]
        self.transport.attach(self.workers)
        self._make_handles(on_bad)
        self._waiters: list[tuple[Callable[[], bool], trio.Event]] = []
        self.error: BaseException | None = None
        self._error_reported = False
        self.failed = False
        self.closed = False
        for probe in self.builder.probes:
            probe.attach(self.wait_for)
        self._observe(history, profile=profile)
        # -- sources (see .sources): the inputs the job feeds itself, and their offsets.
        self._sources = SourceFeeds(self, {})
        # -- sinks (see .sinks): the outputs the job writes out itself, each closed time once.
        self._sinks = SinkFeeds(self)
        # What each step tells the rest of the job, if anything (see Placement.stepped).
        self._stepped = placement.stepped if placement.hears_steps else None
        placement.built(self)

    def _make_handles(self, on_bad: Any) -> None:
        """The input handles (each input's feeds, routing and accounts) and output handles."""
        #: Per input, the plan node of its input actor (on every worker).
        self.input_nodes: dict[str, int] = {
            name: self.plan.physical_of[i]
            for i, node in enumerate(self.builder.spec.nodes)
            for name in [node.name.removeprefix("input:")]
            if node.name.startswith("input:")
        }
        for name, feeds in self.builder.feeds.items():
            if self._reads_runs(name):
                for feed in feeds:
                    feed.runs = True
        # -- accounting (scheduler/accounting.py): per input, records read and refused --
        #: Per input, what it read, refused and set aside (its ``on_bad`` mode).
        self.accounts = make_accounts(self.builder.feeds, on_bad)
        self.inputs: dict[str, InputHandle] = _Named(
            "input",
            {
                name: InputHandle(
                    self,
                    name,
                    self.placement.feeds(self, name, feeds),
                    self._owner_key(name),
                    self.accounts[name],
                )
                for name, feeds in self.builder.feeds.items()
            },
        )
        self.outputs: dict[str, OutputHandle] = _Named(
            "output",
            {name: OutputHandle(self, store) for name, store in self.builder.stores.items()},
        )

    def _observe(self, history: int | None, *, profile: bool) -> None:
        """What the job keeps to be observed: its outputs' history, the times' advances, and
        (when profiled or logged) each operator's work."""
        #: How many times before the frontier the outputs stay answerable (None: all).
        self.history = history
        #: When the inputs advanced to each time (outputs' lag in seconds).
        self.advances = observe.Advances()
        for store in self.builder.stores.values():
            store.keep = history
        #: Where the job serves its statistics as Prometheus metrics (``open(metrics=)``).
        self.metrics_url: str | None = None
        # Counting wraps every activation: only when asked for, or when it will be logged.
        self._operator_counts: list[observe.OperatorCounts] | None = None
        if profile or observe.logger.isEnabledFor(logging.DEBUG):
            self._operator_counts = observe.count_operators(self)

    def attach_sinks(self, sinks: object) -> None:
        """Write the outputs named in ``sinks`` there (see :mod:`.sinks`).

        Raises:
            TypeError, ValueError: not a mapping of this pipeline's output names to sinks.
        """
        names = list(self.outputs)
        self._sinks.attach(check_sinks(sinks, names, type(self.pipeline).__name__))

    def attach_sources(self, sources: object) -> None:
        """Feed the inputs named in ``sources`` from those sources (see :meth:`follow`).

        Raises:
            TypeError, ValueError: not a mapping of this pipeline's input names to sources.
        """
        names = list(self.inputs)
        self._sources.sources = check_sources(sources, names, type(self.pipeline).__name__)

    async def follow(self, *, once: bool = False, checkpoint_every: int | None = 10) -> int:
        """Feed the job from its sources: each batch a source reads is fed at the job's time,
        then the job advances past it (one time per batch), until every source has ended (a
        batch source) or for ever; ``once``: until none has a batch now (what is there now
        is read, as :func:`run` does). A job with ``checkpoint=`` checkpoints after every
        ``checkpoint_every`` batches (``None``: only when asked, or when its block ends); a
        resumed job continues each source after the last batch its checkpoint holds.
        While it runs, it alone advances the job and takes its checkpoints: do not call
        ``advance_to`` or ``checkpoint()`` from another task meanwhile. Returns how many
        batches were fed.

        Raises:
            ValueError: the job has no sources.
            TypeError, ValueError: a batch the input refuses (nothing of it is fed).
        """
        return await self._sources.follow(once=once, checkpoint_every=checkpoint_every)

    def _owner_key(self, name: str) -> Callable[[Any], Any] | None:
        """The key by which input ``name``'s data are exchanged right after it, if every
        reader of it exchanges them by one key and nothing transforms them first: fed data
        can then go straight to the worker that owns them (see :meth:`InputHandle.flush`)."""
        node = self.input_nodes.get(name)
        if node is None or any(self.plan.outlets[node]):
            return None  # it runs the operators after it: they change the data first
        routes = [r for port in self.plan.routes[node] for r in port]
        keys = {id(key) for _, _, key in routes}
        if not routes or len(keys) != 1 or routes[0][2] is None:
            return None
        for target, port, _ in routes:
            inlet = self.plan.nodes[target].inlets.get(port)
            if inlet is not None and inlet.steps:
                return None  # the steps before the arrangement run before its exchange
        return routes[0][2]  # type: ignore[no-any-return]

    def _reads_runs(self, name: str) -> bool:
        """Whether every reader of input ``name`` takes a
        :class:`~deltaflow.operators.base.RunsBatch` (several times in one message): the
        input's messages go straight into ports of arrangements absorbed as inlets, whose
        forwarding reads them (see :mod:`deltaflow.operators.inlet`)."""
        node = self.input_nodes.get(name)
        if node is None or any(self.plan.outlets[node]):
            return False
        routes = [r for port in self.plan.routes[node] for r in port]
        return bool(routes) and all(
            port in self.plan.nodes[target].inlets for target, port, _ in routes
        )

    # -- starting and stopping (run by OpenJob) ---------------------------------------------
    async def start(self) -> None:
        """Make the workers ready to run (:class:`OpenJob` does, once, as it is entered): open
        the checkpoint location and check the checkpoint it holds, if any; start what runs
        the workers elsewhere (:meth:`.Placement.start`); resume this process's share of the
        checkpoint (:meth:`.Placement.resume`). On failure the location is released.

        Raises:
            CheckpointError: the location is held by another job, or cannot be read.
            ValueError: its checkpoint is of another pipeline, or of other code.
        """
        if self._started:
            return
        self._started = True
        try:
            manifest = None
            if self.checkpointer is not None:
                manifest = await self._open_location()
                if manifest is not None:
                    self._check_manifest(manifest)
            await self.placement.start(self)
            if manifest is not None:
                await self.placement.resume(self, manifest)
        except BaseException:
            self.release_location()
            raise

    async def _open_location(self) -> dict[str, Any] | None:
        """Lock the checkpoint location (if this process owns it), start it over if asked,
        and read its current manifest (``None``: none)."""
        checkpointer = self.checkpointer
        assert checkpointer is not None
        # The digests of the operators' code, taken before anything runs (a function may
        # fill what it captured as it runs: a cache).
        assert self.layout is not None
        if self.placement.owns_location:
            lock = functools.partial(checkpointer.lock, fresh=self._opening.fresh)
            await trio.to_thread.run_sync(lock)
        return await trio.to_thread.run_sync(checkpointer.store.latest)

    def release_location(self) -> None:
        """Unlock the checkpoint location (once the job is over; idempotent)."""
        if self.checkpointer is not None:
            self.checkpointer.unlock()

    async def close_sinks(self) -> None:
        """Close the sinks the job writes its outputs to (once the job is over)."""
        await self._sinks.aclose()

    @property
    def layout(self) -> StateLayout:
        """The job's state named independently of its layout (see :mod:`.checkpoint`)."""
        if self._layout is None:
            self._layout = state_layout(self.builder, self.plan)
        return self._layout

    def _check_manifest(self, manifest: dict[str, Any]) -> None:
        """Refuse a checkpoint of another pipeline.

        Raises:
            ValueError: its operators, inputs or outputs differ from this job's, or their
                code does (unless ``allow_code_change``), or a source has no offset in it
                for an input it fed (:meth:`SourceFeeds.check_resume`).
        """
        assert self.checkpointer is not None
        where = self.checkpointer.store.describe()
        check_pipeline(manifest, self.layout, where, type(self.pipeline).__name__)
        self._sources.check_resume(manifest, where)  # (no source would feed the state twice)
        if self.placement.owns_location:  # (the owner checks the code, for every process)
            check_code(manifest, self.layout, where, allow=self._opening.allow_code_change)

    async def restore(
        self, manifest: dict[str, Any], workers: list[Worker], *, current: bool, pending: bool
    ) -> None:
        """Restore ``workers``' state (and the outputs': their collections with ``current``,
        their updates at later times with ``pending``) from ``manifest``, off the event loop,
        and stand at its time: what :meth:`.Placement.resume` takes of a checkpoint."""
        checkpointer = self.checkpointer
        assert checkpointer is not None
        restore = functools.partial(
            checkpointer.restore,
            manifest,
            self.layout,
            workers,
            self.total_workers,
            self.builder.stores,
            current=current,
            pending=pending,
        )
        await trio.to_thread.run_sync(restore)
        self._stand_at(manifest)

    def _stand_at(self, manifest: dict[str, Any]) -> None:
        """The inputs stand at the checkpoint's time, those it saved closed closed."""
        time = int(manifest["time"])
        self.time = time
        self.resumed_at = time
        self._sources.resume(manifest.get("sources", {}))
        saved = manifest.get("accounts", {})
        for name, account in self.accounts.items():
            account.restore(saved.get(name))
        for name, handle in self.inputs.items():
            handle.stand_at(time, closed=bool(manifest["inputs"].get(name, {}).get("closed")))

    @property
    def rejected(self) -> list[Rejected]:
        """The records the inputs set aside with ``on_bad="quarantine"``, as
        :class:`~deltaflow.Rejected` (input, datum, reason, where), input by input in the
        order refused; after a resume, those of times before the checkpoint's too."""
        return [r for account in self.accounts.values() for r in account.rejected()]

    @property
    def finished(self) -> bool:
        """True once the dataflow has stopped here: every worker this process hosts (or, for
        a caller hosting none, every process) finished or was stopped by a failure."""
        return self.placement.finished(self)

    @property
    def operator_counts(self) -> list[observe.OperatorCounts] | None:
        """Per operator (plan order), its work, when the job counts it (``profile=True``,
        ``dashboard=``, or the ``deltaflow`` logger at ``DEBUG``); ``None`` otherwise."""
        return self._operator_counts

    # -- state -----------------------------------------------------------------------------
    @property
    def output(self) -> OutputHandle:
        """The single output (a pipeline whose ``build`` returned one collection)."""
        if list(self.outputs) != ["output"]:
            msg = f"this pipeline has several outputs {sorted(self.outputs)}: use job.outputs[name]"
            raise AttributeError(msg)
        return self.outputs["output"]

    def check_usable(self) -> None:
        """Raise :class:`~deltaflow.JobClosedError` if the job failed or is closed: what every
        handle checks before taking updates or subscribers."""
        if self.error is not None:
            msg = f"the job failed: {self.error}"
            raise JobClosedError(msg) from self.error
        if self.closed:
            msg = "the job is closed"
            raise JobClosedError(msg)

    def notify(self) -> None:
        """Wake the tasks whose awaited condition now holds (all of them once the job failed
        or a worker finished).

        Workers call this after every step, so the conditions are checked here rather than
        by waking each waiting task to check its own: a round of ``advance_to`` then costs
        the application one wake-up instead of one per worker step.
        """
        waiters = self._waiters
        if waiters:
            wake_all = self.failed or self.placement.any_finished(self)
            keep = []
            for condition, event in waiters:
                if wake_all or condition():
                    event.set()
                else:
                    keep.append((condition, event))
            self._waiters = keep
        if self._stepped is not None:
            self._stepped(self)

    def fail(self, exc: BaseException) -> None:
        """Stop every worker and remember ``exc`` for the application (and tell the rest of
        the job: :meth:`.Placement.failed`)."""
        first = self.error is None
        if first:
            self.error = exc
        self.failed = True
        for w in self.workers:
            w.wake()
        for out in self.outputs.values():
            out.close_subscriptions()
        self.notify()
        self.placement.failed(self, exc, first=first)

    def abandon(self) -> None:
        """The job was abandoned (cancelled, or its ``async with`` body raised): nothing more
        is taken in, subscriptions end."""
        self.failed = True
        self.closed = True
        for out in self.outputs.values():
            out.close_subscriptions()

    def raise_error(self) -> None:
        """Raise the error the job failed with, marking it reported (so that leaving the
        ``async with`` does not raise it again)."""
        assert self.error is not None
        self._error_reported = True
        raise self.error

    async def wait_for(self, condition: Callable[[], bool]) -> None:
        """Wait until ``condition()`` holds (looked at as the job wakes its waiters).

        Raises:
            OperatorError: the job failed (its error).
            JobClosedError: the job finished before ``condition`` held.
        """
        while True:
            if self.error is not None:
                self.raise_error()
            if condition():
                return
            if self.placement.finished(self):
                msg = "the job finished before the awaited condition held"
                raise JobClosedError(msg)
            waiter = (condition, trio.Event())
            self._waiters.append(waiter)
            try:
                await waiter[1].wait()
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    async def wait_until(self, condition: Callable[[], bool]) -> None:
        """Wait until ``condition()`` holds (looked at as the job wakes its waiters), whatever
        becomes of the job meanwhile."""
        while not condition():
            event = trio.Event()
            self._waiters.append((condition, event))
            await event.wait()

    def activate_inputs(self, name: str | None = None) -> None:
        """Make what was fed to input ``name`` (all inputs when ``None``) and the job's time
        go to the workers (see :meth:`.Placement.activate_inputs`)."""
        self.placement.activate_inputs(self, name)

    # -- the application's side ------------------------------------------------------------
    async def advance_to(self, time: int) -> None:
        """Close every time before ``time`` and wait until every output is complete for them.

        Updates fed afterwards are stamped ``time``.

        Raises:
            ValueError: ``time`` is before the current time.
            OperatorError: user code in an operator failed (the job is stopped).
        """
        self.check_usable()
        time = require_int(time, "advance_to")
        if time < self.time:
            msg = f"advance_to({time!r}): the inputs are already at time {self.time!r}"
            raise ValueError(msg)
        self.check_not_checkpointing("advance_to")
        held = self.checkpointer is not None
        for handle in self.inputs.values():
            if not handle.closed:
                handle.flush(time if held else None)
        self.time = time
        if self.advances.listened:  # only the dashboard reads when the inputs advanced
            self.advances.record(time)
        for account in self.accounts.values():
            account.close_before(time)
        if observe.logger.isEnabledFor(logging.DEBUG):
            observe.logger.debug("inputs advanced to time %r", time)
        for handle in self.inputs.values():
            if not handle.closed:
                handle.advance_feeds(time)
        # What was fed and the new time go together (nothing runs before the wait below).
        self.placement.activate_inputs(self, None)
        await self.wait_for(lambda: self._complete_before(time))
        if self._sinks.sinks:  # every closed time written before a checkpoint can follow
            await self._sinks.drain()

    def flush(self) -> None:
        """Hand what was fed to the workers without advancing time.

        A job that keeps checkpoints hands over updates at the job's time or later only when
        it advances past them: a checkpoint at ``job.time`` holds exactly the updates before
        it.
        """
        held = self.checkpointer is not None
        for handle in self.inputs.values():
            if not handle.closed:
                handle.flush(self.time if held else None)
        self.activate_inputs()

    def check_not_checkpointing(self, what: str) -> None:
        """Refuse ``what`` (naming it) while a checkpoint is being taken.

        Raises:
            RuntimeError: a checkpoint is being taken.
        """
        if self._checkpointing:
            msg = f"{what}: a checkpoint is being taken; await job.checkpoint() first"
            raise RuntimeError(msg)

    # -- checkpoints -----------------------------------------------------------------------
    async def checkpoint(self) -> int:
        """Make every update at times before ``job.time`` durable; returns that time.

        Waits until the dataflow is quiescent at ``job.time`` (every earlier update
        processed, no message in flight), then writes the operators' state, the capabilities
        they hold and the outputs' collections to the checkpoint location, switching to it
        atomically (see :mod:`deltaflow.scheduler.checkpoint`). A job opened on a location
        holding a checkpoint resumes from it.

        Raises:
            ValueError: the job was opened without ``checkpoint=``.
            RuntimeError: another checkpoint is being taken.
            CheckpointError: the checkpoint could not be written (the job goes on; the
                previous checkpoint stays the current one).
            OperatorError: user code in an operator failed (the job is stopped).
        """
        if not self.placement.commits:
            msg = (
                "a peer writes its share with save_share(); the coordinator commits the checkpoint"
            )
            raise RuntimeError(msg)
        checkpointer = self.checkpointer
        if checkpointer is None:
            msg = "checkpoint(): this job was opened without checkpoint=LOCATION"
            raise ValueError(msg)
        self.check_usable()
        self.check_not_checkpointing("checkpoint()")
        self._checkpointing = True
        try:
            time = self.time
            self.flush()
            await self._settle(time)
            await self._write_checkpoint(checkpointer, time)
        finally:
            self._checkpointing = False
        return time

    async def _settle(self, time: int) -> None:
        """Wait until every update before ``time`` is processed and nothing is in flight:
        the state a checkpoint at ``time`` takes."""
        await self.wait_for(lambda: self._complete_before(time))
        await self.placement.settle(self)

    @property
    def checkpoints_itself(self) -> bool:
        """Whether this job writes (and commits) its checkpoints on its own: the one at the
        end of its block included."""
        return self.checkpointer is not None and self.placement.commits

    def header(self, time: int, sequence: int) -> dict[str, Any]:
        """What the manifest of checkpoint ``sequence`` at ``time`` says of the job: its
        time, layout, pipeline, inputs, sources and outputs."""
        return {
            "sequence": sequence,
            "time": time,
            "workers": self.total_workers,
            "pipeline": type(self.pipeline).__qualname__,
            "fingerprint": self.layout.fingerprint,
            "code": self.layout.code_entry(),
            "inputs": {name: {"closed": h.closed} for name, h in self.inputs.items()},
            "sources": self._sources.offsets_before(time),
            "accounts": {name: a.saved(time) for name, a in self.accounts.items()},
            "outputs": {
                name: {"frontier": encode_frontier(store.frontier)}
                for name, store in self.builder.stores.items()
            },
        }

    async def _write_checkpoint(self, checkpointer: Checkpointer, time: int) -> None:
        """Take this job's state (settled now: every process's share, then this one's) and
        commit it as the next checkpoint."""
        sequence = checkpointer.sequence
        checkpointer.started()  # (from before the other processes write their shares)
        try:
            shares = await self.placement.shares(self, sequence)
            capture = self.placement.capture(self, checkpointer)
            own = await trio.to_thread.run_sync(checkpointer.write, capture, sequence)
            header = self.header(time, sequence)
            await trio.to_thread.run_sync(checkpointer.commit, header, [own, *shares])
        except BaseException:
            checkpointer.failed(time)
            raise
        checkpointer.committed(capture, own, sequence)
        self._sources.committed(time, header["sources"])
        observe.logger.info("checkpoint %d at time %d written", sequence, time)

    def _complete_before(self, time: int) -> bool:
        for out in self.outputs.values():
            for f in out.frontier:
                if f < time:
                    return False
        return True

    async def close(self) -> None:
        """Close every input and wait until the whole dataflow has finished."""
        if self.error is not None:
            if not self._error_reported:
                self.raise_error()
            return
        self.check_not_checkpointing("close")
        for handle in self.inputs.values():
            handle.close()
        self.activate_inputs()
        with contextlib.suppress(JobClosedError):
            await self.wait_for(lambda: self.finished)
        if self.error is None:
            await self._sinks.drain()
        self.closed = True
        for out in self.outputs.values():
            out.close_subscriptions()
        if self._unreported_error():
            self.raise_error()

    def _unreported_error(self) -> bool:
        return self.error is not None and not self._error_reported

    def statistics(self) -> dict[str, Any]:
        """Counts for introspection, as plain data (JSON-able):

        * ``time``: the job's time (the inputs'; updates fed now are stamped with it);
        * ``inputs``: per input, ``{"read", "accepted", "refused", "skipped",
          "quarantined", "on_bad"}``: records offered, kept, refused (bad), and of those set
          aside by ``on_bad`` (see :mod:`deltaflow.scheduler.accounting`); after a resume,
          those of times before the checkpoint's included;
        * ``outputs``: per output, ``{"written": n, "frontier": [...]}``: consolidated
          updates published for completed times (since the job started) and the times the
          output may still change at;
        * ``workers``: per worker its steps, activations, actors, the updates each
          operator's arrangements hold on it, its process and its late updates; and
          ``processes``: per process its pid and resident memory;
        * ``operators``: per operator (in plan order) its name and the updates its
          arrangements hold, with its activations, records received (``ports``: per input
          port) and seconds when the job counts them (``df.open(..., profile=True)`` or
          ``dashboard=``, or the ``deltaflow`` logger at ``DEBUG``);
        * ``late``: the late updates each window operator with a watermark dropped;
        * ``checkpoints``: the last checkpoints taken (when the job keeps them);
        * ``arrangements`` and delta queries' ``proposals`` (see :func:`.delta_statistics`).

            >>> import deltaflow as df, trio
            >>> class Same(df.Pipeline):
            ...     def build(self, xs):
            ...         return xs
            >>> async def main():
            ...     async with df.open(Same(), on_bad={"xs": "skip"}) as job:
            ...         job.inputs["xs"].insert(1)
            ...         job.inputs["xs"].insert([2])      # unhashable: skipped, counted
            ...         await job.advance_to(1)
            ...     return job.statistics()
            >>> stats = trio.run(main)
            >>> stats["inputs"]["xs"]["read"], stats["inputs"]["xs"]["skipped"]
            (2, 1)
            >>> stats["outputs"]["output"]
            {'written': 1, 'frontier': []}
        """
        counts = self._operator_counts
        workers = self.placement.worker_statistics(self)
        operators = []
        for i, node in enumerate(self.plan.nodes):
            op: dict[str, Any] = {
                "name": node.name,
                "arranged": sum(w["arranged"][i] for w in workers),
            }
            if counts is not None:
                c = counts[i]
                op.update(
                    activations=c.activations, records=c.records, seconds=c.seconds, ports=c.ports
                )
            operators.append(op)
        stats = {
            **delta_statistics(self.builder.spec),
            "time": self.time,
            "workers": workers,
            "processes": observe.processes_of(workers),
            "inputs": {
                name: {**account.counts(), "on_bad": account.mode}
                for name, account in self.accounts.items()
            },
            "outputs": {
                n: {"written": o.published, "frontier": list(o.frontier)}
                for n, o in self.outputs.items()
            },
            "operators": operators,
            "late": observe.total_late(workers),
        }
        if self.checkpointer is not None:
            stats["checkpoints"] = list(self.checkpointer.history)
        return stats


@attrs.frozen
class _Opening:
    """How a job opens its checkpoint location: started over (``fresh``), and whether it
    resumes a checkpoint whose operators' code changed (``allow_code_change``)."""

    fresh: bool
    allow_code_change: bool


class _Named(dict[str, Any]):
    """A job's inputs or outputs by name; a missing name lists the ones there are."""

    def __init__(self, kind: str, items: dict[str, Any]) -> None:
        super().__init__(items)
        self.kind = kind

    def __missing__(self, name: str) -> Any:
        msg = f"no {self.kind} named {name!r}; this pipeline has {sorted(self)}"
        raise KeyError(msg)


def _check_options(
    workers: int,
    history: int | None,
    checkpoint: object,
    *,
    fresh: bool,
    allow_code_change: bool,
) -> None:
    """Refuse a :class:`Job`'s options of the wrong kind or range, naming the option."""
    flags: tuple[tuple[str, object], ...] = (
        ("fresh", fresh),
        ("allow_code_change", allow_code_change),
    )
    for flag, value in flags:
        if value.__class__ is not bool:
            msg = f"{flag} must be True or False, not {value!r}"
            raise ValueError(msg)
    if fresh and checkpoint is None:
        msg = "fresh=True starts a checkpoint location over: give checkpoint=LOCATION too"
        raise ValueError(msg)
    if workers.__class__ is not int or workers < 1:
        msg = f"workers must be a positive int, not {workers!r}"
        raise ValueError(msg)
    if history is not None and (history.__class__ is not int or history < 0):
        msg = f"history must be a non-negative int or None, not {history!r}"
        raise ValueError(msg)
