"""Inlets: an arrangement (and the linear steps before it) run by the port of its only reader.

An arrangement that keeps no trace (:mod:`.arrange`) only consolidates what it forwards, and a
chain of linear steps only transforms it; neither keeps anything between activations. When the
arrangement has a single reader, the plan (:mod:`deltaflow.scheduler.local.plan`) runs both inside
the reader's actor instead of as actors of their own: the reader's input port receives what
would have gone into them, and its actor passes every drained message through the
:class:`Inlet` before the operator sees it. The reader gets the same batches; a loop saves an
actor activation and two progress-tracked ports per absorbed operator on every iteration.

Linear steps are absorbed only where no exchange separates them from the arrangement, which
with several workers is never (an arrangement exchanges its input by key): then the
arrangement alone is the inlet.

    >>> from deltaflow.framework.antichain import Antichain
    >>> from deltaflow.framework.trace.spine import Spine
    >>> from .base import UpdateBatch
    >>> from .linear import Step
    >>> inlet = Inlet(
    ...     ArrangeOperator("arrange_by_self", Spine(Antichain([0])), by_self=True),
    ...     LinearOperator([Step("map", lambda d: d % 2)]),
    ... )
    >>> inlet([(0, UpdateBatch([1, 2, 3], [1, 1, 1]))])
    [(0, RawBatch(keys=[1, 0], vals=None, times=[0, 0], diffs=[2, 1]))]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .arrange import ArrangeOperator
from .linear import LinearOperator

if TYPE_CHECKING:
    from ..framework.lattice import Time

__all__ = ["Inlet"]


class Inlet:
    """Turn a port's raw messages into what ``arrange`` would forward after ``steps``.

    Attributes:
        arrange: the absorbed arrangement (its spine is registered, but it keeps no trace).
        steps: the absorbed chain of linear steps before it, or ``None``.
    """

    __slots__ = ("arrange", "steps")

    def __init__(self, arrange: ArrangeOperator, steps: LinearOperator | None = None) -> None:
        self.arrange = arrange
        self.steps = steps

    def __call__(self, messages: list[tuple[Time, Any]]) -> list[tuple[Time, Any]]:
        """The messages after the steps, consolidated by the arrangement (see
        :meth:`.ArrangeOperator.forward`). Errors of a step name that step."""
        if self.steps is not None:
            messages = self.steps.transform(messages)
        return self.arrange.forward(messages)

    def __repr__(self) -> str:
        steps = f"{self.steps.name} -> " if self.steps is not None else ""
        return f"<Inlet {steps}{self.arrange.name}>"
