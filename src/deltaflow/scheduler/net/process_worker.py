"""A worker process of a ``processes=P`` job: it serves jobs from the caller, one at a time.

:class:`~deltaflow.scheduler.net.processes.Processes` starts each process as ``python -m
deltaflow.scheduler.net.process_worker FD``, ``FD`` its end of the control socket. For each
job the caller sends a frame (the pickled pipeline, the mesh's secret, the caller's import
path and log level); the process builds its share of the job (placed by
:class:`WorkerProcess`, a peer's placement), connects the mesh with the caller as its
rendezvous, runs the job to its end and reports outputs, probes, failures, checkpoints and
its ``deltaflow`` log records on the control stream. The caller going away (the control
stream closed) ends the process at any moment.

    main(["5"])   # serve jobs on the control socket whose descriptor is 5
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
from typing import Any

import attrs
import cloudpickle  # type: ignore[import-untyped]
import trio

from ...errors import CheckpointError
from ...framework.antichain import Antichain
from ..collector import GC_THRESHOLD
from ..job import Job, OpenJob
from .peer import PeerPlacement, peer_job
from .remote_errors import ErrorReport
from .tcp import FrameError, Link

__all__ = ["WorkerProcess", "main"]

_log = logging.getLogger("deltaflow")


class WorkerProcess(PeerPlacement):
    """A process's share of a ``processes=P`` job (see
    :class:`~deltaflow.scheduler.net.processes.Processes`): a peer that also reports outputs,
    probes, statistics and failures to the caller over ``control``, and takes what the
    caller feeds and asks of it.

        WorkerProcess(spec, index, control)   # spec: the job the caller shipped, unpickled
    """

    def __init__(self, spec: dict[str, Any], index: int, control: Link) -> None:
        super().__init__(
            index=index, peers=spec["peers"], local=spec["local"], exchange_outputs=False
        )
        self.control = control
        self.gc_threshold: int | None = spec.get("gc_threshold", GC_THRESHOLD)
        self._published: dict[str, list[tuple[Any, list[tuple[Any, int]]]]] = {}
        self._sent: dict[str, Antichain] = {}
        self._probes: list[Antichain] = []

    def built(self, job: Job) -> None:
        """Keep what each output completes until it is reported."""
        super().built(job)
        for name, store in job.builder.stores.items():
            published: list[tuple[Any, list[tuple[Any, int]]]] = []
            self._published[name] = published
            self._sent[name] = store.frontier
            store.on_complete = lambda t, u, published=published: published.append((t, u))
        self._probes = [p.frontier for p in job.builder.probes]

    def counts(self, job: Job) -> list[tuple[int, int, float, list[int]]] | None:
        """The operators' counts on this process's workers, if the job counts them."""
        counts = job.operator_counts
        if counts is None:
            return None
        return [(c.activations, c.records, c.seconds, c.ports) for c in counts]

    def stepped(self, job: Job) -> None:
        """As :meth:`PeerPlacement.stepped`, and report outputs and probes that moved."""
        super().stepped(job)
        control = self.control
        for name, store in job.builder.stores.items():
            published = self._published[name]
            if store.frontier is not self._sent[name] or published:
                self._sent[name] = store.frontier
                # As columns: the caller makes a batch of them as they come.
                columns = [(t, [d for d, _ in u], [r for _, r in u]) for t, u in published]
                frontier = list(store.frontier)
                stats = self.worker_statistics(job)
                control.queue(("out", name, columns, frontier, stats, self.counts(job)))
                published.clear()
                store.history.clear()
                store.current.clear()
        for i, probe in enumerate(job.builder.probes):
            if probe.frontier is not self._probes[i]:
                self._probes[i] = probe.frontier
                control.queue(("probe", i, list(probe.frontier)))
        control.flush_now()  # the caller may be waiting on this very report

    def failed(self, job: Job, exc: BaseException, *, first: bool) -> None:
        """As :meth:`PeerPlacement.failed`, and tell the caller (the first error only)."""
        super().failed(job, exc, first=first)
        if first:
            self.control.queue(("error", ErrorReport.of(exc)))

    async def answer(self, job: Job, message: Any) -> None:
        """A checkpoint request from the caller: settle, or write this process's share."""
        try:
            if message[0] == "settle":
                self.control.queue(("settled", *await self.idle_counts(job)))
            else:
                _, sequence, committed = message
                fragment = await self.save_share(job, sequence, committed)
                self.control.queue(("checkpointed", fragment))
        except CheckpointError as exc:
            self.control.queue(("checkpoint-failed", str(exc)))
        except Exception as exc:  # reported, not raised: the job goes on without it
            self.control.queue(("checkpoint-failed", f"worker process {self.index}: {exc!r}"))
        self.control.flush_now()

    def apply(self, job: Job, message: Any) -> None:
        """A feed operation from the caller."""
        kind, name, offset, *rest = message
        feed = job.inputs[name].feeds[offset]
        if kind == "push":
            feed.push(*rest)
        elif kind == "time":
            feed.time = rest[0]
        else:
            feed.closed = True
        job.workers[offset].activate(job.input_nodes[name])


