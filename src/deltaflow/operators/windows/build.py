"""Adding a window's operators to a dataflow under construction: what
``Collection.window(spec, at=..., key=..., retention=..., clock=..., watermark=...)`` builds.

Tumbling and sliding windows place each datum by itself (one fused linear step); sessions
chain each key's events (a :class:`~.sessions.SessionOperator` at the top scope, a reduction
in a loop); a watermark bounds either kind's state instead of a retention (:mod:`.watermarks`).

    >>> import deltaflow as df
    >>> from deltaflow.testing import example
    >>> example(lambda xs: add_window(xs, df.tumbling(10), lambda e: e, None),
    ...         xs=[(3, 0, 1), (12, 1, 1)])
    [(((0, 10), 3), 0, 1), (((10, 20), 12), 1, 1)]
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

from ..base import check_function, describe_callable
from ..dataflow import NodeTraits, Pact
from ..linear import LinearOperator, Step
from .eventtime import span
from .sessions import SessionOperator, session_logic
from .specs import Closing, FixedWindows, LateRows, Session, Sliding, event_time
from .watermarks import WatermarkSessions, WatermarkWindows, watermark_key

if TYPE_CHECKING:
    from ..collection import Collection

__all__ = ["add_window"]


def add_window(
    collection: Collection,
    spec: Sliding | Session,
    at: Callable[[Any], Any],
    key: Callable[[Any], Hashable] | None,
    *,
    retention: float | None = None,
    clock: Callable[[Any], int] | None = None,
    watermark: Any = None,
) -> Collection:
    """The windows of ``spec`` over ``collection`` (see ``Collection.window``).

    Raises:
        TypeError: ``spec`` is not a window spec, or a watermark's kind differs from the
            spans'.
        ValueError: ``key=`` for fixed-size windows, both a retention and a watermark, or a
            retention or watermark inside a loop.
    """
    check_function("window", "at", at, 1)
    raw: object = spec
    if not isinstance(raw, (Sliding, Session)):
        msg = f"window: spec must be df.tumbling, df.sliding or df.session, not {spec!r}"
        raise TypeError(msg)
    label = f"window({spec.label}, at={describe_callable(at)})"
    closing = Closing.of(label, retention, clock)
    if watermark is not None:
        return _watermarked(collection, spec, at, key, label, watermark, closing)
    if isinstance(spec, Sliding):
        if key is not None:
            msg = f"{label}: key= groups sessions; tumbling and sliding windows take none"
            raise ValueError(msg)
        late = LateRows(label) if closing is not None else None
        step = Step("groups", FixedWindows(spec, at, closing, label, late), label)
        return collection.builder.add(
            label,
            lambda _w, _n: LinearOperator([step]),
            [collection],
            fusable=True,
            traits=NodeTraits(steps=(step,), late=late),
        )
    return _sessions(collection, spec, at, key, label, closing)


def _sessions(
    collection: Collection,
    spec: Session,
    at: Callable[[Any], Any],
    key: Callable[[Any], Hashable] | None,
    label: str,
    closing: Closing | None,
) -> Collection:
    """Session windows: an operator of their own at the top scope, a reduction in a loop."""
    if key is not None:
        check_function("window", "key", key, 1)
    by = key if key is not None else _no_key
    gap = spec.gap
    instants = spec.instants
    if collection.scope.depth == 0:
        keyed = collection.builder.linear(
            collection,
            Step(
                "map",
                lambda d: (by(d), event_time(label, at, d, instants), d),
                f"{label}: keys",
            ),
        )
        late = LateRows(label) if closing is not None else None
        return keyed.builder.add(
            label,
            lambda _w, _n: SessionOperator(label, gap, closing, late),
            [keyed],
            pacts=[Pact(_session_key)],
            traits=NodeTraits(late=late),
        )
    if closing is not None:
        msg = f"{label}: a retention closes sessions in int (top-scope) time, not in a loop"
        raise ValueError(msg)
    pairs = collection.builder.linear(
        collection,
        Step("map", lambda d: (by(d), (event_time(label, at, d, instants), d)), f"{label}: keys"),
    )
    return pairs.reduce(session_logic(gap), label).map(_value)


def _watermarked(
    collection: Collection,
    spec: Sliding | Session,
    at: Callable[[Any], Any],
    key: object,
    label: str,
    watermark: Any,
    closing: object,
) -> Collection:
    """``window(..., watermark=)``: see :mod:`deltaflow.operators.windows.watermarks`."""
    if closing is not None:
        msg = f"{label}: give a watermark= or a retention=, not both"
        raise ValueError(msg)
    if key is not None and not isinstance(spec, Session):
        msg = f"{label}: key= groups sessions; tumbling and sliding windows take none"
        raise ValueError(msg)
    delay = span(label, "watermark", watermark, positive=False)
    if isinstance(delay, dt.timedelta) != spec.instants:
        msg = (
            f"{label}: the watermark {watermark!r} and the windows' spans must be of one "
            "kind (numbers, or timedeltas)"
        )
        raise TypeError(msg)
    if collection.scope.depth != 0:
        msg = f"{label}: a watermark follows the stream's (top-scope) time, not a loop's"
        raise ValueError(msg)
    if isinstance(spec, Session):
        if key is not None:
            check_function("window", "key", key, 1)
        by: Callable[[Any], Any] = key if key is not None else _no_key  # type: ignore[assignment]
        instants, gap = spec.instants, spec.gap
        keyed = collection.builder.linear(
            collection,
            Step(
                "map",
                lambda d: (by(d), event_time(label, at, d, instants), d),
                f"{label}: keys",
            ),
        )
        return keyed.builder.add(
            label,
            lambda _w, _n: WatermarkSessions(label, gap, delay),
            [keyed],
            pacts=[Pact(watermark_key)],
        )
    return collection.builder.add(
        label,
        lambda _w, _n: WatermarkWindows(label, spec, at, delay),
        [collection],
        pacts=[Pact(watermark_key)],
    )


def _no_key(_d: Any) -> Any:
    return ()


def _session_key(keyed: Any) -> Any:
    return keyed[0]


def _value(pair: Any) -> Any:
    return pair[1]
