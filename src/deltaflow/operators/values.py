"""Checks on the values that reductions order, add up or count.

A reduction's answer must not depend on how many workers computed it. ``min``, ``max`` and
``top_k`` order a key's values, so values that ``<`` cannot compare (an ``int`` and a ``str``)
or a NaN (which compares false with everything, so the answer would depend on the order the
values arrived in) are errors naming the operator, the key and the values. Counts returned by
user logic may be numpy integers, like input diffs.

    >>> check_ordered("min", "k", [(1, 1), (2, 3)])
    >>> check_ordered("min", "k", [(1, 1), ("x", 1)])
    Traceback (most recent call last):
    ...
    deltaflow.errors.OperatorTypeError: min: key 'k' has values 1 and 'x', which < cannot compare

The errors are both :class:`~deltaflow.OperatorError` (naming the operator; the job stops)
and ``ValueError`` / ``TypeError``.
"""

from __future__ import annotations

import numbers
from typing import Any

from ..errors import OperatorTypeError, OperatorValueError

__all__ = [
    "as_count",
    "check_numbers",
    "check_ordered",
    "find_incomparable",
    "has_nan",
    "is_nan",
]


def as_count(n: object) -> int | None:
    """``n`` as an ``int`` if it is an integer (numpy's included) but not a bool; else None.

    Counts, diffs and times all accept exactly these.

    >>> import numpy as np
    >>> as_count(3), as_count(np.int32(4)), as_count(True), as_count(2.0)
    (3, 4, None, None)
    """
    if n.__class__ is int:
        return n
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        return None
    return int(n)


def is_nan(v: Any) -> bool:
    """Whether ``v`` is a NaN (only NaN differs from itself among the values a user orders).

    >>> is_nan(float("nan")), is_nan(1.0), is_nan("nan")
    (True, False, False)
    """
    try:
        return bool(v != v)
    except Exception:
        return False


def has_nan(datum: Any) -> bool:
    """Whether ``datum`` is a NaN (a float, numpy or ``Decimal`` one), or a tuple holding one
    at any depth.

    NaN equals nothing, itself included, so a datum holding one could be neither counted nor
    retracted: equal-looking data would be distinct keys, and whether two of them meet would
    depend on object identity, which differs between workers and processes.

    >>> has_nan(float("nan")), has_nan(("a", (1, float("nan")))), has_nan(("a", 1.5))
    (True, True, False)
    """
    c = datum.__class__
    if c is float:
        return datum != datum  # type: ignore[no-any-return]
    if c is tuple:
        for x in datum:
            xc = x.__class__
            if xc is float:
                if x != x:
                    return True
            elif xc is not int and xc is not str and has_nan(x):
                return True
        return False
    if c is int or c is str:
        return False
    if isinstance(datum, numbers.Number):  # numpy floats, Decimal('NaN'), complex
        return bool(datum != datum)
    if isinstance(datum, tuple):
        return any(has_nan(x) for x in datum)
    return False


def find_incomparable(values: list[Any]) -> tuple[Any, Any] | None:
    """The first two of ``values`` that ``<`` cannot compare, or None if every pair compares.

    Quadratic, so only called once an ordering has already failed.

    >>> find_incomparable([1, 2.5, "a"])
    (1, 'a')
    """
    for i, a in enumerate(values):
        for b in values[i + 1 :]:
            try:
                a < b  # noqa: B015 - only whether it raises matters
                b < a  # noqa: B015
            except TypeError:
                return a, b
    return None


def check_ordered(operator: str, key: Any, vals: list[tuple[Any, int]]) -> None:
    """Raise unless ``vals`` (a reduction's sorted ``[(val, count)]``) is ordered by ``<``.

    A reduction's values reach its logic sorted by ``<`` when they all compare, else in a
    universal order that groups them by type; so an adjacent pair that does not compare shows
    that some pair does not.

    Raises:
        OperatorValueError: a value is NaN.
        OperatorTypeError: two values do not compare, naming both.
    """
    prev: Any = None
    for i, (v, _) in enumerate(vals):
        if v != v and is_nan(v):
            msg = f"{operator}: key {key!r} has NaN among its values, which cannot be ordered"
            raise OperatorValueError(msg, operator=operator)
        if i:
            try:
                prev < v  # noqa: B015 - only whether it raises matters
            except TypeError:
                pair = find_incomparable([w for w, _ in vals]) or (prev, v)
                msg = (
                    f"{operator}: key {key!r} has values {pair[0]!r} and {pair[1]!r}, "
                    "which < cannot compare"
                )
                raise OperatorTypeError(msg, operator=operator) from None
        prev = v


def check_numbers(operator: str, key: Any, vals: list[tuple[Any, int]]) -> None:
    """Raise unless every value of ``vals`` is a number (not a bool) and none is NaN
    (:class:`~deltaflow.errors.OperatorTypeError`, :class:`~deltaflow.errors.OperatorValueError`).

    >>> check_numbers("sum", "k", [(1, 2), (float("nan"), 1)])
    Traceback (most recent call last):
    ...
    deltaflow.errors.OperatorValueError: sum: key 'k' has NaN among its values
    """
    for v, _ in vals:
        if v.__class__ is int:
            continue
        if isinstance(v, bool) or not isinstance(v, numbers.Number):
            msg = f"{operator}: key {key!r} has the value {v!r}, which is not a number"
            raise OperatorTypeError(msg, operator=operator)
        if is_nan(v):
            msg = f"{operator}: key {key!r} has NaN among its values"
            raise OperatorValueError(msg, operator=operator)
