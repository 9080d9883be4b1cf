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
from typing import Any

import attrs

from .summary import PathSummary

__all__ = ["DataflowSpec", "Edge", "NodeSpec", "Pact"]


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
    """

    name: str
    factory: Callable[[int, int], Any]
    inputs: list[Edge]
    outputs: int
    summaries: Mapping[tuple[int, int], PathSummary] | None = None
    depth: int = 0
    fusable: bool = False
    meta: dict[str, Any] = attrs.field(factory=dict)


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
        meta: dict[str, Any] | None = None,
    ) -> int:
        """Append a node and return its index."""
        for edge in inputs:
            if not 0 <= edge.node < len(self.nodes):
                msg = f"node {name!r}: input from unknown node {edge.node}"
                raise ValueError(msg)
        self.nodes.append(
            NodeSpec(name, factory, list(inputs), outputs, summaries, depth, fusable, meta or {})
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
