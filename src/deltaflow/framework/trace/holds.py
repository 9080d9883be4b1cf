"""Readers' holds on a trace's compaction: :class:`Holds` keeps one kind of them (logical or
physical) for a :class:`~.spine.Spine`, each live reader's frontier by its token, and their
meet, the trace's compaction frontier of that kind.

    >>> from deltaflow.framework.antichain import Antichain
    >>> holds = Holds(Antichain([0]))
    >>> holds.hold(0, Antichain([3]))
    >>> holds.hold(1, Antichain([5]))
    >>> holds.frontier(Antichain([9]))
    Antichain([3])
    >>> holds.release(0)
    >>> holds.frontier(Antichain([9]))
    Antichain([5])
"""

from __future__ import annotations

import attrs

from ..antichain import Antichain, frontier_join

__all__ = ["Holds"]


@attrs.define(eq=False)
class Holds:
    """Each live reader's frontier of one kind, by reader token, and their meet.

    The meet is cached until a hold changes or the trace's upper does (:meth:`forget`). With
    nothing held, the frontier is the join of the last meet and the upper: compaction never
    moves back when the last reader leaves.
    """

    #: The last frontier computed (the trace's lower before any).
    last: Antichain
    #: Each reader's frontier, by its token.
    of: dict[int, Antichain] = attrs.field(factory=dict)
    #: The frontier, until a hold or the upper changes (None: recompute).
    cache: Antichain | None = None

    def frontier(self, upper: Antichain) -> Antichain:
        """The meet of the held frontiers; ``join(last, upper)`` when nothing is held.

        Runtime complexity: O(1) while no hold and the upper are unchanged; otherwise
        O(h * m) comparisons for h held elements of which m are minimal.
        """
        f = self.cache
        if f is None:
            f = self.cache = self.last = _meet_of_holds(self.of, self.last, upper)
        return f

    def hold(self, token: int, frontier: Antichain) -> None:
        """Reader ``token`` holds ``frontier`` (its first hold, or one further on)."""
        self.of[token] = frontier
        self.cache = None

    def release(self, token: int) -> None:
        """Reader ``token`` holds nothing any more."""
        del self.of[token]
        self.cache = None

    def forget(self) -> None:
        """The trace's upper moved: compute the frontier again when next asked."""
        self.cache = None


def _meet_of_holds(holds: dict[int, Antichain], last: Antichain, upper: Antichain) -> Antichain:
    """The frontier of the held elements; ``join(last, upper)`` when nothing is held."""
    if len(holds) == 1:
        (f,) = holds.values()
        if f:
            return f
    elif holds:
        elems = [e for f in holds.values() for e in f.elements]
        if elems:
            return Antichain(elems)
    return frontier_join(last, upper)
