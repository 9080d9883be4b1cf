"""From the graph a pipeline described to the graph that runs: fusion and progress wiring.

Chains of stateless linear operators (``map``, ``filter``, ``flat_map``, ...) whose
intermediate results feed exactly one consumer on the same worker become one actor: a batch
then crosses the whole chain in one activation instead of one actor switch per step.

A linear chain that reads an operator's output on the same worker (or a dissolved union of
such outputs) runs inside that operator's actor, as an *outlet* of the output port: what the
operator sends on the port goes through the chain's steps once, then on to the chain's
readers (exchanged by their keys), beside the port's other readers, which get it as sent. The
chain is then no actor of its own: no activation, no message and no progress-tracked ports
per batch it transforms; the tracker sees the chain's readers wired to the port itself (a
linear chain moves no time back, so the port's capabilities cover what it sends). This is
what keeps a chain before an exchange (``reach.map(flip).join(...)``) from costing an actor
per batch with several workers, where it cannot be absorbed into the arrangement's inlet as
with one.

A ``concat`` with a single consumer is not an actor at all: its inputs are wired straight into
the consumer's input port, which then has several incoming edges (a port already takes
messages from every worker, so from several upstream ports is no different). Inside a loop
every actor and port on the cycle is visited once per iteration by the scheduler and the
progress tracker, so a union that only forwards costs a share of every iteration; dissolved,
it costs nothing. A union whose inputs would reach the consumer twice along the same edge
(``a.concat(a)``) stays an actor.

An arrangement that keeps no trace and has a single reader (a reduction, a join that keeps
its own history of that side, ``as_collection``) only consolidates what it forwards; it is
absorbed into the reader as an *inlet* of that input port. The port then takes the updates
the arrangement would have received (exchanged by its key), and the reader's actor hands them
to the arrangement's ``forward`` as it drains the port: one actor and two ports less, which
inside a loop is a share of every iteration, and the same batches as before. With a single
worker, exchanges move nothing, so the linear chain feeding such an arrangement is absorbed
into the inlet too (see :mod:`deltaflow.operators.inlet`).

The plan also builds the progress graph (ports, edges, path summaries) and validates it: a
cycle whose times do not strictly increase is rejected here, before anything runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from ...framework.progress import GraphBuilder, ProgressGraph
from ...framework.summary import PathSummary
from ...framework.time_domain import TimeDomain, domain_for_depth
from ...operators.dataflow import DataflowSpec, Edge, NodeSpec
from ...operators.inlet import Inlet
from ...operators.linear import LinearOperator, Step

__all__ = ["InletSpec", "PhysicalNode", "Plan", "make_plan"]


@attrs.define
class PhysicalNode:
    """One actor per worker: the operator factory and its wiring."""

    name: str
    factory: Callable[[int, int], Any]
    #: The edges into each input port (several where a ``concat`` was dissolved into it).
    inputs: list[list[Edge]]
    outputs: int
    summaries: Mapping[tuple[int, int], PathSummary] | None
    depth: int
    logical: list[int]
    #: Per input port, what was absorbed into it as an inlet (see the module docstring).
    inlets: dict[int, InletSpec] = attrs.field(factory=dict)

    @property
    def domain(self) -> TimeDomain:
        """The shape of the actor's times, chosen from its depth."""
        return domain_for_depth(self.depth)


@attrs.frozen
class OutletEdge(Edge):
    """An edge whose data pass through an outlet's ``steps`` (a linear chain run by the
    sending actor) before they are routed by the pact."""

    steps: tuple[Step, ...] = ()


@attrs.frozen
class InletSpec:
    """An arrangement absorbed into a port of its only reader, with the linear steps before it.

    On each worker ``arrange`` is called (registering the arrangement's spine) before the
    reader's own factory, and the port's actor runs an :class:`~deltaflow.operators.inlet.Inlet`.
    """

    arrange: Callable[[int, int], Any]
    steps: list[Step] = attrs.field(factory=list)

    def build(self, worker: int, peers: int) -> Inlet:
        """The inlet of one worker."""
        steps = LinearOperator(self.steps) if self.steps else None
        return Inlet(self.arrange(worker, peers), steps)


