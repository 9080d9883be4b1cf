"""``processes=P``: a job's workers in P fresh interpreters, driven from the caller's trio loop.

The caller hosts no worker. It starts P interpreters (``python -m
deltaflow.scheduler.net.process_worker``, so the user's script needs no ``if __name__ ==
"__main__"`` guard; the process's side is :mod:`deltaflow.scheduler.net.process_worker`), each
holding one end of a socket pair: the *control* stream, which nobody else can reach. Over it
the caller ships the pipeline (pickled with cloudpickle: lambdas and classes of ``__main__``
travel by value) and a fresh secret for the job, acts as the rendezvous of the processes' TCP
mesh on loopback (:mod:`deltaflow.scheduler.net.mesh`, which admits only connections that prove
they hold the secret), forwards what the application feeds to the worker that owns it, and
receives every output's consolidated updates with the frontier they complete.

The caller's job is placed by :class:`Processes` (see :mod:`deltaflow.scheduler.placement`);
each process runs a job of ``W / P`` workers placed as a peer
(:class:`~deltaflow.scheduler.net.process_worker.WorkerProcess`). Its
output stores report ``(updates, frontier)`` in that order on the control stream, so once
every process has reported a frontier past time ``t`` the caller holds all of ``t``'s
updates: the caller's store advances to the meet of the processes' frontiers and publishes
from there, consolidated across processes. Probes advance on any process's report (every
tracker sees the same frontiers, some later than others).

Start-up has deadlines (:attr:`Processes.START_TIMEOUT_S`,
:attr:`Processes.CONNECT_TIMEOUT_S`): a job whose processes cannot connect fails naming the
missing one. A process that dies closes its control stream: the job fails within moments
naming the workers it hosted; and a caller that goes away (killed, at any moment) closes
theirs, which ends them. Leaving the job (normally or not) ends the processes, or hands them back
to a :class:`ProcessPool` that keeps them between jobs (the test suite uses one).

    >>> import deltaflow as df
    >>> class Double(df.Pipeline):
    ...     def build(self, xs):
    ...         return xs.map(lambda x: 2 * x)
    >>> df.run(Double(), processes=2, xs=[(1, 0, 1), (5, 1, 1)])
    [(2, 0, 1), (10, 1, 1)]
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import sys
import time as _time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import cloudpickle  # type: ignore[import-untyped]
import trio

from ...errors import CheckpointError, JobClosedError, PeerLostError
from ...framework.antichain import Antichain
from ...operators.base import UpdateBatch
from ..checkpoint import settled
from ..collector import GC_THRESHOLD
from ..placement import Placement
from .handshake import new_secret
from .mesh import CONNECT_TIMEOUT_S, first_error
from .remote_errors import ErrorReport
from .tcp import FrameError, Link, describe_workers

if TYPE_CHECKING:
    from ...operators.io import InputFeed
    from ...operators.pipeline import Pipeline
    from ..checkpoint import Capture, Checkpointer
    from ..job import Job
    from ..local.transport import ProgressChange, Transport
    from ..local.worker import Worker

__all__ = ["ProcessPool", "Processes"]

if sys.version_info < (3, 11):  # pragma: no cover - trio brings the backport there
    from exceptiongroup import BaseExceptionGroup

_log = logging.getLogger("deltaflow")
T = TypeVar("T")


# -- the processes -------------------------------------------------------------------------
class _Process:
    """One worker interpreter and the caller's end of its control socket."""

    def __init__(self) -> None:
        mine, theirs = socket.socketpair()
        with theirs:
            self.popen = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "deltaflow.scheduler.net.process_worker",
                    str(theirs.fileno()),
                ],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
            )
        self.sock = mine

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, *, kill: bool) -> None:
        """End the process: close its control stream (it exits on its own), or kill it."""
        if kill and self.alive():
            self.popen.kill()
        self.sock.close()
        try:
            self.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


