"""A worker: one copy of the dataflow's actors, stepped cooperatively in one trio task.

Each worker owns an actor per operator, a queue of activated actors, and its own
:class:`~deltaflow.framework.progress.ProgressTracker`. A :meth:`Worker.step`:

1. runs every activated actor (an actor sending to another on the same worker activates it,
   so a batch crosses a whole chain of operators in one step);
2. publishes the pointstamp changes those activations made (messages sent and drained,
   capabilities minted and dropped) to every worker's tracker, through the transport;
3. applies the changes it received, propagates them, and hands each changed input frontier to
   its actor, waking the actors that asked to hear about frontiers.

Why a loop instead of a trio task per actor: a hop through a trio channel costs 12-20 µs, a
Python call 0.06 µs; with a task per actor a single-record round through ten operators pays
~120 µs of switching before any work. The actor/mailbox/capability model is the same; only the
stepping is cooperative. The worker yields to trio after every step that did work, and sleeps
on an event when there is nothing to do (no busy waiting).

Progress is exchanged as whole per-step batches, in order: a batch that records a message
sent also records the drop of the right it was sent with, so no tracker can see a frontier
pass a time while a message for it is unaccounted.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

import trio

from ..errors import OperatorError
from ..framework.lattice import Product
from ..framework.progress import ProgressTracker
from .actor import Actor
from .capability import Capability

if TYPE_CHECKING:
    from ..framework.lattice import Time
    from .plan import Plan

__all__ = ["ProgressChange", "Transport", "Worker"]

ProgressChange = tuple[bool, int, int, Any, int]
"""``(is_source, node, port, time, delta)``: a pointstamp count change at a location."""


class Transport(Protocol):
    """How workers reach each other: data messages to one worker, progress to all.

    The in-process transport appends to the other workers' mailboxes and inboxes directly; a
    socket transport (one worker per process) serializes the same calls.
    """

    def send_data(self, worker: int, node: int, port: int, time: Any, payload: Any) -> None:
        """Deliver a message to actor ``node``'s input ``port`` on ``worker``."""

    def broadcast_progress(self, sender: int, changes: list[ProgressChange]) -> None:
        """Deliver a batch of pointstamp changes to every worker's tracker (sender included)."""


def _min_time(depth: int) -> Time:
    t: Time = 0
    for _ in range(depth):
        t = Product(t, 0)
    return t


