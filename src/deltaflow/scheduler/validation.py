"""Checking what the application feeds a job: times, data, diffs and whole input batches.

Every check raises a clear error naming the input and the offending value, so a bad update is
reported where it was fed rather than deep in an operator:

    >>> validate_updates("xs", [(1, 0, 1), (2, 1, -1)])
    {0: ([1], [1]), 1: ([2], [-1])}
    >>> check_diff("xs", 1, 2.5)
    Traceback (most recent call last):
    ...
    TypeError: input 'xs': diff 2.5 for 1 must be an int
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..operators.pipeline import Pipeline
from ..operators.values import as_count as _integer, has_nan
from .frames import is_frame, updates_from_frame

if TYPE_CHECKING:
    from ..framework.schema import Schema
    from .accounting import InputAccount

__all__ = [
    "check_diff",
    "check_hashable",
    "check_nan",
    "require_int",
    "require_pipeline",
    "validate_updates",
]


def require_pipeline(pipeline: object) -> Pipeline:
    if not isinstance(pipeline, Pipeline):
        msg = f"expected a deltaflow Pipeline instance, got {pipeline!r}"
        raise TypeError(msg)
    return pipeline


def require_int(time: object, where: str) -> int:
    t = _integer(time)
    if t is None:
        msg = f"{where}({time!r}): times are ints"
        raise TypeError(msg)
    return t


def check_hashable(input_name: str, data: Any) -> None:
    try:
        hash(data)
    except TypeError:
        msg = f"input {input_name!r}: data {data!r} is not hashable (use tuples, not lists)"
        raise TypeError(msg) from None


def check_nan(input_name: str, data: Any) -> None:
    """Refuse a datum that is or holds a float NaN: NaN equals nothing, itself included, so it
    could be neither counted nor retracted, and whether two NaN data met would depend on the
    worker and process count.

    >>> check_nan("xs", ("k", float("nan")))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: input 'xs': datum ('k', nan) holds a NaN, which equals nothing: ...
    """
    if has_nan(data):
        msg = (
            f"input {input_name!r}: datum {data!r} holds a NaN, which equals nothing: it could "
            "be neither counted nor retracted (use None, or leave the datum out)"
        )
        raise ValueError(msg)


def check_nans(input_name: str, data: Iterable[Any]) -> None:
    """:func:`check_nan` on every datum of ``data``: the first datum holding a NaN is named.

    The items of a flat tuple are looked at here, without a call each: a tuple of ints and
    strings (keys, pairs, rows) costs a pass over its items.

    >>> check_nans("xs", [(1, "a"), 2, "b"])
    >>> check_nans("xs", [(1, 0.5), (2, float("nan"))])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: input 'xs': datum (2, nan) holds a NaN, which equals nothing: ...
    """
    for d in data:
        c = d.__class__
        if c is tuple:
            for x in d:
                xc = x.__class__
                if xc is not int and xc is not str and has_nan(x):
                    check_nan(input_name, d)
        elif c is not int and c is not str and has_nan(d):
            check_nan(input_name, d)


def check_diff(input_name: str, data: Any, diff: Any) -> int:
    """``diff`` as an ``int`` (numpy integers accepted), or a TypeError naming the input."""
    if diff.__class__ is int:
        return diff
    r = _integer(diff)
    if r is None:
        msg = f"input {input_name!r}: diff {diff!r} for {data!r} must be an int"
        raise TypeError(msg)
    return r


def validate_updates(
    name: str,
    updates: Iterable[Any],
    schema: Schema | None = None,
    account: InputAccount | None = None,
    at: int = 0,
) -> dict[int, tuple[list[Any], list[int]]]:
    """Group ``(data, time, diff)`` triples (or a DataFrame's rows, read by ``schema`` when
    the input declares one) by time, rejecting the first malformed one; each datum is checked
    against ``schema``. With an ``account`` (:mod:`.accounting`) every update is counted, and
    a bad one is refused by its mode: raised (``"fail"``) or set aside (no time earlier than
    ``at`` is stamped on it)."""
    refuse = None
    if account is not None and account.mode != "fail":
        refuse = functools.partial(_set_aside, account, at)
    if is_frame(updates):
        updates = updates_from_frame(name, updates, schema, refuse)
        schema = None  # the frame's rows were read by it
    if isinstance(updates, (str, bytes, Mapping)):
        msg = f"input {name!r}: expected an iterable of (data, time, diff) triples, got {updates!r}"
        raise TypeError(msg)
    try:
        it = iter(updates)
    except TypeError:
        msg = f"input {name!r}: expected an iterable of (data, time, diff) triples, got {updates!r}"
        raise TypeError(msg) from None
    if schema is not None or refuse is not None:
        return _validate_each(name, it, schema, account, at)
    by_time: dict[int, tuple[list[Any], list[int]]] = {}
    get = by_time.get
    # Every datum in the order fed, checked for NaNs as one batch: before the error of a
    # malformed update (the first bad update is the one named), else at the end.
    seen: list[Any] = []
    note = seen.append
    upd: Any = None
    try:
        for upd in it:
            # The fast check accepts exactly what the precise one below accepts.
            if upd.__class__ is not tuple or len(upd) != 3:
                raise _Malformed(upd)
            data, time, diff = upd
            if time.__class__ is not int or diff.__class__ is not int or time < 0:
                time, diff = _explain(name, upd)  # numpy integers pass, as ints
            hash(data)
            note(data)
            slot = get(time)
            if slot is None:
                slot = by_time[time] = ([], [])
            slot[0].append(data)
            slot[1].append(diff)
    except (_Malformed, TypeError, ValueError) as exc:
        bad = exc.args[0] if isinstance(exc, _Malformed) else upd
        try:
            check_nans(name, seen)  # what came before the bad update (never noted) first
            _explain(name, bad)
        except (TypeError, ValueError) as error:
            if account is not None:
                account.refuse(error, bad, f"update {len(seen)}", at)
            raise
        raise  # the error came from the iterable itself (``bad`` is the update before it)
    try:
        check_nans(name, seen)
    except ValueError as error:
        if account is not None:
            account.refuse(error, None, "", at)
        raise
    if account is not None:
        for time, (data, _) in by_time.items():
            account.admitted(max(time, at), len(data))
    return by_time


def _set_aside(account: InputAccount, at: int, exc: BaseException, datum: Any, where: str) -> None:
    account.refuse(exc, datum, where, at)


def _validate_each(
    name: str,
    updates: Iterator[Any],
    schema: Schema | None,
    account: InputAccount | None,
    at: int,
) -> dict[int, tuple[list[Any], list[int]]]:
    """:func:`validate_updates` one update at a time: each datum checked against ``schema``,
    each bad update refused by ``account``'s mode."""
    by_time: dict[int, tuple[list[Any], list[int]]] = {}
    for i, upd in enumerate(updates):
        try:
            time, diff = _explain(name, upd)
            data = upd[0]
            if schema is not None:
                try:
                    data = schema.check_datum(data)
                except ValueError as exc:
                    msg = f"input {name!r}: {upd!r} does not fit the declared schema: {exc}"
                    raise ValueError(msg) from None
                check_hashable(name, data)
            check_nan(name, data)
        except (TypeError, ValueError) as exc:
            if account is None:
                raise
            t = upd[1] if isinstance(upd, tuple) and len(upd) == 3 else None
            t = _integer(t) if t is not None else None
            account.refuse(exc, upd, f"update {i}", max(at, t if t is not None and t >= 0 else 0))
            continue
        if account is not None:
            account.admitted(max(time, at))
        slot = by_time.get(time)
        if slot is None:
            slot = by_time[time] = ([], [])
        slot[0].append(data)
        slot[1].append(diff)
    return by_time


class _Malformed(Exception):
    """Internal: the fast validation loop found an update to explain."""


def _explain(name: str, upd: Any) -> tuple[int, int]:
    """Raise the precise error for a rejected update; an update whose time and diff are
    integers of another type (numpy's) passes, with them as ``int``."""
    if not isinstance(upd, tuple) or len(upd) != 3:
        msg = (
            f"input {name!r}: expected an update triple (data, time, diff), got {upd!r}; "
            f"to feed the datum itself once at time 0, pass ({upd!r}, 0, 1)"
        )
        raise ValueError(msg)
    data, time, diff = upd
    check_hashable(name, data)
    t = _integer(time)
    if t is None:
        msg = (
            f"input {name!r}: expected an update triple (data, time, diff), got {upd!r}, whose "
            f"time {time!r} must be an int; if {upd!r} is the datum itself, pass "
            f"({upd!r}, 0, 1)"
        )
        raise TypeError(msg)
    if t < 0:
        msg = f"input {name!r}: time {time!r} in {upd!r} must be >= 0"
        raise ValueError(msg)
    return t, check_diff(name, data, diff)
