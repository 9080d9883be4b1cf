"""The actor: one operator instance on one worker, with its mailboxes and capabilities.

The actor *is* the operator's :class:`~deltaflow.operators.base.OperatorContext`. It keeps
one mailbox per input port (a list of ``(time, payload)`` messages), the frontier of each input
as the worker's tracker last computed it, and counts of the capabilities it holds per output.
Every message it sends and every message it drains, and every capability minted, downgraded
or dropped, becomes a pointstamp change the worker reports to the progress trackers.

``send`` checks the right to send: a capability held for a time ``<=`` the send time, or a
message drained in the current activation whose time (mapped through the operator's path
summary) is ``<=`` it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..framework.antichain import Antichain
from ..framework.hashing import stable_hash
from ..framework.lattice import less_equal
from ..operators.base import Interest, UpdateBatch
from .capability import Capability

if TYPE_CHECKING:
    from ..framework.lattice import Time
    from ..framework.summary import PathSummary
    from ..operators.base import Operator
    from .worker import Worker

__all__ = ["Actor"]


class Actor:
    """Runs one :class:`~deltaflow.operators.base.Operator` on one worker."""

    __slots__ = (
        "_held",
        "_rights",
        "_worker",
        "frontiers",
        "index",
        "interest",
        "mailboxes",
        "name",
        "operator",
        "outputs",
        "routes",
        "summaries",
    )

    def __init__(
        self,
        worker: Worker,
        index: int,
        operator: Operator,
        inputs: int,
        outputs: int,
        summaries: list[list[PathSummary | None]],
        routes: list[list[tuple[int, int, Any]]],
        initial: Time,
    ) -> None:
        self._worker = worker
        self.index = index
        self.operator = operator
        self.name = operator.name
        self.interest = operator.interest is Interest.ALWAYS
        self.mailboxes: list[list[tuple[Time, Any]]] = [[] for _ in range(inputs)]
        self.frontiers: list[Antichain] = [Antichain.from_elem(initial) for _ in range(inputs)]
        self.outputs = outputs
        self.summaries = summaries
        self.routes = routes
        self._held: list[dict[Time, int]] = [{} for _ in range(outputs)]
        self._rights: list[list[Time]] = [[] for _ in range(outputs)]

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
        """Drain input ``port``; the drained messages' times become send rights."""
        box = self.mailboxes[port]
        if not box:
            return box
        self.mailboxes[port] = []
        pending = self._worker.pending
        node = self.index
        for time, _ in box:
            pending.append((False, node, port, time, -1))
        for out, rights in enumerate(self._rights):
            summary = self.summaries[port][out]
            if summary is None:
                continue
            if summary.is_identity:
                rights.extend(t for t, _ in box)
            else:
                results_in = summary.results_in
                rights.extend(results_in(t) for t, _ in box)
        return box

    def frontier(self, port: int) -> Antichain:
        """The frontier of input ``port``."""
        return self.frontiers[port]

    def send(self, port: int, time: Time, payload: Any) -> None:
        """Send ``payload`` at ``time`` on output ``port`` to every consumer."""
        if not self._may_send(port, time):
            msg = (
                f"operator '{self.name}' (output {port}) sent at time {time!r} without a "
                f"capability: it holds {sorted(self._held[port])!r} and received "
                f"{sorted(set(self._rights[port]))!r} in this activation"
            )
            raise ValueError(msg)
        worker = self._worker
        pending = worker.pending
        for node, inport, key in self.routes[port]:
            if key is None or worker.peers == 1:
                pending.append((False, node, inport, time, 1))
                worker.deliver(worker.index, node, inport, time, payload)
            else:
                for w, part in _split(payload, key, worker.peers):
                    pending.append((False, node, inport, time, 1))
                    worker.deliver(w, node, inport, time, part)

    def _may_send(self, port: int, time: Time) -> bool:
        for t in self._rights[port]:
            if t == time or less_equal(t, time):
                return True
        return any(less_equal(t, time) for t in self._held[port])

    def capability(self, time: Time, port: int = 0) -> Capability:
        """Mint a capability at ``time`` from a right held in this activation."""
        if not self._may_send(port, time):
            msg = (
                f"operator '{self.name}' (output {port}) asked for a capability at {time!r} "
                "without holding one at or before it"
            )
            raise ValueError(msg)
        return Capability._mint(self, port, time)

    def activate(self) -> None:
        """Schedule this actor again on its worker."""
        self._worker.activate(self.index)

    # -- runtime side --------------------------------------------------------------------
    def _source_change(self, port: int, time: Time, delta: int) -> None:
        held = self._held[port]
        n = held.get(time, 0) + delta
        if n:
            held[time] = n
        else:
            del held[time]
        self._worker.pending.append((True, self.index, port, time, delta))

    def run(self) -> None:
        """One activation of the operator."""
        try:
            self.operator.schedule(self)
        finally:
            for rights in self._rights:
                rights.clear()

    def holds_capabilities(self) -> bool:
        """True while the actor holds any capability."""
        return any(self._held)

    def __repr__(self) -> str:
        return f"<Actor {self.index} {self.name!r} on worker {self._worker.index}>"


def _split(payload: Any, key: Any, peers: int) -> list[tuple[int, Any]]:
    if not isinstance(payload, UpdateBatch):
        msg = f"only update batches can be exchanged between workers, not {type(payload)!r}"
        raise TypeError(msg)
    parts_d: list[list[Any]] = [[] for _ in range(peers)]
    parts_r: list[list[int]] = [[] for _ in range(peers)]
    h = stable_hash
    for d, r in zip(payload.data, payload.diffs):
        k = key(d)
        w = (k if k.__class__ is int else h(k)) % peers
        parts_d[w].append(d)
        parts_r[w].append(r)
    return [(w, UpdateBatch(parts_d[w], parts_r[w])) for w in range(peers) if parts_d[w]]
