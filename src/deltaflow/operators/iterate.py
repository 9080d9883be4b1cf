"""Iteration: loop scopes, loop variables (``Variable``) and ``iterate``.

A loop runs in a nested *scope* whose times are ``Product(t, i)``: ``t`` is the time of the
enclosing scope, ``i`` the round. Three pieces make a loop, and nothing else is special:

* **enter** (``t -> Product(t, 0)``): a collection of the enclosing scope, seen inside the loop,
  is present from round 0 on (accumulation over the product order does the rest);
* **feedback** (``Product(t, i) -> Product(t, i + 1)``): a :class:`Variable` is a feedback node;
  what it is ``set`` to at round ``i`` is what it holds at round ``i + 1``;
* **leave** (``Product(t, i) -> t``): outside the loop, a collection holds the accumulation of
  all of its rounds, that is its value once the loop has converged.

``iterate(collection, step)`` wires them up: the variable starts as ``collection`` (round 0) and
``x[i + 1] = step(x[i])``; the result, left to the enclosing scope, is the fixed point.

    >>> import deltaflow as df
    >>> class CountUp(df.Pipeline):
    ...     def build(self, xs):
    ...         return iterate(xs, lambda x: x.map(lambda n: min(n + 1, 10)).consolidate())
    >>> df.run(CountUp(), xs=[(3, 0, 1), (12, 1, 1)])
    [(10, 0, 1), (10, 1, 1)]

Invariants:

* Differences, not collections, travel around the loop. ``Variable.from_collection(source)``
  exposes ``feedback + source`` and feeds back ``result - source``, so the feedback carries
  only what changed between rounds, and nothing once a fixed point is reached.
* The feedback node's path summary is ``+1`` on the round, so every cycle strictly advances
  times; the progress graph rejects a cycle without one when the job is built. The feedback
  node keeps no state and holds no capability.
* A loop stops when no differences circulate: then no pointstamp at any ``Product(t, i)`` is
  left, and every frontier inside the loop (and the left result's) passes ``t``.
* With ``limit=n`` the feedback drops whatever would reach round ``n`` or later: the variable
  takes at most the values of rounds ``0 .. n - 1``, and ``iterate(..., limit=n)`` applies
  ``step`` at most ``n`` times (``step`` applied ``n`` times if it has not converged sooner).

* Equal updates of opposite signs must cancel somewhere on every cycle, or they circulate for
  ever and the loop never ends (``iterate(xs, lambda x: x)`` feeds back ``x - xs``: ``+xs``
  and ``-xs`` at every round). Reductions (``distinct``, ``count``, ``reduce``, ...) and
  ``consolidate`` cancel them. When a variable without a ``limit`` is set to a value that
  depends on it along a path with none of these, :meth:`Variable.set` puts a ``consolidate``
  before the feedback (its collections are unchanged; it costs a wait for each round's
  frontier there). With a ``limit`` the loop is bounded and left as written.

Footguns:

* A loop whose fixed point does not exist never ends, consolidated or not
  (``x.map(lambda n: n + 1).distinct()`` on ints): give it a ``limit``.
* Feeding back ``result - source`` can make intermediate counts negative: operators inside a
  loop must be correct for negative counts of an *update stream* (their accumulated input
  collections stay right).
* A collection of a loop scope cannot be used outside it: ``leave()`` it first. Collections of
  enclosing scopes may be used inside (they are entered automatically).
* Every :class:`Variable` must be ``set`` exactly once before the pipeline finishes building;
  :func:`check_variables_set` names the ones that were not.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING

import attrs

from ..framework.lattice import Product, meet_all
from ..framework.summary import PathSummary
from .base import Interest, Operator, RunsBatch, UpdateBatch, check_function
from .collection import Collection
from .dataflow import Edge, NodeTraits
from .scope import Scope

if TYPE_CHECKING:
    from .base import OperatorContext
    from .builder import DataflowBuilder

__all__ = [
    "FeedbackOperator",
    "LoopScope",
    "Variable",
    "check_variables_set",
    "iterate",
    "loop_scope",
]

_PACKAGE_DIR = str(Path(__file__).resolve().parent.parent)


def _user_site() -> str:
    """``file:line`` of the innermost caller outside deltaflow (for error messages)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith("<attrs generated") and not str(
            Path(filename).resolve()
        ).startswith(_PACKAGE_DIR):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


