"""Event times and spans: what ``at(datum)`` may return, and what a window's size, hop, gap or
a watermark's delay may be.

An event time is either a *number* (a finite ``int`` or ``float``) or an *instant* (a
``datetime.datetime``, which ``pandas.Timestamp`` is, or a ``numpy.datetime64``; never NaT).
A span goes with one kind: a number for numbers, a ``datetime.timedelta`` (``pandas.Timedelta``
is one; a ``numpy.timedelta64`` or a Spark interval string such as ``"10 minutes"`` becomes
one) for instants. Int arithmetic stays exact at any magnitude: windows are placed by floor
division, never through a float.

    >>> span("tumbling", "size", "1 hour 30 minutes")
    datetime.timedelta(seconds=5400)
    >>> span("tumbling", "size", 600)
    600
    >>> import datetime as dt
    >>> epoch = dt.datetime(1970, 1, 1)
    >>> floor_steps(dt.datetime(1970, 1, 1, 0, 25), epoch, dt.timedelta(minutes=10))
    2
"""

from __future__ import annotations

import datetime as dt
import math
import numbers
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from ..values import is_nan

__all__ = ["epoch_of", "event_time", "floor_steps", "is_instant", "parse_interval", "span"]

_UNITS = {
    "microsecond": dt.timedelta(microseconds=1),
    "us": dt.timedelta(microseconds=1),
    "millisecond": dt.timedelta(milliseconds=1),
    "ms": dt.timedelta(milliseconds=1),
    "second": dt.timedelta(seconds=1),
    "sec": dt.timedelta(seconds=1),
    "s": dt.timedelta(seconds=1),
    "minute": dt.timedelta(minutes=1),
    "min": dt.timedelta(minutes=1),
    "m": dt.timedelta(minutes=1),
    "hour": dt.timedelta(hours=1),
    "h": dt.timedelta(hours=1),
    "day": dt.timedelta(days=1),
    "d": dt.timedelta(days=1),
    "week": dt.timedelta(weeks=1),
}
_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*", re.IGNORECASE)


def parse_interval(text: str) -> dt.timedelta:
    """A Spark interval string as a ``timedelta``: amounts with units (``"10 minutes"``,
    ``"1 hour 30 minutes"``, ``"interval 2 days"``, ``"500 ms"``); months and years have no
    fixed length and are refused.

    >>> parse_interval("interval 2 hours 15 min")
    datetime.timedelta(seconds=8100)

    Raises:
        ValueError: anything else, naming the text.
    """
    body = text.strip()
    if body.lower().startswith("interval"):
        body = body[len("interval") :]
    total = dt.timedelta(0)
    pos = 0
    found = False
    while pos < len(body):
        m = _PART.match(body, pos)
        if m is None or m.end() == pos:
            break
        word = m.group(2).lower()
        unit = _UNITS.get(word, _UNITS.get(word[:-1]) if word.endswith("s") else None)
        if unit is None:
            break
        amount = m.group(1)
        total += unit * (float(amount) if "." in amount else int(amount))
        pos = m.end()
        found = True
    if not found or pos < len(body):
        msg = (
            f"{text!r} is not an interval such as '10 minutes' or '1 hour 30 seconds' (units: "
            "microseconds, milliseconds, seconds, minutes, hours, days, weeks)"
        )
        raise ValueError(msg)
    return total