class ProcessPool:
    """Worker processes kept between jobs: ``with ProcessPool(): ...`` makes every job with
    ``processes=P`` inside the block take its processes from here (starting only those it
    lacks) and give them back when it ends cleanly; a job that fails or is cancelled ends its
    processes. Closing the pool ends the idle ones.

    >>> with ProcessPool() as pool:
    ...     pool.idle
    0
    """

    _active: ProcessPool | None = None

    def __init__(self) -> None:
        self._idle: list[_Process] = []
        self._outer: ProcessPool | None = None

    @property
    def idle(self) -> int:
        """How many processes wait for a job."""
        return len(self._idle)

    def take(self, n: int) -> list[_Process]:
        """``n`` processes: idle ones first, the rest fresh."""
        alive = [p for p in self._idle if p.alive()]
        for p in self._idle:
            if not p.alive():
                p.stop(kill=True)
        taken, self._idle = alive[:n], alive[n:]
        return taken + [_Process() for _ in range(n - len(taken))]

    def give_back(self, processes: list[_Process]) -> None:
        """Keep ``processes`` for the next job."""
        self._idle.extend(processes)

    def close(self) -> None:
        """End the idle processes."""
        idle, self._idle = self._idle, []
        for p in idle:
            p.stop(kill=False)

    @staticmethod
    def current() -> ProcessPool | None:
        """The pool of the innermost ``with`` block, if any."""
        return ProcessPool._active

    def __enter__(self) -> ProcessPool:
        self._outer, ProcessPool._active = ProcessPool._active, self
        return self

    def __exit__(self, *exc: object) -> None:
        ProcessPool._active = self._outer
        self.close()


# -- the caller's side ---------------------------------------------------------------------
class _RemoteFeed:
    """An input feed whose worker is in another process: what is fed goes over control."""

    def __init__(self, control: _Control, name: str, worker: int) -> None:
        self._control = control
        self._name = name
        self._worker = worker
        self._time: Any = 0
        self._closed = False

    def _send(self, *message: Any) -> None:
        process, offset = divmod(self._worker, self._control.local)
        self._control.links[process].queue((message[0], self._name, offset, *message[1:]))

    def push(self, time: Any, data: list[Any], diffs: list[int]) -> None:
        self._send("push", time, data, diffs)

    def stand_at(self, time: Any, closed: bool) -> None:
        """Where a checkpoint left the input (the process, resumed from it, knows)."""
        self._time = time
        self._closed = closed

    @property
    def time(self) -> Any:
        return self._time

    @time.setter
    def time(self, time: Any) -> None:
        if time != self._time:
            self._time = time
            self._send("time", time)

    @property
    def closed(self) -> bool:
        return self._closed

    @closed.setter
    def closed(self, closed: bool) -> None:
        if closed and not self._closed:
            self._closed = True
            self._send("close")


