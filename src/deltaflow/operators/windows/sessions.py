"""Session windows: per key, events whose sorted event times are less than ``gap`` apart chain
into one session, the window ``(first, last + gap)``.

The events of a key are its data with a positive count; each is output as
``((first, last + gap), datum)`` with its count. Adding an event may merge two sessions and
removing one may split a session, so a change at event time ``a`` can only move the windows of
the sessions within ``gap`` of ``a``: :class:`SessionOperator` keeps each key's event times
sorted and, for a change, retracts and re-emits only the sessions of the region around it,
work proportional to the affected sessions rather than to the key's history.

With a retention (:class:`~deltaflow.operators.windows.specs.Closing`), a session closes at the
logical time ``clock(last + gap + retention)``: it is retracted from the output and its events
leave the operator's state. An update whose event time ``a`` has ``clock(a + retention) <= t``
at its logical time ``t`` is late (it could touch a session that has closed): it is dropped,
counted and reported. No update that is not late can change a closed session, since any
session within ``gap`` of it closes later than it.

The operator works on totally ordered (``int``) times, the top scope's; inside a loop the
sessions are a reduction over each key's sorted events (:func:`session_logic`).

    >>> session_logic(5)("k", [((1, "a"), 1), ((4, "b"), 2), ((20, "c"), 1)])
    [(((1, 9), 'a'), 1), (((1, 9), 'b'), 2), (((20, 25), 'c'), 1)]
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sortedcontainers import SortedList  # type: ignore[import-untyped]

from ...framework.durable.tables import Rows
from ..base import Interest, Operator, UpdateBatch
from ..durable import Deltas, delayed_to, fold_counts
from ..pending import Pending
from .eventtime import as_step
from .specs import Closing, LateRows

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..base import Capability, OperatorContext
    from ..durable import StateSink, StateSource

__all__ = ["KeyEvents", "SessionOperator", "send_counts", "session_logic", "sessions_of"]


def sessions_of(times: list[Any], gap: Any) -> list[tuple[Any, Any, list[Any]]]:
    """Split sorted event ``times`` into sessions: ``(first, last + gap, times)`` each.

    >>> sessions_of([1, 3, 9, 10], 5)
    [(1, 8, [1, 3]), (9, 15, [9, 10])]
    """
    out: list[tuple[Any, Any, list[Any]]] = []
    run: list[Any] = []
    if times:
        gap = as_step(times[0], gap)
    for a in times:
        if run and a - run[-1] >= gap:
            out.append((run[0], run[-1] + gap, run))
            run = []
        run.append(a)
    if run:
        out.append((run[0], run[-1] + gap, run))
    return out


def session_logic(
    gap: Any,
) -> Callable[[Any, list[tuple[Any, int]]], list[tuple[Any, int]]]:
    """A ``reduce`` logic over a key's ``((at, datum), count)`` values (sorted, positive
    counts) giving ``((first, last + gap), datum)`` for each event."""

    def logic(_key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
        times = sorted({at for (at, _), _ in vals})
        window = {}
        for first, end, members in sessions_of(times, gap):
            for a in members:
                window[a] = (first, end)
        return [((window[at], d), c) for (at, d), c in vals]

    return logic


def send_counts(ctx: OperatorContext, time: int, counts: dict[Any, int]) -> None:
    """Send ``counts`` (``{datum: diff}``, each datum once) at ``time``, leaving out zeros:
    a window operator gathers a time's output this way, retractions and additions of one
    window cancelling."""
    data = [d for d, r in counts.items() if r]
    if data:
        ctx.send(0, time, UpdateBatch(data, [counts[d] for d in data], consolidated=True))


def _rows(state: KeyEvents) -> list[tuple[Any, Any, int]]:
    """A key's events as ``(at, datum, count)`` rows."""
    return [(at, d, c) for at, here in state.counts.items() for d, c in here.items()]


