"""Path summaries: how a time changes along a path through the dataflow graph.

deltaflow's dataflow graph is *flat*: a loop is not a separate subgraph. Instead, times carry
one :class:`~deltaflow.framework.lattice.Product` level per enclosing loop, and three kinds of
operator change a time's shape or value as it passes:

* ``enter`` maps ``t`` to ``Product(t, 0)`` (the loop's first round),
* a loop's ``feedback`` maps ``Product(t, i)`` to ``Product(t, i + 1)`` (the next round),
* ``leave`` maps ``Product(t, i)`` back to ``t``.

A :class:`PathSummary` describes any composition of these in one canonical form
``(pop, add, push)``: drop ``pop`` innermost coordinates, add ``add`` to the innermost remaining
coordinate, then push one new inner coordinate per element of ``push``, starting at that value.
The form is closed under composition (:meth:`PathSummary.followed_by`) and unique: two
summaries that act the same on every time deep enough for them are equal as values.

Invariants and footguns:

* A summary only applies to times with at least ``pop`` Product levels; applying it to a
  shallower time raises ``ValueError``.
* The partial order :meth:`PathSummary.less_equal` compares summaries of the same shape (same
  ``pop`` and same ``len(push)``) coordinate-wise. It is *sound* (``s1.less_equal(s2)`` implies
  ``s1.results_in(t) <= s2.results_in(t)`` for every ``t``) but does not relate every pair the
  pointwise order would (a summary that resets an inner coordinate to 0 is pointwise below the
  identity, yet has another shape). Antichains of summaries kept with it may therefore hold a
  few more elements than strictly needed, never fewer.
* The dunder comparisons are a *total* order (a linear extension of :meth:`less_equal`) for
  sorting only, as for times.

    >>> from deltaflow.framework.lattice import Product
    >>> loop = PathSummary.enter().followed_by(PathSummary.feedback()).followed_by(
    ...     PathSummary.leave())
    >>> loop
    PathSummary(pop=0, add=0, push=())
    >>> PathSummary.leave().followed_by(PathSummary.feedback()).results_in(
    ...     Product(Product(3, 1), 7))
    Product(outer=3, inner=2)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from .lattice import Product, Time, depth, new_tuple
from .time_domain import TimeDomain

__all__ = ["PathSummary"]


def _non_negative(instance: Any, attribute: attrs.Attribute[Any], value: int) -> None:
    if value.__class__ is not int or value < 0:
        msg = f"PathSummary.{attribute.name} must be a non-negative int, got {value!r}"
        raise ValueError(msg)


def _push_values(instance: Any, attribute: attrs.Attribute[Any], value: tuple[int, ...]) -> None:
    if value.__class__ is not tuple or any(v.__class__ is not int or v < 0 for v in value):
        msg = f"PathSummary.push must be a tuple of non-negative ints, got {value!r}"
        raise ValueError(msg)


@attrs.frozen(order=False)
class PathSummary:
    """A map from times to times: pop ``pop`` levels, add ``add`` innermost, push ``push``.

    Args:
        pop: how many innermost :class:`Product` levels to drop first.
        add: how much to add to the innermost remaining coordinate (the ``int`` itself for a
            plain int time; the ``inner`` field for a Product).
        push: the starting values of new inner coordinates, outermost first.

    >>> from deltaflow.framework.lattice import Product
    >>> s = PathSummary(pop=1, add=2, push=(0,))
    >>> s.results_in(Product(5, 9))
    Product(outer=7, inner=0)
    >>> s.depth_change
    0
    """

    pop: int = attrs.field(default=0, validator=_non_negative)
    add: int = attrs.field(default=0, validator=_non_negative)
    push: tuple[int, ...] = attrs.field(default=(), validator=_push_values)

    @classmethod
    def identity(cls) -> PathSummary:
        """The summary that leaves every time unchanged (an ordinary operator or edge)."""
        return _IDENTITY

    @classmethod
    def enter(cls) -> PathSummary:
        """Entering a loop: ``t -> Product(t, 0)``.

        >>> PathSummary.enter().results_in(4)
        Product(outer=4, inner=0)
        """
        return _ENTER

    @classmethod
    def leave(cls) -> PathSummary:
        """Leaving a loop: ``Product(t, i) -> t``.

        >>> from deltaflow.framework.lattice import Product
        >>> PathSummary.leave().results_in(Product(4, 2))
        4
        """
        return _LEAVE

    @classmethod
    def feedback(cls, step: int = 1) -> PathSummary:
        """A loop's feedback: ``Product(t, i) -> Product(t, i + step)`` (``t -> t + step`` on ints).

        Raises:
            ValueError: if ``step`` is not a positive int (a feedback must advance time).

        >>> from deltaflow.framework.lattice import Product
        >>> PathSummary.feedback().results_in(Product(4, 2))
        Product(outer=4, inner=3)
        """
        if step.__class__ is not int or step < 1:
            msg = f"a feedback step must be a positive int, got {step!r}"
            raise ValueError(msg)
        return cls(add=step)

    @property
    def depth_change(self) -> int:
        """How many Product levels the result has more than the input (negative: fewer)."""
        return len(self.push) - self.pop

    @property
    def is_identity(self) -> bool:
        """True for the summary that changes nothing."""
        return not (self.pop or self.add or self.push)

    def results_in(self, time: Time) -> Time:
        """Apply the summary to ``time``.

        Raises:
            ValueError: if ``time`` has fewer than ``pop`` Product levels.

        Runtime complexity: O(pop + len(push)).

        >>> PathSummary(add=3, push=(1, 2)).results_in(5)
        Product(outer=Product(outer=8, inner=1), inner=2)
        """
        for _ in range(self.pop):
            if time.__class__ is not Product:
                msg = (
                    f"{self!r} drops {self.pop} Product level(s) but was applied to a time "
                    f"of depth {depth(time)}: {time!r}"
                )
                raise ValueError(msg)
            time = time.outer
        add = self.add
        if add:
            if time.__class__ is Product:
                time = Product(time.outer, time.inner + add)
            else:
                time = time + add  # type: ignore[operator]
        for value in self.push:
            time = Product(time, value)
        return time

    def results_in_for(self, domain: TimeDomain) -> Callable[[Time], Time]:
        """:meth:`results_in` for the times of ``domain`` (the summary's input), chosen once:
        the shape is known, so the returned function walks no time's type (a hot loop takes
        it once, as an actor does per input port, and calls it per message).

        A domain of odd shape (``loops=False``) gets :meth:`results_in` itself.

        Raises:
            ValueError: if ``domain``'s times have fewer than ``pop`` Product levels.

        >>> from deltaflow.framework.time_domain import domain_for_depth
        >>> PathSummary.leave().results_in_for(domain_for_depth(1))(Product(4, 2))
        4
        >>> PathSummary.feedback().results_in_for(domain_for_depth(0))(4)
        5
        """
        if domain.depth < self.pop:
            msg = (
                f"{self!r} drops {self.pop} Product level(s) but was given the times of {domain!r}"
            )
            raise ValueError(msg)
        if not domain.loops:
            return self.results_in
        pop, add, push = self.pop, self.add, self.push
        # After the pops, the time the addition applies to is an int or a Product(t, int).
        on_int = domain.depth == pop
        if not pop and not push:
            if not add:
                return _same
            if on_int:
                return add.__add__  # type: ignore[return-value]

            def advance(t: Any) -> Time:
                return new_tuple(Product, (t[0], t[1] + add))

            return advance
        if pop == 1 and not add and not push:
            return _outer
        if not pop and not add and len(push) == 1:
            start = push[0]

            def enter(t: Time) -> Time:
                return new_tuple(Product, (t, start))

            return enter

        def apply(t: Any) -> Time:
            for _ in range(pop):
                t = t[0]
            if add:
                t = t + add if on_int else new_tuple(Product, (t[0], t[1] + add))
            for value in push:
                t = new_tuple(Product, (t, value))
            return t  # type: ignore[no-any-return]

        return apply

    def followed_by(self, other: PathSummary) -> PathSummary:
        """The summary of a path that takes ``self`` and then ``other``.

        ``self.followed_by(other).results_in(t) == other.results_in(self.results_in(t))`` for
        every time ``t`` with at least ``self.pop`` levels for which the right side is defined.

        Runtime complexity: O(len(self.push) + len(other.push)).

        >>> PathSummary.enter().followed_by(PathSummary.leave()).is_identity
        True
        >>> PathSummary.leave().followed_by(PathSummary.enter())
        PathSummary(pop=1, add=0, push=(0,))
        """
        pushed = self.push
        n = len(pushed)
        pop2 = other.pop
        if pop2 > n:
            # ``other`` pops everything ``self`` pushed and the coordinate ``self`` added to.
            return PathSummary(self.pop + pop2 - n, other.add, other.push)
        kept = pushed[: n - pop2]
        if not kept:
            return PathSummary(self.pop, self.add + other.add, other.push)
        if other.add:
            kept = (*kept[:-1], kept[-1] + other.add)
        return PathSummary(self.pop, self.add, kept + other.push)

    def less_equal(self, other: PathSummary) -> bool:
        """The partial order on summaries: same shape, and every coordinate ``<=``.

        Sound for the pointwise order on results (see the module docstring).

        Runtime complexity: O(len(push)).

        >>> PathSummary.identity().less_equal(PathSummary.feedback(2))
        True
        >>> PathSummary(push=(1,)).less_equal(PathSummary(add=1, push=(0,)))
        False
        """
        if self.pop != other.pop or len(self.push) != len(other.push) or self.add > other.add:
            return False
        return all(a <= b for a, b in zip(self.push, other.push))

    def _key(self) -> tuple[int, int, int, tuple[int, ...]]:
        return (self.pop, len(self.push), self.add, self.push)

    def __lt__(self, other: PathSummary) -> bool:
        return self._key() < other._key()

    def __le__(self, other: PathSummary) -> bool:
        return self._key() <= other._key()

    def __gt__(self, other: PathSummary) -> bool:
        return self._key() > other._key()

    def __ge__(self, other: PathSummary) -> bool:
        return self._key() >= other._key()

    def __str__(self) -> str:
        if self.is_identity:
            return "identity"
        parts = []
        if self.pop:
            parts.append(f"leave x{self.pop}" if self.pop > 1 else "leave")
        if self.add:
            parts.append(f"+{self.add}")
        if self.push:
            parts.append(f"enter at {list(self.push)}")
        return ", then ".join(parts)


def _same(time: Time) -> Time:
    return time


def _outer(time: Any) -> Time:
    return time[0]  # type: ignore[no-any-return]


_IDENTITY = PathSummary()
_ENTER = PathSummary(push=(0,))
_LEAVE = PathSummary(pop=1)
