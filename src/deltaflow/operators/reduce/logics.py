"""The built-in reductions' logics, and the shortcuts the operator takes for them.

``count``, ``distinct``, ``threshold``, ``min`` and ``max`` are reductions with a ``logic`` like
any user's (:func:`count_logic`, ...). For some of them the operator skips the sorted value
list and the result checks and answers from the accumulation ``{val: count}`` directly: a
*fold* (:data:`FOLDS`, each tested against its logic). ``distinct`` and ``threshold`` also
have a count function ``by_count(key, n)`` (:mod:`.counting`), and ``distinct``'s runs on a
numpy column of counts (:data:`COLUMNS`).

>>> count_logic("k", [("a", 2), ("b", 1)]), count_fold({"a": 2, "b": 1})
([(3, 1)], {3: 1})
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ...errors import OperatorValueError
from ..values import as_count, check_ordered
from .counting import ByCount

__all__ = [
    "COLUMNS",
    "FOLDS",
    "Logic",
    "count_logic",
    "distinct_by_count",
    "distinct_logic",
    "max_logic",
    "min_logic",
    "negative",
    "strict_count",
    "threshold_functions",
]

Logic = Callable[[Any, list[tuple[Any, int]]], Iterable[tuple[Any, int]]]
"""``logic(key, [(val, count), ...]) -> [(out_val, count), ...]``."""


def count_logic(_key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    total = 0
    for _, c in vals:
        total += c
    return [(total, 1)] if total > 0 else []


def distinct_logic(_key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    return [((), 1)]


def negative(operator: str, key: Any, n: int, val: Any = None) -> OperatorValueError:
    """The error of a reduction's key (or value ``val`` of it) accumulating to a negative
    count ``n``: more retracted than inserted, which is no collection; every reduction but
    ``threshold`` (whose ``f`` is given any count) raises it rather than let the key vanish.

    >>> print(negative("count", "k", -1))  # doctest: +ELLIPSIS
    count: key 'k' has count -1: more was retracted than inserted ...
    """
    what = f"key {key!r}" if val is None else f"key {key!r}, value {val!r},"
    msg = (
        f"{operator}: {what} has count {n}: more was retracted than inserted (a collection "
        "has no negative counts); retract only what was inserted, or use threshold(f), "
        "whose f is given negative counts too"
    )
    return OperatorValueError(msg, operator=operator)


def strict_count(operator: str, by_count: ByCount) -> ByCount:
    """``by_count`` refusing a negative count with :func:`negative` (a strict reduction's).

    >>> strict_count("distinct", distinct_by_count)("k", 2)
    1
    """

    def checked(key: Any, n: int) -> int:
        if n < 0:
            raise negative(operator, key, n)
        return by_count(key, n)

    return checked


def distinct_by_count(_key: Any, n: int) -> int:
    return 1 if n > 0 else 0


def distinct_columns(n: np.ndarray) -> np.ndarray:
    """:func:`distinct_by_count` on a column of counts (its callers report a negative one
    through the operator's ``by_count``, with the key)."""
    return (n > 0).astype(np.int64)


def threshold_functions(f: Callable[[Any, int], int], label: str) -> tuple[Logic, ByCount]:
    """``threshold(f)``'s logic and its ``by_count`` (checking that ``f`` returns ints)."""

    def by_count(key: Any, n: int) -> int:
        if not n:
            return 0
        c = f(key, n)
        if c.__class__ is not int:
            r = as_count(c)  # numpy integers count, as they do in inputs
            if r is None:
                msg = f"{label}: f must return an int count; f({key!r}, {n}) returned {c!r}"
                raise TypeError(msg)
            return r
        return c

    def logic(key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
        return [((), by_count(key, vals[0][1]))]

    return logic, by_count


def min_logic(key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    check_ordered("min", key, vals)
    return [(vals[0][0], 1)]


def max_logic(key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    check_ordered("max", key, vals)
    return [(vals[-1][0], 1)]


def distinct_fold(acc: dict[Any, int]) -> dict[Any, int] | None:
    for c in acc.values():
        if c > 0:
            return {(): 1}
    return {}


def count_fold(acc: dict[Any, int]) -> dict[Any, int] | None:
    total = sum(acc.values())
    return {total: 1} if total > 0 else {}


def min_fold(acc: dict[Any, int]) -> dict[Any, int] | None:
    vals = [v for v, c in acc.items() if c > 0]
    if not vals:
        return {}
    try:
        m = min(vals)
    except TypeError:  # incomparable values: logic names them
        return None
    for v in vals:
        if v != v:  # NaN: logic names the key
            return None
    return {m: 1}


def max_fold(acc: dict[Any, int]) -> dict[Any, int] | None:
    vals = [v for v, c in acc.items() if c > 0]
    if not vals:
        return {}
    try:
        m = max(vals)
    except TypeError:
        return None
    for v in vals:
        if v != v:
            return None
    return {m: 1}


FOLDS: dict[Any, tuple[Callable[[dict[Any, int]], dict[Any, int] | None], bool]] = {
    distinct_logic: (distinct_fold, True),
    count_logic: (count_fold, False),
    min_logic: (min_fold, True),
    max_logic: (max_fold, True),
}
"""The built-in logics with an equivalent fold of the accumulation ``{val: count}`` straight
to the output ``{out_val: count}`` (skipping the sorted value list and the result checks), and
the ``positive_only`` they are used with. A fold returns None to fall back on ``logic`` (values
that ``<`` cannot order)."""


COLUMNS: dict[Any, Callable[[np.ndarray], np.ndarray]] = {distinct_by_count: distinct_columns}
"""The built-in ``by_count`` functions with an equivalent on a numpy column of counts."""