class KeyEvents:
    """One key's events: counts by event time and datum, and the times holding a positive
    count, sorted.

    >>> state = KeyEvents()
    >>> state.add(1, "a", 1), state.add(9, "b", 1), state.add(1, "a", -1)
    (1, 1, -1)
    >>> list(state.times), state.sessions(0, 10, 5)
    ([9], [(9, 14, [9])])
    """

    __slots__ = ("counts", "times")

    def __init__(self) -> None:
        self.counts: dict[Any, dict[Any, int]] = {}
        self.times = SortedList()

    def index_times(self) -> None:
        """Note in :attr:`times` the event times with a positive count (after
        :attr:`counts` was filled from a checkpoint)."""
        self.times.update(at for at in self.counts if self.live(at))

    def live(self, at: Any) -> list[tuple[Any, int]]:
        return [(d, c) for d, c in self.counts[at].items() if c > 0]

    def add(self, at: Any, datum: Any, diff: int) -> int:
        """Add ``diff`` to the count of ``datum`` at ``at``; the rows (``(at, datum)`` with
        a count) made, or removed (-1)."""
        here = self.counts.get(at)
        if here is None:
            here = self.counts[at] = {}
        was = any(c > 0 for c in here.values())
        had = datum in here
        n = here.get(datum, 0) + diff
        if n:
            here[datum] = n
        else:
            here.pop(datum, None)
        now = any(c > 0 for c in here.values())
        if now and not was:
            self.times.add(at)
        elif was and not now:
            self.times.remove(at)
        if not here:
            del self.counts[at]
        return (not had) - (not n)

    def region(self, lo: Any, hi: Any, gap: Any) -> tuple[Any, Any]:
        """``[lo, hi]`` widened to whole sessions: no event outside it is within ``gap``."""
        times = self.times
        i = times.bisect_left(lo)
        while i > 0 and lo - times[i - 1] < gap:
            i -= 1
            lo = times[i]
        j = times.bisect_right(hi)
        while j < len(times) and times[j] - hi < gap:
            hi = times[j]
            j += 1
        return lo, hi

    def sessions(self, lo: Any, hi: Any, gap: Any) -> list[tuple[Any, Any, list[Any]]]:
        return sessions_of(list(self.times.irange(lo, hi)), gap)


