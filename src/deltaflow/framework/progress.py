"""Progress tracking: which times can still arrive at each operator input.

The dataflow graph has *nodes* (operators) with numbered input ports (*targets*) and output
ports (*sources*). Edges connect a source to a target and never change times. Inside a node,
each connected (input, output) pair carries a :class:`~deltaflow.framework.summary.PathSummary`
(identity for ordinary operators; ``enter`` / ``leave`` / ``feedback`` for the loop plumbing of
the flat graph encoding).

A *pointstamp* is a (location, time) pair with a signed count: a capability held at an output
port (the operator may still send at that time), or a batch of messages in flight to an input
port. The :class:`ProgressTracker` keeps the counts per location and derives, for every
location, its *implications*: the antichain of minimal times that could still appear there,
from its own pointstamps and from everything upstream mapped through edges and summaries. An
input port's implications are its **frontier**: once no frontier element is ``<=`` a time
``t``, the operator has seen every update at ``t`` ("the frontier passed ``t``").

How it works:

* Updates are buffered by :meth:`ProgressTracker.update_source` /
  :meth:`~ProgressTracker.update_target` and applied by :meth:`~ProgressTracker.propagate`.
* Each location keeps its ``pointstamps`` (a
  :class:`~deltaflow.framework.antichain.MutableAntichain` of its own counts) and its
  ``implications``: counts of the frontier elements of its own pointstamps plus those of its
  predecessors' implications, mapped along the arcs, with the antichain of minimal
  positive-count times. Only *frontier changes* travel: a change of a location's implication
  frontier is pushed to its successors. Implications receive one change at a time, so they
  are kept as a plain dict of counts plus a frontier list, updated incrementally in the
  propagation loop (the same semantics as ``MutableAntichain``, without its batch rebuild),
  and over coordinate tuples (``sort_key(time)``, e.g. ``(t, i)`` for ``Product(t, i)``),
  which hash and compare at C speed; times are rebuilt only for reports and queries.
* The pending changes live in a min-heap keyed by ``(sort_key(time), location)``; all entries
  for the same key are summed before they are applied. Processing in time order is what makes
  cycles terminate: a retraction always reaches a location before the times it was hiding can
  travel around a loop and come back. A first-in-first-out queue can chase its own tail for
  ever.

Invariants and footguns:

* :meth:`~ProgressGraphBuilder.build` rejects every cycle that does not strictly advance
  times: around each cycle the composed summary must keep the nesting depth and add a positive
  amount (a loop's feedback). Without that, no frontier on the cycle could ever pass a time.
  It also rejects graphs where one location would see times of different nesting depths.
* Counts may go negative for a while (a "consumed" seen before the matching "produced");
  negative counts never hold a frontier back. Report production before consumption where you
  can: while a count is wrongly negative, frontiers may be too far ahead.
* Queries (:meth:`~ProgressTracker.frontier`, :meth:`~ProgressTracker.is_complete`) reflect
  the state as of the last :meth:`~ProgressTracker.propagate`.
* Times must be ints, or Products nested in the outer coordinate with int inner coordinates
  (``Product(Product(t, i), j)``); anything else is rejected when buffered.
* Times at a location must all have the same nesting depth, the one its summaries imply; the
  tracker does not check this on the hot path (:meth:`ProgressTracker._check` does). A time
  too shallow for a ``leave`` raises from ``propagate`` and leaves the tracker inconsistent.
* ``leave`` maps a time to a *smaller* sort key (``(t, i, j) -> (t, i)``), so a location
  outside a loop may be visited again at a key below the one just popped. Around every cycle
  times still strictly grow, which is what termination relies on; the randomized model test
  (``tests/framework/test_progress.py``) checks nested loops against a from-scratch walk.

    >>> b = ProgressGraphBuilder()
    >>> src = b.add_node("input", inputs=0, outputs=1)
    >>> op = b.add_node("map", inputs=1, outputs=1)
    >>> b.add_edge((src, 0), (op, 0))
    >>> tracker = ProgressTracker(b.build())
    >>> tracker.update_source(src, 0, 0, +1)
    >>> tracker.propagate()
    [(1, 0, 0, 1)]
    >>> tracker.update_source(src, 0, 1, +1); tracker.update_source(src, 0, 0, -1)
    >>> tracker.propagate()
    [(1, 0, 0, -1), (1, 0, 1, 1)]
    >>> tracker.frontier(op, 0)
    Antichain([1])
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable, Iterable, Mapping

import attrs

from .antichain import Antichain, MutableAntichain
from .lattice import Product, Time, less_equal, less_than, sort_key
from .summary import PathSummary

__all__ = [
    "GraphBuilder",
    "Location",
    "ProgressGraph",
    "ProgressGraphBuilder",
    "ProgressStatistics",
    "ProgressTracker",
]

Port = tuple[int, int]
_Arc = tuple[int, PathSummary]


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


@attrs.frozen
class ProgressStatistics:
    """Counters of a :class:`ProgressTracker` (a snapshot).

    Attributes:
        propagations: calls of ``propagate`` that had something to apply.
        worklist_pops: entries taken off the time-ordered worklist, over all propagations.
        frontier_changes: input-port frontier changes reported by ``propagate``.
        pending: buffered pointstamp changes not yet propagated.
        occupied_locations: locations holding a positive pointstamp.
    """

    propagations: int
    worklist_pops: int
    frontier_changes: int
    pending: int
    occupied_locations: int


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
    _edges: list[tuple[Port, Port]] = attrs.field(factory=list)
    _edge_set: set[tuple[Port, Port]] = attrs.field(factory=set)

    def add_node(
        self,
        name: str,
        inputs: int,
        outputs: int,
        summaries: Mapping[Port, PathSummary] | None = None,
    ) -> int:
        """Add a node; return its index.

        Args:
            name: the operator's name, used in error messages.
            inputs: number of input ports.
            outputs: number of output ports.
            summaries: ``(input port, output port) -> PathSummary`` for every connected pair;
                a pair missing from the mapping is not connected. ``None`` connects every input
                to every output with the identity.

        Raises:
            ValueError: on negative port counts, out-of-range ports or non-summary values.
        """
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
                (or that changes the nesting depth of times), or the location that would see
                times of different nesting depths.

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
        _validate(graph)
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
    """

    names: tuple[str, ...]
    input_counts: tuple[int, ...]
    output_counts: tuple[int, ...]
    summaries: tuple[dict[Port, PathSummary], ...]
    edges: tuple[tuple[Port, Port], ...]
    _target_ids: dict[Port, int]
    _source_ids: dict[Port, int]
    _locations: tuple[Location, ...]
    _arcs: tuple[tuple[_Arc, ...], ...]
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
        arcs: list[list[_Arc]] = [[] for _ in locations]
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

    @property
    def node_count(self) -> int:
        """Number of nodes."""
        return len(self.names)

    @property
    def location_count(self) -> int:
        """Number of ports (inputs plus outputs) over all nodes."""
        return len(self._locations)

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


