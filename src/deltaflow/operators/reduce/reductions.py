"""The public reductions: ``reduce``, ``count``, ``distinct``, ``threshold``, ``min``, ``max``,
``top_k``, and :func:`reduce_core`, which adds a :class:`.operator.ReduceOperator` to a
dataflow.

>>> from deltaflow.testing import example
>>> example(lambda xs: count(xs), xs=[(("a", 1), 0, 1), (("a", 2), 0, 1), (("a", 1), 2, -1)])
[(('a', 2), 0, 1), (('a', 1), 2, 1), (('a', 2), 2, -1)]
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from deltaflow.errors import OperatorTypeError
from deltaflow.framework.trace.spine import Spine

from ..arrange import TraceRegistry
from ..base import check_function, describe_callable
from ..dataflow import NodeTraits
from ..values import check_ordered, find_incomparable
from .counting import ByCount
from .logics import (
    Logic,
    count_logic,
    distinct_by_count,
    distinct_logic,
    max_logic,
    min_logic,
    threshold_functions,
)
from .operator import ReduceOperator

if TYPE_CHECKING:
    from ..collection import Arranged, Collection

__all__ = [
    "count",
    "distinct",
    "max",
    "min",
    "reduce",
    "reduce_core",
    "threshold",
    "top_k",
]

_first = itemgetter(0)


def reduce_core(
    arranged: Arranged,
    logic: Logic,
    *,
    name: str,
    positive_only: bool = True,
    key_only: bool = False,
    total_order: bool | None = None,
    arrange_output: bool = True,
    by_count: ByCount | None = None,
    strict: bool = True,
) -> tuple[Collection, TraceRegistry | None]:
    """Add a :class:`ReduceOperator` reading ``arranged``; return its output and output trace.

    The collection holds ``(key, out_val)`` (or ``key`` with ``key_only``). With
    ``arrange_output`` the registry gives the output spine of each worker, an arrangement by
    key of the same data (its ``upper`` may lag the frontier by rounds without changes);
    without it the registry is ``None`` and int-time reductions keep no output trace.
    ``by_count`` (see :class:`ReduceOperator`) needs an arrangement by self; ``strict``
    (every public reduction but ``threshold``): a negative count is an error naming the key.
    """
    if by_count is not None and not arranged.by_self:
        msg = f"{name}: by_count needs an arrangement by self (every value ()), not by key"
        raise ValueError(msg)
    registry = TraceRegistry(name) if arrange_output else None
    source = arranged.registry

    def factory(w: int, _n: int) -> ReduceOperator:
        spine = source.spine(w)
        out = None
        if registry is not None:
            out = registry.spines[w] = Spine(spine.lower, domain=spine.domain)
        return ReduceOperator(
            name,
            spine,
            out,
            logic,
            positive_only=positive_only,
            key_only=key_only,
            total_order=total_order,
            by_count=by_count,
            strict=strict,
        )

    # A reduction's output holds exact corrections: updates that cancel never leave it (a
    # loop with one on its cycle needs no other consolidation, see .iterate).
    traits = NodeTraits(consolidates=True)
    return arranged.builder.add(name, factory, [arranged], traits=traits), registry


def _build(
    arranged: Arranged,
    logic: Logic,
    name: str,
    *,
    positive_only: bool = True,
    key_only: bool = False,
    by_count: ByCount | None = None,
    strict: bool = True,
) -> Collection:
    """The public reductions: the output trace is not handed out, so none is kept for ints."""
    return reduce_core(
        arranged,
        logic,
        name=name,
        positive_only=positive_only,
        key_only=key_only,
        arrange_output=False,
        by_count=by_count,
        strict=strict,
    )[0]


def reduce(collection: Collection, logic: Logic, name: str | None = None) -> Collection:
    """Per key of ``(key, val)`` data, ``(key, out_val)`` for each ``(out_val, n)`` of ``logic``.

    ``logic(key, vals)`` gets the key's accumulated ``[(val, count), ...]`` (positive counts
    only, sorted by val) and returns ``[(out_val, count), ...]``; it is not called for a key
    without positive values.

    >>> from deltaflow.testing import example
    >>> example(lambda xs: reduce(xs, lambda k, vs: [(len(vs), 1)]),
    ...         xs=[((1, "a"), 0, 1), ((1, "b"), 1, 1)])
    [((1, 1), 0, 1), ((1, 1), 1, -1), ((1, 2), 1, 1)]
    """
    check_function("reduce", "logic", logic, 2)
    raw: object = name
    if raw is not None and not isinstance(raw, str):
        msg = f"reduce: name must be a str or None, not {raw!r}"
        raise TypeError(msg)
    label = name or f"reduce({describe_callable(logic)})"
    return _build(collection.arrange_by_key(), logic, label)


def count(collection: Collection) -> Collection:
    """``(key, n)`` per key of ``(key, val)`` data: ``n`` sums the key's counts, if positive;
    a negative sum is an :class:`~deltaflow.errors.OperatorValueError` naming the key.

    >>> from deltaflow.testing import example
    >>> example(lambda xs: count(xs), xs=[(("a", 1), 0, 2), (("a", 2), 0, 1)])
    [(('a', 3), 0, 1)]
    """
    return _build(collection.arrange_by_key(), count_logic, "count", positive_only=False)


def distinct(collection: Collection) -> Collection:
    """Each datum with a positive count, once (a negative count is an
    :class:`~deltaflow.errors.OperatorValueError` naming the datum).

    >>> from deltaflow.testing import example
    >>> example(lambda xs: distinct(xs), xs=[("a", 0, 3), ("b", 0, 1), ("b", 1, -1)])
    [('a', 0, 1), ('b', 0, 1), ('b', 1, -1)]
    """
    return _build(
        collection.arrange_by_self(),
        distinct_logic,
        "distinct",
        key_only=True,
        by_count=distinct_by_count,
    )


def threshold(collection: Collection, f: Callable[[Any, int], int]) -> Collection:
    """Each datum with count ``f(datum, n)``, ``n`` its (non-zero, possibly negative) count.

    >>> from deltaflow.testing import example
    >>> example(lambda xs: threshold(xs, lambda d, n: n * n), xs=[("a", 0, 3), ("b", 0, -1)])
    [('a', 0, 9), ('b', 0, 1)]
    """
    check_function("threshold", "f", f, 2)
    label = f"threshold({describe_callable(f)})"
    logic, by_count = threshold_functions(f, label)
    return _build(
        collection.arrange_by_self(),
        logic,
        label,
        positive_only=False,
        key_only=True,
        by_count=by_count,
        strict=False,  # f is given every count, negative ones included
    )


def min(collection: Collection) -> Collection:
    """``(key, smallest val)`` per key of ``(key, val)`` data (values with positive counts).

    >>> from deltaflow.testing import example
    >>> example(lambda xs: min(xs), xs=[(("a", 3), 0, 1), (("a", 1), 1, 1)])
    [(('a', 3), 0, 1), (('a', 1), 1, 1), (('a', 3), 1, -1)]
    """
    return _build(collection.arrange_by_key(), min_logic, "min")


def max(collection: Collection) -> Collection:
    """``(key, largest val)`` per key of ``(key, val)`` data (values with positive counts).

    >>> from deltaflow.testing import example
    >>> example(lambda xs: max(xs), xs=[(("a", 3), 0, 1), (("a", 1), 1, 1)])
    [(('a', 3), 0, 1)]
    """
    return _build(collection.arrange_by_key(), max_logic, "max")


def top_k(collection: Collection, k: int, key: Callable[[Any], Any] | None = None) -> Collection:
    """Each key's ``k`` smallest values counting multiplicity (``ORDER BY val LIMIT k``).

    ``key`` orders values by ``key(val)`` instead (ties keep the value order). Values are
    kept with the count they contribute: a value with count 3 that straddles the limit keeps
    the part that fits.

    >>> from deltaflow.testing import example
    >>> example(lambda xs: top_k(xs, 2), xs=[(("a", 5), 0, 1), (("a", 1), 0, 1), (("a", 3), 0, 1)])
    [(('a', 1), 0, 1), (('a', 3), 0, 1)]
    """
    msg = f"top_k: k must be a non-negative int, not {k!r}"
    if k.__class__ is not int:
        raise TypeError(msg)
    if k < 0:
        raise ValueError(msg)
    if key is not None:
        check_function("top_k", "key", key, 1)
    sort_key = key

    label = "top_k" if key is None else f"top_k(key={describe_callable(key)})"

    def logic(group: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
        if sort_key is None:
            check_ordered("top_k", group, vals)
        else:
            vals = _sorted_by(label, group, vals, sort_key)
        out = []
        room = k
        for v, c in vals:
            if room <= 0:
                break
            take = c if c < room else room
            out.append((v, take))
            room -= take
        return out

    return _build(collection.arrange_by_key(), logic, label)


def _sorted_by(
    label: str, group: Any, vals: list[tuple[Any, int]], sort_key: Callable[[Any], Any]
) -> list[tuple[Any, int]]:
    """``vals`` sorted by ``sort_key`` of the value (stable), or an error naming the values
    whose sort keys do not compare or are NaN."""
    keyed = [(sort_key(v), v, c) for v, c in vals]
    try:
        keyed.sort(key=_first)
    except TypeError:
        pair = find_incomparable([k for k, _, _ in keyed])
        by_key = {id(k): v for k, v, _ in keyed}
        a, b = (by_key[id(pair[0])], by_key[id(pair[1])]) if pair else ("?", "?")
        msg = f"{label}: key {group!r} has values {a!r} and {b!r}, whose keys < cannot compare"
        raise OperatorTypeError(msg, operator=label) from None
    check_ordered(label, group, [(k, c) for k, _, c in keyed])
    return [(v, c) for _, v, c in keyed]
