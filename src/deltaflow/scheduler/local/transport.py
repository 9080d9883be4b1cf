"""How workers reach each other: data messages to one worker, progress batches to all.

A :class:`~deltaflow.scheduler.local.worker.Worker` never touches another worker directly: a message
for an actor on another worker and the pointstamp changes of each step go through its job's
:class:`Transport`. What every transport must keep, and what makes the progress protocol
sound with any delays (timely dataflow's argument):

* Between one sender and one receiver, data messages and progress batches arrive in the
  order they were sent: a message always reaches its receiver before the progress batch
  that counts it.
* A step's pointstamp changes travel as one batch and are applied together: a batch that
  records a message sent also records the capability (or drained message) it was sent with,
  so no tracker sees the right to send drop before it sees the message.
* Batches from different senders may interleave in any order, and a receiver may see
  another worker's drain of a message before the send that counted it: counts go negative
  for a while, and the sender's capability still holds every frontier back meanwhile.

:class:`InProcessTransport` serves workers that share one process and one trio loop: it
appends to their mailboxes and inboxes directly. A transport that needs a task of its own
(one that reads sockets, or a test schedule that delays deliveries) does its work in
:meth:`Transport.run`, which the job starts beside its workers. A worker hands its transport
the moments it yields (:meth:`Transport.turn` after a slice of steps, :meth:`Transport.rest`
when it has nothing to do): a transport over sockets sends and reads there, in the worker's
own task.

    >>> transport = InProcessTransport()
    >>> transport.workers == []
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .worker import Worker

__all__ = ["InProcessTransport", "ProgressChange", "Transport"]

ProgressChange = tuple[bool, int, int, Any, int]
"""``(is_source, node, port, time, delta)``: a pointstamp count change at a location."""


class Transport(Protocol):
    """What a worker sends through: data messages to one worker, progress to all."""

    def attach(self, workers: list[Worker]) -> None:
        """Learn the workers to deliver to (the job calls it once, before anything runs)."""

    def send_data(
        self, sender: int, worker: int, node: int, port: int, time: Any, payload: Any
    ) -> None:
        """Deliver a message from worker ``sender`` to actor ``node``'s input ``port`` on
        ``worker``."""

    def broadcast_progress(self, sender: int, changes: list[ProgressChange]) -> None:
        """Deliver a step's pointstamp changes to every worker's tracker (the sender's too)."""

    def turn(self, worker: Worker) -> None:
        """``worker`` has stepped for a while and is about to let other tasks run: send what
        its steps queued, take in what has arrived for this process (never waiting)."""

    async def rest(self, worker: Worker) -> bool:
        """``worker`` has nothing to do (its bell cleared, then found idle): send what its
        steps queued, and return once it may have work (its bell rang). Whether it waited
        (``False``: what it took in gave the worker work at once)."""

    async def run(self) -> None:
        """Deliver what needs a task of its own, until the job's workers have finished."""


class InProcessTransport:
    """Workers that share one process and one trio loop: direct appends, no copies."""

    def __init__(self) -> None:
        self.workers: list[Worker] = []

    def attach(self, workers: list[Worker]) -> None:
        """Deliver to ``workers``."""
        self.workers = workers

    def send_data(
        self, sender: int, worker: int, node: int, port: int, time: Any, payload: Any
    ) -> None:
        """Append to the target worker's mailbox and wake it."""
        self.workers[worker].receive(node, port, time, payload)

    def broadcast_progress(self, sender: int, changes: list[ProgressChange]) -> None:
        """Give every worker (the sender too) the same batch, in the same order."""
        for w in self.workers:
            w.receive_progress(changes)

    def turn(self, worker: Worker) -> None:
        """Nothing to send or take in: every delivery happened when it was sent."""

    async def rest(self, worker: Worker) -> bool:
        """Wait for ``worker``'s bell."""
        await worker.bell.wait()
        return True

    async def run(self) -> None:
        """Nothing to do: every delivery happens when it is sent."""
