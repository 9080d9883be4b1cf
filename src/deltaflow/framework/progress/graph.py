"""The dataflow graph as the progress tracker sees it: nodes, ports, edges and summaries.

A :class:`ProgressGraphBuilder` collects nodes (operators, with numbered input and output
ports and a :class:`~deltaflow.framework.summary.PathSummary` per connected (input, output)
pair) and edges (output to input, never changing times), and :meth:`~ProgressGraphBuilder.build`
validates them (:mod:`.validation`) into an immutable :class:`ProgressGraph` whose ports are
numbered densely as *locations*.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from ..summary import PathSummary
from .validation import location_depths, validate

__all__ = ["Arc", "GraphBuilder", "Location", "Port", "ProgressGraph", "ProgressGraphBuilder"]

#: A port of a node: ``(node, port number)``.
Port = tuple[int, int]
#: A successor of a location: ``(location id, summary of the step)``.
Arc = tuple[int, PathSummary]


@attrs.frozen
class Location:
    """A port of a node: an output (``is_source=True``) or an input (``is_source=False``).

    >>> Location.source(2, 0), Location.target(3, 1).is_source
    (Location(node=2, port=0, is_source=True), False)
    """

    node: int
    port: int
    is_source: bool

    @classmethod
    def source(cls, node: int, port: int) -> Location:
        """Output ``port`` of ``node`` (where capabilities are held)."""
        return cls(node, port, True)

    @classmethod
    def target(cls, node: int, port: int) -> Location:
        """Input ``port`` of ``node`` (where messages are in flight)."""
        return cls(node, port, False)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _port_pair(key: object, inputs: int, outputs: int) -> Port | None:
    if not (isinstance(key, tuple) and len(key) == 2):
        return None
    i, o = key
    if _is_count(i) and _is_count(o) and i < inputs and o < outputs:
        return (i, o)
    return None


def _all_identity(inputs: int, outputs: int) -> dict[Port, PathSummary]:
    ident = PathSummary.identity()
    return {(i, o): ident for i in range(inputs) for o in range(outputs)}


@attrs.define(eq=False, repr=False)
class ProgressGraphBuilder:
    """Collects nodes and edges, then :meth:`build`\\ s a validated :class:`ProgressGraph`.

    >>> b = ProgressGraphBuilder()
    >>> a = b.add_node("a", inputs=1, outputs=1)
    >>> b.add_edge((a, 0), (a, 0))
    >>> b.build()  # doctest: +ELLIPSIS
    Traceback (most recent call last):
      ...
    ValueError: cycle does not advance times: 'a' -> 'a' maps a time t to itself; ...
    """

    _names: list[str] = attrs.field(factory=list)
    _inputs: list[int] = attrs.field(factory=list)
    _outputs: list[int] = attrs.field(factory=list)
    _summaries: list[dict[Port, PathSummary]] = attrs.field(factory=list)
    _depths: list[int | None] = attrs.field(factory=list)
    _edges: list[tuple[Port, Port]] = attrs.field(factory=list)
    _edge_set: set[tuple[Port, Port]] = attrs.field(factory=set)

    def add_node(
        self,
        name: str,
        inputs: int,
        outputs: int,
        summaries: Mapping[Port, PathSummary] | None = None,
        depth: int | None = None,
    ) -> int:
        """Add a node; return its index.

        Args:
            name: the operator's name, used in error messages.
            inputs: number of input ports.
            outputs: number of output ports.
            summaries: ``(input port, output port) -> PathSummary`` for every connected pair;
                a pair missing from the mapping is not connected. ``None`` connects every input
                to every output with the identity.
            depth: how many loops the node's scope is nested in: the nesting depth of the
                times at its outputs (at its inputs if it has none). It fixes the depth of
                every location connected to the node (:attr:`ProgressGraph.depths`), and so
                the :class:`~deltaflow.framework.time_domain.TimeDomain` the tracker uses
                there; ``None`` leaves it to another node, or unknown.

        Raises:
            ValueError: on negative port counts or depth, out-of-range ports or non-summary
                values.
        """
        if depth is not None and not _is_count(depth):
            msg = f"node {name!r}: depth must be a non-negative int or None, got {depth!r}"
            raise ValueError(msg)
        if not (_is_count(inputs) and _is_count(outputs)):
            msg = (
                f"node {name!r}: port counts must be non-negative ints, "
                f"got {inputs!r} input(s) and {outputs!r} output(s)"
            )
            raise ValueError(msg)
        if summaries is None:
            checked = _all_identity(inputs, outputs)
        else:
            checked = {}
            for key, summary in summaries.items():
                pair = _port_pair(key, inputs, outputs)
                if pair is None:
                    msg = (
                        f"node {name!r}: summary key {key!r} is not an (input, output) pair "
                        f"within {inputs} input(s) and {outputs} output(s)"
                    )
                    raise ValueError(msg)
                raw: object = summary
                if not isinstance(raw, PathSummary):
                    msg = (
                        f"node {name!r}: summary for {key!r} must be a PathSummary, got {summary!r}"
                    )
                    raise ValueError(msg)
                checked[pair] = raw
        self._names.append(str(name))
        self._inputs.append(inputs)
        self._outputs.append(outputs)
        self._summaries.append(checked)
        self._depths.append(depth)
        return len(self._names) - 1

    def add_edge(self, source: Port, target: Port) -> None:
        """Connect output ``source = (node, out_port)`` to input ``target = (node, in_port)``.

        Raises:
            ValueError: if a node or port does not exist, or the edge was already added.
        """
        src_node, src_port = source
        dst_node, dst_port = target
        self._check_port(src_node, src_port, is_source=True)
        self._check_port(dst_node, dst_port, is_source=False)
        key = ((src_node, src_port), (dst_node, dst_port))
        if key in self._edge_set:
            msg = (
                f"edge from {self._describe(src_node, src_port, True)} to "
                f"{self._describe(dst_node, dst_port, False)} was already added"
            )
            raise ValueError(msg)
        self._edge_set.add(key)
        self._edges.append(key)

    def _check_port(self, node: int, port: int, *, is_source: bool) -> None:
        kind = "output" if is_source else "input"
        if node.__class__ is not int or not 0 <= node < len(self._names):
            msg = f"no node {node!r} (the graph has {len(self._names)} node(s))"
            raise ValueError(msg)
        count = self._outputs[node] if is_source else self._inputs[node]
        if port.__class__ is not int or not 0 <= port < count:
            msg = f"node {self._names[node]!r} has no {kind} port {port!r} (it has {count})"
            raise ValueError(msg)

    def _describe(self, node: int, port: int, is_source: bool) -> str:
        return f"{self._names[node]!r} {'output' if is_source else 'input'} {port}"

    def build(self) -> ProgressGraph:
        """Validate the graph and freeze it.

        Raises:
            ValueError: naming the operators on a cycle that does not strictly advance times
                (or that changes the nesting depth of times), the location that would see
                times of different nesting depths, or nodes whose declared depths disagree.

        Runtime complexity: O(V + E) outside cycles; for each strongly connected component, a
        fixed point over antichains of path summaries from each of its input ports.
        """
        graph = ProgressGraph(
            tuple(self._names),
            tuple(self._inputs),
            tuple(self._outputs),
            tuple(dict(s) for s in self._summaries),
            tuple(self._edges),
        )
        validate(graph)
        graph.depths = tuple(location_depths(graph, self._depths))
        return graph


GraphBuilder = ProgressGraphBuilder


@attrs.define(eq=False, repr=False, init=False)
class ProgressGraph:
    """A validated, immutable dataflow graph with numbered locations.

    Location ids are dense ints: for each node in order, its input ports, then its output ports.

    Attributes:
        names: node names.
        input_counts: number of input ports per node.
        output_counts: number of output ports per node.
        summaries: per node, ``(input, output) -> PathSummary`` for connected pairs.
        edges: ``((node, out_port), (node, in_port))`` pairs, in insertion order.
        depths: per location id, the nesting depth of its times where a node connected to it
            declared its depth (``None`` elsewhere: any depth the tracker is given).
    """

    names: tuple[str, ...]
    input_counts: tuple[int, ...]
    output_counts: tuple[int, ...]
    summaries: tuple[dict[Port, PathSummary], ...]
    edges: tuple[tuple[Port, Port], ...]
    depths: tuple[int | None, ...]
    _target_ids: dict[Port, int]
    _source_ids: dict[Port, int]
    _locations: tuple[Location, ...]
    _arcs: tuple[tuple[Arc, ...], ...]
    _targets_of: dict[Port, tuple[Port, ...]]
    _sources_of: dict[Port, tuple[Port, ...]]

    def __init__(
        self,
        names: tuple[str, ...],
        input_counts: tuple[int, ...],
        output_counts: tuple[int, ...],
        summaries: tuple[dict[Port, PathSummary], ...],
        edges: tuple[tuple[Port, Port], ...],
    ) -> None:
        self.names = names
        self.input_counts = input_counts
        self.output_counts = output_counts
        self.summaries = summaries
        self.edges = edges
        target_ids: dict[Port, int] = {}
        source_ids: dict[Port, int] = {}
        locations: list[Location] = []
        for node in range(len(names)):
            for port in range(input_counts[node]):
                target_ids[(node, port)] = len(locations)
                locations.append(Location(node, port, False))
            for port in range(output_counts[node]):
                source_ids[(node, port)] = len(locations)
                locations.append(Location(node, port, True))
        arcs: list[list[Arc]] = [[] for _ in locations]
        for node, mapping in enumerate(summaries):
            for (i, o), summary in sorted(mapping.items()):
                arcs[target_ids[(node, i)]].append((source_ids[(node, o)], summary))
        targets_of: dict[Port, list[Port]] = {}
        sources_of: dict[Port, list[Port]] = {}
        ident = PathSummary.identity()
        for src, dst in edges:
            arcs[source_ids[src]].append((target_ids[dst], ident))
            targets_of.setdefault(src, []).append(dst)
            sources_of.setdefault(dst, []).append(src)
        self._target_ids = target_ids
        self._source_ids = source_ids
        self._locations = tuple(locations)
        self._arcs = tuple(tuple(a) for a in arcs)
        self._targets_of = {k: tuple(v) for k, v in targets_of.items()}
        self._sources_of = {k: tuple(v) for k, v in sources_of.items()}
        self.depths = (None,) * len(locations)

    @property
    def node_count(self) -> int:
        """Number of nodes."""
        return len(self.names)

    @property
    def location_count(self) -> int:
        """Number of ports (inputs plus outputs) over all nodes."""
        return len(self._locations)

    @property
    def source_ids(self) -> Mapping[Port, int]:
        """``(node, out_port) -> location id`` for every output port."""
        return self._source_ids

    @property
    def target_ids(self) -> Mapping[Port, int]:
        """``(node, in_port) -> location id`` for every input port."""
        return self._target_ids

    def location_id(self, location: Location) -> int:
        """The dense id of ``location``.

        Raises:
            ValueError: if the port does not exist.
        """
        ids = self._source_ids if location.is_source else self._target_ids
        try:
            return ids[(location.node, location.port)]
        except KeyError:
            kind = "output" if location.is_source else "input"
            msg = f"no {kind} port {location.port!r} on node {location.node!r}"
            raise ValueError(msg) from None

    def location(self, location_id: int) -> Location:
        """The :class:`Location` with dense id ``location_id``."""
        return self._locations[location_id]

    def arcs(self, location_id: int) -> tuple[tuple[int, PathSummary], ...]:
        """Successors of a location: ``(location id, summary)`` along edges and through nodes."""
        return self._arcs[location_id]

    def targets_of(self, node: int, out_port: int) -> tuple[Port, ...]:
        """The ``(node, in_port)`` inputs fed by output ``out_port`` of ``node``."""
        return self._targets_of.get((node, out_port), ())

    def sources_of(self, node: int, in_port: int) -> tuple[Port, ...]:
        """The ``(node, out_port)`` outputs feeding input ``in_port`` of ``node``."""
        return self._sources_of.get((node, in_port), ())

    def describe(self, location_id: int) -> str:
        """A human-readable name for a location, e.g. ``"'map' input 0"``."""
        loc = self._locations[location_id]
        kind = "output" if loc.is_source else "input"
        return f"{self.names[loc.node]!r} {kind} {loc.port}"

    def __repr__(self) -> str:
        return f"ProgressGraph(nodes={len(self.names)}, edges={len(self.edges)})"
