"""Which path corrects a key: chosen once per operator, by the shape of its times.

Every time of one scope has one shape, so a :class:`~.operator.ReduceOperator` picks its
per-key path once, from the lower bound of its input (:func:`path_for`):

* ``int`` times (under ``total_order=False``; otherwise :mod:`.total`): one line, the chain
  sweep (:func:`on_int_line`);
* ``Product(int, int)`` (one loop): the key's times on one line, else on one row, else the
  general search (:func:`on_pairs`);
* ``Product(t, int)`` with ``t`` not an int (nested loops): one line, else one row of the
  enclosing loop's iterations, else the general search (:func:`on_lines`);
* anything else: the general search (:func:`on_general`), which a test may also set as an
  operator's ``path`` to check a shortcut against it.

Within a path, what decides is where the key's times lie (one pass over them), not their
type. Each shortcut gives the general search's answer; the tests run every path against the
general one and the oracle.

An :class:`Activation` carries what the keys of one frontier step share: the frontier, the
corrections gathered so far and the frontier's bound on each line and row (computed once per
line or row).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .chains import count_line, line, nested_row, pair_row
from .counting import RowCounts, on_row
from .general import general
from .interesting_times import InterestingTimes, line_bound, row_bound

if TYPE_CHECKING:
    from deltaflow.framework.antichain import Antichain
    from deltaflow.framework.lattice import Time
    from deltaflow.framework.time_domain import TimeDomain

    from .operator import ReduceOperator

__all__ = [
    "Activation",
    "KeyPath",
    "general_only",
    "on_general",
    "on_int_line",
    "on_lines",
    "on_pairs",
    "path_for",
]

Rows = list[tuple[Any, Any, int]]
Fixes = dict[Any, list[tuple[Any, Any, int]]]

KeyPath = Callable[["ReduceOperator", Any, list[Any], Rows, "Rows | None", "Activation"], None]
"""``path(op, key, times, history, written, activation)``: correct one key at this step."""

_UNKNOWN: Any = object()


class Activation:
    """What the keys corrected at one frontier step share.

    ``corrections`` gathers them by time; ``line_fixes`` those of keys on a line or row by
    ``(outer, inner)`` int pairs (made into times once, at the end); ``row_batch`` queues
    counting keys on rows to be corrected together (``None``: one by one).
    """

    __slots__ = (
        "_bounds",
        "_rows",
        "corrections",
        "depth",
        "int_bound",
        "last_bound",
        "last_line",
        "line_fixes",
        "row_batch",
        "upper",
    )

    def __init__(self, upper: Antichain, row_batch: RowCounts | None, domain: TimeDomain) -> None:
        self.upper = upper
        self.corrections: dict[Time, Rows] = {}
        self.line_fixes: Fixes = {}
        self.row_batch = row_batch
        self.depth = domain.depth
        # Int times: the frontier is one int, the bound of the one line.
        total = domain.total
        first = upper.elements[0] if total and upper.elements else None
        self.int_bound: int | None = first  # type: ignore[assignment]
        self._bounds: dict[Any, int | None] = {}
        self._rows: dict[int, int | None] = {}
        # The line asked for last and its bound: a step's keys mostly share one line (the
        # round being computed), which a path reads here without a call.
        self.last_line: Any = _UNKNOWN
        self.last_bound: int | None = None

    def line_bound(self, x: Any) -> int | None:
        """The first inner coordinate beyond the frontier on line ``x`` (``None``: none is)."""
        bound = self._bounds.get(x, _UNKNOWN)
        if bound is _UNKNOWN:
            bound = self._bounds[x] = line_bound(self.upper, x, self.depth)
        self.last_line = x
        self.last_bound = bound
        return bound  # type: ignore[no-any-return]

    def row_bound(self, y: int) -> int | None:
        """The first outer coordinate beyond the frontier on row ``y`` (``None``: none is)."""
        bound = self._rows.get(y, _UNKNOWN)
        if bound is _UNKNOWN:
            bound = self._rows[y] = row_bound(self.upper, y)
        return bound  # type: ignore[no-any-return]


def path_for(domain: TimeDomain) -> KeyPath:
    """The per-key path for the times of ``domain`` (module docstring).

    >>> from deltaflow.framework.time_domain import domain_for_depth
    >>> [path_for(domain_for_depth(d)).__name__ for d in range(3)]
    ['on_int_line', 'on_pairs', 'on_lines']
    """
    if domain.total:
        return on_int_line
    if domain.pairs:
        return on_pairs
    return on_lines if domain.loops else on_general


def on_general(
    op: ReduceOperator,
    key: Any,
    times: list[Any],
    history: Rows,
    written: Rows | None,
    act: Activation,
) -> None:
    """Any partial order: the general interesting-times search (:func:`.general.general`)."""
    general(op, key, times, history, written or [], act.upper, act.corrections)


def general_only(search: InterestingTimes) -> KeyPath:
    """The general search, with ``search``'s tunables, for every key: set as an operator's
    ``path``, it is what the tests check every shortcut against.

    >>> from .interesting_times import InterestingTimes
    >>> callable(general_only(InterestingTimes(line_fast_path=False)))
    True
    """

    def path(
        op: ReduceOperator,
        key: Any,
        times: list[Any],
        history: Rows,
        written: Rows | None,
        act: Activation,
    ) -> None:
        general(op, key, times, history, written or [], act.upper, act.corrections, search)

    return path


def on_int_line(
    op: ReduceOperator,
    key: Any,
    times: list[Any],
    history: Rows,
    written: Rows | None,
    act: Activation,
) -> None:
    """Int times: one line whose positions are the times (:func:`.chains.line`)."""
    line(op, key, None, times, history, written, act.int_bound, act.corrections)


def on_lines(
    op: ReduceOperator,
    key: Any,
    times: list[Any],
    history: Rows,
    written: Rows | None,
    act: Activation,
) -> None:
    """Nested loops' times, ``Product(t, int)`` with ``t`` a ``Product`` of the enclosing
    loop: the chain sweep when the key's times lie on one line, or on one row of the
    enclosing loop's iterations (:func:`.chains.nested_row`); else the general search."""
    x = times[0][0]
    if line(op, key, x, times, history, written, act.line_bound(x), act.line_fixes):
        return
    if nested_row(op, key, times, history, written, act.upper, act.line_fixes):
        return
    on_general(op, key, times, history, written, act)


def on_pairs(
    op: ReduceOperator,
    key: Any,
    times: list[Any],
    history: Rows,
    written: Rows | None,
    act: Activation,
) -> None:
    """``Product(int, int)`` times: on one line, else on one row, else the general search.

    On a line, a counting reduction's key takes :func:`.chains.count_line` and any other
    :func:`.chains.line`.
    """
    first = times[0]
    x = first[0]
    # Times on two lines are on none: a key of a static run, with new times from several
    # rounds, goes straight to the row check.
    if len(times) == 1 or times[1][0] == x:
        bound = act.last_bound if x == act.last_line else act.line_bound(x)
        by_count = op.by_count
        if by_count is not None:
            if count_line(op, by_count, key, x, times, history, written, bound, act.line_fixes):
                return
        elif line(op, key, x, times, history, written, bound, act.line_fixes):
            return
    y = first[1]
    if on_row(y, times, history):
        row = act.row_bound(y)
        if row is None and act.row_batch is not None:
            act.row_batch.add(key, y, times, history, written)
        else:
            pair_row(op, key, y, times, history, written, row, act.line_fixes)
        return
    on_general(op, key, times, history, written, act)
