"""Crossing a scope boundary: ``enter`` (``t -> Product(t, 0)``), ``leave`` (drop the round).

Leaving a loop scope sums every round of a time into the outer time: it is only a projection
of times, and consolidation happens in whatever reads the result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..framework.lattice import Product
from .base import Interest, Operator

if TYPE_CHECKING:
    from .base import OperatorContext

__all__ = ["ScopeOperator"]


class ScopeOperator(Operator):
    """Map batch times into (``kind="enter"``) or out of (``kind="leave"``) a nested scope."""

    interest = Interest.NEVER
    stateless = True
    reads_frontiers = False

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
                send(0, Product(time, 0), batch)
        else:
            for time, batch in ctx.messages(0):
                send(0, time.outer, batch)  # type: ignore[union-attr]