class Worker:
    """One worker: actors, activation queue, progress tracker, and the step loop."""

    #: Activations one step may run before exchanging progress and yielding to trio: a chain
    #: of actors runs in one step, while a loop that keeps re-activating itself still lets
    #: other tasks (and cancellation) in.
    ACTIVATIONS_PER_STEP = 1_000

    def __init__(self, index: int, peers: int, plan: Plan, transport: Transport, job: Any) -> None:
        self.index = index
        self.peers = peers
        self.plan = plan
        self.transport = transport
        self.job = job
        self.pending: list[ProgressChange] = []
        self.inbox: list[list[ProgressChange]] = []
        self.active: deque[int] = deque()
        self._is_active: list[bool] = []
        self.tracker = ProgressTracker(plan.progress)
        self._wake = trio.Event()
        self.finished = False
        self.steps = 0
        self.activations = 0
        self.actors: list[Actor] = []
        for idx, node in enumerate(plan.nodes):
            operator = node.factory(index, peers)
            summaries = [
                [plan.summary(idx, i, o) for o in range(node.outputs)]
                for i in range(len(node.inputs))
            ]
            self.actors.append(
                Actor(
                    self,
                    idx,
                    operator,
                    len(node.inputs),
                    node.outputs,
                    summaries,
                    plan.routes[idx],
                    _min_time(node.depth),
                )
            )
            self._is_active.append(False)
        # Every worker starts holding one capability per output port at the least time; all
        # trackers count all workers' initial capabilities before anything runs.
        for idx, node in enumerate(plan.nodes):
            t0 = _min_time(node.depth)
            for port in range(node.outputs):
                self.tracker.update_source(idx, port, t0, peers)
        self.tracker.propagate()
        for idx, actor in enumerate(self.actors):
            for port in range(len(actor.frontiers)):
                actor.frontiers[port] = self.tracker.frontier(idx, port)

    def initialize(self) -> None:
        """Hand every operator its initial capabilities (most drop them at once)."""
        for actor in self.actors:
            t0 = _min_time(self.plan.nodes[actor.index].depth)
            caps = [Capability._initial(actor, port, t0) for port in range(actor.outputs)]
            self._guard(actor, lambda a=actor, c=caps: a.operator.initialize(a, c))
            self.activate(actor.index)

    def activate(self, index: int) -> None:
        """Queue actor ``index`` to run in the next step."""
        if not self._is_active[index]:
            self._is_active[index] = True
            self.active.append(index)
            self._wake.set()

    def deliver(self, worker: int, node: int, port: int, time: Any, payload: Any) -> None:
        """Put a message in a mailbox: ours directly, another worker's via the transport."""
        if worker == self.index:
            self.actors[node].mailboxes[port].append((time, payload))
            self.activate(node)
        else:
            self.transport.send_data(worker, node, port, time, payload)

    def receive(self, node: int, port: int, time: Any, payload: Any) -> None:
        """A message from another worker arrived (called by the transport)."""
        self.actors[node].mailboxes[port].append((time, payload))
        self.activate(node)

    def receive_progress(self, changes: list[ProgressChange]) -> None:
        """A progress batch arrived (called by the transport)."""
        self.inbox.append(changes)
        self._wake.set()

    def wake(self) -> None:
        """Make a sleeping worker look for work."""
        self._wake.set()

    def _guard(self, actor: Actor, fn: Any) -> None:
        try:
            fn()
        except OperatorError:
            raise
        except Exception as exc:
            msg = f"operator '{actor.name}' raised {exc.__class__.__name__}: {exc}"
            raise OperatorError(msg, operator=actor.name) from exc

    def step(self) -> bool:
        """Run activated actors, exchange progress, deliver frontiers. True if it did work."""
        did = False
        active = self.active
        is_active = self._is_active
        actors = self.actors
        budget = self.ACTIVATIONS_PER_STEP
        while active and budget:
            budget -= 1
            idx = active.popleft()
            is_active[idx] = False
            actor = actors[idx]
            self._guard(actor, actor.run)
            self.activations += 1
            did = True
        if self.pending:
            changes, self.pending = self.pending, []
            self.transport.broadcast_progress(self.index, changes)
        if self.inbox:
            tracker = self.tracker
            inbox, self.inbox = self.inbox, []
            update_source = tracker.update_source
            update_target = tracker.update_target
            for changes in inbox:
                for is_source, node, port, time, delta in changes:
                    if is_source:
                        update_source(node, port, time, delta)
                    else:
                        update_target(node, port, time, delta)
            touched: set[tuple[int, int]] = set()
            for node, port, _time, _delta in tracker.propagate():
                touched.add((node, port))
            for node, port in touched:
                actor = actors[node]
                actor.frontiers[port] = tracker.frontier(node, port)
                if actor.interest:
                    self.activate(node)
            did = True
        self.steps += 1
        return did

    def idle(self) -> bool:
        """True when nothing is queued for this worker."""
        return not self.active and not self.inbox and not self.pending

    def done(self) -> bool:
        """True when the whole dataflow (as this tracker sees it) has finished."""
        return self.idle() and self.tracker.is_complete()

    async def run(self) -> None:
        """The worker's loop: step while there is work, sleep when idle, stop when done."""
        job = self.job
        try:
            self.initialize()
            while not job.failed:
                if self.step():
                    job.notify()
                    await trio.lowlevel.checkpoint()
                    continue
                if self.tracker.is_complete():
                    break
                self._wake = trio.Event()
                if self.idle():
                    await self._wake.wait()
        except OperatorError as exc:
            job.fail(exc)
        except Exception as exc:  # a runtime bug: still never hang the application
            job.fail(exc)
        finally:
            self.finished = True
            job.notify()
