"""The actor: one operator instance on one worker, with its mailboxes and capabilities.

The actor *is* the operator's :class:`~deltaflow.operators.base.OperatorContext`. It keeps
one mailbox per input port (a list of ``(time, payload)`` messages), the frontier of each input
as the worker's tracker last computed it, and counts of the capabilities it holds per output.
Every message it sends and every message it drains, and every capability minted, downgraded
or dropped, becomes a pointstamp change the worker reports to the progress trackers.

A message delivered on the same worker is announced lazily: the mailbox remembers where the
messages delivered in the current step begin (``fresh``), a drain reports only the messages
before that point, and the worker announces the rest when the step ends
(:meth:`~deltaflow.scheduler.local.worker.Worker.step`). A message sent and drained within one step
(the common case along a chain of actors) so costs the trackers nothing, and the step's
progress batch is exactly what it would be with eager announcements, net.

``send`` checks the right to send: a capability held for a time ``<=`` the send time, or a
message drained in the current activation whose time (mapped through the operator's path
summary) is ``<=`` it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ...errors import OperatorError
from ...framework import tuning
from ...framework.antichain import Antichain
from ...framework.lattice import less_equal, meet_all
from ...framework.time_domain import TimeDomain, domain_for_depth
from ...operators.base import Interest, RunsBatch, UpdateBatch, expand_runs
from ...operators.linear import LinearOperator
from .capability import Capability, mint
from .exchange import split

if TYPE_CHECKING:
    from ...framework.lattice import Time
    from ...framework.summary import PathSummary
    from ...operators.base import Operator
    from .worker import Worker

__all__ = ["Actor"]


class Actor:
    """Runs one :class:`~deltaflow.operators.base.Operator` on one worker."""

    __slots__ = (
        "_feeds",
        "_held",
        "_out",
        "_rights",
        "_sending",
        "_worker",
        "expands",
        "fresh",
        "frontiers",
        "index",
        "inlets",
        "interest",
        "mailboxes",
        "name",
        "operator",
        "outlets",
        "outputs",
        "routes",
        "summaries",
        "watches_frontiers",
    )

    #: An output's send rights (the drained messages' times) are reduced to their minimal
    #: times once they are more than this many.
    RIGHTS_KEPT = tuning.RIGHTS_KEPT

    def __init__(
        self,
        worker: Worker,
        index: int,
        operator: Operator,
        inputs: int,
        outputs: int,
        summaries: list[list[PathSummary | None]],
        routes: list[list[tuple[int, int, Any]]],
        domain: TimeDomain,
        inlets: Mapping[int, Callable[[list[tuple[Time, Any]]], list[tuple[Time, Any]]]]
        | None = None,
        outlets: list[list[tuple[LinearOperator, list[tuple[int, int, Any]]]]] | None = None,
    ) -> None:
        self._worker = worker
        self.index = index
        self.operator = operator
        self.name = operator.name
        self.interest = operator.interest is Interest.ALWAYS
        # An operator that declares it never reads its input frontiers (and is never woken by
        # them) gets none kept by the tracker; ``frontier`` then makes one on each request.
        self.watches_frontiers = bool(operator.reads_frontiers) or self.interest
        self.mailboxes: list[list[tuple[Time, Any]]] = [[] for _ in range(inputs)]
        # Per input port: what turns its drained messages into what the operator reads (an
        # absorbed arrangement's ``forward``, see :mod:`.plan`), or ``None``.
        self.inlets = [(inlets or {}).get(port) for port in range(inputs)]
        # Per input port: whether a drained RunsBatch is handed over as one message per run
        # (the operator does not read runs itself; an inlet reads them for it).
        reads_runs = bool(getattr(operator, "reads_runs", False))
        self.expands = [inlet is None and not reads_runs for inlet in self.inlets]
        # Per output port: the update batches sent in this activation, each with the right
        # it was sent under, as flat ``right, time, payload`` triples; sent at its end
        # (``_flush``).
        self._out: list[list[Any] | None] = [None] * outputs
        self._sending: list[int] = []
        # Per output port: the linear chains run as its outlets (see :mod:`.plan`), each with
        # the routes of what it makes.
        self.outlets = outlets or [[] for _ in range(outputs)]
        # Per input port: the index in its mailbox where the messages delivered in this step
        # (not announced to the trackers yet) begin; -1 when there are none. The worker sets
        # it when it delivers (``Worker.deliver_fresh``) and clears it when it announces them.
        self.fresh: list[int] = [-1] * inputs
        # Per input port: its frontier, or ``None`` when it moved and has not been asked for
        # since (``frontier`` then fetches it from the worker's tracker); always ``None`` for
        # an operator whose frontiers are not watched.
        least = domain.least
        self.frontiers: list[Antichain | None] = [
            Antichain.from_elem(least) if self.watches_frontiers else None for _ in range(inputs)
        ]
        self.outputs = outputs
        self.summaries = summaries
        self.routes = routes
        self._held: list[dict[Time, int]] = [{} for _ in range(outputs)]
        self._rights: list[list[Time]] = [[] for _ in range(outputs)]
        # Per input port: the rights lists of the outputs it is connected to, each with the
        # summary to apply to a drained message's time as a function made once for the port's
        # times (``None`` for the identity). The actor's domain is its outputs' times; an
        # input's are those a summary from it takes there.
        self._feeds: list[tuple[tuple[list[Time], Callable[[Time], Time] | None], ...]] = [
            tuple(
                (
                    self._rights[out],
                    None
                    if summary.is_identity
                    else summary.results_in_for(
                        domain_for_depth(domain.depth - summary.depth_change)
                    ),
                )
                for out, summary in enumerate(summaries[port])
                if summary is not None
            )
            for port in range(inputs)
        ]

    # -- OperatorContext -----------------------------------------------------------------
    @property
    def worker_index(self) -> int:
        """This worker's index in ``0..peers-1``."""
        return self._worker.index

    @property
    def peers(self) -> int:
        """How many workers run the dataflow."""
        return self._worker.peers

    def messages(self, port: int) -> list[tuple[Time, Any]]:
        """Drain input ``port``; the drained messages' times become send rights.

        A port with an inlet returns what the inlet makes of the messages (their times are
        the rights all the same: an inlet's batches are sent at some of those times).
        """
        box = self.mailboxes[port]
        if not box:
            return box
        self.mailboxes[port] = []
        pending = self._worker.pending
        node = self.index
        # Only messages before the fresh ones were announced; those delivered in this step
        # were not, so draining them reports nothing (and later ones are fresh too).
        fresh = self.fresh[port]
        if fresh >= 0:
            self.fresh[port] = 0
        if len(box) == 1:
            time = box[0][0]
            if fresh:
                pending.append((False, node, port, time, -1))
            for rights, results_in in self._feeds[port]:
                rights.append(time if results_in is None else results_in(time))
            inlet = self.inlets[port]
            if inlet is not None:
                return inlet(box)
            if self.expands[port] and box[0][1].__class__ is RunsBatch:
                return box[0][1].per_time()
            return box
        times = [t for t, _ in box]
        announced = times if fresh < 0 else times[:fresh]
        pending.extend([(False, node, port, t, -1) for t in announced])
        for rights, results_in in self._feeds[port]:
            if results_in is None:
                rights.extend(times)
            else:
                rights.extend([results_in(t) for t in times])
        inlet = self.inlets[port]
        if inlet is not None:
            return inlet(box)
        return expand_runs(box) if self.expands[port] else box

    def frontier(self, port: int) -> Antichain:
        """The frontier of input ``port``."""
        frontier = self.frontiers[port]
        if frontier is None:
            frontier = self._worker.tracker.frontier(self.index, port)
            if self.watches_frontiers:
                self.frontiers[port] = frontier
        return frontier

    def send(self, port: int, time: Time, payload: Any) -> None:
        """Send ``payload`` at ``time`` on output ``port`` to every consumer.

        An update batch waits for the end of the activation (:meth:`_flush`), where every
        update batch sent on the port goes as one message per destination; anything else
        (an arrangement's trace batch) goes at once.
        """
        rights = self._rights[port]
        if len(rights) > self.RIGHTS_KEPT:
            # Many messages drained (many times known at once): only their minimal times
            # matter for what may be sent, and every send checks them.
            rights[:] = Antichain(rights).elements
        for right in rights:  # ``_may_send``, with its common case inlined
            if right is time or less_equal(right, time):
                break
        else:
            right = self._covering(port, time)
        cls = payload.__class__
        if cls is UpdateBatch or cls is RunsBatch:
            # Flat ``right, time, payload`` triples: the common single send costs one list.
            out = self._out[port]
            if out is None:
                self._out[port] = [right, time, payload]
                self._sending.append(port)
            else:
                out += (right, time, payload)
            return
        self._emit(port, time, payload)

    def _covering(self, port: int, time: Time) -> Time:
        """A held capability's time ``<=`` ``time`` on ``port``, or the error of a send
        without one."""
        for t in self._held[port]:
            if t is time or less_equal(t, time):
                return t
        msg = (
            f"operator '{self.name}' (output {port}) sent at time {time!r} without a "
            f"capability: it holds {sorted(self._held[port])!r} and received "
            f"{sorted(set(self._rights[port]))!r} in this activation"
        )
        raise ValueError(msg)

    def _flush(self) -> None:
        """Send the update batches the activation sent, one message per port and lower
        bound: the batches' runs in send order as a
        :class:`~deltaflow.operators.base.RunsBatch` at the meet of their times (a lone
        batch as it was sent).

        Each batch was sent under a right (a drained message's time or a held capability)
        at or before its time; batches are grouped by the minimal rights that cover them,
        so that each message's time is at or after a right it was sent under: one group
        (one message) whenever those rights are totally ordered, as they are outside loops
        and for each outer time inside one.
        """
        ports = self._sending
        outs = self._out
        for port in ports:
            out = outs[port]
            outs[port] = None
            assert out is not None
            if len(out) == 3:
                time, payload = out[1], out[2]
                self._route(self.routes[port], time, payload)
                for chain, routes in self.outlets[port]:
                    for t, batch in chain.transform([(time, payload)]):
                        self._route(routes, t, batch)
                continue
            sends = list(zip(out[::3], out[1::3], out[2::3]))
            first = out[0]
            if all(right is first or right == first for right in out[::3]):
                groups = [sends]
            else:
                groups = _by_lower_right(sends)
            for group in groups:
                runs = RunsBatch.of([(t, p) for _, t, p in group])
                if runs.times:
                    self._emit(port, meet_all(runs.times), runs)
        ports.clear()

    def _emit(self, port: int, time: Time, payload: Any) -> None:
        """Route ``payload`` at ``time`` on output ``port``, through its outlets too."""
        self._route(self.routes[port], time, payload)
        for chain, routes in self.outlets[port]:
            for t, batch in chain.transform([(time, payload)]):
                self._route(routes, t, batch)

    def _route(self, routes: list[tuple[int, int, Any]], time: Time, payload: Any) -> None:
        """Deliver ``payload`` at ``time`` along ``routes``, exchanged by their keys across
        the workers."""
        worker = self._worker
        local = worker.peers == 1
        for node, inport, key in routes:
            if key is None or local:
                worker.deliver_fresh(node, inport, time, payload)
            else:
                try:
                    parts = split(payload, key, worker.peers)
                except Exception as exc:
                    # The exchange key is the receiving operator's: a datum it cannot key
                    # (not a pair, say) is that operator's input error, not this one's.
                    raise OperatorError.of(worker.actors[node].name, exc) from exc
                me = worker.index
                for w, part in parts:
                    if w == me:
                        worker.deliver_fresh(node, inport, time, part)
                    else:
                        worker.pending.append((False, node, inport, time, 1))
                        worker.deliver(w, node, inport, time, part)

    def _may_send(self, port: int, time: Time) -> bool:
        for t in self._rights[port]:
            if t is time or less_equal(t, time):
                return True
        for t in self._held[port]:  # noqa: SIM110 - a plain loop beats any() on this hot path
            if t is time or less_equal(t, time):
                return True
        return False

    def capability(self, time: Time, port: int = 0) -> Capability:
        """Mint a capability at ``time`` from a right held in this activation."""
        if not self._may_send(port, time):
            msg = (
                f"operator '{self.name}' (output {port}) asked for a capability at {time!r} "
                "without holding one at or before it"
            )
            raise ValueError(msg)
        return mint(self, port, time)

    def activate(self) -> None:
        """Schedule this actor again on its worker."""
        self._worker.activate(self.index)

    def set_interest(self, interest: Interest) -> None:
        """Wake on every input frontier change (``ALWAYS``) or only on messages (``NEVER``).

        Raises:
            ValueError: ``ALWAYS`` for an operator that declared it never reads its frontiers
                (``Operator.reads_frontiers``): the tracker does not follow them.
        """
        if interest is Interest.ALWAYS and not self.watches_frontiers:
            msg = (
                f"operator '{self.name}' declares reads_frontiers = False, so its input "
                "frontiers are not followed and it cannot ask to be woken by them"
            )
            raise ValueError(msg)
        self.interest = interest is Interest.ALWAYS

    # -- runtime side --------------------------------------------------------------------
    def hold_initial(self, port: int, time: Time) -> None:
        """Count a start-up capability at ``time`` on ``port``: every tracker counts it
        already, so nothing is reported."""
        held = self._held[port]
        held[time] = held.get(time, 0) + 1

    def held_times(self) -> list[tuple[int, Time]]:
        """Every ``(port, time)`` this actor holds a capability at (what a checkpoint keeps)."""
        return [(port, t) for port, times in enumerate(self._held) for t in times]

    def source_change(self, port: int, time: Time, delta: int) -> None:
        """A capability at ``time`` on ``port`` minted (``delta`` 1) or dropped (-1): counted
        here and reported to the worker's progress."""
        held = self._held[port]
        n = held.get(time, 0) + delta
        if n:
            held[time] = n
        else:
            del held[time]
        self._worker.pending.append((True, self.index, port, time, delta))

    def run(self) -> None:
        """One activation of the operator, then what it sent (:meth:`_flush`)."""
        try:
            self.operator.schedule(self)
            if self._sending:
                self._flush()
        finally:
            for rights in self._rights:
                if rights:
                    rights.clear()

    def initialize(self, capabilities: list[Capability]) -> None:
        """Hand the operator its initial capabilities; send what it sent meanwhile."""
        self.operator.initialize(self, capabilities)
        if self._sending:
            self._flush()

    def holds_capabilities(self) -> bool:
        """True while the actor holds any capability."""
        return any(self._held)

    def __repr__(self) -> str:
        return f"<Actor {self.index} {self.name!r} on worker {self._worker.index}>"


def _by_lower_right(
    out: list[tuple[Time, Time, Any]],
) -> list[list[tuple[Time, Time, Any]]]:
    """``out``'s ``(right, time, payload)`` sends grouped by the minimal rights among theirs:
    each send joins the first minimal right at or before its own right (so at or before
    its time)."""
    lows = Antichain(right for right, _, _ in out).elements
    groups: dict[Time, list[tuple[Time, Time, Any]]] = {}
    for item in out:
        right = item[0]
        for low in lows:
            if low is right or less_equal(low, right):
                break
        group = groups.get(low)
        if group is None:
            groups[low] = [item]
        else:
            group.append(item)
    return list(groups.values())
