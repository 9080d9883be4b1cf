"""Event-time windows: the specs ``tumbling``, ``sliding`` and ``session``, and how a datum is
placed in the windows of a fixed-size spec.

``coll.window(spec, at=fn, key=None)`` gives ``((start, end), datum)`` for every window of
``spec`` holding the datum's event time ``at(datum)`` (``start <= at < end``), with the datum's
count. Fixed-size windows (tumbling, sliding) start at ``origin + k * hop`` and are *linear*:
each datum is placed by itself, so they need no state. Sessions chain each key's events whose
sorted event times are less than ``gap`` apart (:mod:`.sessions`).

    >>> sliding(10, 5).windows(12)
    [(5, 15), (10, 20)]
    >>> tumbling(10, origin=3).windows(12)
    [(3, 13)]
    >>> sliding(2, 5).windows(3)        # a hop larger than the size leaves gaps
    []

Retention (``retention=r``): logical time is the stream's clock. A window ``(start, end)``
closes at the logical time ``clock(end + r)`` (``clock`` maps an event time to a logical time,
by default the identity on ints and the ceiling of a float): it is retracted from the output
then, so every operator downstream forgets it, and an update fed at or after that time that
belongs to it is *late*: it is not applied, and the late updates are counted per window
operator (``job.statistics()["late"]``, :class:`LateRows`) and the first of them reported by
one ``WARNING`` record on the ``deltaflow`` logger (naming the operator, the time, how many
then, and the first), not one per row or per time. The output at every logical time ``t`` is
then the windows of the collection at ``t`` that are still open at ``t``.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import numbers
from collections.abc import Callable
from typing import Any

import attrs

from .eventtime import as_step, epoch_of, event_time, floor_steps, is_instant, span

__all__ = [
    "Closing",
    "LateRows",
    "Session",
    "Sliding",
    "event_time",
    "session",
    "sliding",
    "tumbling",
]

logger = logging.getLogger("deltaflow")


def _check_span(spec: str, what: str, value: object, *, positive: bool = True) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        msg = f"{spec}: {what} must be a finite int or float, not {value!r}"
        raise TypeError(msg)
    if positive and not value > 0:
        msg = f"{spec}: {what} must be > 0, not {value!r}"
        raise ValueError(msg)


@attrs.frozen
class Sliding:
    """Windows of ``size`` starting every ``hop`` at ``origin + k * hop`` (a tumbling spec is
    one whose hop is its size). Make one with :func:`sliding` or :func:`tumbling`.

    ``origin`` ``None`` (spans that are timedeltas, the default) aligns the windows on the
    Unix epoch in the event time's own kind (naive, or in its time zone).
    """

    size: Any
    hop: Any
    origin: Any = 0

    @property
    def instants(self) -> bool:
        """Whether the event times are instants (the spans are timedeltas)."""
        return isinstance(self.hop, dt.timedelta)

    def windows(self, at: Any) -> list[tuple[Any, Any]]:
        """The ``(start, end)`` windows holding the event time ``at``, earliest first.

        >>> sliding(3, 1).windows(5)
        [(3, 6), (4, 7), (5, 8)]
        >>> tumbling(600).windows(6 * 10**30 + 7)
        [(6000000000000000000000000000000, 6000000000000000000000000000600)]
        """
        size, hop, origin = self.size, self.hop, self.origin
        if self.instants:
            if origin is None:
                origin = epoch_of(at)
            size, hop = as_step(at, size), as_step(at, hop)
        try:
            k = floor_steps(at, origin, hop)
        except (TypeError, ValueError) as exc:
            msg = f"{self.label}: {exc}"
            raise type(exc)(msg) from None
        start = origin + k * hop
        out = []
        # At most ceil(size / hop) windows hold a time; the bound also ends the loop when a
        # float hop falls below the precision of a huge event time.
        for _ in range(self._most):
            if not start + size > at:
                break
            out.append((start, start + size))
            k -= 1
            start = origin + k * hop
        out.reverse()
        return out

    @property
    def _most(self) -> int:
        q = self.size / self.hop
        return math.ceil(q) if math.isfinite(q) else 1

    @property
    def label(self) -> str:
        """How errors and logs name the spec."""
        origin = "" if self.origin is None else f", origin={self.origin!r}"
        if self.hop == self.size:
            return f"tumbling({self.size!r}{origin})"
        return f"sliding({self.size!r}, {self.hop!r}{origin})"


@attrs.frozen
class Session:
    """Per key, events whose sorted event times are less than ``gap`` apart chain into one
    session, the window ``(first, last + gap)``. Make one with :func:`session`."""

    gap: Any

    @property
    def instants(self) -> bool:
        """Whether the event times are instants (the gap is a timedelta)."""
        return isinstance(self.gap, dt.timedelta)

    @property
    def label(self) -> str:
        """How errors and logs name the spec."""
        return f"session({self.gap!r})"


def _origin(spec: str, origin: object, size: Any) -> Any:
    """The origin of a spec with ``size``: a number for number spans, an instant (or None:
    the epoch) for timedeltas."""
    if isinstance(size, dt.timedelta):
        if origin is None or origin == 0:
            return None
        if not is_instant(origin):
            msg = f"{spec}: origin must be a datetime for timedelta windows, not {origin!r}"
            raise TypeError(msg)
        return origin
    if origin is None:
        return 0
    _check_span(spec, "origin", origin, positive=False)
    return origin


def tumbling(size: Any, origin: Any = 0) -> Sliding:
    """Back-to-back windows ``[origin + k * size, origin + (k + 1) * size)``: each event time
    is in exactly one. ``size`` is a number, or a ``timedelta`` / ``"10 minutes"`` for
    event times that are datetimes (windows then align on the epoch unless given an
    ``origin`` datetime).

    >>> tumbling(60).windows(130)
    [(120, 180)]
    >>> import datetime as dt
    >>> tumbling("1 hour").windows(dt.datetime(2024, 5, 1, 12, 30))[0][0]
    datetime.datetime(2024, 5, 1, 12, 0)
    """
    size = span("tumbling", "size", size)
    return Sliding(size, size, _origin("tumbling", origin, size))


def sliding(size: Any, hop: Any, origin: Any = 0) -> Sliding:
    """Windows of ``size`` starting at ``origin + k * hop``: an event time is in about
    ``size / hop`` of them (none when it falls in a gap left by ``hop > size``). Spans are
    numbers, or timedeltas / ``"10 minutes"`` for datetimes, as for :func:`tumbling`.

    >>> sliding(600, 60).windows(0)[:2]
    [(-540, 60), (-480, 120)]
    """
    size = span("sliding", "size", size)
    hop = span("sliding", "hop", hop)
    if isinstance(size, dt.timedelta) != isinstance(hop, dt.timedelta):
        msg = f"sliding: size {size!r} and hop {hop!r} must both be numbers or both timedeltas"
        raise TypeError(msg)
    return Sliding(size, hop, _origin("sliding", origin, size))


def session(gap: Any) -> Session:
    """Sessions: per key, event times less than ``gap`` apart chain into one window
    ``(first, last + gap)``; removing an event may split a session, adding one may merge two.
    ``gap`` is a number, or a timedelta / ``"30 minutes"`` for datetimes.

    >>> session(5)
    Session(gap=5)
    """
    return Session(span("session", "gap", gap))


def _default_clock(t: int | float) -> int:
    return t if t.__class__ is int else math.ceil(t)


@attrs.frozen
class Closing:
    """When windows close: at the logical time ``clock(end + retention)``."""

    retention: int | float
    clock: Callable[[Any], Any] = _default_clock

    @classmethod
    def of(
        cls, label: str, retention: object, clock: Callable[[Any], Any] | None
    ) -> Closing | None:
        """The closing rule of ``window(..., retention=, clock=)`` (None: windows stay open).

        Raises:
            TypeError / ValueError: a retention that is not a number ``>= 0``, or a clock
                without one.
        """
        if retention is None:
            if clock is not None:
                msg = f"{label}: clock= only matters with a retention="
                raise ValueError(msg)
            return None
        _check_span(label, "retention", retention, positive=False)
        assert isinstance(retention, (int, float))
        if retention < 0:
            msg = f"{label}: retention must be >= 0, not {retention!r}"
            raise ValueError(msg)
        return cls(retention, clock if clock is not None else _default_clock)

    def close_time(self, label: str, end: Any) -> int:
        """The logical time at which a window ending at ``end`` closes (an int)."""
        c = self.clock(end + self.retention)
        if c.__class__ is not int:
            if isinstance(c, bool) or not isinstance(c, numbers.Integral):
                msg = f"{label}: clock({end + self.retention!r}) gave {c!r}; logical times are ints"
                raise TypeError(msg)
            c = int(c)
        return c


@attrs.define(eq=False)
class LateRows:
    """The late updates of one window operator with a ``retention``, on this process: how
    many were not applied (``job.statistics()["late"]`` under the operator's name), and one
    ``WARNING`` at the first of them, not one per row or per time (the workers of a process
    share it).

    >>> late = LateRows("window(tumbling(10))")
    >>> late.add(7, 2, ("a", 3)); late.add(8, 1, ("b", 4))
    >>> late.count
    3
    """

    label: str
    count: int = 0

    def add(self, time: Any, late: int, first: Any) -> None:
        """``late`` updates at ``time`` met closed windows (``first`` the first of them)."""
        if not self.count:
            logger.warning(
                "%s: %d late update(s) at time %r belong to windows already closed and were "
                "not applied (the first: %r); later ones are counted in "
                "job.statistics()['late'], not logged",
                self.label,
                late,
                time,
                first,
            )
        self.count += late


@attrs.define(eq=False)
class FixedWindows:
    """The linear step that places each update in its tumbling or sliding windows (and, with
    a :class:`Closing`, retracts each window when it closes and drops late updates)."""

    spec: Sliding
    at: Callable[[Any], Any]
    closing: Closing | None
    label: str
    #: The late updates (with a ``closing``), shared by the workers of a process.
    late: LateRows | None = None

    def __call__(
        self, groups: list[tuple[Any, list[Any], list[int]]]
    ) -> list[tuple[Any, list[Any], list[int]]]:
        """``(time, data, diffs)`` groups of input to groups of ``((start, end), datum)``."""
        windows, at, label, closing = self.spec.windows, self.at, self.label, self.closing
        instants = self.spec.instants
        if closing is None:
            out = []
            for t, data, diffs in groups:
                nd: list[Any] = []
                nr: list[int] = []
                for d, r in zip(data, diffs):
                    for w in windows(event_time(label, at, d, instants)):
                        nd.append((w, d))
                        nr.append(r)
                if nd:
                    out.append((t, nd, nr))
            return out
        by_time: dict[Any, tuple[list[Any], list[int]]] = {}
        closes: dict[Any, int] = {}
        for t, data, diffs in groups:
            here = by_time.get(t)
            if here is None:
                here = by_time[t] = ([], [])
            late = 0
            first: Any = None
            for d, r in zip(data, diffs):
                was_late = False
                for w in windows(event_time(label, at, d, instants)):
                    end = w[1]
                    c = closes.get(end)
                    if c is None:
                        c = closes[end] = closing.close_time(label, end)
                    if c <= t:
                        was_late = True
                        continue
                    item = (w, d)
                    here[0].append(item)
                    here[1].append(r)
                    slot = by_time.get(c)
                    if slot is None:
                        slot = by_time[c] = ([], [])
                    slot[0].append(item)
                    slot[1].append(-r)
                if was_late:
                    if not late:
                        first = d
                    late += 1
            if late and self.late is not None:
                self.late.add(t, late, first)
        return [(t, d, r) for t, (d, r) in by_time.items() if d]