# --------------------------------------------------------------------------------------------
# Validation


def _strongly_connected(n: int, succ: list[list[int]]) -> list[list[int]]:
    """Tarjan's algorithm, iterative; returns the components (any order)."""
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    components: list[list[int]] = []
    counter = 0
    for root in range(n):
        if index[root] != -1:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        work = [(root, 0)]
        while work:
            v, i = work[-1]
            if i < len(succ[v]):
                work[-1] = (v, i + 1)
                w = succ[v][i]
                if index[w] == -1:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = True
                    work.append((w, 0))
                elif on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
            else:
                work.pop()
                if work:
                    u = work[-1][0]
                    if low[v] < low[u]:
                        low[u] = low[v]
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack[w] = False
                        component.append(w)
                        if w == v:
                            break
                    components.append(component)
    return components


def _walk_names(graph: ProgressGraph, walk: list[int]) -> str:
    names: list[str] = []
    last = -1
    for loc_id in walk:
        node = graph._locations[loc_id].node
        if node != last:
            names.append(repr(graph.names[node]))
            last = node
    if len(names) == 1:
        names.append(names[0])
    return " -> ".join(names)


def _compose(graph: ProgressGraph, walk: list[int]) -> PathSummary:
    summary = PathSummary.identity()
    for u, v in itertools.pairwise(walk):
        for w, s in graph._arcs[u]:
            if w == v:
                summary = summary.followed_by(s)
                break
    return summary