class SessionOperator(Operator):
    """Sessions of ``(key, at, datum)`` updates (routed by key), on int times; see the module.

    Updates wait until the frontier passes their time, then each time's changes are applied
    key by key, in time order, with the sessions they touch re-emitted at that time. With a
    ``closing``, each session's close time is queued and a capability held for the earliest.
    """

    interest = Interest.ALWAYS

    def __init__(
        self, name: str, gap: Any, closing: Closing | None, late: LateRows | None = None
    ) -> None:
        self.name = name
        self.gap = gap
        self.closing = closing
        #: The late updates a ``closing`` drops, shared by the workers of a process.
        self.late_rows = late if late is not None else LateRows(name)
        self.keys: dict[Any, KeyEvents] = {}
        #: The updates waiting for their time.
        self.pending: Pending[int] = Pending()
        # (close time, sequence, key, first event time) per session made; stale entries
        # (the session changed since) are skipped when their time comes.
        self.closes: list[tuple[int, int, Any, Any]] = []
        self.close_cap: Capability | None = None
        self._seq = 0
        #: The changes to the events since a checkpoint last took them, and how many rows
        #: (``(key, at, datum)`` with a count) they are.
        self.deltas = Deltas()
        self.size = 0

    # -- checkpoints (see .durable) ------------------------------------------------------------
    def save(self, sink: StateSink) -> None:
        """Hand the events per key, the updates waiting for their time and the sessions'
        close times to a checkpoint."""
        columns = ("at", "datum", "count")
        sink.history("events", self.keys, columns, self.deltas.take(3), self.size, _rows)
        self.pending.save(sink, lambda data: [d[0] for d in data])
        closes = self.closes
        sink.rows(
            "closes",
            Rows({"key": [c[2] for c in closes], "time": [c[0] for c in closes],
                  "first": [c[3] for c in closes]}),
            "key",
        )  # fmt: skip

    def load(self, source: StateSource) -> None:
        """Take this worker's share of a checkpoint back."""
        events = source.history("events")
        if events is not None:
            self.deltas.keys = []
            for key, rows in events.items():
                counts = fold_counts(rows)
                if not counts:
                    continue
                state = self.keys[key] = KeyEvents()
                self.size += len(counts)
                for (at, d), c in counts.items():
                    state.counts.setdefault(at, {})[d] = c
                state.index_times()
        self.pending.load(source)
        self._load_closes(source, "time", "key")

    def _load_closes(self, source: StateSource, time: str, key: str) -> None:
        """Queue a checkpoint's session closes (table ``closes``: the close times in column
        ``time``, the keys in column ``key``, the first event times in ``first``) again."""
        rows = source.rows("closes")
        if rows is None:
            return
        cols = rows.columns
        closes = self.closes
        for t, k, first in zip(cols[time], cols[key], cols["first"]):
            self._seq += 1
            closes.append((t, self._seq, k, first))
        heapq.heapify(closes)

    def initialize(self, ctx: OperatorContext, capabilities: Sequence[Capability]) -> None:
        """Capabilities for a restored state's updates at later times, one per time, and
        for its earliest close (none on a fresh start)."""
        if self.closes:
            self.close_cap = delayed_to(capabilities, self.closes[0][0])
        self.pending.start(capabilities)

    def schedule(self, ctx: OperatorContext) -> None:
        """Queue new updates; apply and close the times the frontier has passed."""
        pending = self.pending
        pending.queue(ctx)
        frontier = ctx.frontier(0)
        closes = self.closes
        while True:
            nxt = pending.first()
            if closes and (nxt is None or closes[0][0] < nxt):
                nxt = closes[0][0]
            if nxt is None or frontier.less_equal(nxt):
                break
            out: dict[Any, int] = {}
            slot = pending.take(nxt)
            cap = slot[0] if slot is not None else self.close_cap
            assert cap is not None and cap.time <= nxt
            if slot is not None:
                self._apply(nxt, slot[1], slot[2], out)
            self._close(nxt, out)
            send_counts(ctx, nxt, out)
            self._hold(cap, nxt)
            if slot is not None:
                slot[0].drop()

    def _hold(self, cap: Capability, time: int) -> None:
        """Keep the close capability at the earliest queued close (``cap`` is valid at
        ``time``, at or before it)."""
        closes = self.closes
        held = self.close_cap
        if not closes:
            if held is not None:
                held.drop()
                self.close_cap = None
            return
        first = closes[0][0]
        if held is not None and held.time <= first:
            if held.time < first:
                held.downgrade(first)
            return
        self.close_cap = cap.delayed(max(first, time))
        if held is not None:
            held.drop()

    def _emit(
        self, state: KeyEvents, lo: Any, hi: Any, sign: int, out: dict[Any, int]
    ) -> list[Any]:
        """Add (``sign`` +1) or retract (-1) the windows of the sessions within ``[lo, hi]``;
        returns those sessions."""
        sessions = state.sessions(lo, hi, self.gap)
        get = out.get
        for first, end, members in sessions:
            window = (first, end)
            for a in members:
                for d, c in state.live(a):
                    item = (window, d)
                    out[item] = get(item, 0) + sign * c
        return sessions

    # -- what closes a session: a retention here, a watermark in a subclass --------------------
    def _late_test(self, time: int) -> Callable[[Any], bool] | None:
        """Whether an update at ``time`` with a given event time is late (``None``: none is)."""
        closing = self.closing
        if closing is None:
            return None
        name = self.name
        return lambda at: closing.close_time(name, at) <= time

    def _close_at(self, end: Any) -> Any:
        """What a session ending at ``end`` closes at, in the order of :attr:`closes`."""
        assert self.closing is not None
        return self.closing.close_time(self.name, end)

    def _report(self, time: int, late: int, first: Any) -> None:
        self.late_rows.add(time, late, first)

    def _closes_sessions(self) -> bool:
        return self.closing is not None

    def _apply(self, time: int, data: list[Any], diffs: list[int], out: dict[Any, int]) -> None:
        is_late = self._late_test(time)
        by_key: dict[Any, list[tuple[Any, Any, int]]] = {}
        late = 0
        first_late: Any = None
        for (key, at, d), r in zip(data, diffs):
            if is_late is not None and is_late(at):
                if not late:
                    first_late = d
                late += 1
                continue
            by_key.setdefault(key, []).append((at, d, r))
        if late:
            self._report(time, late, first_late)
        gap = self.gap
        closes = self._closes_sessions()
        deltas = self.deltas
        for key, changes in by_key.items():
            state = self.keys.get(key)
            if state is None:
                state = self.keys[key] = KeyEvents()
            ats = [a for a, _, _ in changes]
            lo, hi = state.region(min(ats), max(ats), gap)
            self._emit(state, lo, hi, -1, out)
            for a, d, r in changes:
                self.size += state.add(a, d, r)
                deltas.add(key, (a, d, r))
            sessions = self._emit(state, lo, hi, 1, out)
            if closes:
                for first, end, _ in sessions:
                    self._seq += 1
                    heapq.heappush(self.closes, (self._close_at(end), self._seq, key, first))
            if not state.counts:
                del self.keys[key]
        deltas.bound(self.size)

    def _close(self, time: Any, out: dict[Any, int]) -> None:
        """Retract and forget the sessions whose close (:meth:`_close_at`) is at or before
        ``time``."""
        closes, gap = self.closes, self.gap
        while closes and closes[0][0] <= time:
            _, _, key, first = heapq.heappop(closes)
            state = self.keys.get(key)
            if state is None or first not in state.counts:
                continue
            times = state.times
            i = times.bisect_left(first)
            if i == len(times) or times[i] != first or (i and first - times[i - 1] < gap):
                continue  # no longer a session's first event: a later entry stands for it
            lo, hi = state.region(first, first, gap)
            _, end, members = state.sessions(lo, hi, gap)[0]
            if self._close_at(end) > time:
                continue
            window = (first, end)
            for a in members:
                for d, c in state.live(a):
                    item = (window, d)
                    out[item] = out.get(item, 0) - c
            for a in members:
                # The session's events leave the state; counts that are not positive go too
                # (an event retracted below zero belongs to no window).
                gone = state.counts.pop(a)
                state.times.remove(a)
                self.size -= len(gone)
                for d, c in gone.items():
                    self.deltas.add(key, (a, d, -c))
            if not state.counts:
                del self.keys[key]
