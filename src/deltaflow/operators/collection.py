"""``Collection``: the user's handle on a collection that changes over time, and ``Arranged``.

A :class:`Collection` names the output of one node of a dataflow under construction; each
method adds a node (through its :class:`~deltaflow.operators.builder.DataflowBuilder`) and
returns the new collection. Nothing runs while a pipeline (:mod:`.pipeline`) is built.

    >>> from deltaflow.testing import example
    >>> example(lambda xs: xs.filter(lambda n: n % 2 == 0).map(lambda n: n * 10),
    ...         xs=[(1, 0, 1), (2, 0, 1), (4, 1, 1), (2, 2, -1)])
    [(20, 0, 1), (40, 1, 1), (20, 2, -1)]

Collections live in a *scope*: the top scope has ``int`` times; ``iterate`` opens a nested scope
whose times are ``Product(outer, round)``. A collection of an enclosing scope used inside a
loop body is entered into the loop automatically.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Any

import attrs

from ..framework.lattice import Product
from ..framework.summary import PathSummary
from . import aggregate as _aggregate, reduce as _reduce
from .arrange import AsCollection, TraceRegistry
from .base import check_function, describe_callable
from .dataflow import NodeTraits, Pact, identity_key
from .delta.extenders import extend, half_join, index_by_key
from .io import ProbeHandle, ProbeOperator
from .join.operator import JoinOperator
from .linear import Concat, Consolidate, Exchange, Step, temporal_filter_logic
from .scope import EnterAt, Scope, ScopeOperator, innermost_scope
from .windows.build import add_window

if TYPE_CHECKING:
    from ..framework.lattice import Time
    from .builder import DataflowBuilder
    from .delta.extenders import Index, PrefixExtender
    from .windows.specs import Session, Sliding

__all__ = ["Arranged", "Collection", "Scope", "innermost_scope"]


@attrs.define(eq=False, repr=False)
class Collection:
    """A multiset of data that changes over time; every method adds an operator.

    Linear operators: :meth:`map`, :meth:`filter`, :meth:`flat_map`, :meth:`explode`,
    :meth:`join_function`, :meth:`negate`, :meth:`concat`, :meth:`inspect`,
    :meth:`consolidate`. Routing and observation: :meth:`exchange`, :meth:`probe`.
    """

    builder: DataflowBuilder
    node: int
    port: int
    scope: Scope

    def __repr__(self) -> str:
        name = self.builder.spec.nodes[self.node].name
        return f"<Collection from {name!r} (node {self.node}) in scope {self.scope.name!r}>"

    def enter_scope(self, scope: Scope) -> Collection:
        """This collection as seen from ``scope`` (a nested scope of its own, or itself)."""
        return self.builder.enter(self, scope)

    # -- linear operators ----------------------------------------------------------------
    def map(self, fn: Callable[[Any], Any]) -> Collection:
        """Apply ``fn`` to every datum (``(d, t, r)`` becomes ``(fn(d), t, r)``)."""
        return self.builder.linear(self, Step("map", fn))

    def filter(self, predicate: Callable[[Any], Any]) -> Collection:
        """Keep the data for which ``predicate`` is true."""
        return self.builder.linear(self, Step("filter", predicate), "predicate")

    def flat_map(self, fn: Callable[[Any], Iterable[Any]]) -> Collection:
        """Replace each datum by every element of ``fn(datum)`` (same time and diff)."""
        return self.builder.linear(self, Step("flat_map", fn))

    def explode(self, fn: Callable[[Any], Iterable[tuple[Any, int]]]) -> Collection:
        """Replace each datum by the ``(data2, diff2)`` pairs of ``fn(datum)``, diffs multiplied.

        ``explode(lambda d: [(d, 3)])`` triples every count; ``[(d, -1)]`` negates.
        """
        return self.builder.linear(self, Step("explode", fn))

    def join_function(self, logic: Callable[[Any], Iterable[tuple[Any, Time, int]]]) -> Collection:
        """The general linear operator: ``logic(d)`` yields ``(d2, t2, r2)``; the output is
        ``(d2, join(t, t2), r * r2)``. Times only move forward, so no state is needed.
        """
        return self.builder.linear(self, Step("join_function", logic), "logic")

    def temporal_filter(
        self,
        lower: Callable[[Any], Time | None],
        upper: Callable[[Any], Time | None],
    ) -> Collection:
        """Keep each datum only during ``[lower(d), upper(d))`` (in logical time).

        A datum fed at time ``t`` appears at ``max(t, lower(d))`` and is retracted at
        ``upper(d)``; nothing is emitted when ``lower(d) >= upper(d)``. ``upper(d) is None``
        keeps it for ever. Retractions wait in downstream state until time reaches them.
        """
        check_function("temporal_filter", "lower", lower, 1)
        check_function("temporal_filter", "upper", upper, 1)
        name = f"temporal_filter({describe_callable(lower)}, {describe_callable(upper)})"
        return self.builder.linear(
            self, Step("join_function", temporal_filter_logic(lower, upper), name)
        )

    def negate(self) -> Collection:
        """Every diff negated (``a.concat(b.negate())`` is the multiset difference)."""
        return self.builder.linear(self, Step("negate"))

    def inspect(self, fn: Callable[[tuple[Any, Time, int]], Any]) -> Collection:
        """Call ``fn((data, time, diff))`` for every update passing by; data is unchanged.

        ``fn`` runs where the worker runs: with ``processes >= 2``, in the worker's process
        (a ``print`` goes to that process's standard output, a log record on the
        ``deltaflow`` logger is re-emitted in the caller's), not in the caller's.
        """
        return self.builder.linear(self, Step("inspect", fn))

    def concat(self, *others: Collection) -> Collection:
        """The multiset union of this collection and ``others`` (counts add)."""
        for o in others:
            self.builder.check_same_pipeline(o)
        scope = innermost_scope([self, *others])
        n = 1 + len(others)
        return self.builder.add(
            "concat",
            lambda _w, _n: Concat(n),
            [self, *others],
            scope=scope,
            traits=NodeTraits(union=True),
        )

    def consolidate(self) -> Collection:
        """Sum equal updates of each time once the time is complete; drop zeros."""
        return self.builder.add(
            "consolidate",
            lambda _w, _n: Consolidate(),
            [self],
            pacts=[Pact(identity_key)],
            traits=NodeTraits(consolidates=True),
        )

    def exchange(self, key: Callable[[Any], Hashable] | None = None) -> Collection:
        """Route each datum to the worker that owns ``key(datum)`` (default: the datum)."""
        if key is None:
            name = "exchange"
        else:
            check_function("exchange", "key", key, 1)
            name = f"exchange({describe_callable(key)})"
        return self.builder.add(
            name, lambda _w, _n: Exchange(key, name), [self], pacts=[Pact(key or identity_key)]
        )

    def probe(self) -> ProbeHandle:
        """A :class:`~deltaflow.operators.io.ProbeHandle` watching this collection's frontier."""
        handle = ProbeHandle(_least_time(self.scope.depth))
        self.builder.probes.append(handle)
        self.builder.add("probe", lambda _w, _n: ProbeOperator(handle), [self])
        return handle

    # -- event-time windows ----------------------------------------------------------------
    def window(
        self,
        spec: Sliding | Session,
        at: Callable[[Any], Any],
        key: Callable[[Any], Hashable] | None = None,
        *,
        retention: float | None = None,
        clock: Callable[[Any], int] | None = None,
        watermark: Any = None,
    ) -> Collection:
        """``((start, end), datum)`` for every window of ``spec`` holding ``at(datum)``
        (``start <= at < end``), with the datum's count.

        ``spec`` is :func:`~deltaflow.tumbling`, :func:`~deltaflow.sliding` or
        :func:`~deltaflow.session` (sessions chain the events of each ``key(datum)``; without
        ``key`` all data are one key). Event times are finite ints or floats. ``retention``
        closes windows at the logical time ``clock(end + retention)``: they leave the output
        and every operator's state, and later updates to them are late, reported and not
        applied (see :mod:`deltaflow.operators.windows`). ``watermark`` (a delay, in the
        event times' span: a number, or a timedelta / ``"10 minutes"``) bounds the state on
        a stream instead, as Spark's ``withWatermark``: an update whose event time is below
        the largest one seen before its time minus the delay is late (counted in
        ``job.statistics()["late"]``, not applied), and windows the watermark has passed
        are final and leave the output (see :mod:`deltaflow.operators.windows.watermarks`).

        >>> import deltaflow as df
        >>> from deltaflow.testing import example
        >>> example(lambda xs: xs.window(df.tumbling(10), at=lambda e: e[1]).count(),
        ...         xs=[(("a", 3), 0, 1), (("b", 7), 0, 1), (("c", 12), 1, 1)])
        [(((0, 10), 2), 0, 1), (((10, 20), 1), 1, 1)]
        """
        return add_window(
            self, spec, at, key, retention=retention, clock=clock, watermark=watermark
        )

    # -- arrangements and joins ----------------------------------------------------------
    def arrange_by_key(self) -> Arranged:
        """Index ``(key, val)`` data by key into a shared trace (see :class:`Arranged`).

        Arranging the same collection twice returns the same arrangement.
        """
        return self.builder.arrange(self, False)

    def arrange_by_self(self) -> Arranged:
        """Index the data themselves as keys (the value is ``()``)."""
        return self.builder.arrange(self, True)

    def _arranged_pair(
        self, other: Collection | Arranged, by_self: bool
    ) -> tuple[Arranged, Arranged]:
        other_coll = other if isinstance(other, Collection) else None
        if other_coll is None:
            if not isinstance(other, Arranged):
                msg = f"expected a Collection or an Arranged, got {other!r}"
                raise TypeError(msg)
            if other.scope is not self.scope:
                other_coll = other.as_collection()
        if other_coll is not None:
            self.builder.check_same_pipeline(other_coll)
            scope = innermost_scope([self, other_coll])
            right = self.builder.arrange(other_coll.enter_scope(scope), by_self)
        else:
            assert isinstance(other, Arranged)
            scope = self.scope
            right = other
        left = self.enter_scope(scope).arrange_by_key()
        return left, right

    def join(self, other: Collection | Arranged) -> Collection:
        """Pairs with equal keys: ``(k, a)`` and ``(k, b)`` give ``(k, (a, b))``, counts multiplied.

        >>> from deltaflow.testing import example
        >>> example(lambda a, b: a.join(b), a=[((1, "x"), 0, 2)], b=[((1, "y"), 0, 3)])
        [((1, ('x', 'y')), 0, 6)]
        """
        left, right = self._arranged_pair(other, False)
        return left._join(right, _pair, "join_map", single=True, label="join")

    def join_map(
        self, other: Collection | Arranged, fn: Callable[[Any, Any, Any], Any]
    ) -> Collection:
        """Like :meth:`join`, giving ``fn(k, a, b)`` for each matching pair."""
        check_function("join_map", "fn", fn, 3)
        left, right = self._arranged_pair(other, False)
        label = f"join_map({describe_callable(fn)})"
        return left._join(right, fn, "join_map", single=True, label=label)

    def semijoin(self, keys: Collection | Arranged) -> Collection:
        """The ``(k, v)`` whose key is in ``keys`` (counts multiplied by the key's count)."""
        left, right = self._arranged_pair(keys, True)
        return left.join_core(right, _keep_left, name="semijoin")

    def antijoin(self, keys: Collection | Arranged) -> Collection:
        """``self`` minus ``semijoin(keys)``: the ``(k, v)`` whose key is absent from ``keys``.

        ``keys`` should be distinct (each key with count 1), as for a set difference.
        """
        return self.concat(self.semijoin(keys).negate())

    # -- iteration -------------------------------------------------------------------------
    def iterate(
        self, step: Callable[[Collection], Collection], limit: int | None = None
    ) -> Collection:
        """The fixed point of ``step``, starting from this collection.

        ``step`` gets the loop variable (a collection of a nested scope whose times are
        ``Product(t, round)``) and returns the next round's collection; collections of
        enclosing scopes may be used inside it directly. ``limit`` caps the rounds. Without a
        limit, a step with no reduction or ``consolidate`` on some path from the variable gets
        a ``consolidate`` before the feedback, so that updates of opposite signs cancel and
        the loop ends once the fixed point is reached (a fixed point that does not exist still
        needs a ``limit``).

        >>> from deltaflow.testing import example
        >>> example(lambda xs: xs.iterate(lambda x: x.map(lambda n: min(n * 2, 20)).distinct()),
        ...         xs=[(3, 0, 1)])
        [(20, 0, 1)]
        """
        return self.builder.iterate(self, step, limit)

    # -- reductions ------------------------------------------------------------------------
    def reduce(
        self,
        logic: Callable[[Any, list[tuple[Any, int]]], Iterable[tuple[Any, int]]],
        name: str | None = None,
    ) -> Collection:
        """Per key, the output of ``logic(key, [(val, count), ...])`` as ``(key, out_val)``.

        ``logic`` sees the key's accumulated values with positive counts, sorted by value, and
        returns ``[(out_val, count), ...]``. It runs only at the key's *interesting times*
        (joins of its input times), and only for keys whose input changed.

        >>> from deltaflow.testing import example
        >>> example(lambda xs: xs.reduce(lambda k, vs: [(sum(v * n for v, n in vs), 1)]),
        ...         xs=[(("a", 2), 0, 1), (("a", 5), 1, 1)])
        [(('a', 2), 0, 1), (('a', 2), 1, -1), (('a', 7), 1, 1)]
        """
        return _reduce.reduce(self, logic, name)

    def count(self) -> Collection:
        """``(key, val)`` data to ``(key, n)``: how many values each key has (multiplicity)."""
        return _reduce.count(self)

    def distinct(self) -> Collection:
        """Each datum with a positive count, once."""
        return _reduce.distinct(self)

    def threshold(self, f: Callable[[Any, int], int]) -> Collection:
        """Each datum with count ``f(data, n)`` where ``n`` is its accumulated count."""
        return _reduce.threshold(self, f)

    def min(self) -> Collection:
        """``(key, val)`` data to ``(key, smallest val)``."""
        return _reduce.min(self)

    def max(self) -> Collection:
        """``(key, val)`` data to ``(key, largest val)``."""
        return _reduce.max(self)

    def top_k(self, k: int, key: Callable[[Any], Any] | None = None) -> Collection:
        """Each key's ``k`` smallest values counting multiplicity (``ORDER BY val LIMIT k``)."""
        return _reduce.top_k(self, k, key)

    def sum(self) -> Collection:
        """``(key, number)`` data to ``(key, total)``, values weighted by their counts (exact for
        ints).

        >>> from deltaflow.testing import example
        >>> example(lambda xs: xs.sum(), xs=[(("a", 2), 0, 3), (("b", 1.5), 0, 1)])
        [(('a', 6), 0, 1), (('b', 1.5), 0, 1)]
        """
        return _aggregate.sum(self)

    def mean(self) -> Collection:
        """``(key, number)`` data to ``(key, total / count)``.

        >>> from deltaflow.testing import example
        >>> example(lambda xs: xs.mean(), xs=[(("a", 2), 0, 3), (("a", 6), 0, 1)])
        [(('a', 3.0), 0, 1)]
        """
        return _aggregate.mean(self)

    def leave(self) -> Collection:
        """This loop-scope collection as seen from the enclosing scope (rounds accumulate)."""
        parent = self.scope.parent
        if parent is None:
            msg = "leave() called on a collection of the top scope"
            raise ValueError(msg)
        return self.builder.add(
            f"leave:{self.scope.name}",
            lambda _w, _n: ScopeOperator("leave"),
            [self],
            summaries={(0, 0): PathSummary.leave()},
            scope=parent,
            align=False,
        )

    def enter(self, scope: Scope) -> Collection:
        """This collection as seen from the nested ``scope`` (round 0)."""
        return self.enter_scope(scope)

    def enter_at(self, scope: Scope, at: Callable[[Any], int]) -> Collection:
        """This collection as seen from the nested loop ``scope``, each datum present from
        round ``at(datum)`` on (a non-negative int) instead of from round 0.

        Prioritised propagation: labels entering a loop at rounds that grow with their size
        let small labels spread first, so large ones are replaced less often (differential
        dataflow's ``enter_at``; see :func:`deltaflow.graphs.propagate_at`). A scope nested
        several levels deep is entered at round 0 of the levels in between.

        The fixed point does not depend on the rounds data enter at; how much work reaching
        it takes does. The smallest value per key, each ``(key, value)`` entering at round
        ``value``:

        >>> import deltaflow as df
        >>> class Smallest(df.Pipeline):
        ...     def build(self, xs):
        ...         def step(x):
        ...             return x.concat(xs.enter_at(x.scope, lambda kv: kv[1])).min()
        ...         return xs.filter(lambda kv: False).iterate(step)
        >>> df.run(Smallest(), xs=[(("a", 3), 0, 1), (("a", 1), 0, 1), (("a", 1), 1, -1)])
        [(('a', 1), 0, 1), (('a', 1), 1, -1), (('a', 3), 1, 1)]
        """
        check_function("enter_at", "at", at, 1)
        raw: object = scope
        parent = raw.parent if isinstance(raw, Scope) else None
        if parent is None:
            msg = f"enter_at: scope must be a loop scope (a collection's .scope), not {raw!r}"
            raise TypeError(msg)
        if self.scope is scope or self.scope not in scope.ancestors():
            msg = (
                f"enter_at: a collection of scope {self.scope.describe()} cannot enter scope "
                f"{scope.describe()}: only a scope nested in the collection's can be entered"
            )
            raise ValueError(msg)
        outer = self.enter_scope(parent)
        name = f"enter_at:{scope.name}({describe_callable(at)})"
        return self.builder.add(
            name,
            lambda _w, _n: EnterAt(at, name),
            [outer],
            summaries={(0, 0): PathSummary.enter()},
            scope=scope,
            align=False,
        )

    # -- delta queries (operators/delta) -----------------------------------------------------
    def half_join(self, other: Collection, *, strict: bool = False) -> Collection:
        """Each ``(k, a)`` update meets ``other``'s ``(k, b)`` updates as of its own time: at
        times not after it (before it, with ``strict``) in a fixed total order of times that
        extends their partial order (lexicographic on products). Gives ``(k, (a, b))`` at the
        join of the two times, counts multiplied; ``a.half_join(b)`` and
        ``b.half_join(a, strict=True)`` together meet every pair once, as ``join`` does.

        >>> from deltaflow.testing import example
        >>> example(lambda a, b: a.half_join(b), a=[((1, "x"), 1, 1)], b=[((1, "y"), 1, 2)])
        [((1, ('x', 'y')), 1, 2)]
        """
        return half_join(self, other, strict=strict)

    def index_by_key(self) -> Index:
        """``(key, val)`` data as a :class:`~deltaflow.Index` for lookups as of a time (prefix
        extenders, ``half_join``): one arrangement, the same each time it is asked for."""
        return index_by_key(self)

    def extend(self, *extenders: PrefixExtender) -> Collection:
        """Extend each prefix (datum) by the values every extender has for it, as of its time:
        ``(prefix, val)``, counts multiplied. Per prefix the extender with the fewest
        candidates proposes and the others validate (worst-case optimal)."""
        return extend(self, *extenders)


def _pair(_k: Any, a: Any, b: Any) -> Any:
    return (_k, (a, b))


def _keep_left(k: Any, a: Any, _b: Any) -> tuple[Any, ...]:
    return ((k, a),)


def _least_time(depth: int) -> Any:
    t: Any = 0
    for _ in range(depth):
        t = Product(t, 0)
    return t


@attrs.define(eq=False, repr=False)
class Arranged:
    """An arranged collection: a stream of sealed batches plus a trace per worker.

    Get one from :meth:`Collection.arrange_by_key` / :meth:`Collection.arrange_by_self`;
    join it with another arrangement of the same scope (:meth:`join_core`), or read it back as a
    collection (:meth:`as_collection`). Every operator reading it shares the same trace.
    """

    builder: DataflowBuilder
    node: int
    registry: TraceRegistry
    scope: Scope
    by_self: bool

    def __repr__(self) -> str:
        return f"<Arranged {self.registry.name} (node {self.node}) in scope {self.scope.name!r}>"

    def as_collection(self) -> Collection:
        """The arranged updates as a collection again (``(key, val)``, or the key by self)."""
        by_self = self.by_self
        return self.builder.add(
            "as_collection", lambda _w, _n: AsCollection("as_collection", by_self), [self]
        )

    def join_core(
        self,
        other: Arranged,
        logic: Callable[[Any, Any, Any], Iterable[Any]],
        name: str = "join_core",
    ) -> Collection:
        """Join with ``other`` (same key, same scope): ``logic(k, a, b)`` yields output data."""
        raw: object = other
        if not isinstance(raw, Arranged):
            msg = f"{name}: expected an arrangement (arrange_by_key() or _by_self()), got {raw!r}"
            raise TypeError(msg)
        check_function(name, "logic", logic, 3)
        return self._join(other, logic, name, single=False)

    def _join(
        self,
        other: Arranged,
        logic: Callable[[Any, Any, Any], Any],
        name: str,
        *,
        single: bool,
        label: str | None = None,
    ) -> Collection:
        """Add the join node ``name``; ``label`` is what errors call it (default ``name``)."""
        if other.builder is not self.builder:
            msg = "arrangements from different pipelines cannot be joined"
            raise ValueError(msg)
        if other.scope is not self.scope:
            msg = (
                f"cannot join an arrangement of scope {self.scope.name!r} with one of scope "
                f"{other.scope.name!r}; arrange the entered collection instead"
            )
            raise ValueError(msg)
        left_reg, right_reg = self.registry, other.registry
        left_reg.readers += 1
        right_reg.readers += 1

        def factory(w: int, _n: int) -> JoinOperator:
            # Built once the whole dataflow is: the reader counts are final.
            own = (left_reg.readers == 1, right_reg.readers == 1)
            return JoinOperator(
                label or name, left_reg.spine(w), right_reg.spine(w), logic, single=single, own=own
            )

        return self.builder.add(name, factory, [self, other])
