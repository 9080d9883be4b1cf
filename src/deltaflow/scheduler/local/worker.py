"""A worker: one copy of the dataflow's actors, stepped cooperatively in one trio task.

Each worker owns an actor per operator, a queue of activated actors, and its own
:class:`~deltaflow.framework.progress.ProgressTracker`. A :meth:`Worker.step`:

1. runs every activated actor (an actor sending to another on the same worker activates it,
   so a batch crosses a whole chain of operators in one step);
2. publishes the pointstamp changes those activations made (messages sent and drained,
   capabilities minted and dropped) to every worker's tracker, through the transport;
3. applies the changes it received, propagates them, and tells each actor which of its input
   frontiers changed (the actor fetches a new frontier from the tracker only when its operator
   asks for it), waking the actors that asked to hear about frontiers.

Why a loop instead of a trio task per actor: a hop through a trio channel is a task switch,
which costs far more than a Python call; with a task per actor a single-record round through
a chain of operators would pay a switch per operator before any work. The
actor/mailbox/capability model is the same; only the stepping is cooperative. The worker
yields to trio once it has stepped for :attr:`Worker.SLICE_S` without yielding (and whenever
it runs out of work: it then sleeps on its :class:`~deltaflow.scheduler.local.bell.Bell`, no busy
waiting), so a round that takes many short steps (an iteration needs a few per inner round)
does not pay a trio reschedule for each. Where it yields, its transport sends what the steps
queued and takes in what arrived (:meth:`Transport.turn`, :meth:`Transport.rest`): across
processes, one write per peer for all those steps, and the wait of an idle worker is also the
wait for the next frame.

Progress is exchanged as whole per-step batches, in order: a batch that records a message
sent also records the drop of the right it was sent with, so no tracker can see a frontier
pass a time while a message for it is unaccounted.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any

import trio

from ...errors import OperatorError
from ...framework import tuning
from ...framework.lattice import Product
from ...framework.progress import ProgressTracker
from ...operators.linear import LinearOperator
from .actor import Actor
from .bell import Bell
from .capability import initial

if TYPE_CHECKING:
    from ...framework.lattice import Time
    from .plan import Plan
    from .transport import ProgressChange, Transport

__all__ = ["Worker"]


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
    ACTIVATIONS_PER_STEP = tuning.ACTIVATIONS_PER_STEP
    #: Seconds a worker may keep stepping before it yields to trio (other tasks, other
    #: in-process workers, cancellation); it always yields when it has nothing to do.
    SLICE_S = tuning.SLICE_S

    def __init__(self, index: int, peers: int, plan: Plan, transport: Transport, job: Any) -> None:
        self.index = index
        self.peers = peers
        self.plan = plan
        self.transport = transport
        self.job = job
        self.pending: list[ProgressChange] = []
        # Input ports holding messages delivered in this step and not yet announced (see
        # ``Actor.fresh``); announced into ``pending`` when the step's actors have run.
        self._fresh_ports: list[tuple[Actor, int]] = []
        self.inbox: list[list[ProgressChange]] = []
        self.active: deque[int] = deque()
        self._is_active: list[bool] = []
        #: Rung when something is queued for this worker (it waits on it when idle).
        self.bell = Bell()
        self.finished = False
        self.steps = 0
        self.activations = 0
        # Data messages this worker sent (to itself or to others) and pointstamp changes it
        # reported: what the message format costs, counted for ``Job.statistics``.
        self.messages = 0
        self.pointstamps = 0
        self.actors: list[Actor] = []
        for idx, node in enumerate(plan.nodes):
            # An inlet's arrangement registers its spine before its reader asks for it.
            inlets = {port: spec.build(index, peers) for port, spec in node.inlets.items()}
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
                    node.domain,
                    inlets,
                    [
                        [(LinearOperator(steps), routes) for steps, routes in chains]
                        for chains in plan.outlets[idx]
                    ],
                )
            )
            self._is_active.append(False)
        #: Data messages and progress batches this worker sent to workers (each worker a
        #: progress batch reaches counts once, this one included) and received from them:
        #: summed over every worker, equal once nothing is in flight (a job waits for that
        #: before a checkpoint).
        self.sent = 0
        self.received = 0
        # The capabilities each node starts with, per output port (None: one per port at
        # the least time of its scope; a resumed job starts from a checkpoint's).
        self._initial: dict[int, list[list[Time]]] | None = None
        self.tracker = self._start_tracker()

    def _start_tracker(self) -> ProgressTracker:
        """A tracker counting every worker's initial capabilities (each worker starts with
        the same), propagated, and the actors' frontiers read from it."""
        plan = self.plan
        # Inputs of operators that never read their frontiers: the tracker keeps none for them.
        tracker = ProgressTracker(
            plan.progress,
            [
                (actor.index, port)
                for actor in self.actors
                if not actor.watches_frontiers
                for port in range(len(actor.mailboxes))
            ],
        )
        for idx in range(len(plan.nodes)):
            for port, times in enumerate(self._initial_times(idx)):
                for t in times:
                    tracker.update_source(idx, port, t, self.peers)
        tracker.propagate()
        for idx, actor in enumerate(self.actors):
            if actor.watches_frontiers:
                for port in range(len(actor.frontiers)):
                    actor.frontiers[port] = tracker.frontier(idx, port)
        return tracker

    def _initial_times(self, node: int) -> list[list[Time]]:
        """The times of the capabilities ``node`` starts with, per output port."""
        outputs = self.plan.nodes[node].outputs
        if self._initial is None:
            return [[_min_time(self.plan.nodes[node].depth)] for _ in range(outputs)]
        return self._initial.get(node) or [[] for _ in range(outputs)]

    def start_at(self, initial: dict[int, list[list[Time]]]) -> None:
        """Start (before running) from these capabilities, per node and output port, instead
        of one per port at the least time: those a checkpoint found held, on every worker
        alike (see :mod:`.checkpoint`); a node not named starts with none."""
        self._initial = initial
        self.tracker = self._start_tracker()

    def initialize(self) -> None:
        """Hand every operator its initial capabilities (most drop them at once)."""
        for actor in self.actors:
            caps = [
                initial(actor, port, t)
                for port, times in enumerate(self._initial_times(actor.index))
                for t in times
            ]
            self._guard(actor, lambda a=actor, c=caps: a.initialize(c))
            self.activate(actor.index)

    def activate(self, index: int) -> None:
        """Queue actor ``index`` to run in the next step."""
        if not self._is_active[index]:
            self._is_active[index] = True
            self.active.append(index)
            self.bell.ring()

    def deliver(self, worker: int, node: int, port: int, time: Any, payload: Any) -> None:
        """Put a message in a mailbox: ours directly, another worker's via the transport.

        The caller reports the message as sent (``pending``), as :meth:`Actor.send` does for
        messages to other workers.
        """
        self.messages += 1
        if worker == self.index:
            actor = self.actors[node]
            if actor.fresh[port] >= 0:
                self._announce(actor, port)  # keep every fresh message after announced ones
            actor.mailboxes[port].append((time, payload))
            self.activate(node)
        else:
            self.sent += 1
            self.transport.send_data(self.index, worker, node, port, time, payload)

    def deliver_fresh(self, node: int, port: int, time: Any, payload: Any) -> None:
        """Put a message sent on this worker in a mailbox, announced when the step ends.

        The actor's ``fresh`` mark lets a drain within the step skip it; the end of the step
        reports (``+1``) the fresh messages still in the mailbox.
        """
        self.messages += 1
        actor = self.actors[node]
        box = actor.mailboxes[port]
        fresh = actor.fresh
        if fresh[port] < 0:
            fresh[port] = len(box)
            self._fresh_ports.append((actor, port))
        box.append((time, payload))
        self.activate(node)

    def _announce(self, actor: Actor, port: int) -> None:
        """Report the fresh messages still in a mailbox as sent; they are ordinary from now."""
        start = actor.fresh[port]
        if start >= 0:
            actor.fresh[port] = -1
            box = actor.mailboxes[port]
            node = actor.index
            self.pending.extend([(False, node, port, box[i][0], 1) for i in range(start, len(box))])

    def receive(self, node: int, port: int, time: Any, payload: Any) -> None:
        """A message from another worker arrived (called by the transport)."""
        self.received += 1
        actor = self.actors[node]
        if actor.fresh[port] >= 0:
            self._announce(actor, port)
        actor.mailboxes[port].append((time, payload))
        self.activate(node)

    def receive_progress(self, changes: list[ProgressChange]) -> None:
        """A progress batch arrived (called by the transport)."""
        self.received += 1
        self.inbox.append(changes)
        self.bell.ring()

    def wake(self) -> None:
        """Make a sleeping worker look for work."""
        self.bell.ring()

    def _guard(self, actor: Actor, fn: Any) -> None:
        try:
            fn()
        except OperatorError:
            raise
        except Exception as exc:
            raise OperatorError.of(actor.name, exc) from exc

    def step(self) -> bool:
        """Run activated actors, exchange progress, deliver frontiers. True if it did work."""
        did = False
        active = self.active
        actors = self.actors
        if active:
            is_active = self._is_active
            budget = self.ACTIVATIONS_PER_STEP
            ran = 0
            actor = None
            try:  # ``_guard`` around each activation, hoisted out of the loop
                while active and ran < budget:
                    idx = active.popleft()
                    is_active[idx] = False
                    actor = actors[idx]
                    actor.run()
                    ran += 1
            except OperatorError:
                raise
            except Exception as exc:
                assert actor is not None
                raise OperatorError.of(actor.name, exc) from exc
            finally:
                self.activations += ran
            did = True
        fresh_ports = self._fresh_ports
        if fresh_ports:
            # Messages delivered in this step and still in their mailboxes: announce them in
            # this step's batch (those drained already cancelled out without being reported).
            # ``_announce`` for each port, inlined.
            pending = self.pending
            for actor, port in fresh_ports:
                fresh = actor.fresh
                start = fresh[port]
                if start >= 0:
                    fresh[port] = -1
                    box = actor.mailboxes[port]
                    if len(box) > start:
                        node = actor.index
                        pending.extend([(False, node, port, m[0], 1) for m in box[start:]])
            fresh_ports.clear()
        if self.pending:
            changes, self.pending = self.pending, []
            self.sent += self.peers
            self.pointstamps += len(changes)
            self.transport.broadcast_progress(self.index, changes)
        if self.inbox:
            tracker = self.tracker
            inbox, self.inbox = self.inbox, []
            update = tracker.update_pointstamps
            for changes in inbox:
                update(changes)
            # Only input ports whose frontier moved come back; the actor fetches the new
            # frontier from the tracker when the operator asks for it (``Actor.frontier``).
            for node, port in tracker.propagate_inputs():
                actor = actors[node]
                actor.frontiers[port] = None
                if actor.interest:
                    self.activate(node)
            did = True
        self.steps += 1
        return did

    def idle(self) -> bool:
        """True when nothing is queued for this worker."""
        return not self.active and not self.inbox and not self.pending and not self._fresh_ports

    def done(self) -> bool:
        """True when the whole dataflow (as this tracker sees it) has finished."""
        return self.idle() and self.tracker.is_complete()

    async def run(self) -> None:
        """The worker's loop: step while there is work, sleep when idle, stop when done."""
        job = self.job
        clock = time.perf_counter
        try:
            self.initialize()
            transport = self.transport
            deadline = clock() + self.SLICE_S
            while not job.failed:
                if self.step():
                    job.notify()
                    if clock() >= deadline:
                        # What the steps sent leaves; what other processes sent comes in.
                        transport.turn(self)
                        await trio.lowlevel.checkpoint()
                        deadline = clock() + self.SLICE_S
                    continue
                if self.tracker.is_complete():
                    break
                self.bell.clear()
                if self.idle() and await transport.rest(self):
                    deadline = clock() + self.SLICE_S
        except OperatorError as exc:
            job.fail(exc)
        except Exception as exc:  # a runtime bug: still never hang the application
            job.fail(exc)
        except KeyboardInterrupt as exc:
            # Raised by user code (or Ctrl-C): it leaves the job as itself, and a job spread
            # over processes tells the others what it was.
            job.fail(exc)
            raise
        finally:
            self.finished = True
            job.notify()