class _Control:
    """The caller's "transport": the control streams to the processes, and their reports.

    It hosts no worker (``attach`` gets none; nothing is sent through it by a worker).
    """

    def __init__(self, placement: Processes, job: Job) -> None:
        self.placement = placement
        self.job = job
        self.local = placement.local
        self.processes: list[_Process] = []
        self.links: list[Link] = []
        self.frontiers: dict[str, list[Antichain]] = {}
        self.stats: list[list[dict[str, Any]]] = []
        #: Per process, its operators' counts as last reported (when the job counts them).
        self.counts: list[list[tuple[int, int, float, list[int]]]] = []
        self.done = 0
        self.ended = False
        self.pool: ProcessPool | None = None
        self._nursery: trio.Nursery | None = None
        #: Per process, its answer to the checkpoint request under way (see
        #: :meth:`Processes.settle` and :meth:`Processes.shares`).
        self.replies: dict[int, Any] = {}
        #: The processes that have bound their mesh's port, and those whose mesh is connected.
        self._bound: set[int] = set()
        self._ready: set[int] = set()

    #: Seconds the caller waits for the processes' mesh beyond their own deadline for it.
    GRACE_S = 5.0

    # Transport protocol: the caller has no workers.
    def attach(self, workers: list[Worker]) -> None:
        assert not workers

    def send_data(
        self, sender: int, worker: int, node: int, port: int, time: Any, payload: Any
    ) -> None:
        raise AssertionError("the caller of a multi-process job hosts no worker")

    def broadcast_progress(self, sender: int, changes: list[ProgressChange]) -> None:
        raise AssertionError("the caller of a multi-process job hosts no worker")

    def turn(self, worker: Worker) -> None:
        raise AssertionError("the caller of a multi-process job hosts no worker")

    async def rest(self, worker: Worker) -> bool:
        raise AssertionError("the caller of a multi-process job hosts no worker")

    def _describe(self, p: int) -> str:
        return f"{describe_workers(p, self.local)[:-1]}, pid {self.processes[p].popen.pid})"

    def _open_link(self, p: int) -> None:
        """The control link to process ``p`` (a socket pair of the caller's own: no frame
        bound, nobody else can reach it)."""
        sock = trio.socket.from_stdlib_socket(self.processes[p].sock.dup())
        link = Link(trio.SocketStream(sock), p, max_frame=None)
        if p < len(self.links):
            self.links[p] = link
        else:
            self.links.append(link)

    async def start(self, spec: bytes) -> None:
        """Start (or take from the pool) the processes, ship the job with a fresh secret for
        its mesh, be their rendezvous, and wait until every process is connected.

        Raises:
            PeerLostError: a process died, or did not report within the start-up deadlines
                (:attr:`Processes.START_TIMEOUT_S`, then the mesh's
                :attr:`Processes.CONNECT_TIMEOUT_S`), naming it.
        """
        job, placement = self.job, self.placement
        peers = placement.peers
        self.pool = ProcessPool.current()
        pool = self.pool if self.pool is not None else ProcessPool()
        self.processes = pool.take(peers)
        self.frontiers = {name: [Antichain([0])] * peers for name in job.outputs}
        self.stats = [[] for _ in range(peers)]
        self.counts = [[] for _ in range(peers)]
        for p in range(peers):
            self._open_link(p)
        # The mesh's secret reaches each process on its own control socket: never on a
        # command line, in an environment or a log.
        secret = new_secret()
        level = _log.getEffectiveLevel()
        for p in range(len(self.links)):
            job_frame = [("job", p, sys.path, level, spec, secret, placement.CONNECT_TIMEOUT_S)]
            try:
                await self.links[p].send_frame(job_frame)
            except (OSError, trio.BrokenResourceError):
                # An idle process of the pool that ended since it was last used: a fresh
                # one takes its place (a fresh one that cannot be reached is lost for real).
                self.processes[p].stop(kill=True)
                self.processes[p] = _Process()
                self._open_link(p)
                try:
                    await self.links[p].send_frame(job_frame)
                except (OSError, trio.BrokenResourceError) as exc:
                    raise PeerLostError(await self._lost(p)) from exc
        addresses = await self._within(
            placement.START_TIMEOUT_S, "bind their mesh's port", self._rendezvous, self._bound
        )
        for link in self.links:
            await link.send_frame([("peers", addresses)])

        async def ready(p: int) -> None:
            await self._expect(p, "ready")
            self._ready.add(p)

        async def all_ready() -> None:
            # Every process at once: the first to fail (a peer it could not authenticate)
            # is heard while the others still wait for it.
            try:
                async with trio.open_nursery() as nursery:
                    for p in range(peers):
                        nursery.start_soon(ready, p)
            except BaseExceptionGroup as group:
                raise first_error(group) from None

        # The processes' own deadline for their mesh comes first, so the error that names
        # the missing peer is theirs.
        wait = placement.CONNECT_TIMEOUT_S + self.GRACE_S
        await self._within(wait, "connect their mesh", all_ready, self._ready)

    async def _rendezvous(self) -> list[str]:
        """Every process's mesh address, in process order, once all have bound theirs."""
        reports = []
        for p in range(self.placement.peers):
            reports.append(await self._expect(p, "address"))
            self._bound.add(p)
        digests = {r[2] for r in reports}
        if len(digests) != 1:  # pragma: no cover - the same spec gives the same plan
            msg = f"the worker processes built different dataflows: {sorted(digests)}"
            raise RuntimeError(msg)
        return [r[1] for r in reports]

    async def _within(
        self, seconds: float, what: str, step: Callable[[], Awaitable[T]], done: set[int]
    ) -> T:
        """``await step()``, or after ``seconds`` a :class:`PeerLostError` naming the
        processes not in ``done``."""
        with trio.move_on_after(seconds):
            return await step()
        late = [p for p in range(self.placement.peers) if p not in done]
        names = "; ".join(self._describe(p) for p in late)
        msg = f"the worker processes did not {what} within {seconds} s: {names}"
        raise PeerLostError(msg)

    async def _expect(self, p: int, kind: str) -> Any:
        """The next control message of process ``p`` but its log records (handled), which
        must be a ``kind``."""
        while True:
            try:
                messages = await self.links[p].receive()
            except (EOFError, OSError, trio.BrokenResourceError, FrameError) as exc:
                raise PeerLostError(await self._lost(p)) from exc
            for message in messages:
                if message[0] == "log":
                    self._handle(p, message)
                    continue
                if message[0] == "error":
                    raise self._error(message)
                assert message[0] == kind, message
                return message

    async def _lost(self, p: int) -> str:
        proc = self.processes[p].popen
        with trio.move_on_after(2):
            while proc.poll() is None:  # noqa: ASYNC110 - a child's exit sets no trio event
                await trio.sleep(0.02)
        code = proc.poll()
        how = "died" if code is None else f"exited with code {code}"
        return f"the worker process of {self._describe(p)} {how}"

    def _error(self, message: Any) -> BaseException:
        return cast("ErrorReport", message[1]).rebuild(RuntimeError)

    def _handle(self, p: int, message: Any) -> None:
        job = self.job
        kind = message[0]
        if kind == "out":
            _, name, published, frontier, stats, counts = message
            store = job.builder.stores[name]
            for t, data, diffs in published:
                store.add(t, UpdateBatch(data, diffs))
            fronts = self.frontiers[name]
            fronts[p] = Antichain(frontier)
            store.advance(Antichain([t for f in fronts for t in f]))
            self._report(p, stats, counts)
        elif kind == "probe":
            _, index, frontier = message
            job.builder.probes[index].advance(Antichain(frontier))
        elif kind == "log":
            _, name, level, text = message
            logger = logging.getLogger(name)
            if logger.isEnabledFor(level):
                record = logger.makeRecord(name, level, "(worker process)", 0, text, (), None)
                record.processName = f"deltaflow worker process {p}"
                logger.handle(record)
        elif kind in ("settled", "checkpointed", "checkpoint-failed"):
            self.replies[p] = message
        elif kind == "done":
            self._report(p, message[1], message[2])
            self.done += 1
        elif kind == "error":
            error = self._error(message)
            if isinstance(error, PeerLostError):
                # Another process lost this one's peer: give the caller's own view of that
                # process (it died? with which code?) a moment to be the error reported.
                assert self._nursery is not None
                self._nursery.start_soon(self._fail_later, error)
            else:
                job.fail(error)

    def _report(
        self,
        p: int,
        stats: list[dict[str, Any]],
        counts: list[tuple[int, int, float, list[int]]] | None,
    ) -> None:
        """Process ``p``'s workers' statistics and (when counting) its operators' counts;
        the job's operator counts become the sums over the processes."""
        self.stats[p] = stats
        totals = self.job.operator_counts
        if counts is None or totals is None:
            return
        self.counts[p] = counts
        for i, total in enumerate(totals):
            got = [c[i] for c in self.counts if c]
            total.activations = sum(c[0] for c in got)
            total.records = sum(c[1] for c in got)
            total.seconds = sum(c[2] for c in got)
            total.ports = [sum(ports) for ports in zip(*(c[3] for c in got))]

    async def _send_loop(self, link: Link) -> None:
        # A process that is gone breaks its stream: its receiving loop reports it.
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await link.send_loop()

    async def _fail_later(self, error: BaseException) -> None:
        await trio.sleep(1)
        self.job.fail(error)

    async def _receive_loop(self, p: int) -> None:
        link = self.links[p]
        while True:
            try:
                messages = await link.receive_many()
            except (EOFError, OSError, trio.BrokenResourceError, FrameError):
                self.job.fail(PeerLostError(await self._lost(p)))
                return
            for message in messages:
                self._handle(p, message)
            if self.done == len(self.links):
                self.ended = True
            self.job.notify()
            if messages[-1][0] == "done":
                return

    async def run(self) -> None:
        """Carry control messages until every process is done or the job failed."""
        job = self.job
        clean = False
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for p, link in enumerate(self.links):
                    nursery.start_soon(self._receive_loop, p)
                    nursery.start_soon(self._send_loop, link)

                async def watch_failure() -> None:
                    await self.placement.failure.wait()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(watch_failure)
                await job.wait_until(lambda: self.done == self.placement.peers)
                for link in self.links:
                    link.close_after_queued()
                nursery.cancel_scope.cancel()
            clean = not job.failed
        finally:
            self.ended = True
            self.shutdown(clean=clean)
            job.notify()

    def shutdown(self, *, clean: bool) -> None:
        """Give the processes back to the pool after a clean job; end them otherwise."""
        for link in self.links:
            link.stream.socket.close()  # type: ignore[attr-defined]  # a control link's own
        processes, self.processes = self.processes, []
        if clean and self.pool is not None:
            self.pool.give_back(processes)
            return
        for proc in processes:
            proc.stop(kill=not clean)