def _check_depth_cycles(graph: ProgressGraph, component: list[int]) -> None:
    """Every cycle inside ``component`` must keep the nesting depth of times."""
    members = set(component)
    arcs = graph._arcs
    root = component[0]
    potential = {root: 0}
    forward_parent: dict[int, int] = {}
    queue = deque([root])
    while queue:
        u = queue.popleft()
        for v, s in arcs[u]:
            if v in members and v not in potential:
                potential[v] = potential[u] + s.depth_change
                forward_parent[v] = u
                queue.append(v)
    for u in component:
        for v, s in arcs[u]:
            if v in members and potential[v] != potential[u] + s.depth_change:
                walk = _closed_walk(graph, members, root, forward_parent, u, v)
                change = _compose(graph, walk).depth_change
                direction = (
                    "enters a loop more often than it leaves"
                    if change > 0
                    else ("leaves a loop more often than it enters")
                )
                msg = (
                    f"cycle changes the nesting depth of times by {change:+d} (it {direction}): "
                    f"{_walk_names(graph, walk)}; a cycle must stay at one nesting level and "
                    "pass a loop feedback"
                )
                raise ValueError(msg)


def _closed_walk(
    graph: ProgressGraph,
    members: set[int],
    root: int,
    forward_parent: dict[int, int],
    u: int,
    v: int,
) -> list[int]:
    """A closed walk through ``root`` whose depth change is non-zero, given a conflicting arc."""
    preds: dict[int, list[int]] = {m: [] for m in members}
    for a in members:
        for b, _ in graph._arcs[a]:
            if b in members:
                preds[b].append(a)
    towards_root: dict[int, int] = {}
    seen = {root}
    queue = deque([root])
    while queue:
        b = queue.popleft()
        for a in preds[b]:
            if a not in seen:
                seen.add(a)
                towards_root[a] = b
                queue.append(a)

    def from_root(x: int) -> list[int]:
        path = [x]
        while path[-1] != root:
            path.append(forward_parent[path[-1]])
        path.reverse()
        return path

    def to_root(x: int) -> list[int]:
        path = [x]
        while path[-1] != root:
            path.append(towards_root[path[-1]])
        return path

    back = to_root(v)
    walk = [*from_root(u), *back]
    if _compose(graph, walk).depth_change != 0:
        return walk
    return [*from_root(v)[:-1], *back]


def _check_advancing_cycles(graph: ProgressGraph, component: list[int]) -> None:
    """Every cycle inside ``component`` must strictly advance times.

    For each input port ``start`` in the component, compute the antichains of summaries of
    paths from ``start`` to every location of the component (a fixed point: a summary is kept
    only if no kept summary is ``less_equal`` to it). The summaries arriving back at ``start``
    are those of the cycles through it. A dominated summary can be skipped safely: if ``a <= b``
    and ``a`` advances times, so does ``b``.
    """
    members = set(component)
    arcs = graph._arcs
    locations = graph._locations
    for start in component:
        if locations[start].is_source:
            continue  # every cycle passes an input port too
        kept: dict[int, list[PathSummary]] = {}
        parent: dict[tuple[int, PathSummary], tuple[int, PathSummary] | None] = {}
        queue: deque[tuple[int, PathSummary]] = deque()

        def offer(
            v: int,
            s: PathSummary,
            prev: tuple[int, PathSummary] | None,
            kept: dict[int, list[PathSummary]] = kept,
            parent: dict[tuple[int, PathSummary], tuple[int, PathSummary] | None] = parent,
            queue: deque[tuple[int, PathSummary]] = queue,
        ) -> None:
            current = kept.setdefault(v, [])
            for e in current:
                if e.less_equal(s):
                    return
            current[:] = [e for e in current if not s.less_equal(e)]
            current.append(s)
            parent[(v, s)] = prev
            queue.append((v, s))

        for v, s in arcs[start]:
            if v in members:
                offer(v, s, None)
        while queue:
            u, s = queue.popleft()
            if s not in kept[u]:
                continue
            if u == start:
                if s.depth_change == 0 and s.add > 0:
                    continue
                walk = [start]
                node: tuple[int, PathSummary] | None = (u, s)
                while node is not None:
                    walk.append(node[0])
                    node = parent[node]
                walk.reverse()
                effect = "itself" if s.is_identity else f"'{s}' of itself ({s!r})"
                msg = (
                    f"cycle does not advance times: {_walk_names(graph, walk)} maps a time t "
                    f"to {effect}; every cycle must pass a loop feedback at its own nesting "
                    "level, such as (t, i) -> (t, i + 1)"
                )
                raise ValueError(msg)
            for v, a in arcs[u]:
                if v in members:
                    offer(v, s.followed_by(a), (u, s))