@attrs.define
class Plan:
    """The physical graph, the logical-to-physical node map, and the progress graph."""

    nodes: list[PhysicalNode]
    physical_of: dict[int, int]
    progress: ProgressGraph
    routes: list[list[list[tuple[int, int, Any]]]]
    #: Per actor and output port, its outlets: each chain's steps and the routes of what
    #: they make (the ``routes`` of the port get what the actor sends, as it is).
    outlets: list[list[list[tuple[tuple[Step, ...], list[tuple[int, int, Any]]]]]]

    def summary(self, node: int, inp: int, out: int) -> PathSummary | None:
        """The internal summary from input ``inp`` to output ``out`` (None: not connected)."""
        s = self.nodes[node].summaries
        if s is None:
            return PathSummary.identity()
        return s.get((inp, out))


def make_plan(spec: DataflowSpec, *, fuse: bool = True, workers: int | None = None) -> Plan:
    """Fuse linear chains, dissolve unions, absorb inlets, number the actors, build and
    validate the progress graph (``fuse=False``: one actor per node, as described).

    ``workers``: how many workers will run the plan. With exactly one, exchanges move nothing,
    so a linear chain feeding an inlet's arrangement is absorbed into the inlet too.
    """
    nodes = spec.nodes
    consumers = _consumers(nodes)
    merged = _Merged(steps_of={i: list(n.traits.steps) for i, n in enumerate(nodes) if n.fusable})
    if fuse:
        _dissolve_unions(nodes, consumers, merged)
        _fuse_chains(nodes, consumers, merged)
        _absorb_inlets(nodes, consumers, merged, workers)
        _absorb_outlets(nodes, consumers, merged)
    physical, physical_of = _physical_nodes(nodes, merged)
    routes, outlets = _routes(physical)
    return Plan(physical, physical_of, _progress_graph(physical), routes, outlets)


@attrs.define
class _Merged:
    """Which logical nodes the passes of :func:`make_plan` merged into which.

    Attributes:
        steps_of: the linear steps of each fusable node, its fused predecessors' included.
        absorbed: ``absorbed[i]`` is the node that ``i``'s steps were fused into (its single
            consumer).
        source_of: the input edge of a fused chain's first node, by the chain's last node.
        unions: the logical edges a dissolved union stands for, by node.
        inlets: ``inlets[i] = {port: j}``: arrangement ``j`` is absorbed into its only reader
            ``i``, with the linear chain ending at ``chain_of[j]`` if there is one.
        chain_of: see ``inlets``.
        inlet_of: ``inlet_of[x] = i`` for an absorbed arrangement and its chain.
        outlet_of: ``outlet_of[x] = [(u, p), ...]``: the linear chain ending at ``x`` runs
            as an outlet of output ``p`` of each node ``u``.
    """

    steps_of: dict[int, list[Step]]
    absorbed: dict[int, int] = attrs.field(factory=dict)
    source_of: dict[int, Edge] = attrs.field(factory=dict)
    unions: dict[int, list[Edge]] = attrs.field(factory=dict)
    inlets: dict[int, dict[int, int]] = attrs.field(factory=dict)
    chain_of: dict[int, int] = attrs.field(factory=dict)
    inlet_of: dict[int, int] = attrs.field(factory=dict)
    outlet_of: dict[int, list[tuple[int, int]]] = attrs.field(factory=dict)

    def owner(self, node: int) -> int:
        """The logical node whose actor runs ``node`` (for a chain run as outlets, the
        actor of the first of them)."""
        while node in self.absorbed:
            node = self.absorbed[node]
        if node in self.outlet_of:
            return self.owner(self.outlet_of[node][0][0])
        return self.inlet_of.get(node, node)

    def is_kept(self, node: int) -> bool:
        """True when ``node`` runs as an actor of its own."""
        return (
            node not in self.absorbed
            and node not in self.unions
            and node not in self.inlet_of
            and node not in self.outlet_of
        )


_Consumers = dict[tuple[int, int], list[tuple[int, int]]]


def _consumers(nodes: list[NodeSpec]) -> _Consumers:
    """The ``(node, input port)`` pairs fed by each ``(node, output port)``: what every pass
    asks before merging a node into its reader."""
    consumers: _Consumers = {}
    for i, n in enumerate(nodes):
        for p, e in enumerate(n.inputs):
            consumers.setdefault((e.node, e.port), []).append((i, p))
    return consumers