def _as_collection(value: object, what: str) -> Collection:
    """``value`` if it is a :class:`Collection`, else a ``TypeError`` naming ``what``."""
    if not isinstance(value, Collection):
        msg = f"{what} must be a Collection, got {value!r}"
        raise TypeError(msg)
    return value


def _check_limit(limit: int | None) -> int | None:
    if limit is None:
        return limit
    msg = f"an iteration limit must be a positive int or None, not {limit!r}"
    if limit.__class__ is not int:
        raise TypeError(msg)
    if limit < 1:
        raise ValueError(msg)
    return limit


class FeedbackOperator(Operator):
    """Move every batch one round later: ``Product(t, i) -> Product(t, i + 1)``.

    With ``limit``, batches that would land at round ``limit`` or later are dropped. Keeps no
    state; it sends under the right of the message it forwards.

    >>> op = FeedbackOperator(limit=3)
    >>> op.advance(Product(7, 1)), op.advance(Product(7, 2))
    (Product(outer=7, inner=2), None)
    """

    interest = Interest.NEVER
    stateless = True
    reads_frontiers = False
    reads_runs = True

    def __init__(self, limit: int | None = None, name: str = "feedback") -> None:
        self.limit = _check_limit(limit)
        self.name = name

    def advance(self, time: Product) -> Product | None:
        """The time a batch at ``time`` is delivered at, or ``None`` if it is dropped."""
        inner = time.inner + 1
        limit = self.limit
        if limit is not None and inner >= limit:
            return None
        return Product(time.outer, inner)

    def schedule(self, ctx: OperatorContext) -> None:
        """Forward every waiting batch to the next round (or drop it past the limit)."""
        send = ctx.send
        limit = self.limit
        for time, batch in ctx.messages(0):
            if batch.__class__ is RunsBatch:
                # Each run one round later; the runs past the limit dropped.
                batch = batch.map_times(self.advance)  # type: ignore[arg-type]
                if not batch.data:
                    continue
                time = meet_all(batch.times)
                send(0, time, batch)
                continue
            inner = time.inner + 1  # type: ignore[union-attr]
            if limit is not None and inner >= limit:
                continue
            if batch.__class__ is UpdateBatch and not batch.data:
                continue
            send(0, Product(time.outer, inner), batch)  # type: ignore[union-attr]


