"""``sum`` and ``mean``: the aggregations of numbers per key, as ordinary ``reduce`` logics.

Both take ``(key, number)`` data. A value counts as many times as its (positive) count, so a
value inserted twice adds twice; a key whose values are all retracted disappears. ``sum`` of
ints is an exact int; ``mean`` divides by the number of values (a float). The values are
added in sorted order, so floats give the same answer on any number of workers.

    >>> from deltaflow.testing import example
    >>> example(lambda xs: sum(xs), xs=[(("a", 2), 0, 3), (("a", 5), 1, 1)])
    [(('a', 6), 0, 1), (('a', 6), 1, -1), (('a', 11), 1, 1)]
    >>> example(lambda xs: mean(xs), xs=[(("a", 2), 0, 3), (("a", 6), 0, 1)])
    [(('a', 3.0), 0, 1)]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import OperatorValueError
from . import reduce as _reduce
from .values import check_numbers, is_nan

if TYPE_CHECKING:
    from .collection import Collection

__all__ = ["mean", "sum"]


def _no_nan(operator: str, key: Any, vals: list[tuple[Any, int]], result: Any) -> Any:
    """``result``, unless it is NaN (``inf + -inf``): NaN equals nothing, so an output holding
    it could never be retracted, and the answer would depend on the worker count."""
    if result != result and is_nan(result):
        shown = ", ".join(f"{v!r}" + (f" x{c}" if c != 1 else "") for v, c in vals[:6])
        more = ", ..." if len(vals) > 6 else ""
        msg = f"{operator}: key {key!r} adds up to NaN (its values: {shown}{more})"
        raise OperatorValueError(msg, operator=operator)
    return result


def _sum_logic(key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    check_numbers("sum", key, vals)
    total: Any = 0
    for v, c in vals:
        total += v * c
    return [(_no_nan("sum", key, vals, total), 1)]


def _mean_logic(key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    check_numbers("mean", key, vals)
    total: Any = 0
    n = 0
    for v, c in vals:
        total += v * c
        n += c
    return [(_no_nan("mean", key, vals, total / n), 1)]


def sum(collection: Collection) -> Collection:
    """``(key, total)`` per key of ``(key, number)`` data, each value weighted by its count.

    Raises (when the job runs, as the operator's error): ``TypeError`` for a value that is
    not a number, ``ValueError`` for a NaN or a total that is NaN (``inf`` and ``-inf``), both
    naming the key.
    """
    return _reduce.reduce(collection, _sum_logic, "sum")


def mean(collection: Collection) -> Collection:
    """``(key, total / count)`` per key of ``(key, number)`` data (errors as :func:`sum`)."""
    return _reduce.reduce(collection, _mean_logic, "mean")
