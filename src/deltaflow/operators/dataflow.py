"""The description of a dataflow graph, before anything runs.

Building a pipeline (``Pipeline.build``) records :class:`NodeSpec` entries in a
:class:`DataflowSpec`: which operator each node runs (a factory, called once per worker), which
upstream output ports feed each of its inputs and how updates are routed there (a
:class:`Pact`), and how times change from each input to each output (path summaries, for the
progress tracker). The scheduler turns one spec into one set of actors per worker.

The description is pure data: building it runs no user code and starts nothing.

    >>> spec = DataflowSpec()
    >>> a = spec.add_node("input", factory=lambda w, n: None, inputs=[], outputs=1)
    >>> b = spec.add_node("map", factory=lambda w, n: None, inputs=[Edge(a, 0)], outputs=1)
    >>> [n.name for n in spec.nodes], spec.consumers(a, 0)
    (['input', 'map'], [(1, 0)])
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ..framework.summary import PathSummary
from ..framework.time_domain import TimeDomain, domain_for_depth
from .base import is_pair

if TYPE_CHECKING:
    from .arrange import TraceRegistry
    from .delta.index import IndexRegistry
    from .delta.lookup import Tally
    from .iterate import Variable
    from .linear import Step
    from .scope import Scope
    from .windows.specs import LateRows

__all__ = ["DataflowSpec", "Edge", "NodeSpec", "NodeTraits", "Pact", "identity_key", "pair_key"]


def identity_key(datum: Any) -> Any:
    """The exchange key of a datum that is its own key (``arrange_by_self``, ``distinct``):
    the exchange recognises it and routes the data without calling it."""
    return datum


def pair_key(pair: Any) -> Any:
    """The exchange key of a ``(key, value)`` pair (``arrange_by_key`` and what reads it): the
    exchange recognises it and reads a batch's keys in one pass.

    >>> pair_key((1, "a"))
    1
    """
    if (pair.__class__ is tuple and len(pair) == 2) or is_pair(pair):
        return pair[0]
    msg = f"arrange_by_key: expected (key, value) pairs, got {pair!r}"
    raise TypeError(msg)


@attrs.frozen
class Pact:
    """How updates travel along an edge: kept on the sending worker, or exchanged by key.

    ``key is None`` means *pipeline*: each worker's output goes to the same worker's input.
    Otherwise every update ``d`` goes to the worker ``stable_hash(key(d)) % workers``.
    """

    key: Callable[[Any], Hashable] | None = None

    @property
    def is_exchange(self) -> bool:
        """True when updates are routed between workers by key."""
        return self.key is not None


PIPELINE = Pact()


@attrs.frozen
class Edge:
    """An input of a node: the upstream ``(node, output port)`` and the routing pact."""

    node: int
    port: int
    pact: Pact = PIPELINE


@attrs.frozen
class NodeTraits:
    """What the planner, the loop checks and the statistics know of a node beyond its wiring.

    Every field has a neutral default, so a node states only what applies to it:

        >>> NodeTraits(union=True).consolidates
        False

    Attributes:
        scope: the scope the node was built in (pictures of the graph group a loop's
            operators by it); ``None`` for nodes added outside a collection.
        steps: the linear steps a fusable node runs, which the planner chains into one actor.
        union: a ``concat``, which the planner may dissolve into its single consumer.
        consolidates: the node's output holds exact corrections (updates that cancel never
            leave it), so a loop through it needs no other consolidation.
        arrangement: the trace an ``arrange`` node maintains (its readers, its spines).
        index: the index a delta query's ``index`` node maintains.
        tally: the counters of a delta rule's node, summed by ``Job.statistics()``.
        late: the late updates a window operator with a ``retention`` did not apply (this
            process's; ``Job.statistics()["late"]``).
        variable: the loop variable whose feedback node this is.
    """

    scope: Scope | None = None
    steps: tuple[Step, ...] = ()
    union: bool = False
    consolidates: bool = False
    arrangement: TraceRegistry | None = None
    index: IndexRegistry | None = None
    tally: Tally | None = None
    late: LateRows | None = None
    variable: Variable | None = None


NO_TRAITS = NodeTraits()


@attrs.define
class NodeSpec:
    """One operator in the graph.

    Attributes:
        name: shown in errors and statistics (``"map"``, ``"count"``, ...).
        factory: called once per worker to create the operator instance.
        inputs: one :class:`Edge` per input port.
        outputs: number of output ports.
        summaries: ``(input, output) -> PathSummary``; ``None`` means every input reaches
            every output unchanged (identity). A pair missing from an explicit mapping means
            the input does not reach that output.
        depth: how many iteration scopes the node sits in (its times have this many
            :class:`~deltaflow.framework.lattice.Product` levels).
        fusable: a stateless linear operator that may be fused with its single consumer.
        traits: what the planner and the statistics know of the node (see
            :class:`NodeTraits`).
    """

    name: str
    factory: Callable[[int, int], Any]
    inputs: list[Edge]
    outputs: int
    summaries: Mapping[tuple[int, int], PathSummary] | None = None
    depth: int = 0
    fusable: bool = False
    traits: NodeTraits = NO_TRAITS

    @property
    def domain(self) -> TimeDomain:
        """The shape of the node's times, chosen from its depth."""
        return domain_for_depth(self.depth)


@attrs.define
class DataflowSpec:
    """A graph of :class:`NodeSpec` under construction (nodes are numbered in creation order)."""

    nodes: list[NodeSpec] = attrs.field(factory=list)

    def add_node(
        self,
        name: str,
        *,
        factory: Callable[[int, int], Any],
        inputs: list[Edge],
        outputs: int,
        summaries: Mapping[tuple[int, int], PathSummary] | None = None,
        depth: int = 0,
        fusable: bool = False,
        traits: NodeTraits = NO_TRAITS,
    ) -> int:
        """Append a node and return its index."""
        for edge in inputs:
            if not 0 <= edge.node < len(self.nodes):
                msg = f"node {name!r}: input from unknown node {edge.node}"
                raise ValueError(msg)
        self.nodes.append(
            NodeSpec(name, factory, list(inputs), outputs, summaries, depth, fusable, traits)
        )
        return len(self.nodes) - 1

    def set_input(self, node: int, port: int, edge: Edge) -> None:
        """Connect (or reconnect) an input port; used to close loops after the fact."""
        inputs = self.nodes[node].inputs
        while len(inputs) <= port:
            inputs.append(Edge(-1, -1))
        inputs[port] = edge

    def consumers(self, node: int, port: int) -> list[tuple[int, int]]:
        """The ``(node, input port)`` pairs fed by ``(node, port)``."""
        return [
            (i, p)
            for i, spec in enumerate(self.nodes)
            for p, edge in enumerate(spec.inputs)
            if edge.node == node and edge.port == port
        ]
