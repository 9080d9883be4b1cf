"""Placement: where a job's workers run, and all that follows from it.

A :class:`~deltaflow.scheduler.job.Job` runs alike wherever its workers are; it is given a
:class:`Placement` that says what differs:

* the transport the workers talk through, and which workers this process hosts;
* how each input's feeds are made (one per worker here, or one that forwards what is fed to
  another process) and how they are woken once fed;
* checkpoints: what this process's data files are named after, whether it owns the location
  (locks it, may start it over, checks the operators' code), whether it commits checkpoints
  or writes only its share, how the dataflow settles, what this process captures and what
  it resumes;
* when the job has finished here, the workers' statistics, and what a failure and each step
  tell the rest of the job.

Three placements:

* :class:`InProcess` - every worker in the caller's trio loop (``df.open(..., processes=1)``);
* :class:`~deltaflow.scheduler.net.processes.Processes` - the workers in P interpreters the
  caller starts and drives (``processes=P``); the caller hosts none;
* :class:`~deltaflow.scheduler.net.peer.PeerPlacement` - one block of the workers of a
  dataflow spread over peers joined by a TCP mesh (a Spark task; each interpreter of
  ``processes=P``, where :class:`~deltaflow.scheduler.net.process_worker.WorkerProcess` also
  reports to the caller).

    >>> import deltaflow as df
    >>> class Same(df.Pipeline):
    ...     def build(self, xs):
    ...         return xs
    >>> job = df.Job(Same(), 2, placement=InProcess())
    >>> job.placement.describe(job), job.placement.hosted(2)
    ('2 workers, 1 process', range(0, 2))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import observe
from .checkpoint import quiescent
from .local.transport import InProcessTransport, Transport

if TYPE_CHECKING:
    from ..operators.builder import DataflowBuilder
    from ..operators.io import InputFeed
    from ..operators.pipeline import Pipeline
    from .checkpoint import Capture, Checkpointer
    from .job import Job

__all__ = ["InProcess", "Placement"]


class Placement:
    """What differs by where a job's workers run (see the module). The defaults are those of
    a process that hosts the workers it runs and holds the job's outputs: :class:`InProcess`.

        >>> Placement().writer, Placement().owns_location, Placement().commits
        ('job', True, True)
    """

    #: What this process's checkpoint data files are named after.
    writer = "job"
    #: Whether this process owns the checkpoint location: locks it, may start it over, and
    #: checks the operators' code (a peer's coordinator does that for it).
    owns_location = True
    #: Whether this process commits the job's checkpoints (a peer writes only its share;
    #: whoever coordinates the peers commits them together).
    commits = True
    #: Whether :meth:`stepped` has anything to do: the job calls it after its workers' steps
    #: only then (it wakes its waiters after every step).
    hears_steps = False

    # -- the workers ------------------------------------------------------------------------
    def transport(self, job: Job) -> Transport:
        """The transport this process's workers talk through (made once, as the job is
        built)."""
        raise NotImplementedError

    def hosted(self, workers: int) -> range:
        """Which of the job's ``workers`` this process runs: all of them."""
        return range(workers)

    def instantiate(self, pipeline: Pipeline, workers: int) -> DataflowBuilder:
        """Run the pipeline's ``build`` for ``workers`` workers."""
        return pipeline.instantiate(workers)

    def built(self, job: Job) -> None:
        """The job is built (its plan, workers and handles): what the placement keeps of it."""

    # -- the inputs -------------------------------------------------------------------------
    def feeds(self, job: Job, name: str, feeds: list[InputFeed]) -> Sequence[Any]:
        """What input ``name``'s handle pushes to, one per worker of the job it deals data to:
        ``feeds``, the hosted workers' own."""
        return feeds

    def activate_inputs(self, job: Job, name: str | None) -> None:
        """Make what was fed to input ``name`` (every input when ``None``) and the job's time
        go: wake each hosted worker's input actor."""
        nodes = job.input_nodes
        for input_name, node in nodes.items():
            if name is None or input_name == name:
                for w in job.workers:
                    w.activate(node)

    # -- checkpoints ------------------------------------------------------------------------
    async def start(self, job: Job) -> None:
        """Start what runs the workers elsewhere, once the checkpoint location is open (and
        its checkpoint checked); nothing here."""

    async def resume(self, job: Job, manifest: dict[str, Any]) -> None:
        """Take this process's share of checkpoint ``manifest``: the workers' state, the
        outputs' collections and their updates at later times."""
        await job.restore(manifest, job.workers, current=True, pending=True)

    async def settle(self, job: Job) -> None:
        """Wait, once every output is complete before the checkpoint's time, until nothing is
        in flight: the workers idle, every message sent received."""
        await job.wait_for(lambda: quiescent(job.workers))

    async def shares(self, job: Job, sequence: int) -> list[dict[str, Any]]:
        """The manifest fragments of checkpoint ``sequence`` that other processes wrote (once
        settled): none."""
        return []

    def capture(self, job: Job, checkpointer: Checkpointer) -> Capture:
        """This process's share of a checkpoint (settled): its workers' state, the outputs'
        collections and their updates at later times."""
        stores = job.builder.stores
        return checkpointer.capture(job.layout, job.workers, stores, current=True, pending=True)

    # -- running ----------------------------------------------------------------------------
    def finished(self, job: Job) -> bool:
        """True once every hosted worker has stopped (finished, or stopped by a failure)."""
        return all(w.finished for w in job.workers)

    def any_finished(self, job: Job) -> bool:
        """True once some hosted worker has stopped (every waiter then looks again)."""
        return any(w.finished for w in job.workers)

    def worker_statistics(self, job: Job) -> list[dict[str, Any]]:
        """Per worker, what :func:`.observe.worker_statistics` says."""
        return observe.worker_statistics(job)

    def describe(self, job: Job) -> str:
        """How many workers in how many processes, for the log: ``"2 workers, 1 process"``."""
        return f"{len(job.workers)} workers, 1 process"

    def failed(self, job: Job, exc: BaseException, *, first: bool) -> None:
        """The job failed with ``exc`` (``first``: the first error it failed with), its
        workers stopped: what the rest of the job hears of it (nothing here)."""

    def stepped(self, job: Job) -> None:
        """A worker stepped (or stopped), or a report came in, and the job woke its waiters:
        what the rest of the job hears of it (called only with :attr:`hears_steps`)."""


class InProcess(Placement):
    """Every worker in the caller's trio loop (the placement of ``df.open`` with
    ``processes=1``), talking through an :class:`~.local.transport.InProcessTransport`.

        >>> isinstance(InProcess().transport(None), InProcessTransport)
        True
    """

    @staticmethod
    def make_transport() -> Transport:
        """A fresh in-process transport. (The seam where another transport plugs in: the
        test suite's randomized delivery schedule replaces it.)"""
        return InProcessTransport()

    def transport(self, job: Job) -> Transport:
        return self.make_transport()
