"""Watermarks: windows (tumbling, sliding, sessions) whose state stays bounded on a stream, as
Spark's ``withWatermark`` bounds it.

``coll.window(spec, at=fn, watermark=delay)``: at every (int, top-scope) logical time ``t``,
the *watermark* ``W(t)`` is the largest event time of every update that arrived at a time
before ``t``, minus ``delay`` (none: no watermark yet). An update arriving at ``t`` whose event
time is below ``W(t)`` is **late**: it is not applied, it is counted
(``job.statistics()["late"]``) and the first late update of the operator is reported by one
``WARNING``. A window whose end is at or below the watermark is **final**: no update that is
not late can reach it, so it is retracted from the output at the first time whose watermark
passes it (every operator downstream forgets it then) and the operator drops its contents.
The output at every time ``t`` is thus the windows of the updates applied so far whose ends
are above ``W(t)``. A session is final once its end (``last + gap``) is at or below the
watermark (:class:`WatermarkSessions`).

The watermark is one value for the whole job, so every update goes through one worker (the
one owning the operator's constant exchange key): that worker keeps the largest event time,
the contents of the windows still open, and the updates waiting for their time. The rest of
the dataflow keeps its parallelism (the windows leave exchanged by their own keys
downstream).

    >>> import deltaflow as df
    >>> from deltaflow.testing import example
    >>> for update in example(lambda xs: xs.window(df.tumbling(10), at=lambda e: e, watermark=5),
    ...                       xs=[(3, 0, 1), (17, 1, 1), (4, 2, 1), (30, 3, 1)]):
    ...     print(update)      # 4 arrives at 2, below the watermark 17 - 5: late
    (((0, 10), 3), 0, 1)
    (((10, 20), 17), 1, 1)
    (((0, 10), 3), 2, -1)
    (((30, 40), 30), 3, 1)
    (((10, 20), 17), 4, -1)
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sortedcontainers import SortedDict  # type: ignore[import-untyped]

from ...framework.durable.tables import Rows
from ..base import Interest, Operator
from ..pending import Pending
from .eventtime import as_step, event_time
from .sessions import KeyEvents, SessionOperator, send_counts

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..base import Capability, OperatorContext
    from ..durable import StateSink, StateSource
    from .specs import Sliding

__all__ = ["WATERMARK_KEY", "WatermarkSessions", "WatermarkWindows", "watermark_key"]

logger = logging.getLogger("deltaflow")

WATERMARK_KEY = "watermark"
"""The exchange key of every update into a watermark: one worker sees them all."""


def watermark_key(_datum: Any) -> str:
    """Every update goes to the worker that keeps the watermark."""
    return WATERMARK_KEY


class Watermarked:
    """What both watermark operators keep of the watermark: the largest event time seen
    and the late updates met, saved under the constant key (checkpoint table ``high``).

    >>> w = Watermarked()
    >>> w.delay, w.high = 5, 17
    >>> w.watermark
    12
    """

    name: str
    #: How far the watermark trails the largest event time.
    delay: Any = None
    #: The largest event time of every update processed (``None``: none yet).
    high: Any = None
    #: Late updates met (and not applied) so far.
    late: int = 0

    @property
    def watermark(self) -> Any:
        """The current watermark (``None`` before any update)."""
        return None if self.high is None else self.high - as_step(self.high, self.delay)

    def _report(self, time: int, late: int, first: Any) -> None:
        """Count ``late`` updates met at ``time``; the operator's first ones are logged."""
        if not self.late:
            logger.warning(
                "%s: %d late update(s) at time %r are older than the watermark %r and were "
                "not applied (the first: %r); later ones are counted in "
                "job.statistics()['late'], not logged",
                self.name,
                late,
                time,
                self.watermark,
                first,
            )
        self.late += late

    def _save_high(self, sink: StateSink) -> None:
        held = [] if self.high is None else [self.high]
        sink.rows(
            "high",
            Rows({"key": [WATERMARK_KEY] * len(held), "high": held,
                  "late": [self.late] * len(held)}),
            "key",
        )  # fmt: skip

    def _load_high(self, source: StateSource) -> None:
        """Fold a checkpoint's largest event times and late counts (one row per worker
        that held them) into this one's."""
        rows = source.rows("high")
        if rows is not None:
            cols = rows.columns
            for h, n in zip(cols["high"], cols["late"]):
                self.high = h if self.high is None else max(self.high, h)
                self.late += n


