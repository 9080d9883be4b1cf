"""From the graph a pipeline described to the graph that runs: fusion and progress wiring.

Chains of stateless linear operators (``map``, ``filter``, ``flat_map``, ...) whose
intermediate results feed exactly one consumer on the same worker become one actor: a batch
then crosses the whole chain in one activation instead of one actor switch per step.

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

from ..framework.progress import GraphBuilder, ProgressGraph
from ..framework.summary import PathSummary
from ..operators.dataflow import DataflowSpec, Edge
from ..operators.inlet import Inlet
from ..operators.linear import LinearOperator, Step

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
    consumers: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for i, n in enumerate(nodes):
        for p, e in enumerate(n.inputs):
            consumers.setdefault((e.node, e.port), []).append((i, p))

    # absorbed[i] = the logical node that i's steps were fused into (its single consumer).
    absorbed: dict[int, int] = {}
    steps_of: dict[int, list[Step]] = {
        i: list(n.traits.steps) for i, n in enumerate(nodes) if n.fusable
    }
    source_of: dict[int, Edge] = {}
    # The logical edges a dissolved union stands for, by node (see the module docstring).
    unions: dict[int, list[Edge]] = {}
    # inlets[i] = {port: j}: arrangement j is absorbed into its only reader i (an inlet), with
    # the linear chain ending at chain_of[j] if there is one; inlet_of[x] = i for both.
    inlets: dict[int, dict[int, int]] = {}
    chain_of: dict[int, int] = {}
    inlet_of: dict[int, int] = {}
    if fuse:
        for i, n in enumerate(nodes):
            if n.traits.union and len(consumers.get((i, 0), [])) == 1:
                # Inputs come from earlier nodes, so their own unions are decided already.
                edges = [x for e in n.inputs for x in _expand(e, unions)]
                if len({(e.node, e.port) for e in edges}) == len(edges):
                    unions[i] = edges
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
                absorbed[up] = i
                source_of[i] = source_of.get(up, nodes[up].inputs[0])
        for j, n in enumerate(nodes):
            registry = n.traits.arrangement
            users = consumers.get((j, 0), [])
            if registry is None or registry.readers > 1 or len(users) != 1:
                continue
            i, port = users[0]
            if i in absorbed or i in unions or nodes[i].depth != n.depth:
                continue
            # No operator reads the trace (a join that is the only reader keeps its own
            # history), so the arrangement only consolidates what its reader gets.
            inlets.setdefault(i, {})[port] = j
            inlet_of[j] = i
            edge = n.inputs[0]
            up = edge.node
            if (
                workers == 1
                and up in steps_of
                and up not in absorbed
                and len(consumers.get((up, edge.port), [])) == 1
                and nodes[up].depth == n.depth
            ):
                chain_of[j] = up
                inlet_of[up] = i

    physical_of: dict[int, int] = {}
    order = [
        i for i in range(len(nodes)) if i not in absorbed and i not in unions and i not in inlet_of
    ]
    for phys, i in enumerate(order):
        physical_of[i] = phys

    def owner(node: int) -> int:
        """The logical node whose actor runs ``node``."""
        while node in absorbed:
            node = absorbed[node]
        return inlet_of.get(node, node)

    def resolve(node: int) -> int:
        return physical_of[owner(node)]

    physical: list[PhysicalNode] = []
    for i in order:
        n = nodes[i]
        logical_inputs = [source_of[i]] if i in source_of else list(n.inputs)
        ports = inlets.get(i, {})
        for port, j in ports.items():
            if j in chain_of:
                tail = chain_of[j]
                logical_inputs[port] = source_of.get(tail, nodes[tail].inputs[0])
            else:
                logical_inputs[port] = nodes[j].inputs[0]
        inputs = [
            [
                Edge(resolve(x.node), x.port, x.pact) if x.node >= 0 else x
                for x in _expand(e, unions)
            ]
            for e in logical_inputs
        ]
        factory = n.factory
        name = n.name
        logical = [j for j in range(len(nodes)) if j not in unions and owner(j) == i]
        if i in source_of:
            steps = steps_of[i]
            name = " -> ".join(s.label for s in steps)

            def factory(_w: int, _n: int, steps: list[Step] = steps, name: str = name) -> Any:
                return LinearOperator(steps, name)

        node_inlets = {
            port: InletSpec(nodes[j].factory, steps_of[chain_of[j]] if j in chain_of else [])
            for port, j in ports.items()
        }
        physical.append(
            PhysicalNode(
                name, factory, inputs, n.outputs, n.summaries, n.depth, logical, node_inlets
            )
        )

    builder = GraphBuilder()
    for pn in physical:
        builder.add_node(pn.name, pn.inputs.__len__(), pn.outputs, pn.summaries)
    for idx, pn in enumerate(physical):
        for port, edges in enumerate(pn.inputs):
            for e in edges:
                if e.node < 0:
                    msg = f"operator {pn.name!r}: input {port} was never connected"
                    raise ValueError(msg)
                builder.add_edge((e.node, e.port), (idx, port))
    progress = builder.build()

    routes: list[list[list[tuple[int, int, Any]]]] = [
        [[] for _ in range(pn.outputs)] for pn in physical
    ]
    for idx, pn in enumerate(physical):
        for port, edges in enumerate(pn.inputs):
            for e in edges:
                routes[e.node][e.port].append((idx, port, e.pact.key))
    return Plan(physical, physical_of, progress, routes)


def _expand(edge: Edge, unions: dict[int, list[Edge]]) -> list[Edge]:
    """``edge``, or the edges into the dissolved union it comes from, routed by ``edge``'s
    pact when that exchanges (it decides where the data go) and by their own otherwise."""
    inner = unions.get(edge.node)
    if inner is None:
        return [edge]
    return [Edge(e.node, e.port, edge.pact if edge.pact.is_exchange else e.pact) for e in inner]
