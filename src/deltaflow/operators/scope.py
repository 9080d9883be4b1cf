"""Scopes: :class:`Scope`, the nesting of times a collection lives in, and the operators that
cross a scope boundary: ``enter`` (``t -> Product(t, 0)``), ``leave`` (drop the round), and
``enter_at`` (``t -> Product(t, at(datum))``).

Leaving a loop scope sums every round of a time into the outer time: it is only a projection
of times, and consolidation happens in whatever reads the result.

Entering at a round of the datum's own (differential dataflow's ``enter_at``) makes a datum
present in the loop from that round on instead of from round 0: prioritised label propagation
lets small labels spread before large ones arrive, so that fewer labels are ever replaced. The
path summary is still ``enter`` (``Product(t, 0)``): every round a datum enters at is beyond
it, so the progress tracker's view stays a lower bound.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ..errors import OperatorTypeError, OperatorValueError
from ..framework.lattice import Product
from ..framework.time_domain import TimeDomain, domain_for_depth
from .base import Interest, Operator, RunsBatch, UpdateBatch
from .values import as_count

if TYPE_CHECKING:
    from ..framework.lattice import Time
    from .base import OperatorContext
    from .collection import Collection

__all__ = ["EnterAt", "Scope", "ScopeOperator", "innermost_scope"]


@attrs.define(eq=False)
class Scope:
    """A (possibly nested) timestamp scope: depth 0 is the top, with ``int`` times.

    A collection's scope is ``collection.scope``; a loop's body runs in a scope nested in the
    one the loop was started in, one ``Product`` level deeper.

    >>> top = Scope()
    >>> inner = Scope(Scope(top, "outer"), "inner")
    >>> inner.depth, inner.describe()
    (2, "'inner' in 'outer'")
    """

    parent: Scope | None = None
    name: str = "top"

    @property
    def depth(self) -> int:
        """How many ``Product`` levels the scope's times have."""
        return 0 if self.parent is None else self.parent.depth + 1

    @property
    def domain(self) -> TimeDomain:
        """The shape of the scope's times, chosen from its depth: what its operators and
        traces compute with (:mod:`deltaflow.framework.time_domain`)."""
        return domain_for_depth(self.depth)

    def ancestors(self) -> list[Scope]:
        """This scope and its parents, innermost first."""
        out: list[Scope] = []
        s: Scope | None = self
        while s is not None:
            out.append(s)
            s = s.parent
        return out

    def site(self) -> str | None:
        """Where the user made the scope (``file:line``), when known."""
        return None

    def describe(self) -> str:
        """The scope as errors name it: its name and where it was made, then the same for
        every loop scope it is nested in (two ``iterate`` calls make two scopes of one name)."""
        parts = []
        for s in self.ancestors()[:-1]:
            site = s.site()
            parts.append(f"{s.name!r}" if site is None else f"{s.name!r} (made at {site})")
        return " in ".join(parts) or "the top scope"


def innermost_scope(collections: Sequence[Collection]) -> Scope:
    """The deepest scope of ``collections`` (the one all of them enter when combined)."""
    best = collections[0].scope
    for c in collections[1:]:
        if c.scope.depth > best.depth:
            best = c.scope
    return best


class ScopeOperator(Operator):
    """Map batch times into (``kind="enter"``) or out of (``kind="leave"``) a nested scope."""

    interest = Interest.NEVER
    stateless = True
    reads_frontiers = False
    reads_runs = True

    def __init__(self, kind: str) -> None:
        if kind not in ("enter", "leave"):
            msg = f"ScopeOperator kind must be 'enter' or 'leave', not {kind!r}"
            raise ValueError(msg)
        self.kind = kind
        self.name = kind

    def schedule(self, ctx: OperatorContext) -> None:
        """Forward every batch at its mapped time."""
        send = ctx.send
        if self.kind == "enter":
            for time, batch in ctx.messages(0):
                if batch.__class__ is RunsBatch:
                    batch = batch.map_times(_entered)
                send(0, Product(time, 0), batch)
        else:
            for time, batch in ctx.messages(0):
                if batch.__class__ is RunsBatch:
                    batch = batch.map_times(_left)
                send(0, time.outer, batch)  # type: ignore[union-attr]


def _entered(time: Time) -> Time:
    return Product(time, 0)


def _left(time: Time) -> Time:
    return time.outer  # type: ignore[union-attr,no-any-return]


class EnterAt(Operator):
    """Enter a nested scope at a round per datum: ``(d, t, r)`` becomes
    ``(d, Product(t, at(d)), r)``.

    ``at(d)`` must be a non-negative int (numpy integers count); anything else stops the job
    with an error naming the operator, the datum and the value.

    >>> op = EnterAt(lambda n: n.bit_length(), "enter_at")
    >>> op.rounds(UpdateBatch([1, 4, 5, 0], [1, 1, -1, 2]))
    [(1, [1], [1]), (3, [4, 5], [1, -1]), (0, [0], [2])]
    """

    interest = Interest.NEVER
    stateless = True
    reads_frontiers = False

    def __init__(self, at: Callable[[Any], int], name: str) -> None:
        self.at = at
        self.name = name

    def rounds(self, batch: UpdateBatch) -> list[tuple[int, list[Any], list[int]]]:
        """The batch's updates grouped by the round each enters at, ``(round, data, diffs)``,
        in the order the rounds first appear."""
        groups: dict[int, tuple[list[Any], list[int]]] = {}
        for d, r, n in zip(batch.data, batch.diffs, map(self.at, batch.data)):
            if n.__class__ is not int or n < 0:
                n = self._checked(d, n)
            group = groups.get(n)
            if group is None:
                groups[n] = ([d], [r])
            else:
                group[0].append(d)
                group[1].append(r)
        return [(n, data, diffs) for n, (data, diffs) in groups.items()]

    def _checked(self, datum: Any, n: Any) -> int:
        """``n`` as a round, or the error naming this operator, ``datum`` and ``n``."""
        r = as_count(n)
        if r is None:
            msg = f"{self.name}: for {datum!r} it gave the round {n!r}; rounds are ints"
            raise OperatorTypeError(msg, operator=self.name)
        if r < 0:
            msg = f"{self.name}: for {datum!r} it gave the round {n!r}; rounds are >= 0"
            raise OperatorValueError(msg, operator=self.name)
        return r

    def schedule(self, ctx: OperatorContext) -> None:
        """Forward every batch, each update at the round it enters at."""
        send = ctx.send
        for time, batch in ctx.messages(0):
            for n, data, diffs in self.rounds(batch):
                send(0, Product(time, n), UpdateBatch(data, diffs))