class WatermarkWindows(Watermarked, Operator):
    """Tumbling or sliding windows with a watermark (see the module), on int times.

    Updates wait until the frontier passes their time; each time, in order, drops its late
    updates, places the others in their windows (output at that time, and kept in the open
    windows' contents), raises the largest event time, and retracts at the next time the
    windows the new watermark has made final.
    """

    interest = Interest.ALWAYS

    def __init__(self, name: str, spec: Sliding, at: Callable[[Any], Any], delay: Any) -> None:
        self.name = name
        self.spec = spec
        self.at = at
        self.delay = delay
        #: The updates waiting for their time.
        self.pending: Pending[int] = Pending()
        #: The updates applied to windows not all final yet, once each: ``{event time:
        #: {datum: count}}`` (an event in several windows is kept once, not once per window).
        self.events = SortedDict()
        #: The windows that received updates and are not final: a heap of ``(end, start)``.
        self.open: list[tuple[Any, Any]] = []
        self._opened: set[tuple[Any, Any]] = set()

    # -- checkpoints (see .durable) ------------------------------------------------------------
    def save(self, sink: StateSink) -> None:
        """Hand the largest event time, the open windows and the waiting updates over."""
        self.pending.save(sink, _watermark_keys)
        rows = [(at, d, c) for at, here in self.events.items() for d, c in here.items()]
        sink.rows(
            "events",
            Rows({"key": [WATERMARK_KEY] * len(rows), "at": [r[0] for r in rows],
                  "datum": [r[1] for r in rows], "count": [r[2] for r in rows]}),
            "key",
        )  # fmt: skip
        sink.rows(
            "open",
            Rows({"key": [WATERMARK_KEY] * len(self.open), "end": [w[0] for w in self.open],
                  "start": [w[1] for w in self.open]}),
            "key",
        )  # fmt: skip
        self._save_high(sink)

    def load(self, source: StateSource) -> None:
        """Take the state back (on the worker owning the watermark)."""
        self.pending.load(source)
        events = source.rows("events")
        if events is not None:
            cols = events.columns
            for at, d, c in zip(cols["at"], cols["datum"], cols["count"]):
                self._keep(at, d, c)
        windows = source.rows("open")
        if windows is not None:
            cols = windows.columns
            for end, start in zip(cols["end"], cols["start"]):
                self._open((end, start))
        self._load_high(source)

    def initialize(self, ctx: OperatorContext, capabilities: Sequence[Capability]) -> None:
        """A capability per restored waiting time (none on a fresh start)."""
        self.pending.start(capabilities)

    # -- running ---------------------------------------------------------------------------------
    def schedule(self, ctx: OperatorContext) -> None:
        """Queue new updates; process the times the frontier has passed, in order."""
        pending = self.pending
        pending.queue(ctx)
        for time, cap, data, diffs in pending.passed(ctx.frontier(0)):
            self._apply(ctx, time, data, diffs)
            cap.drop()

    def _keep(self, at: Any, datum: Any, count: int) -> None:
        here = self.events.get(at)
        if here is None:
            here = self.events[at] = {}
        n = here.get(datum, 0) + count
        if n:
            here[datum] = n
        else:
            del here[datum]
            if not here:
                del self.events[at]

    def _open(self, window: tuple[Any, Any]) -> None:
        """Note a window (as ``(end, start)``) that received updates."""
        if window not in self._opened:
            self._opened.add(window)
            heapq.heappush(self.open, window)

    def _apply(self, ctx: OperatorContext, time: int, data: list[Any], diffs: list[int]) -> None:
        """Time ``time``'s updates: late ones dropped, others placed; then the windows the
        new watermark makes final retracted at ``time + 1``."""
        label, at, windows, instants = self.name, self.at, self.spec.windows, self.spec.instants
        mark = self.watermark
        high = self.high
        out: dict[Any, int] = {}
        late = 0
        first: Any = None
        for d, r in zip(data, diffs):
            e = event_time(label, at, d, instants)
            try:
                if high is None or e > high:
                    high = e
                is_late = mark is not None and e < mark
            except TypeError as exc:
                msg = f"{label}: the event time {e!r} of {d!r} cannot be compared: {exc}"
                raise TypeError(msg) from None
            if is_late:
                if not late:
                    first = d
                late += 1
                continue
            placed = windows(e)
            for w in placed:
                item = (w, d)
                out[item] = out.get(item, 0) + r
                self._open((w[1], w[0]))
            if placed:
                self._keep(e, d, r)
        if late:
            self._report(time, late, first)
        send_counts(ctx, time, out)
        self.high = high
        mark = self.watermark
        if mark is not None:
            send_counts(ctx, time + 1, self._close(mark))

    def _close(self, mark: Any) -> dict[Any, int]:
        """Retract the windows whose ends are at or below ``mark``; forget the events none
        of whose windows is open any more."""
        closed: dict[Any, int] = {}
        opened, events = self.open, self.events
        while opened and opened[0][0] <= mark:
            end, start = heapq.heappop(opened)
            self._opened.discard((end, start))
            window = (start, end)
            for at in events.irange(start, end, inclusive=(True, False)):
                for d, c in events[at].items():
                    closed[(window, d)] = closed.get((window, d), 0) - c
        # An event's last window ends at or after every other of its windows, and later
        # event times have later last windows: the final events are a prefix.
        windows = self.spec.windows
        while events:
            at = events.keys()[0]
            if windows(at)[-1][1] > mark:
                break
            del events[at]
        return closed