@attrs.define(eq=False)
class LoopScope(Scope):
    """A nested scope for a loop, with times ``Product(outer, round)``.

    Unlike the plain :class:`~deltaflow.operators.builder.Scope` it knows its pipeline's
    builder, so :class:`Variable`\\ s can be created in it. Make one with :func:`loop_scope`
    (``iterate`` makes its own). Used as a context manager, it checks on exit that every
    variable created in it was ``set``.

    Attributes:
        builder: the pipeline's builder (the graph the loop's nodes are added to).
        variables: the variables created in this scope, in creation order.
        created_at: ``file:line`` of the user code that made the scope (for error messages:
            every ``iterate`` scope is named ``"iterate"``).
    """

    builder: DataflowBuilder = attrs.field(kw_only=True)
    variables: list[Variable] = attrs.field(factory=list, kw_only=True)
    created_at: str = attrs.field(factory=_user_site, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if self.parent is None:
            msg = "a LoopScope needs an enclosing scope (use loop_scope(collection))"
            raise ValueError(msg)

    def site(self) -> str:
        """Where the user made the scope (``file:line``)."""
        return self.created_at

    def __enter__(self) -> LoopScope:
        self.builder.open_body(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.builder.close_body(self)
        if exc_type is None:
            _raise_unset([v for v in self.variables if not v.is_set])

    def _check(self) -> None:
        """Assert the scope's invariants: nested in its builder's scopes, variables its own."""
        assert self.parent is not None
        assert self.builder.top in self.ancestors()
        for v in self.variables:
            assert v.scope is self
            v._check()


def loop_scope(outer: Collection | LoopScope, name: str = "loop") -> LoopScope:
    """A new loop scope nested in ``outer`` (a collection's scope, or a loop scope).

    Create :class:`Variable`\\ s in it for mutual recursion; see :class:`Variable`. Inside the
    body of another loop (an ``iterate`` step, a ``with`` block of a loop scope), a scope made
    from a collection of an enclosing scope nests in that body, as ``iterate`` does. Used as a
    context manager, loops started inside the ``with`` block nest in it.

    >>> from deltaflow.operators.builder import DataflowBuilder
    >>> builder = DataflowBuilder()
    >>> xs = builder.new_input("xs")
    >>> s = loop_scope(xs, "outer")
    >>> (s.depth, loop_scope(s, "inner").depth, s.parent is xs.scope)
    (1, 2, True)
    """
    if isinstance(outer, LoopScope):
        return LoopScope(parent=outer, name=name, builder=outer.builder)
    collection = _as_collection(outer, "the argument of loop_scope() (or a LoopScope)")
    builder = collection.builder
    parent = builder.loop_parent(collection.scope, "loop_scope()")
    return LoopScope(parent=parent, name=name, builder=builder)


@attrs.define(eq=False, repr=False, init=False)
class Variable(Collection):
    """A loop variable: a collection of a loop scope whose next round is what it is ``set`` to.

    A ``Variable`` *is* a :class:`~deltaflow.operators.collection.Collection` (use ``map``,
    ``concat``, ... on it directly). Two forms:

    * ``Variable(scope, limit=None)`` starts empty: round 0 holds nothing and round ``i + 1``
      holds what the variable was ``set`` to at round ``i``.
    * ``Variable.from_collection(source, limit=None)`` starts as ``source`` (a collection of the
      loop scope, or of an enclosing one with ``scope=`` given): round ``i + 1`` holds what it
      was set to at round ``i``. It exposes ``feedback + source`` and feeds back
      ``result - source``, so only changes circulate.

    ``set(result)`` closes the loop; it must be called exactly once. Several variables in one
    scope give mutual recursion. Numbers reachable from 0 by steps of one, split by parity:

    >>> import deltaflow as df
    >>> class Parity(df.Pipeline):
    ...     def build(self, roots):
    ...         with loop_scope(roots, "parity") as scope:
    ...             even, odd = Variable(scope), Variable(scope)
    ...             succ = lambda c: c.map(lambda n: n + 1).filter(lambda n: n <= 5)
    ...             even_next = roots.concat(succ(odd)).consolidate()
    ...             odd_next = succ(even).consolidate()
    ...             even.set(even_next)
    ...             odd.set(odd_next)
    ...         return {"even": even_next.leave(), "odd": odd_next.leave()}
    >>> out = df.run(Parity(), roots=[(0, 0, 1)])
    >>> [d for d, _, _ in out["even"]], [d for d, _, _ in out["odd"]]
    ([0, 2, 4], [1, 3, 5])

    Attributes:
        limit: rounds at or beyond it are dropped by the feedback (``None``: no limit).
        source: the starting collection of the ``from_collection`` form, else ``None``.
        feedback_node: the index of the feedback node in the dataflow graph.
        created_at: ``file:line`` of the user code that created the variable.
    """

    limit: int | None
    source: Collection | None
    feedback_node: int
    created_at: str
    _result: Collection | None

    def __init__(
        self, scope: LoopScope, limit: int | None = None, *, source: Collection | None = None
    ) -> None:
        raw: object = scope
        if not isinstance(raw, LoopScope):
            msg = (
                f"a Variable lives in a loop scope made by loop_scope(...), not in {scope!r}; "
                "the top scope cannot hold loop variables"
            )
            raise TypeError(msg)
        builder = scope.builder
        limit = _check_limit(limit)
        created_at = _user_site()
        node = builder.spec.add_node(
            f"feedback:{scope.name}",
            factory=lambda _w, _n: FeedbackOperator(limit, f"feedback:{scope.name}"),
            inputs=[],
            outputs=1,
            summaries={(0, 0): PathSummary.feedback()},
            depth=scope.depth,
            traits=NodeTraits(variable=self),
        )
        exposed = Collection(builder, node, 0, scope)
        if source is not None:
            source = _as_collection(source, "a Variable's source")
            if source.builder is not builder:
                msg = "the variable's source belongs to another pipeline (or job)"
                raise ValueError(msg)
            source = _into_scope(source, scope, "a Variable's source")
            exposed = exposed.concat(source)
        Collection.__init__(self, builder, exposed.node, exposed.port, scope)
        self.limit = limit
        self.source = source
        self.feedback_node = node
        self.created_at = created_at
        self._result = None
        scope.variables.append(self)

    @classmethod
    def from_collection(
        cls, source: Collection, limit: int | None = None, *, scope: LoopScope | None = None
    ) -> Variable:
        """A variable that starts (round 0) as ``source``; see the class docstring.

        Args:
            source: the round-0 value: a collection of ``scope`` or of an enclosing scope.
            limit: rounds at or beyond it are dropped (``None``: no limit).
            scope: the loop scope; defaults to ``source``'s own (which must be a loop scope).

        Raises:
            TypeError: no loop scope is given and ``source`` is not in one.
            ValueError: ``source`` is from a scope nested in ``scope`` (leave it first).
        """
        if scope is None:
            source = _as_collection(source, "a Variable's source")
            if not isinstance(source.scope, LoopScope):
                msg = (
                    f"{source!r} is not in a loop scope: pass scope=loop_scope(...) to "
                    "Variable.from_collection"
                )
                raise TypeError(msg)
            scope = source.scope
        return cls(scope, limit, source=source)

    @property
    def is_set(self) -> bool:
        """True once :meth:`set` has connected the feedback."""
        return self._result is not None

    @property
    def result(self) -> Collection | None:
        """What the variable was set to (in its scope), or ``None`` before :meth:`set`."""
        return self._result

    def set(self, result: Collection) -> Collection:
        """Close the loop: round ``i + 1`` of the variable holds ``result`` at round ``i``.

        ``result`` may be a collection of the variable's scope or of an enclosing one.

        Returns:
            ``result`` as a collection of the variable's scope (``.leave()`` it for the fixed
            point outside the loop).

        Raises:
            ValueError: the variable was already set, or ``result`` is from another pipeline or
                from a scope nested in (or beside) the variable's.
            TypeError: ``result`` is not a collection.
        """
        if self._result is not None:
            msg = f"{self!r} was already set; a Variable is set exactly once"
            raise ValueError(msg)
        result = _as_collection(result, "the value a Variable is set to")
        if result.builder is not self.builder:
            msg = "Variable.set(): the result belongs to another pipeline (or job)"
            raise ValueError(msg)
        if self._left_loop(result):
            msg = (
                f"{self!r} is set to a collection that was computed in its loop and then left "
                "it (.leave()): set it to the collection inside the loop (the set variable's "
                ".leave() gives the fixed point outside)"
            )
            raise ValueError(msg)
        aligned = _into_scope(result, self.scope, "the value a Variable is set to")
        back = aligned if self.source is None else aligned.concat(self.source.negate())
        # A value that depends on the variable along a path without a consolidating operator
        # could send equal updates of opposite signs round the loop for ever.
        if self.limit is None and self._reaches_feedback(aligned.node, past_consolidation=False):
            back = back.consolidate()
        self.builder.spec.set_input(self.feedback_node, 0, Edge(back.node, back.port))
        self._result = aligned
        return aligned

    def _left_loop(self, result: Collection) -> bool:
        """Whether ``result`` is a collection of an enclosing scope computed from this
        variable: it left the loop (``.leave()``), and cannot be fed back into it."""
        if result.builder is not self.builder or result.scope not in self.scope.ancestors()[1:]:
            return False
        return self._reaches_feedback(result.node, past_consolidation=True)

    def _reaches_feedback(self, node: int, *, past_consolidation: bool) -> bool:
        """Whether walking the graph back from ``node`` reaches this variable's feedback node
        (not through consolidating operators unless ``past_consolidation``).

        Runtime complexity: O(nodes + edges) of the graph built so far.
        """
        nodes = self.builder.spec.nodes
        seen = {node}
        stack = [node]
        while stack:
            n = stack.pop()
            if n == self.feedback_node:
                return True
            if not past_consolidation and nodes[n].traits.consolidates:
                continue
            for edge in nodes[n].inputs:
                if edge.node >= 0 and edge.node not in seen:
                    seen.add(edge.node)
                    stack.append(edge.node)
        return False

    def _check(self) -> None:
        """Assert the wiring: feedback node in the scope, connected iff set, source aligned."""
        spec = self.builder.spec
        node = spec.nodes[self.feedback_node]
        assert node.traits.variable is self
        assert node.depth == self.scope.depth
        assert node.summaries == {(0, 0): PathSummary.feedback()}
        assert (len(node.inputs) == 1) == self.is_set
        if self.source is None:
            assert (self.node, self.port) == (self.feedback_node, 0)
        else:
            assert self.source.scope is self.scope
            exposed = spec.nodes[self.node].inputs
            assert [(e.node, e.port) for e in exposed] == [
                (self.feedback_node, 0),
                (self.source.node, self.source.port),
            ]

    def __repr__(self) -> str:
        state = "set" if self.is_set else "not set"
        return (
            f"<Variable in scope {self.scope.name!r} (depth {self.scope.depth}) created at "
            f"{self.created_at}, {state}>"
        )


def _into_scope(collection: Collection, scope: Scope, what: str) -> Collection:
    """``collection`` seen from ``scope``: entered if it is from an enclosing scope."""
    if collection.scope is scope:
        return collection
    if scope in collection.scope.ancestors():
        msg = (
            f"{what} is a collection of scope {collection.scope.describe()} (depth "
            f"{collection.scope.depth}), nested inside scope {scope.describe()} (depth "
            f"{scope.depth}): call .leave() on it first"
        )
        raise ValueError(msg)
    if collection.scope not in scope.ancestors():
        msg = (
            f"{what} is a collection of scope {collection.scope.describe()}, which does not "
            f"enclose scope {scope.describe()}: a loop's collections can only be used inside "
            "it, and reach the outside through .leave()"
        )
        raise ValueError(msg)
    return collection.enter_scope(scope)


def iterate(
    collection: Collection,
    step: Callable[[Collection], Collection],
    limit: int | None = None,
) -> Collection:
    """The fixed point of ``step`` starting from ``collection``, at every time.

    Opens a loop scope, where the variable ``x`` starts as ``collection`` (round 0) and
    ``x[i + 1] = step(x[i])``. Collections of enclosing scopes used inside ``step`` are entered
    automatically; ``step`` may itself call ``iterate``. The loop nests in ``collection``'s
    scope, or, when it is started inside the step of another loop, in that loop (whatever
    scope ``collection`` comes from: it enters the loop).

    Args:
        collection: the starting value.
        step: builds the loop body from the variable; returns a collection of the loop scope
            (or of an enclosing one). A path from the variable with no reduction or
            ``consolidate`` on it makes the loop consolidate before its feedback (module
            docstring).
        limit: apply ``step`` at most ``limit`` times (``None``: until nothing changes).

    Returns:
        The result in the scope the loop nests in: ``step``'s output accumulated over all
        rounds.

    Raises:
        TypeError: ``step`` did not return a collection.
        ValueError: ``step`` returned a collection of a nested or unrelated scope.

    >>> import deltaflow as df
    >>> class Halve(df.Pipeline):
    ...     def build(self, xs):
    ...         return iterate(xs, lambda x: x.map(lambda n: n // 2).consolidate(), limit=2)
    >>> df.run(Halve(), xs=[(12, 0, 1), (12, 1, -1)])
    [(3, 0, 1), (3, 1, -1)]
    """
    collection = _as_collection(collection, "the argument of iterate()")
    check_function("iterate", "step", step, 1)
    builder = collection.builder
    parent = builder.loop_parent(collection.scope, "iterate()")
    scope = LoopScope(parent=parent, name="iterate", builder=builder)
    variable = Variable.from_collection(collection.enter_scope(scope), limit)
    with builder.building(scope):
        result = _as_collection(step(variable), "what the step of iterate() returns")
    if result.builder is not collection.builder:
        msg = "the step of iterate() returned a collection of another pipeline (or job)"
        raise ValueError(msg)
    if variable._left_loop(result):
        msg = (
            "the step of iterate() returned a collection computed in the loop that then left "
            "it (.leave()): return the collection inside the loop (iterate() leaves the loop "
            "itself)"
        )
        raise ValueError(msg)
    return variable.set(result).leave()


def _raise_unset(unset: list[Variable]) -> None:
    if unset:
        where = ", ".join(v.created_at for v in unset)
        msg = (
            f"{len(unset)} loop Variable(s) never set (created at {where}): call "
            "variable.set(result) to close each loop"
        )
        raise ValueError(msg)


def check_variables_set(builder: DataflowBuilder) -> None:
    """Raise if a :class:`Variable` of ``builder``'s graph was never ``set``.

    Meant for the end of ``Pipeline.instantiate``: an unset variable is a loop whose feedback
    input was never connected.

    Raises:
        ValueError: naming where each unset variable was created.

    >>> from deltaflow.operators.builder import DataflowBuilder
    >>> builder = DataflowBuilder()
    >>> v = Variable(loop_scope(builder.new_input("xs")))
    >>> check_variables_set(builder)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
      ...
    ValueError: 1 loop Variable(s) never set (created at ...
    >>> _ = v.set(v.consolidate()); check_variables_set(builder)
    """
    unset: list[Variable] = []
    for node in builder.spec.nodes:
        variable = node.traits.variable
        if variable is not None and not variable.is_set:
            unset.append(variable)
    _raise_unset(unset)
