"""Batch descriptions: which interval of times a batch covers, and how far it was compacted.

A :class:`Description` has three frontiers:

* ``lower`` and ``upper`` bound the times the batch *received*: every update was at a time
  beyond ``lower`` and not beyond ``upper``. Consecutive batches of a trace chain exactly: each
  batch's ``lower`` is the previous batch's ``upper``, so together they tile the timeline.
* ``since`` is the frontier the batch's times have been advanced to with
  :func:`~deltaflow.framework.lattice.advance_by`. Accumulations read from the batch are correct
  at every time beyond ``since`` (and only there). A freshly built batch has not been compacted:
  its ``since`` defaults to the least time of the trace's shape (``0`` for int times), which is
  no constraint at all.

Footgun: after compaction a time may be advanced *beyond* ``upper`` (when ``since`` is ahead of
``upper``); ``upper`` still says which updates the batch received, not where its times lie.

    >>> from deltaflow.framework.antichain import Antichain
    >>> d = Description(Antichain([0]), Antichain([5]))
    >>> d.since
    Antichain([0])
"""

from __future__ import annotations

import attrs

from ..antichain import Antichain
from ..lattice import Product, minimum_like

__all__ = ["Description"]


# The least frontiers of the usual time shapes, shared (antichains are immutable): building a
# default ``since`` is then a few class checks, not an antichain of new products.
_LEAST_INT = Antichain([0])
_LEAST_PRODUCT = Antichain([Product(0, 0)])


def _minimum_since(self: Description) -> Antichain:
    elems = self.lower.elements
    if elems:
        if all(e.__class__ is int for e in elems):
            return _LEAST_INT
        if all(
            e.__class__ is Product and e.outer.__class__ is int and e.inner.__class__ is int
            for e in elems
        ):
            return _LEAST_PRODUCT
    return Antichain([minimum_like(t) for t in elems])


@attrs.frozen
class Description:
    """The ``lower``, ``upper`` and ``since`` frontiers of a batch (see the module docstring).

    Args:
        lower: times of the batch's updates are beyond this frontier.
        upper: times of the batch's updates are not beyond this frontier.
        since: the frontier the times were advanced to (default: the least time, no compaction).

    >>> from deltaflow.framework.antichain import Antichain
    >>> Description(Antichain([2]), Antichain([4]), Antichain([3])).since
    Antichain([3])
    """

    lower: Antichain
    upper: Antichain
    since: Antichain = attrs.field(default=attrs.Factory(_minimum_since, takes_self=True))

    def _check(self) -> None:
        """Assert that ``lower <= upper`` (every upper element is beyond ``lower``)."""
        assert self.lower.dominates(self.upper), (self.lower, self.upper)