class Processes(Placement):
    """``processes=P``: a job's ``workers`` in P other interpreters, which the caller starts,
    feeds and hears from over their control streams (see the module); the caller hosts no
    worker and holds the outputs (and commits checkpoints, each process writing its share).

        >>> import deltaflow as df
        >>> class Same(df.Pipeline):
        ...     def build(self, xs):
        ...         return xs
        >>> placement = Processes(Same(), workers=4, processes=2)
        >>> placement.hosted(4), placement.local
        (range(0, 0), 2)
    """

    #: Seconds from the job's start to every process having built the dataflow and bound
    #: its mesh's port (interpreters started, the pipeline unpickled and built).
    START_TIMEOUT_S = 120.0
    #: Seconds each process waits for the others to connect, once all have bound.
    CONNECT_TIMEOUT_S = CONNECT_TIMEOUT_S
    writer = "caller"

    def __init__(
        self,
        pipeline: Pipeline,
        workers: int,
        processes: int,
        *,
        fuse: bool = True,
        gc_threshold: int | None = GC_THRESHOLD,
        profile: bool = False,
        checkpoint: Any = None,
    ) -> None:
        if processes.__class__ is not int or processes < 1:
            msg = f"processes must be a positive int, not {processes!r}"
            raise ValueError(msg)
        if workers.__class__ is not int or workers < 1 or workers % processes:
            msg = f"workers ({workers!r}) must be a positive multiple of processes ({processes})"
            raise ValueError(msg)
        self.peers = processes
        self.local = workers // processes
        #: The collector's threshold in the worker processes (see ``collector``), where the
        #: operators' state lives.
        self.gc_threshold = gc_threshold
        self.control: _Control | None = None
        #: Set once the job failed: the control streams stop at once.
        self.failure = trio.Event()
        # Pickled before ``build`` runs here: what it leaves on the pipeline (a probe bound
        # to this job) is not for the processes, which build their own. With counting on,
        # the job's counts are the sums of those the processes report.
        location = None if checkpoint is None else os.fspath(checkpoint)
        self.spec: bytes = cloudpickle.dumps(
            {"pipeline": pipeline, "peers": processes, "local": self.local, "fuse": fuse,
             "gc_threshold": gc_threshold, "profile": profile, "checkpoint": location}
        )  # fmt: skip
        #: Seconds from entering the job to every process connected and ready.
        self.startup_s: float | None = None

    def _control(self) -> _Control:
        assert self.control is not None
        return self.control

    # -- the workers: all in the processes --------------------------------------------------
    def transport(self, job: Job) -> Transport:
        """The control streams to the processes."""
        self.control = _Control(self, job)
        return self.control

    def hosted(self, workers: int) -> range:
        return range(0)

    def feeds(self, job: Job, name: str, feeds: list[InputFeed]) -> list[Any]:
        """A feed per worker that sends what is fed to it over its process's control stream."""
        control = self._control()
        return [_RemoteFeed(control, name, w) for w in range(job.total_workers)]

    def activate_inputs(self, job: Job, name: str | None) -> None:
        """What was fed is queued for the processes: send it now, not when the sending tasks
        next get their turn (the application is about to wait for the answer)."""
        for link in self._control().links:
            link.flush_now()

    # -- checkpoints: the processes write their shares, the caller commits ------------------
    async def start(self, job: Job) -> None:
        """Start (or take from the pool) the processes and connect them; on failure end those
        already started. (A checkpoint at the location is checked first, and each process
        resumes its workers from it.)"""
        control = self._control()
        start = _time.perf_counter()
        try:
            await control.start(self.spec)
        except BaseException:
            control.shutdown(clean=False)
            raise
        self.startup_s = _time.perf_counter() - start

    async def resume(self, job: Job, manifest: dict[str, Any]) -> None:
        """The outputs' collections at the checkpoint (the processes resumed the rest)."""
        await job.restore(manifest, [], current=True, pending=False)

    async def _ask(self, job: Job, message: Any) -> list[Any]:
        """Send ``message`` to every process; their answers, once all have answered.

        Raises:
            CheckpointError: a process could not do what was asked.
        """
        control = self._control()
        control.replies = {}
        for link in control.links:
            link.queue(message)
            link.flush_now()
        await job.wait_until(
            lambda: len(control.replies) == self.peers or job.failed or control.ended
        )
        if job.error is not None:
            job.raise_error()
        if len(control.replies) < self.peers:
            msg = "the job finished while a checkpoint was being taken"
            raise JobClosedError(msg)
        replies = [control.replies[p] for p in range(self.peers)]
        failed = [r[1] for r in replies if r[0] == "checkpoint-failed"]
        if failed:
            raise CheckpointError("; ".join(failed))
        return replies

    async def settle(self, job: Job) -> None:
        """Rounds of the processes' idle counts until two agree and nothing is in flight
        (see :meth:`.PeerPlacement.settle`); no process wakes again before the caller feeds
        it."""
        last: list[tuple[int, int]] | None = None
        while True:
            counts = [(r[1], r[2]) for r in await self._ask(job, ("settle",))]
            if settled(last, counts):
                return
            last = counts

    async def shares(self, job: Job, sequence: int) -> list[dict[str, Any]]:
        """Each process writes its workers' share of checkpoint ``sequence``."""
        replies = await self._ask(job, ("checkpoint", sequence, sequence - 1))
        return [r[1] for r in replies]

    def capture(self, job: Job, checkpointer: Checkpointer) -> Capture:
        """The outputs' collections (the processes hold the rest)."""
        stores = job.builder.stores
        return checkpointer.capture(job.layout, [], stores, current=True, pending=False)

    # -- running ----------------------------------------------------------------------------
    def describe(self, job: Job) -> str:
        return f"{self.peers * self.local} workers, {self.peers} processes"

    def finished(self, job: Job) -> bool:
        return self._control().ended

    def any_finished(self, job: Job) -> bool:
        return self._control().ended

    def failed(self, job: Job, exc: BaseException, *, first: bool) -> None:
        """Stop the control streams (and with them the processes)."""
        self.failure.set()

    def worker_statistics(self, job: Job) -> list[dict[str, Any]]:
        """The workers' counts, arrangement sizes and processes' memory (and with
        ``profile=True`` the operators' counts, summed over the processes) are those the
        processes last reported: with every output frontier move, and as they finish."""
        return [w for stats in self._control().stats for w in stats]
