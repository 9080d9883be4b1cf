"""What a pipeline's ``build()`` records: the :class:`DataflowBuilder` holding the graph,
inputs, outputs and probes of one job, and adding the nodes every collection method asks for.

A :class:`~deltaflow.operators.collection.Collection` names one node of the builder's graph in
one :class:`~deltaflow.operators.scope.Scope`; the scheduler turns the builder into running
actors. The builder is where handles are made: ``Collection``'s methods and the modules that
build operators for them (reductions, windows, delta queries) add nodes through
:meth:`DataflowBuilder.add`, so none of them needs to import the module above it.

    >>> builder = DataflowBuilder(workers=2)
    >>> xs = builder.new_input("xs")
    >>> len(builder.feeds["xs"]), xs.scope is builder.top
    (2, True)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import attrs

from ..framework.antichain import Antichain
from ..framework.summary import PathSummary
from ..framework.trace.spine import Spine
from .arrange import ArrangeOperator, TraceRegistry
from .base import check_function
from .collection import Arranged, Collection
from .dataflow import NO_TRAITS, DataflowSpec, Edge, NodeTraits, Pact, identity_key, pair_key
from .io import InputFeed, InputOperator, OutputOperator, OutputStore, ProbeHandle
from .iterate import iterate
from .linear import LinearOperator, Step
from .scope import Scope, ScopeOperator

__all__ = ["DataflowBuilder", "Scope"]


@attrs.define(eq=False)
class DataflowBuilder:
    """Everything recorded while a pipeline's ``build()`` runs, for one job.

    Holds the graph, the input feeds (one per worker and input), the output stores and the
    probes; the scheduler turns it into running actors.
    """

    workers: int = 1
    spec: DataflowSpec = attrs.field(factory=DataflowSpec)
    feeds: dict[str, list[InputFeed]] = attrs.field(factory=dict)
    stores: dict[str, OutputStore] = attrs.field(factory=dict)
    probes: list[ProbeHandle] = attrs.field(factory=list)
    top: Scope = attrs.field(factory=Scope)
    #: ``build`` returned one collection (the output ``"output"``), not a dict of them.
    single_output: bool = True
    #: Nodes added for how the job is laid out, not by ``build`` (the exchange before each
    #: output of a peer): a checkpoint's description of the pipeline leaves them out.
    layout_nodes: set[int] = attrs.field(factory=set)
    _entered: dict[tuple[int, int, int], Collection] = attrs.field(factory=dict)
    _arranged: dict[tuple[int, int, bool], Arranged] = attrs.field(factory=dict)
    #: The loop scopes whose bodies are being built, outermost first (see :meth:`building`).
    _open: list[Scope] = attrs.field(factory=list)

    @property
    def open_scope(self) -> Scope:
        """The innermost loop scope whose body is being built (the top scope outside any)."""
        return self._open[-1] if self._open else self.top

    def open_body(self, scope: Scope) -> None:
        """Mark ``scope``'s body as being built: loops started meanwhile nest in it."""
        self._open.append(scope)

    def close_body(self, scope: Scope) -> None:
        """``scope``'s body is built (see :meth:`open_body`)."""
        if scope in self._open:
            self._open.remove(scope)

    @contextmanager
    def building(self, scope: Scope) -> Iterator[None]:
        """:meth:`open_body` for the ``with`` block, :meth:`close_body` after it."""
        self.open_body(scope)
        try:
            yield
        finally:
            self.close_body(scope)

    def loop_parent(self, scope: Scope, what: str) -> Scope:
        """The scope a loop started from a collection of ``scope`` nests in.

        A loop started while another loop's body is being built nests in that body, whatever
        the scope of the collection it starts from (the collection enters it); started from a
        collection of a scope nested deeper still, it nests there.

        Raises:
            ValueError: ``scope`` neither encloses the open loop scope nor is nested in it (a
                loop's collection kept and used in another loop).
        """
        current = self.open_scope
        if scope is current or scope in current.ancestors():
            return current
        if current in scope.ancestors():
            return scope
        msg = (
            f"{what} started from a collection of scope {scope.describe()} while building "
            f"the body of scope {current.describe()}: a loop's collections can be used only "
            "inside it (and in loops nested in it); .leave() it to a scope enclosing both"
        )
        raise ValueError(msg)

    def new_input(self, name: str) -> Collection:
        """Add the source node of input ``name``."""
        feeds = [InputFeed() for _ in range(self.workers)]
        self.feeds[name] = feeds
        node = self.spec.add_node(
            f"input:{name}",
            factory=lambda w, _n: InputOperator(name, feeds[w]),
            inputs=[],
            outputs=1,
        )
        return Collection(self, node, 0, self.top)

    def new_output(self, name: str, collection: Collection) -> OutputStore:
        """Add the sink node of output ``name``."""
        if collection.scope is not self.top:
            msg = (
                f"output {name!r} is inside an iteration scope; "
                "call .leave() (or return the result of iterate) instead"
            )
            raise ValueError(msg)
        store = OutputStore(name)
        self.stores[name] = store
        self.spec.add_node(
            f"output:{name}",
            factory=lambda _w, _n: OutputOperator(store),
            inputs=[Edge(collection.node, collection.port)],
            outputs=0,
        )
        return store

    # -- adding nodes: what Collection's methods and the operator builders call ------------
    def add(
        self,
        name: str,
        factory: Callable[[int, int], Any],
        inputs: Sequence[Collection | Arranged],
        *,
        pacts: list[Pact] | None = None,
        outputs: int = 1,
        fusable: bool = False,
        traits: NodeTraits = NO_TRAITS,
        summaries: dict[tuple[int, int], PathSummary] | None = None,
        scope: Scope | None = None,
        align: bool = True,
    ) -> Collection:
        """Add node ``name`` (``factory(worker, workers)`` makes its operator) reading
        ``inputs``, and return its first output as a collection of ``scope``.

        ``scope`` defaults to the first input's; with ``align`` every collection input is
        entered into it first (an arrangement is read where it is: its readers share its
        scope). ``pacts`` routes each input (default: where it is); ``summaries`` gives the
        path summaries of a node that changes times (default: identity).

        >>> from deltaflow.operators.linear import Concat
        >>> builder = DataflowBuilder()
        >>> xs = builder.new_input("xs")
        >>> both = builder.add("concat", lambda _w, _n: Concat(2), [xs, xs])
        >>> builder.spec.nodes[both.node].name, both.scope is builder.top
        ('concat', True)
        """
        target = scope or inputs[0].scope
        edges = []
        for i, given in enumerate(inputs):
            pact = pacts[i] if pacts else Pact()
            if isinstance(given, Arranged):
                edges.append(Edge(given.node, 0, pact))
                continue
            entered = self.enter(given, target) if align else given
            edges.append(Edge(entered.node, entered.port, pact))
        node = self.spec.add_node(
            name,
            factory=factory,
            inputs=edges,
            outputs=outputs,
            summaries=summaries,
            depth=target.depth,
            fusable=fusable,
            # The scope, for pictures of the graph (df.graph groups a loop's operators).
            traits=attrs.evolve(traits, scope=target),
        )
        return Collection(self, node, 0, target)

    def linear(self, collection: Collection, step: Step, role: str = "fn") -> Collection:
        """Add the linear operator applying ``step`` to ``collection`` (``role`` names the
        step's function in the error a function of the wrong arity raises)."""
        if step.kind != "negate":
            check_function(step.kind, role, step.fn, 1)
        steps = [step]
        return self.add(
            step.label,
            lambda _w, _n: LinearOperator(steps),
            [collection],
            fusable=True,
            traits=NodeTraits(steps=tuple(steps)),
        )

    def enter(self, collection: Collection, scope: Scope) -> Collection:
        """``collection`` as seen from ``scope`` (a scope nested in its own, or its own): one
        ``enter`` node per scope crossed, made once per collection and scope.

        Raises:
            ValueError: ``scope`` is not ``collection``'s scope or one nested in it.
        """
        if scope is collection.scope:
            return collection
        chain = scope.ancestors()
        if collection.scope not in chain:
            msg = (
                f"a collection of scope {collection.scope.describe()} cannot be used in scope "
                f"{scope.describe()}: only collections of enclosing scopes enter a loop; "
                ".leave() it to a scope enclosing both, or compute it inside this loop"
            )
            raise ValueError(msg)
        path = chain[: chain.index(collection.scope)]
        current = collection
        for inner in reversed(path):
            key = (current.node, current.port, id(inner))
            cached = self._entered.get(key)
            if cached is None:
                # The enter node's input stays in the outer scope.
                cached = self.add(
                    f"enter:{inner.name}",
                    lambda _w, _n: ScopeOperator("enter"),
                    [current],
                    summaries={(0, 0): PathSummary.enter()},
                    scope=inner,
                    align=False,
                )
                self._entered[key] = cached
            current = cached
        return current

    def arrange(self, collection: Collection, by_self: bool) -> Arranged:
        """``collection`` arranged by key (or ``by_self``): one arrangement per collection and
        kind, shared by every reader (see :class:`~deltaflow.operators.collection.Arranged`)."""
        key = (collection.node, collection.port, by_self)
        cached = self._arranged.get(key)
        if cached is not None:
            return cached
        kind = "arrange_by_self" if by_self else "arrange_by_key"
        registry = TraceRegistry(kind)
        domain = collection.scope.domain
        lower = Antichain([domain.least])

        def factory(w: int, _n: int) -> ArrangeOperator:
            spine = Spine(lower, domain=domain)
            registry.spines[w] = spine
            return ArrangeOperator(kind, spine, by_self)

        node = self.add(
            kind,
            factory,
            [collection],
            pacts=[Pact(identity_key if by_self else pair_key)],
            traits=NodeTraits(arrangement=registry),
        )
        arranged = Arranged(self, node.node, registry, collection.scope, by_self)
        self._arranged[key] = arranged
        return arranged

    def check_same_pipeline(self, other: object) -> None:
        """Raise unless ``other`` is a collection of this builder's pipeline.

        Raises:
            TypeError: ``other`` is not a collection.
            ValueError: ``other`` belongs to another pipeline (or job).
        """
        if not isinstance(other, Collection):
            msg = f"expected a Collection, got {other!r}"
            raise TypeError(msg)
        if other.builder is not self:
            msg = "collections from different pipelines (or jobs) cannot be combined"
            raise ValueError(msg)

    def iterate(
        self,
        collection: Collection,
        step: Callable[[Collection], Collection],
        limit: int | None = None,
    ) -> Collection:
        """:func:`deltaflow.operators.iterate.iterate`: the loop's
        :class:`~deltaflow.operators.iterate.Variable` is a ``Collection``, so
        :meth:`Collection.iterate` reaches the loop through the builder that made it."""
        return iterate(collection, step, limit)