def _dissolve_unions(nodes: list[NodeSpec], consumers: _Consumers, merged: _Merged) -> None:
    """Wire the inputs of each ``concat`` with a single consumer straight into that consumer.

    A union that only forwards costs an actor switch (inside a loop, on every iteration);
    dissolved, it costs nothing. One whose inputs would reach the consumer twice along the
    same edge (``a.concat(a)``) stays an actor.
    """
    for i, n in enumerate(nodes):
        if n.traits.union and len(consumers.get((i, 0), [])) == 1:
            # Inputs come from earlier nodes, so their own unions are decided already.
            edges = [x for e in n.inputs for x in _expand(e, merged.unions)]
            if len({(e.node, e.port) for e in edges}) == len(edges):
                merged.unions[i] = edges


def _fuse_chains(nodes: list[NodeSpec], consumers: _Consumers, merged: _Merged) -> None:
    """Fuse each linear node into its single linear consumer on the same worker and scope,
    so a batch crosses the whole chain in one activation."""
    steps_of = merged.steps_of
    for i, n in enumerate(nodes):
        if not n.fusable or len(n.inputs) != 1:
            continue
        edge = n.inputs[0]
        up = edge.node
        if (
            up in steps_of
            and not edge.pact.is_exchange
            and len(consumers.get((up, edge.port), [])) == 1
            and nodes[up].depth == n.depth
        ):
            steps_of[i] = steps_of[up] + steps_of[i]
            merged.absorbed[up] = i
            merged.source_of[i] = merged.source_of.get(up, nodes[up].inputs[0])


def _absorb_inlets(
    nodes: list[NodeSpec], consumers: _Consumers, merged: _Merged, workers: int | None
) -> None:
    """Absorb each arrangement that keeps no trace into its only reader as an inlet of that
    port (one actor and two ports less); with one worker, the linear chain before it too."""
    for j, n in enumerate(nodes):
        registry = n.traits.arrangement
        users = consumers.get((j, 0), [])
        if registry is None or registry.readers > 1 or len(users) != 1:
            continue
        i, port = users[0]
        if i in merged.absorbed or i in merged.unions or nodes[i].depth != n.depth:
            continue
        # No operator reads the trace (a join that is the only reader keeps its own
        # history), so the arrangement only consolidates what its reader gets.
        merged.inlets.setdefault(i, {})[port] = j
        merged.inlet_of[j] = i
        edge = n.inputs[0]
        up = edge.node
        if (
            workers == 1
            and up in merged.steps_of
            and up not in merged.absorbed
            and len(consumers.get((up, edge.port), [])) == 1
            and nodes[up].depth == n.depth
        ):
            merged.chain_of[j] = up
            merged.inlet_of[up] = i


def _absorb_outlets(nodes: list[NodeSpec], consumers: _Consumers, merged: _Merged) -> None:
    """Run each linear chain that would be an actor of its own, and reads on the same worker
    and scope the output of an actor (or a dissolved union of such outputs), as an outlet of
    each of those outputs."""
    for i in range(len(nodes)):
        if i not in merged.steps_of or not merged.is_kept(i) or len(nodes[i].inputs) != 1:
            continue
        edge = merged.source_of.get(i, nodes[i].inputs[0])
        sources = _expand(edge, merged.unions)
        depth = nodes[i].depth
        if all(
            e.node >= 0
            and e.node != i  # a chain feeding itself is a cycle: the progress graph judges it
            and not e.pact.is_exchange
            and merged.is_kept(e.node)
            and nodes[e.node].depth == depth
            for e in sources
        ):
            merged.outlet_of[i] = [(e.node, e.port) for e in sources]


def _physical_nodes(
    nodes: list[NodeSpec], merged: _Merged
) -> tuple[list[PhysicalNode], dict[int, int]]:
    """Number the nodes that remain actors, in logical order, and wire each one's ports to
    the actors that now run its inputs: ``(physical nodes, logical-to-physical map)``."""
    order = [i for i in range(len(nodes)) if merged.is_kept(i)]
    physical_of = {i: phys for phys, i in enumerate(order)}
    physical = [_physical_node(nodes, merged, physical_of, i) for i in order]
    return physical, physical_of