class _Forward(logging.Handler):
    """Send the process's ``deltaflow`` log records to the caller."""

    def __init__(self, control: Link) -> None:
        super().__init__()
        self.control = control

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            self.control.queue(("log", record.name, record.levelno, record.getMessage()))


async def _send_to_caller(control: Link) -> None:
    try:
        await control.send_loop()
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        os._exit(1)  # the caller is gone: so is this job


class _Job:
    """What one job's frame from the caller says: this process's index, the caller's import
    path and log level, the pickled job, the mesh's secret and its connect timeout."""

    def __init__(self, frame: tuple[Any, ...]) -> None:
        _, self.index, self.path, self.level, self.blob, self.secret, self.timeout = frame


async def _build_and_connect(
    control: Link, given: _Job, addresses: list[str], peers_known: trio.Event
) -> tuple[Job, WorkerProcess]:
    """Build this process's part of the job, meet the other processes (their addresses come
    through the caller, once every process has bound its port) and start the job, resuming
    from its checkpoint location if that holds a checkpoint."""
    spec = cloudpickle.loads(given.blob)
    placement = WorkerProcess(spec, given.index, control)
    job = peer_job(
        spec["pipeline"],
        placement,
        fuse=spec["fuse"],
        profile=spec.get("profile", False),
        checkpoint=spec.get("checkpoint"),
    )
    digest = placement.digest

    async def rendezvous(address: str) -> list[str]:
        control.queue(("address", address, digest))
        control.flush_now()
        await peers_known.wait()
        return list(addresses)

    await placement.connect(rendezvous, secret=given.secret, connect_timeout=given.timeout)
    await job.start()
    return job, placement


async def _run_job(control: Link, given: _Job) -> None:
    """Run one job: build it, connect its mesh, run it to its end, report to the caller.

    From the job's frame on, one task reads the control stream (the peers' addresses, then
    what the application feeds): the caller going away ends this process at any moment,
    mesh start-up included, whatever a stranger does to the mesh's port meanwhile.
    """
    # The caller's import path, so that the pipeline's modules import here as there.
    sys.path[:] = given.path + [p for p in sys.path if p not in given.path]
    _log.setLevel(given.level)
    handler = _Forward(control)
    _log.addHandler(handler)
    addresses: list[str] = []
    peers_known = trio.Event()
    job: Job | None = None
    placement: WorkerProcess | None = None
    reading = trio.CancelScope()

    async def read_caller() -> None:
        with reading:
            while True:
                try:
                    messages = await control.receive_many()
                except (EOFError, OSError, trio.BrokenResourceError, FrameError):
                    os._exit(1)  # the caller is gone: so is this job
                for m in messages:
                    if m[0] == "peers":
                        addresses[:] = m[1]
                        peers_known.set()
                    elif m[0] in ("settle", "checkpoint"):
                        assert job is not None and placement is not None
                        nursery.start_soon(placement.answer, job, m)
                    else:
                        # Feeds come once the caller heard "ready".
                        assert job is not None and placement is not None
                        placement.apply(job, m)

    failure: Exception | None = None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_send_to_caller, control)
            nursery.start_soon(read_caller)
            try:
                job, placement = await _build_and_connect(control, given, addresses, peers_known)
            except Exception as exc:
                # Reported to the caller, which ends this process.
                failure = exc
                text = f"worker process {given.index}: {exc!r}"
                report = attrs.evolve(ErrorReport.of(exc), message=text, args=(text,))
                control.queue(("error", report))
                reading.cancel()
                control.close_after_queued()
                return
            control.queue(("ready",))
            control.flush_now()
            try:
                with contextlib.suppress(Exception):  # ``job.fail`` reported it to the caller
                    async with OpenJob(job, placement.gc_threshold):
                        await job.wait_for(lambda: job.finished)
            except KeyboardInterrupt as exc:
                job.fail(exc)  # reported too (unless a failure came first)
            reading.cancel()
            control.queue(("done", placement.worker_statistics(job), placement.counts(job)))
            control.close_after_queued()
    finally:
        _log.removeHandler(handler)
    if failure is not None:
        raise failure


async def _serve(fd: int) -> None:
    sock = trio.socket.from_stdlib_socket(socket.socket(fileno=fd))
    stream = trio.SocketStream(sock)
    buffered = bytearray()
    while True:
        # With what the last job's link read ahead, if anything.
        control = Link(stream, -1, max_frame=None, unread=buffered)
        try:
            (frame,) = await control.receive()
        except (EOFError, OSError, trio.BrokenResourceError):
            return  # the caller closed the pool or went away
        await _run_job(control, _Job(frame))
        buffered = control.unread()


def main(argv: list[str] | None = None) -> None:
    """A worker process: serve jobs on the control socket whose descriptor is ``argv[0]``."""
    args = sys.argv[1:] if argv is None else argv
    trio.run(_serve, int(args[0]))


if __name__ == "__main__":
    main()