def _check_depth_consistency(graph: ProgressGraph) -> None:
    """Each location must see times of a single nesting depth."""
    n = len(graph._locations)
    neighbours: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for u in range(n):
        for v, s in graph._arcs[u]:
            neighbours[u].append((v, s.depth_change))
            neighbours[v].append((u, -s.depth_change))
    potential: dict[int, int] = {}
    for root in range(n):
        if root in potential:
            continue
        potential[root] = 0
        queue = deque([root])
        while queue:
            u = queue.popleft()
            for v, change in neighbours[u]:
                expected = potential[u] + change
                if v not in potential:
                    potential[v] = expected
                    queue.append(v)
                elif potential[v] != expected:
                    msg = (
                        f"{graph.describe(v)} would see times of different nesting depths "
                        f"(paths through {graph.describe(u)} and elsewhere disagree by "
                        f"{expected - potential[v]:+d} level(s)); collections from different "
                        "loop levels must be combined only through enter/leave"
                    )
                    raise ValueError(msg)


def _validate(graph: ProgressGraph) -> None:
    n = len(graph._locations)
    succ = [[v for v, _ in graph._arcs[u]] for u in range(n)]
    for component in _strongly_connected(n, succ):
        if len(component) > 1:
            _check_depth_cycles(graph, component)
            _check_advancing_cycles(graph, component)
    _check_depth_consistency(graph)


# --------------------------------------------------------------------------------------------
# Tracker

Coords = tuple[int, ...]


def _coords(time: Time) -> Coords:
    """The coordinates of a flat-encoded time, outermost first (its ``sort_key``).

    Raises:
        ValueError: if ``time`` is not an int or a Product whose inner coordinates are ints.
    """
    if time.__class__ is int:
        return (time,)
    out = []
    t = time
    while t.__class__ is Product:
        inner = t.inner
        if inner.__class__ is not int:
            break
        out.append(inner)
        t = t.outer
    else:
        if t.__class__ is int:
            out.append(t)
            out.reverse()
            return tuple(out)
    msg = (
        f"progress times must be ints or Products nesting in the outer coordinate with int "
        f"inner coordinates, such as Product(Product(t, i), j); got {time!r}"
    )
    raise ValueError(msg)


def _time(coords: Coords) -> Time:
    """The time with the given coordinates (inverse of :func:`_coords`)."""
    t: Time = coords[0]
    for i in range(1, len(coords)):
        t = Product(t, coords[i])
    return t


_EMPTY = Antichain()


def _antichain(frontier: list[Coords]) -> Antichain:
    """An :class:`Antichain` of the times of a frontier (already mutually incomparable)."""
    if not frontier:
        return _EMPTY
    if len(frontier) == 1:
        return Antichain.from_elem(_time(frontier[0]))
    return Antichain(_time(c) for c in frontier)


def _coords_le(a: Coords, b: Coords) -> bool:
    """The product partial order on coordinate tuples of equal length."""
    for x, y in zip(a, b):  # noqa: SIM110 (a generator in all() is twice as slow)
        if x > y:
            return False
    return True