def span(spec: str, what: str, value: object, *, positive: bool = True) -> Any:
    """``value`` as a span of ``spec`` (a number, or a ``timedelta`` for instants).

    Raises:
        TypeError: not a finite number, a timedelta or an interval string.
        ValueError: a malformed interval, or not ``> 0`` (``>= 0`` unless ``positive``).
    """
    out: Any
    if isinstance(value, str):
        try:
            out = parse_interval(value)
        except ValueError as exc:
            msg = f"{spec}: {what}: {exc}"
            raise ValueError(msg) from None
    elif isinstance(value, np.timedelta64):
        if np.isnat(value):
            msg = f"{spec}: {what} must not be NaT"
            raise ValueError(msg)
        out = dt.timedelta(microseconds=int(value // np.timedelta64(1, "us")))
    elif isinstance(value, dt.timedelta):
        out = value
    elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        msg = (
            f"{spec}: {what} must be a finite int or float, a timedelta or an interval such "
            f"as '10 minutes', not {value!r}"
        )
        raise TypeError(msg)
    else:
        out = value
    zero = dt.timedelta(0) if isinstance(out, dt.timedelta) else 0
    if positive and not out > zero:
        msg = f"{spec}: {what} must be > 0, not {value!r}"
        raise ValueError(msg)
    if not positive and out < zero:
        msg = f"{spec}: {what} must be >= 0, not {value!r}"
        raise ValueError(msg)
    return out


def is_instant(value: object) -> bool:
    """Whether an event time or origin is an instant (a datetime or ``numpy.datetime64``)."""
    return isinstance(value, (dt.datetime, np.datetime64))


def event_time(label: str, at: Callable[[Any], Any], datum: Any, instants: bool = False) -> Any:
    """``at(datum)``, checked: a finite int or float (``instants`` False), or an instant
    (``instants`` True: the spans are timedeltas).

    Raises:
        TypeError: anything else, naming the operator and the datum.
    """
    t = at(datum)
    if not instants:
        if t.__class__ is int or t.__class__ is float:
            if t.__class__ is int or math.isfinite(t):
                return t
        elif not isinstance(t, bool) and isinstance(t, numbers.Real):
            t = int(t) if isinstance(t, numbers.Integral) else float(t)
            if not is_nan(t) and not math.isinf(t):
                return t
        elif is_instant(t):
            msg = (
                f"{label}: at({datum!r}) gave the instant {t!r}, but the spans are numbers: "
                "give them as timedeltas or intervals such as '10 minutes'"
            )
            raise TypeError(msg)
        msg = f"{label}: at({datum!r}) gave {t!r}; event times are finite ints or floats"
        raise TypeError(msg)
    if isinstance(t, dt.datetime):
        if t == t:  # pandas.NaT, a datetime, equals nothing
            return t
    elif isinstance(t, np.datetime64):
        if not np.isnat(t):
            return t
    elif isinstance(t, numbers.Real):
        msg = (
            f"{label}: at({datum!r}) gave the number {t!r}, but the spans are timedeltas: "
            "event times must be datetimes"
        )
        raise TypeError(msg)
    msg = (
        f"{label}: at({datum!r}) gave {t!r}; event times are datetimes, pandas.Timestamps or "
        "numpy.datetime64 (not NaT)"
    )
    raise TypeError(msg)


def epoch_of(t: Any) -> Any:
    """The Unix epoch as an instant comparable with ``t`` (naive or with ``t``'s zone), or
    ``0`` for a number: windows align on it by default, as Spark's do.

    >>> epoch_of(5)
    0
    """
    if isinstance(t, dt.datetime):
        return dt.datetime(1970, 1, 1, tzinfo=t.tzinfo)
    if isinstance(t, np.datetime64):
        return np.datetime64(0, "s")
    return 0


def as_step(t: Any, step: Any) -> Any:
    """``step`` in the arithmetic of ``t``: a ``numpy.timedelta64`` for a ``numpy.datetime64``
    (whose sum with a ``timedelta`` would leave numpy), else ``step`` itself."""
    if isinstance(t, np.datetime64) and isinstance(step, dt.timedelta):
        return np.timedelta64(step)
    return step


def floor_steps(t: Any, origin: Any, step: Any) -> int:
    """The largest ``k`` with ``origin + k * step <= t``: exact for ints and instants (floor
    division of ints or of timedeltas), settled on exact comparisons for floats.

    Raises:
        ValueError: a float ``t`` so large that ``step`` is below its precision.
    """
    if t.__class__ is int and origin.__class__ is int and step.__class__ is int:
        return (t - origin) // step
    if isinstance(t, float) or isinstance(origin, float) or isinstance(step, float):
        k: int = math.floor((t - origin) / step)
        # Division rounds floats: settle k on the exact comparison, a step or two at most.
        for _ in range(4):
            start = origin + k * step
            if start > t:
                k -= 1
            elif start + step <= t:
                k += 1
            else:
                return k
        msg = f"the float event time {t!r} is too large for a step of {step!r}: use ints"
        raise ValueError(msg)
    try:
        return int((t - origin) // step)
    except TypeError as exc:
        msg = f"the event time {t!r} cannot be placed from the origin {origin!r}: {exc}"
        raise TypeError(msg) from None
