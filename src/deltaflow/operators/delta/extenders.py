"""The pieces of delta queries, public: ``half_join``, indexes and prefix extenders.

* :func:`half_join` — each ``(k, a)`` update of one collection meets the other collection's
  ``(k, b)`` updates as of its own time: those before it (``strict``) or not after it, in a
  total order of times that extends their partial order (lexicographic on products). Output
  ``(k, (a, b))`` at the join of the two times, diffs multiplied. Two half joins, one strict
  and one not, make a join: each pair of updates is met once, by the later one (ties by
  which side is not strict).
* :func:`index_by_key` — a collection of ``(key, val)`` pairs as an :class:`Index`, the one
  arrangement every lookup of it shares.
* :class:`PrefixExtender` (``index.extend_using(key)``) — for a collection of *prefixes*
  (any data), looked up by ``key(prefix)`` as of each prefix's time: :meth:`~PrefixExtender.count`
  how many values each has, :meth:`~PrefixExtender.propose` them, :meth:`~PrefixExtender.validate`
  proposed ``(prefix, val)`` pairs.
* :func:`extend` — worst-case optimal extension: per prefix the extender with the fewest
  candidates proposes, the others validate.

    >>> from deltaflow.testing import example
    >>> def both_ways(a, b):
    ...     return a.half_join(b).concat(b.half_join(a, strict=True).map(swap))
    >>> def swap(kv):
    ...     return (kv[0], (kv[1][1], kv[1][0]))
    >>> example(both_ways, a=[((1, "x"), 0, 1), ((1, "y"), 2, 1)], b=[((1, "z"), 1, 1)])
    [((1, ('x', 'z')), 1, 1), ((1, ('y', 'z')), 2, 1)]
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import attrs

from ..base import check_function, describe_callable, is_pair
from ..scope import innermost_scope
from .build import add_rule, index_of
from .index import IndexRegistry
from .lookup import (
    CountPhase,
    Extender,
    Phase,
    ProposePhase,
    ValidatePhase,
    extension_phases,
    identity,
)

if TYPE_CHECKING:
    from ..collection import Collection

__all__ = ["Index", "PrefixExtender", "extend", "half_join", "index_by_key"]


def _split_pair(d: Any) -> tuple[Any, Any]:
    if d.__class__ is tuple and len(d) == 2:
        return d
    if is_pair(d):
        return d[0], d[1]
    msg = f"index_by_key: expected (key, value) pairs, got {d!r}"
    raise TypeError(msg)


def _key_of_pair(d: Any) -> Any:
    return _split_pair(d)[0]


@attrs.frozen
class Index:
    """A collection of ``(key, val)`` pairs indexed for lookups as of a time (one
    arrangement, shared by every reader). Get one with ``collection.index_by_key()``."""

    collection: Collection
    registry: IndexRegistry

    def extend_using(self, key: Callable[[Any], Any], *, strict: bool = False) -> PrefixExtender:
        """An extender of prefixes ``p`` by the values of key ``key(p)``, as of each prefix's
        time: not after it, or strictly before it (``strict``)."""
        check_function("extend_using", "key", key, 1)
        return PrefixExtender(self, key, strict)


@attrs.frozen
class PrefixExtender:
    """Extends prefixes by the values an :class:`Index` has for ``key(prefix)``, looked up
    as of each prefix's time (see the module docstring)."""

    index: Index
    key: Callable[[Any], Any]
    strict: bool

    @property
    def _extender(self) -> Extender:
        return Extender(self.index.registry, self.key, self.strict)

    def _rule(
        self,
        prefixes: Collection,
        phases: list[Phase],
        what: str,
        emit: Callable[[Any], Any] | None = None,
    ) -> Collection:
        """The rule running ``phases`` on ``prefixes`` (``emit``: of whole records)."""
        self.index.collection.builder.check_same_pipeline(prefixes)
        if prefixes.scope is not self.index.collection.scope:
            msg = (
                f"{what}: the prefixes are of scope {prefixes.scope.name!r} and the index of "
                f"{self.index.collection.scope.name!r}; index the entered collection instead"
            )
            raise ValueError(msg)
        name = f"{what}({describe_callable(self.key)})"
        if emit is None:
            return add_rule(prefixes, phases, identity, name)
        return add_rule(prefixes, phases, emit, name, whole=True)

    def count(self, prefixes: Collection) -> Collection:
        """``(prefix, n)``: how many updates the index has for the prefix's key as of its
        time (the number of candidates the extender would propose), at the prefix's time."""
        return self._rule(prefixes, [CountPhase((self._extender,), 0)], "count", _counted)

    def propose(self, prefixes: Collection) -> Collection:
        """``(prefix, val)`` for each value of the prefix's key, counts multiplied."""
        return self._rule(prefixes, [ProposePhase((self._extender,), _pair)], "propose")

    def validate(self, extensions: Collection) -> Collection:
        """The ``(prefix, val)`` pairs whose value the prefix's key has, counts multiplied."""
        phase = ValidatePhase(self._extender, -1, _keyed(self.key), _second)
        return self._rule(extensions, [phase], "validate")


def _pair(p: Any, v: Any) -> tuple[Any, Any]:
    return (p, v)


def _counted(rec: Any) -> tuple[Any, int]:
    return (rec[0], rec[2])


_second = itemgetter(1)


def _keyed(key: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The key of an extension ``(prefix, val)``: ``key(prefix)``."""
    return lambda e: key(e[0])


def index_by_key(collection: Collection) -> Index:
    """``collection`` (``(key, val)`` pairs) as an :class:`Index`; the same each time."""
    registry = index_of(collection, ("pairs",), _split_pair, _key_of_pair, "by key")
    return Index(collection, registry)


def extend(prefixes: Collection, *extenders: PrefixExtender) -> Collection:
    """``(prefix, val)`` for the values every extender has for the prefix, counts multiplied:
    per prefix the extender with the fewest candidates proposes, the others validate."""
    if not extenders:
        msg = "extend: give at least one PrefixExtender"
        raise ValueError(msg)
    for given in extenders:
        e: object = given
        if not isinstance(e, PrefixExtender):
            msg = f"extend: expected PrefixExtender objects (index.extend_using(key)), got {e!r}"
            raise TypeError(msg)
    exts = tuple(e._extender for e in extenders)
    local = prefixes.builder.workers == 1
    phases = extension_phases(exts, _pair, lambda e: _keyed(e.key), _second, local=local)
    return extenders[0]._rule(prefixes, phases, "extend")


def half_join(collection: Collection, other: Collection, *, strict: bool = False) -> Collection:
    """Each ``(k, a)`` update of ``collection`` meets ``other``'s ``(k, b)`` updates at times
    not after its own (before it, with ``strict``), in the total order of times: ``(k, (a, b))``
    at the join of the two times, diffs multiplied."""
    collection.builder.check_same_pipeline(other)
    scope = innermost_scope([collection, other])
    index = index_by_key(other.enter_scope(scope))
    ext = Extender(index.registry, _half_join_key, strict)
    phase = ProposePhase((ext,), _half_joined)
    return add_rule(collection.enter_scope(scope), [phase], identity, "half_join")


def _half_join_key(d: Any) -> Any:
    if d.__class__ is tuple and len(d) == 2:
        return d[0]
    if is_pair(d):
        return d[0]
    msg = f"half_join: expected (key, value) pairs, got {d!r}"
    raise TypeError(msg)


def _half_joined(b: Any, v: Any) -> tuple[Any, tuple[Any, Any]]:
    return (b[0], (b[1], v))
