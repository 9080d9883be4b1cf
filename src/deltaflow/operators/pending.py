"""Updates held back until their time is complete: queued by time as they arrive, each time
holding a capability, and taken out in time order once the input frontier has passed it.

An operator that acts on a time's updates all at once (consolidating them, placing them in
windows in event-time order) keeps them here in between, and hands them to a checkpoint and
back with their times.

    >>> pending: Pending[int] = Pending()
    >>> pending.restore(Rows({"data": ["a", "b", "c"], "time": [1, 2, 1], "diff": [1, 1, -1]}))
    >>> pending.restored
    {1: (['a', 'c'], [1, -1]), 2: (['b'], [1])}
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..framework.durable.tables import Rows
from .durable import delayed_to

if TYPE_CHECKING:
    from ..framework.antichain import Antichain
    from ..framework.lattice import Time
    from .base import Capability, OperatorContext
    from .durable import StateSink, StateSource

__all__ = ["Pending"]

T = TypeVar("T", bound="Time")
"""The times waited for: ``int`` for an operator on the top scope's times."""

Slot = tuple["Capability", list[Any], list[int]]
"""A waiting time's capability, data and diffs."""


class Pending(Generic[T]):
    """Updates waiting for the frontier to pass their time (module docstring).

    ``by_time`` maps each waiting time to ``(capability, data, diffs)``; ``restored`` holds
    what a checkpoint gave back, by time, until :meth:`start` has capabilities for it.
    """

    __slots__ = ("by_time", "restored")

    def __init__(self) -> None:
        self.by_time: dict[T, Slot] = {}
        self.restored: dict[T, tuple[list[Any], list[int]]] = {}

    def __bool__(self) -> bool:
        return bool(self.by_time)

    def queue(self, ctx: OperatorContext, port: int = 0) -> None:
        """Add the batches that arrived on ``port``, holding a capability per new time."""
        by_time: dict[Any, Slot] = self.by_time  # the context's times are this one's T
        for time, batch in ctx.messages(port):
            slot = by_time.get(time)
            if slot is None:
                slot = by_time[time] = (ctx.capability(time), [], [])
            slot[1].extend(batch.data)
            slot[2].extend(batch.diffs)

    def first(self) -> T | None:
        """The earliest waiting time (``None``: none waits), for totally ordered times."""
        by_time = self.by_time
        return min(by_time) if by_time else None

    def take(self, time: T) -> Slot | None:
        """Take ``time``'s capability and updates out (``None``: nothing waits at it)."""
        return self.by_time.pop(time, None)

    def passed(self, frontier: Antichain) -> Iterator[tuple[T, Capability, list[Any], list[int]]]:
        """Take out, in time order, each time ``frontier`` has passed, with its capability
        (the caller drops it once done) and updates. One taken out is gone even if the
        caller stops early."""
        by_time = self.by_time
        for time in sorted(by_time):
            if frontier.less_equal(time):
                continue
            cap, data, diffs = by_time.pop(time)
            yield time, cap, data, diffs

    # -- checkpoints ---------------------------------------------------------------------------
    def save(self, sink: StateSink, keys: Callable[[list[Any]], list[Any]] | None = None) -> None:
        """Hand the waiting updates to a checkpoint as table ``pending``, columns ``data``,
        ``time`` and ``diff``, keyed by ``data`` or, given ``keys``, by a column ``key`` of
        ``keys(data)``."""
        slots = self.by_time
        data = [d for _, ds, _ in slots.values() for d in ds]
        columns = {
            "data": data,
            "time": [t for t, (_, ds, _) in slots.items() for _ in ds],
            "diff": [r for _, _, rs in slots.values() for r in rs],
        }
        if keys is None:
            sink.rows("pending", Rows(columns), "data")
        else:
            sink.rows("pending", Rows({"key": keys(data), **columns}), "key")

    def load(self, source: StateSource) -> None:
        """Add a checkpoint's waiting updates (its table ``pending``, if any) to
        :attr:`restored`."""
        self.restore(source.rows("pending"))

    def restore(self, rows: Rows | None) -> None:
        """Add waiting updates saved by :meth:`save` to :attr:`restored`, by time."""
        if rows is None:
            return
        restored = self.restored
        cols = rows.columns
        for d, t, r in zip(cols["data"], cols["time"], cols["diff"]):
            slot = restored.get(t)
            if slot is None:
                restored[t] = ([d], [r])
            else:
                slot[0].append(d)
                slot[1].append(r)

    def start(self, capabilities: Sequence[Capability]) -> None:
        """At ``initialize``: hold a capability, delayed from one of ``capabilities``, for
        each restored time, then drop ``capabilities`` (the operator keeps no other)."""
        for time, (data, diffs) in self.restored.items():
            self.by_time[time] = (delayed_to(capabilities, time), data, diffs)
        self.restored = {}
        for cap in capabilities:
            cap.drop()