def _coords_map(summary: PathSummary) -> Callable[[Coords], Coords]:
    """``summary.results_in`` on coordinate tuples."""
    pop, add, push = summary.pop, summary.add, summary.push
    if not pop and not push:

        def advance(c: Coords) -> Coords:
            return (*c[:-1], c[-1] + add)

        return advance

    def apply(c: Coords) -> Coords:
        if pop:
            if len(c) <= pop:
                msg = f"{summary!r} applied to a time of depth {len(c) - 1}: {_time(c)!r}"
                raise ValueError(msg)
            c = c[:-pop]
        if add:
            c = (*c[:-1], c[-1] + add)
        return c + push

    return apply


@attrs.define(eq=False, repr=False, init=False)
class ProgressTracker:
    """Counts pointstamps per location and maintains every location's frontier.

    Args:
        graph: a graph from :meth:`ProgressGraphBuilder.build`.

    Times given to the tracker must be ints or Products that nest in the outer coordinate
    with int inner coordinates (the flat loop encoding); internally, implications are kept as
    coordinate tuples (``sort_key(time)``), which hash and compare at C speed.

    Runtime complexity: :meth:`propagate` does O(log W) heap work per frontier change that
    travels along an arc (W the worklist size), plus O(frontier) comparisons per change
    applied (a retraction that exposes new times scans that location's counts); changes that
    do not move a location's frontier stop there.

    >>> b = ProgressGraphBuilder()
    >>> inp = b.add_node("input", 0, 1)
    >>> enter = b.add_node("enter", 1, 1, {(0, 0): PathSummary.enter()})
    >>> head = b.add_node("head", 2, 1)
    >>> fb = b.add_node("feedback", 1, 1, {(0, 0): PathSummary.feedback()})
    >>> b.add_edge((inp, 0), (enter, 0)); b.add_edge((enter, 0), (head, 0))
    >>> b.add_edge((head, 0), (fb, 0)); b.add_edge((fb, 0), (head, 1))
    >>> tracker = ProgressTracker(b.build())
    >>> tracker.update_source(inp, 0, 5, 1)
    >>> _ = tracker.propagate()
    >>> tracker.frontier(head, 0), tracker.frontier(head, 1)
    (Antichain([Product(outer=5, inner=0)]), Antichain([Product(outer=5, inner=1)]))
    >>> tracker.update_source(inp, 0, 5, -1)
    >>> _ = tracker.propagate()
    >>> tracker.frontier(head, 1), tracker.is_complete()
    (Antichain([]), True)
    """

    graph: ProgressGraph
    _pointstamps: list[MutableAntichain]
    _counts: list[dict[Coords, int]]
    _frontiers: list[list[Coords]]
    _pending: dict[int, list[tuple[Time, int]]]
    _pending_count: int
    _ident_succ: tuple[tuple[int, ...], ...]
    _other_succ: tuple[tuple[tuple[int, Callable[[Coords], Coords]], ...], ...]
    _is_target: tuple[bool, ...]
    _node_port: tuple[Port, ...]
    _source_ids: dict[Port, int]
    _target_ids: dict[Port, int]
    _occupied: int
    _propagations: int
    _pops: int
    _reported: int

    def __init__(self, graph: ProgressGraph) -> None:
        self.graph = graph
        n = graph.location_count
        self._pointstamps = [MutableAntichain() for _ in range(n)]
        self._counts = [{} for _ in range(n)]
        self._frontiers = [[] for _ in range(n)]
        self._pending = {}
        self._pending_count = 0
        ident: list[tuple[int, ...]] = []
        other: list[tuple[tuple[int, Callable[[Coords], Coords]], ...]] = []
        for loc_id in range(n):
            arcs = graph.arcs(loc_id)
            ident.append(tuple(v for v, s in arcs if s.is_identity))
            other.append(tuple((v, _coords_map(s)) for v, s in arcs if not s.is_identity))
        self._ident_succ = tuple(ident)
        self._other_succ = tuple(other)
        locations = [graph.location(i) for i in range(n)]
        self._is_target = tuple(not loc.is_source for loc in locations)
        self._node_port = tuple((loc.node, loc.port) for loc in locations)
        self._source_ids = dict(graph._source_ids)
        self._target_ids = dict(graph._target_ids)
        self._occupied = 0
        self._propagations = 0
        self._pops = 0
        self._reported = 0

    # -- updates ------------------------------------------------------------------------------

    def _buffer(self, loc: int, time: Time, delta: int) -> None:
        """Validate ``time`` and queue ``(time, delta)`` at location ``loc``."""
        if time.__class__ is not int:
            _coords(time)
        bucket = self._pending.get(loc)
        if bucket is None:
            self._pending[loc] = [(time, delta)]
        else:
            bucket.append((time, delta))
        self._pending_count += 1

    def update_source(self, node: int, port: int, time: Time, delta: int) -> None:
        """Buffer a change of the capabilities held at output ``port`` of ``node``.

        Raises:
            ValueError: if the port does not exist or ``time`` is not a valid time.

        Runtime complexity: O(1) for an int time, O(depth) for a Product.
        """
        if not delta:
            return
        try:
            loc = self._source_ids[(node, port)]
        except KeyError:
            msg = f"no output port {port!r} on node {node!r}"
            raise ValueError(msg) from None
        self._buffer(loc, time, delta)

    def update_target(self, node: int, port: int, time: Time, delta: int) -> None:
        """Buffer a change of the messages in flight to input ``port`` of ``node``.

        Raises:
            ValueError: if the port does not exist or ``time`` is not a valid time.

        Runtime complexity: O(1) for an int time, O(depth) for a Product.
        """
        if not delta:
            return
        try:
            loc = self._target_ids[(node, port)]
        except KeyError:
            msg = f"no input port {port!r} on node {node!r}"
            raise ValueError(msg) from None
        self._buffer(loc, time, delta)

    def update(self, changes: Iterable[tuple[Location | tuple[int, int, bool], Time, int]]) -> None:
        """Buffer a batch of ``(location, time, delta)`` changes.

        A location is a :class:`Location` or a plain ``(node, port, is_source)`` tuple.

        Raises:
            ValueError: if a port does not exist or a time is not valid; changes before the
                offending one stay buffered.

        Runtime complexity: O(len(changes)).
        """
        source_ids = self._source_ids
        target_ids = self._target_ids
        pending = self._pending
        count = 0
        try:
            for where, time, delta in changes:
                if not delta:
                    continue
                if where.__class__ is Location:
                    node, port, is_source = where.node, where.port, where.is_source
                else:
                    node, port, is_source = where  # type: ignore[misc]
                try:
                    loc = (source_ids if is_source else target_ids)[(node, port)]
                except KeyError:
                    kind = "output" if is_source else "input"
                    msg = f"no {kind} port {port!r} on node {node!r}"
                    raise ValueError(msg) from None
                if time.__class__ is not int:
                    _coords(time)
                bucket = pending.get(loc)
                if bucket is None:
                    pending[loc] = [(time, delta)]
                else:
                    bucket.append((time, delta))
                count += 1
        finally:
            self._pending_count += count

    # -- propagation --------------------------------------------------------------------------

    def propagate(self) -> list[tuple[int, int, Time, int]]:
        """Apply every buffered change; return the input-port frontier changes.

        Returns:
            Consolidated ``(node, in_port, time, +1 | -1)`` changes of input-port frontiers
            (``+1``: ``time`` joined the frontier; ``-1``: it left), in a deterministic order.

        Runtime complexity: see the class docstring.
        """
        pending = self._pending
        if not pending:
            return []
        self._pending = {}
        self._pending_count = 0
        self._propagations += 1
        heap: list[tuple[Coords, int, int]] = []
        pointstamps = self._pointstamps
        occupied = self._occupied
        for loc, changes in pending.items():
            stamps = pointstamps[loc]
            was_empty = not stamps.elements
            moved_stamps = stamps.update_iter(changes)
            if moved_stamps:
                if was_empty:
                    occupied += 1
                elif not stamps.elements:
                    occupied -= 1
                for time, d in moved_stamps:
                    heap.append(((time,) if time.__class__ is int else _coords(time), loc, d))
        self._occupied = occupied
        heapq.heapify(heap)

        heappush = heapq.heappush
        heappop = heapq.heappop
        all_counts = self._counts
        all_frontiers = self._frontiers
        ident_succ = self._ident_succ
        other_succ = self._other_succ
        is_target = self._is_target
        reported: dict[tuple[int, Coords], int] = {}
        pops = 0
        while heap:
            t, loc, d = heappop(heap)
            pops += 1
            while heap:
                top = heap[0]
                if top[1] == loc and top[0] == t:
                    d += heappop(heap)[2]
                    pops += 1
                else:
                    break
            if not d:
                continue
            # Apply (t, d) to the implications of ``loc``; ``moved`` gets the frontier changes.
            counts = all_counts[loc]
            frontier = all_frontiers[loc]
            old = counts.get(t, 0)
            new = old + d
            if new:
                counts[t] = new
            else:
                del counts[t]
            if d > 0:
                if old > 0 or new <= 0:
                    continue
                if frontier:
                    dominated = False
                    for f in frontier:
                        if _coords_le(f, t):
                            dominated = True
                            break
                    if dominated:
                        continue
                    moved = [(t, 1)]
                    kept = []
                    for f in frontier:
                        if _coords_le(t, f):
                            moved.append((f, -1))
                        else:
                            kept.append(f)
                    kept.append(t)
                    all_frontiers[loc] = kept
                else:
                    frontier.append(t)
                    moved = [(t, 1)]
            else:
                if old <= 0 or new > 0 or t not in frontier:
                    continue
                frontier.remove(t)
                moved = [(t, -1)]
                if counts:
                    # Only times above ``t`` can be exposed. Visiting them in lexicographic
                    # order (a linear extension) means a later one never dominates an earlier.
                    for u in sorted(u for u, c in counts.items() if c > 0 and _coords_le(t, u)):
                        for f in frontier:
                            if _coords_le(f, u):
                                break
                        else:
                            frontier.append(u)
                            moved.append((u, 1))
            if is_target[loc]:
                for t2, d2 in moved:
                    k = (loc, t2)
                    reported[k] = reported.get(k, 0) + d2
            for succ in ident_succ[loc]:
                for t2, d2 in moved:
                    heappush(heap, (t2, succ, d2))
            for succ, results_in in other_succ[loc]:
                for t2, d2 in moved:
                    heappush(heap, (results_in(t2), succ, d2))
        self._pops += pops
        node_port = self._node_port
        out = [
            (*node_port[loc], t[0] if len(t) == 1 else _time(t), d)
            for (loc, t), d in reported.items()
            if d
        ]
        self._reported += len(out)
        return out

    # -- queries ------------------------------------------------------------------------------

    def frontier(self, node: int, in_port: int) -> Antichain:
        """The frontier of input ``in_port`` of ``node``: minimal times that could still arrive.

        Raises:
            ValueError: if the port does not exist.

        Runtime complexity: O(1) for frontiers of at most one time, O(size ** 2) otherwise.
        """
        try:
            loc = self._target_ids[(node, in_port)]
        except KeyError:
            msg = f"no input port {in_port!r} on node {node!r}"
            raise ValueError(msg) from None
        return _antichain(self._frontiers[loc])

    def source_frontier(self, node: int, out_port: int) -> Antichain:
        """The minimal times that could still be sent from output ``out_port`` of ``node``.

        Includes the node's own capabilities there and everything its inputs could still
        receive, mapped through its summaries.

        Raises:
            ValueError: if the port does not exist.
        """
        try:
            loc = self._source_ids[(node, out_port)]
        except KeyError:
            msg = f"no output port {out_port!r} on node {node!r}"
            raise ValueError(msg) from None
        return _antichain(self._frontiers[loc])

    def pointstamps(self, location: Location) -> Antichain:
        """The minimal times with a positive pointstamp count *at* ``location`` itself."""
        return self._pointstamps[self.graph.location_id(location)].frontier()

    def held(self) -> list[tuple[Location, Antichain]]:
        """Every location holding positive pointstamps, with their minimal times.

        Useful to see what holds a frontier back ("where is my dataflow stuck?").

        Runtime complexity: O(number of locations).
        """
        graph = self.graph
        return [
            (graph.location(i), stamps.frontier())
            for i, stamps in enumerate(self._pointstamps)
            if stamps.elements
        ]

    def is_complete(self) -> bool:
        """True when no location holds a positive pointstamp (as of the last propagate).

        Runtime complexity: O(1).
        """
        return self._occupied == 0

    def has_pending(self) -> bool:
        """True when changes are buffered that :meth:`propagate` has not applied yet."""
        return bool(self._pending)

    def statistics(self) -> ProgressStatistics:
        """A snapshot of the tracker's counters."""
        return ProgressStatistics(
            propagations=self._propagations,
            worklist_pops=self._pops,
            frontier_changes=self._reported,
            pending=self._pending_count,
            occupied_locations=self._occupied,
        )

    # -- invariants ---------------------------------------------------------------------------

    def _check(self, max_steps: int = 1_000_000) -> None:
        """Assert that every frontier equals a from-scratch recomputation.

        Checks the implication counts against the frontiers they are derived from, and every
        frontier against a walk of every pointstamp through all paths that keeps per location
        only the minimal times reached (an ``AssertionError`` after ``max_steps`` steps).
        """
        graph = self.graph
        seeds: list[tuple[int, Time]] = []
        occupied = 0
        for loc, stamps in enumerate(self._pointstamps):
            stamps._check()
            if stamps.elements:
                occupied += 1
            seeds.extend((loc, t) for t in stamps.elements)
        assert occupied == self._occupied, (occupied, self._occupied)
        # Implication counts: one per own pointstamp frontier element, plus one per
        # predecessor implication frontier element mapped along each arc.
        expected_counts: list[dict[Coords, int]] = [{} for _ in range(graph.location_count)]
        for loc, stamps in enumerate(self._pointstamps):
            for t in stamps.elements:
                c = _coords(t)
                expected_counts[loc][c] = expected_counts[loc].get(c, 0) + 1
        for loc, frontier in enumerate(self._frontiers):
            for succ, summary in graph.arcs(loc):
                for c in frontier:
                    c2 = _coords(summary.results_in(_time(c)))
                    expected_counts[succ][c2] = expected_counts[succ].get(c2, 0) + 1
        expected = _naive_frontiers(graph, seeds, max_steps)
        for loc, (counts, frontier) in enumerate(zip(self._counts, self._frontiers)):
            where = graph.describe(loc)
            assert counts == expected_counts[loc], (where, counts, expected_counts[loc])
            positive = [_time(c) for c, n in counts.items() if n > 0]
            minimal = {t for t in positive if not any(less_than(u, t) for u in positive)}
            assert len(frontier) == len(set(frontier)), (where, frontier)
            assert {_time(c) for c in frontier} == minimal, (where, frontier, minimal)
            assert minimal == expected[loc], (where, minimal, expected[loc])

    def __repr__(self) -> str:
        return f"ProgressTracker({self.graph!r}, occupied={self._occupied})"


def _naive_frontiers(
    graph: ProgressGraph, seeds: Iterable[tuple[int, Time]], max_steps: int
) -> list[set[Time]]:
    """Minimal times reachable at each location from ``seeds`` (location id, time)."""
    minimal: list[list[Time]] = [[] for _ in range(graph.location_count)]
    heap = [(sort_key(t), loc, t) for loc, t in seeds]
    heapq.heapify(heap)
    steps = 0
    while heap:
        steps += 1
        assert steps <= max_steps, "naive frontier recomputation did not terminate"
        _, loc, t = heapq.heappop(heap)
        current = minimal[loc]
        if any(less_equal(e, t) for e in current):
            continue
        current[:] = [e for e in current if not less_equal(t, e)]
        current.append(t)
        for succ, summary in graph.arcs(loc):
            t2 = summary.results_in(t)
            heapq.heappush(heap, (sort_key(t2), succ, t2))
    return [set(m) for m in minimal]