def _physical_node(
    nodes: list[NodeSpec], merged: _Merged, physical_of: dict[int, int], i: int
) -> PhysicalNode:
    """The actor of logical node ``i``: its (fused) operator, inputs, inlets and members."""
    n = nodes[i]
    source_of, chain_of, steps_of = merged.source_of, merged.chain_of, merged.steps_of
    logical_inputs = [source_of[i]] if i in source_of else list(n.inputs)
    ports = merged.inlets.get(i, {})
    for port, j in ports.items():
        if j in chain_of:
            tail = chain_of[j]
            logical_inputs[port] = source_of.get(tail, nodes[tail].inputs[0])
        else:
            logical_inputs[port] = nodes[j].inputs[0]
    inputs = [[_physical_edge(x, merged, physical_of) for x in _expand_outlets(e, merged)]
              for e in logical_inputs]  # fmt: skip
    factory = n.factory
    name = n.name
    logical = [
        j
        for j in range(len(nodes))
        if j not in merged.unions
        and (merged.owner(j) == i or any(u == i for u, _ in merged.outlet_of.get(j, ())))
    ]
    if i in source_of:
        steps = steps_of[i]
        name = " -> ".join(s.label for s in steps)

        def factory(_w: int, _n: int, steps: list[Step] = steps, name: str = name) -> Any:
            return LinearOperator(steps, name)

    node_inlets = {
        port: InletSpec(nodes[j].factory, steps_of[chain_of[j]] if j in chain_of else [])
        for port, j in ports.items()
    }
    return PhysicalNode(
        name, factory, inputs, n.outputs, n.summaries, n.depth, logical, node_inlets
    )


def _expand_outlets(edge: Edge, merged: _Merged) -> list[Edge]:
    """The logical edges ``edge`` stands for once unions are dissolved and chains run as
    outlets: from a chain run as outlets, one from each output running it, with its steps."""
    out: list[Edge] = []
    for e in _expand(edge, merged.unions):
        ups = merged.outlet_of.get(e.node)
        if ups is None:
            out.append(e)
        else:
            steps = tuple(merged.steps_of[e.node])
            out += [OutletEdge(u, p, e.pact, steps) for u, p in ups]
    return out


def _physical_edge(edge: Edge, merged: _Merged, physical_of: dict[int, int]) -> Edge:
    """``edge`` with its source numbered as the actor that runs it."""
    if edge.node < 0:
        return edge
    node = physical_of[merged.owner(edge.node)]
    if isinstance(edge, OutletEdge):
        return OutletEdge(node, edge.port, edge.pact, edge.steps)
    return Edge(node, edge.port, edge.pact)


def _progress_graph(physical: list[PhysicalNode]) -> ProgressGraph:
    """The progress tracker's graph of the actors' ports, validated: an input never
    connected, or a cycle whose times do not strictly increase, is rejected before anything
    runs."""
    builder = GraphBuilder()
    for pn in physical:
        builder.add_node(pn.name, len(pn.inputs), pn.outputs, pn.summaries, pn.depth)
    for idx, pn in enumerate(physical):
        added = set()
        for port, edges in enumerate(pn.inputs):
            for e in edges:
                if e.node < 0:
                    msg = f"operator {pn.name!r}: input {port} was never connected"
                    raise ValueError(msg)
                # Two chains run as outlets of one port may feed one input: one edge says
                # all the tracker needs (data reach the input both ways).
                if (e.node, e.port, port) not in added:
                    added.add((e.node, e.port, port))
                    builder.add_edge((e.node, e.port), (idx, port))
    return builder.build()


Routes = list[list[list[tuple[int, int, Any]]]]
Outlets = list[list[list[tuple[tuple[Step, ...], list[tuple[int, int, Any]]]]]]


def _routes(physical: list[PhysicalNode]) -> tuple[Routes, Outlets]:
    """Per actor and output port, the ``(actor, input port, exchange key)`` it sends to, and
    its outlets' steps with theirs: the edges turned around, for the workers' send side."""
    routes: Routes = [[[] for _ in range(pn.outputs)] for pn in physical]
    outlets: Outlets = [[[] for _ in range(pn.outputs)] for pn in physical]
    for idx, pn in enumerate(physical):
        for port, edges in enumerate(pn.inputs):
            for e in edges:
                route = (idx, port, e.pact.key)
                if not isinstance(e, OutletEdge):
                    routes[e.node][e.port].append(route)
                    continue
                chains = outlets[e.node][e.port]
                for steps, chain_routes in chains:
                    if steps == e.steps:
                        chain_routes.append(route)
                        break
                else:
                    chains.append((e.steps, [route]))
    return routes, outlets


def _expand(edge: Edge, unions: dict[int, list[Edge]]) -> list[Edge]:
    """``edge``, or the edges into the dissolved union it comes from, routed by ``edge``'s
    pact when that exchanges (it decides where the data go) and by their own otherwise."""
    inner = unions.get(edge.node)
    if inner is None:
        return [edge]
    return [Edge(e.node, e.port, edge.pact if edge.pact.is_exchange else e.pact) for e in inner]
