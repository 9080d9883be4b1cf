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

from typing import TYPE_CHECKING

import attrs

from ..antichain import Antichain
from ..lattice import Product, minimum_like
from ..time_domain import INT, PAIR

if TYPE_CHECKING:
    from ..time_domain import TimeDomain

__all__ = ["Description", "least_since"]


# The least frontiers of the usual time shapes, shared (antichains are immutable): building a
# default ``since`` is then a few class checks, not an antichain of new products.
_LEAST_INT = Antichain([0])
_LEAST_PRODUCT = Antichain([Product(0, 0)])


def least_since(lower: Antichain, domain: TimeDomain) -> Antichain:
    """The ``since`` of a batch beyond ``lower`` not yet compacted, given by the domain of
    its times (the operator that builds it knows it; no time of ``lower`` is looked at):
    the domain's least time, or no time when ``lower`` is empty, as the default finds it.

    >>> from deltaflow.framework.time_domain import PAIR
    >>> least_since(Antichain([Product(3, 1)]), PAIR), least_since(Antichain(), PAIR)
    (Antichain([Product(outer=0, inner=0)]), Antichain([]))
    """
    if not lower.elements:
        return lower
    least = _LEAST.get(domain)
    if least is None:
        if not domain.loops:  # (an odd shape: its least time is each time's own)
            return Antichain([minimum_like(t) for t in lower.elements])
        least = _LEAST[domain] = Antichain([domain.least])
    return least


_LEAST: dict[TimeDomain, Antichain] = {INT: _LEAST_INT, PAIR: _LEAST_PRODUCT}


def _minimum_since(self: Description) -> Antichain:
    # (The default, for a description made without its times' domain: found from the
    # shape of ``lower``'s times.)
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