class WatermarkSessions(Watermarked, SessionOperator):
    """Sessions with a watermark: an update below it is late; a session whose end
    (``last + gap``) is at or below it is final, retracted at the next time and forgotten.
    No update that is not late can reach a final session: its event time is at least the
    watermark, so at least ``gap`` after the session's last event.

    Every update comes to one worker (the watermark is global), so the state is saved under
    the constant exchange key, whole.
    """

    def __init__(self, name: str, gap: Any, delay: Any) -> None:
        super().__init__(name, gap, None)
        self.delay = delay

    def _late_test(self, time: int) -> Callable[[Any], bool] | None:
        mark = self.watermark
        if mark is None:
            return None
        return lambda at: bool(at < mark)

    def _close_at(self, end: Any) -> Any:
        return end

    def _closes_sessions(self) -> bool:
        return True

    # -- checkpoints: everything under the constant key --------------------------------------
    def save(self, sink: StateSink) -> None:
        """Hand the events, waiting updates, session ends, largest event time over."""
        events = [
            (key, at, d, c)
            for key, state in self.keys.items()
            for at, here in state.counts.items()
            for d, c in here.items()
        ]
        sink.rows(
            "events",
            Rows({"key": [WATERMARK_KEY] * len(events), "skey": [e[0] for e in events],
                  "at": [e[1] for e in events], "datum": [e[2] for e in events],
                  "count": [e[3] for e in events]}),
            "key",
        )  # fmt: skip
        self.pending.save(sink, _watermark_keys)
        closes = self.closes
        sink.rows(
            "closes",
            Rows({"key": [WATERMARK_KEY] * len(closes), "skey": [c[2] for c in closes],
                  "end": [c[0] for c in closes], "first": [c[3] for c in closes]}),
            "key",
        )  # fmt: skip
        self._save_high(sink)

    def load(self, source: StateSource) -> None:
        """Take the state back (on the worker owning the watermark)."""
        events = source.rows("events")
        if events is not None:
            cols = events.columns
            for key, at, d, c in zip(cols["skey"], cols["at"], cols["datum"], cols["count"]):
                state = self.keys.get(key)
                if state is None:
                    state = self.keys[key] = KeyEvents()
                state.counts.setdefault(at, {})[d] = c
            for state in self.keys.values():
                state.index_times()
        self.pending.load(source)
        self._load_closes(source, "end", "skey")
        self._load_high(source)

    def initialize(self, ctx: OperatorContext, capabilities: Sequence[Capability]) -> None:
        """A capability per restored waiting time (closes need none: they follow a time)."""
        self.pending.start(capabilities)

    def schedule(self, ctx: OperatorContext) -> None:
        """Queue new updates; each time the frontier has passed, in order: apply it, then
        retract at the next time the sessions its watermark made final."""
        pending = self.pending
        pending.queue(ctx)
        for time, cap, data, diffs in pending.passed(ctx.frontier(0)):
            out: dict[Any, int] = {}
            self._apply(time, data, diffs, out)
            send_counts(ctx, time, out)
            high = self.high
            try:
                for _, at, _ in data:
                    if high is None or at > high:
                        high = at
            except TypeError as exc:
                msg = f"{self.name}: event times that cannot be compared: {exc}"
                raise TypeError(msg) from None
            self.high = high
            closed: dict[Any, int] = {}
            mark = self.watermark
            if mark is not None:
                self._close(mark, closed)
            send_counts(ctx, time + 1, closed)
            cap.drop()


# -- what both watermark operators keep in a checkpoint -------------------------------------------
def _watermark_keys(data: list[Any]) -> list[str]:
    """Every datum's key: the constant one."""
    return [WATERMARK_KEY] * len(data)
