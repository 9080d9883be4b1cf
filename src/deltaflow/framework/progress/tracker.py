"""The progress tracker: pointstamp counts per location and the frontier of every input port.

See the package docstring (:mod:`deltaflow.framework.progress`) for the model, how
propagation works, and its invariants.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs

from .. import tuning
from ..antichain import Antichain
from ..lattice import Time, less_equal, sort_key
from ..time_domain import TimeDomain, domain_for_depth
from .coords import (
    Coords,
    Counts,
    Updater,
    check_counted,
    coords_map,
    coords_reader,
    from_coords,
    minimal,
    to_coords,
    updater_for,
)
from .graph import Arc, Location, Port, ProgressGraph
from .routes import carried_arcs, kept_locations, postorder, same_time_order
from .validation import levels_above_deepest

__all__ = ["ProgressStatistics", "ProgressTracker"]

_EMPTY = Antichain()
_INF = float("inf")


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


def _port_changes(
    changes: Iterable[tuple[Location | tuple[int, int, bool], Time, int]],
) -> Iterator[tuple[bool, int, int, Time, int]]:
    """``(location, time, delta)`` changes as ``(is_source, node, port, time, delta)``."""
    for where, time, delta in changes:
        if where.__class__ is Location:
            yield where.is_source, where.node, where.port, time, delta
        else:
            node, port, is_source = where  # type: ignore[misc]
            yield is_source, node, port, time, delta


@attrs.define(eq=False, repr=False, init=False)
class ProgressTracker:
    """Counts pointstamps per location and maintains every location's frontier.

    Args:
        graph: a graph from :meth:`ProgressGraphBuilder.build`.
        unwatched: ``(node, in_port)`` inputs whose frontiers nothing reads as they move:
            not kept between propagations, never reported, made on request.

    Raises:
        ValueError: if an unwatched port does not exist.

    Times given to the tracker must be ints or Products that nest in the outer coordinate
    with int inner coordinates (the flat loop encoding); internally, pointstamps and
    implications are kept as coordinate tuples (``sort_key(time)``), which hash and compare at
    C speed. Each location takes the :class:`~deltaflow.framework.time_domain.TimeDomain` of
    its depth (:attr:`ProgressGraph.depths`, declared per node by the plan) once, here: how
    its times are read (a time of another shape is rejected, naming the location) and which
    counted-frontier rule keeps its frontiers (a total order's for ints), so that no change
    tests which shape its time has. Buffered changes are summed per location and time, so a
    message sent and consumed between two propagations costs nothing to propagate.

    Implications are kept at *watched* input ports only: every input port but those named in
    ``unwatched`` (the inputs of operators that never read their frontiers, see
    ``Operator.reads_frontiers``), and one port of any cycle that would otherwise keep none.
    A change is carried straight from one kept port to the next along the composed summaries
    of the paths between them (:func:`.routes.carried_arcs`); frontiers that are not kept are
    made on request (:meth:`frontier`, :meth:`source_frontier`) and never reported. In a loop
    whose feedback and ``leave`` read nothing, most changes then skip most locations.

    Internally, locations are renumbered in a topological order of the arcs that can map a
    time to itself (:func:`.routes.same_time_order`): the worklist, ordered by (time, location),
    then visits each location at most once per time and merges everything arriving there
    first. A change that moves one frontier element to a single successor that comes next in
    that order is handed over directly, without touching the heap. Outer-scope times come
    after every inner time they contain (``Product(5, i)`` before ``5``, whatever ``i``): when
    a capability moves one iteration inside a loop, its -1 and +1 then meet at the loop's exit
    as one outer time and cancel there, instead of emptying and refilling every frontier
    downstream.

    Runtime complexity: :meth:`propagate` does O(log W) heap work per frontier change that
    travels along an arc (W the worklist size), plus O(frontier) comparisons per change
    applied (a retraction that exposes new times scans that location's counts); changes that
    do not move a location's frontier stop there.

    >>> from deltaflow.framework.progress import ProgressGraphBuilder
    >>> from deltaflow.framework.summary import PathSummary
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

    #: Coordinate tuples remembered with their times, so that reports and frontiers reuse
    #: the time objects given to the tracker instead of rebuilding Products, and frontiers
    #: remembered with their :class:`Antichain`, so that locations with equal frontiers share
    #: one; each memo is cleared when it grows past this size.
    TIME_CACHE_SIZE = tuning.TIME_CACHE_SIZE

    graph: ProgressGraph
    _stamps: list[Counts]
    _stamp_frontiers: list[list[Coords]]
    _counts: list[Counts]
    _frontiers: list[list[Coords]]
    _antichains: list[Antichain | None]
    _pending: dict[tuple[int, Coords], int]
    _pending_count: int
    _times: dict[Coords, Time]
    _antichain_memo: dict[Any, Antichain]
    _ident_succ: tuple[tuple[int, ...], ...]
    _other_succ: tuple[tuple[tuple[int, Callable[[Coords], Coords], tuple[float, ...]], ...], ...]
    _chain_succ: tuple[int, ...]
    _pads: tuple[tuple[float, ...], ...]
    _domains: tuple[TimeDomain | None, ...]
    _readers: tuple[Callable[[Time], Coords], ...]
    _updaters: tuple[Updater, ...]
    _kept: tuple[bool, ...]
    _carried: tuple[tuple[Arc, ...], ...]
    _stamp_arcs: tuple[tuple[Arc, ...], ...]
    _stamp_targets: tuple[tuple[tuple[int, Callable[[Coords], Coords] | None], ...], ...]
    _preds: tuple[tuple[tuple[int, Callable[[Coords], Coords] | None], ...], ...]
    _node_port: tuple[Port, ...]
    _graph_ids: tuple[int, ...]
    _internal_ids: tuple[int, ...]
    _source_ids: dict[Port, int]
    _target_ids: dict[Port, int]
    _occupied: int
    _propagations: int
    _pops: int
    _reported: int

    def __init__(self, graph: ProgressGraph, unwatched: Iterable[Port] = ()) -> None:
        self.graph = graph
        n = graph.location_count
        self._stamps = [Counts() for _ in range(n)]
        self._stamp_frontiers = [[] for _ in range(n)]
        self._counts = [Counts() for _ in range(n)]
        self._frontiers = [[] for _ in range(n)]
        self._antichains = [_EMPTY] * n
        self._pending = {}
        self._pending_count = 0
        self._times = {}
        self._antichain_memo = {}
        # Implications are kept at watched input ports only (see the class docstring).
        unwatched = set(unwatched)
        for node, port in unwatched:
            if (node, port) not in graph.target_ids:
                msg = f"no input port {port!r} on node {node!r}"
                raise ValueError(msg)
        kept = kept_locations(graph, unwatched)
        carried, stamp_arcs = carried_arcs(graph, kept)
        self._kept = tuple(kept)
        self._carried = tuple(carried)
        self._stamp_arcs = tuple(stamp_arcs)
        # Internal id ``i`` is graph location ``order[i]``.
        order = same_time_order(carried)
        internal = [0] * n
        for i, g in enumerate(order):
            internal[g] = i
        self._graph_ids = tuple(order)
        self._internal_ids = tuple(internal)
        self._route(order, internal)
        self._choose_domains(order)
        self._source_ids = {port: internal[g] for port, g in graph.source_ids.items()}
        self._target_ids = {port: internal[g] for port, g in graph.target_ids.items()}
        self._occupied = 0
        self._propagations = 0
        self._pops = 0
        self._reported = 0

    def _route(self, order: list[int], internal: list[int]) -> None:
        """Each location's successors, pads and predecessors, by internal id."""
        graph = self.graph
        carried = self._carried
        # Worklist keys of a location's times: the coordinates, padded with infinities up to
        # the depth of the deepest location connected to it, so that a time of an outer scope
        # comes after every inner time it contains. The two changes of a capability moving
        # one iteration inside a loop then meet at the loop's exit (as -1 and +1 of one outer
        # time) before the exit is visited, and cancel there instead of emptying every
        # frontier downstream and filling it again.
        levels = levels_above_deepest(graph)
        self._pads = tuple((_INF,) * levels[g] for g in order)
        ident: list[tuple[int, ...]] = []
        other: list[tuple[tuple[int, Callable[[Coords], Coords], tuple[float, ...]], ...]] = []
        chain: list[int] = []
        for g in order:
            arcs = carried[g]
            ident.append(tuple(internal[v] for v, s in arcs if s.is_identity))
            other.append(
                tuple(
                    (internal[v], coords_map(s), (_INF,) * levels[v])
                    for v, s in arcs
                    if not s.is_identity
                )
            )
            # A single identity successor later in the order can take a change directly.
            only = ident[-1][0] if len(arcs) == 1 and len(ident[-1]) == 1 else -1
            chain.append(only if only > len(chain) else -1)
        self._ident_succ = tuple(ident)
        self._other_succ = tuple(other)
        self._chain_succ = tuple(chain)
        self._node_port = tuple((loc.node, loc.port) for loc in map(graph.location, order))
        # Where a location's own pointstamp frontier changes are applied (itself if kept, else
        # the first kept locations after it), with the summary as a map of coordinates (None
        # for the identity).
        self._stamp_targets = tuple(
            tuple(
                (internal[v], None if a.is_identity else coords_map(a))
                for v, a in self._stamp_arcs[g]
            )
            for g in order
        )
        # Per location id: its predecessors with the summary as a map of coordinates (None for
        # the identity), to make the frontier of a location that is not kept on request.
        preds: list[list[tuple[int, Callable[[Coords], Coords] | None]]] = [[] for _ in order]
        for u in range(len(order)):
            for v, a in graph.arcs(u):
                preds[v].append((u, None if a.is_identity else coords_map(a)))
        self._preds = tuple(tuple(x) for x in preds)

    def _choose_domains(self, order: list[int]) -> None:
        """Each location's time domain, from its depth, and what it decides once: how the
        location's times are read, and the rule keeping its counted frontiers."""
        graph = self.graph
        depths = graph.depths
        self._domains = tuple(
            None if depths[g] is None else domain_for_depth(depths[g])  # type: ignore[arg-type]
            for g in order
        )
        self._readers = tuple(
            coords_reader(d, self._times, graph.describe(g))
            for d, g in zip(self._domains, order, strict=True)
        )
        self._updaters = tuple(updater_for(d) for d in self._domains)

    # -- updates ------------------------------------------------------------------------------

    def update_source(self, node: int, port: int, time: Time, delta: int) -> None:
        """Buffer a change of the capabilities held at output ``port`` of ``node``.

        Raises:
            ValueError: if the port does not exist or ``time`` is not of the port's domain.

        Runtime complexity: O(1) for an int time or a pair, O(depth) for a deeper Product.
        """
        self.update_pointstamps(((True, node, port, time, delta),))

    def update_target(self, node: int, port: int, time: Time, delta: int) -> None:
        """Buffer a change of the messages in flight to input ``port`` of ``node``; as
        :meth:`update_source` otherwise."""
        self.update_pointstamps(((False, node, port, time, delta),))

    def update(self, changes: Iterable[tuple[Location | tuple[int, int, bool], Time, int]]) -> None:
        """Buffer a batch of ``(location, time, delta)`` changes.

        A location is a :class:`Location` or a plain ``(node, port, is_source)`` tuple.

        Raises:
            ValueError: if a port does not exist or a time is not valid; changes before the
                offending one stay buffered.

        Runtime complexity: O(len(changes)).
        """
        self.update_pointstamps(_port_changes(changes))

    def update_pointstamps(self, changes: Iterable[tuple[bool, int, int, Time, int]]) -> None:
        """Buffer a batch of ``(is_source, node, port, time, delta)`` changes.

        This is the format workers exchange (a capability change at output ``port`` when
        ``is_source``, a message change at input ``port`` otherwise); it is the fastest way in.

        Raises:
            ValueError: if a port does not exist or a time is not of its domain (naming the
                port); changes before the offending one stay buffered.

        Runtime complexity: O(len(changes)).
        """
        source_ids = self._source_ids
        target_ids = self._target_ids
        readers = self._readers
        pending = self._pending
        count = 0
        try:
            for is_source, node, port, time, delta in changes:
                if not delta:
                    continue
                loc = (source_ids if is_source else target_ids).get((node, port))
                if loc is None:
                    kind = "output" if is_source else "input"
                    msg = f"no {kind} port {port!r} on node {node!r}"
                    raise ValueError(msg)
                key = (loc, readers[loc](time))
                pending[key] = pending.get(key, 0) + delta
                count += 1
        finally:
            self._pending_count += count

    # -- propagation --------------------------------------------------------------------------

    def propagate(self) -> list[tuple[int, int, Time, int]]:
        """Apply every buffered change; return the input-port frontier changes.

        Returns:
            Consolidated ``(node, in_port, time, +1 | -1)`` changes of input-port frontiers
            (``+1``: ``time`` joined the frontier; ``-1``: it left), in a deterministic order:
            by input port in the order they were first reached, then times leaving, then
            times joining, each in sort order.

        Runtime complexity: see the class docstring.
        """
        if not self._pending:
            return []
        node_port = self._node_port
        time_of = self._time_of
        frontiers = self._frontiers
        out: list[tuple[int, int, Time, int]] = []
        for loc, old in self._propagate().items():
            new = frontiers[loc]
            node, port = node_port[loc]
            out.extend([(node, port, time_of(t), -1) for t in sorted(old) if t not in new])
            out.extend([(node, port, time_of(t), 1) for t in sorted(new) if t not in old])
        self._reported += len(out)
        return out

    def propagate_inputs(self) -> list[tuple[int, int]]:
        """Apply every buffered change; return the input ports whose frontier changed.

        Like :meth:`propagate`, but without listing the times: the new frontiers are what
        :meth:`frontier` returns (built on first request, then cached until they move).

        Returns:
            ``(node, in_port)`` for every input port whose frontier differs from before the
            call, in a deterministic order (the order they were first reached).

        Runtime complexity: see the class docstring.
        """
        if not self._pending:
            return []
        node_port = self._node_port
        frontiers = self._frontiers
        out = []
        changes = 0
        for loc, old in self._propagate().items():
            frontier = frontiers[loc]
            common = 0
            for t in old:
                if t in frontier:
                    common += 1
            n = len(frontier)
            if common == n == len(old):
                continue  # moved and moved back
            changes += len(old) + n - 2 * common
            out.append(node_port[loc])
        self._reported += changes
        return out

    def _propagate(self) -> dict[int, list[Coords]]:
        """Apply the buffered changes.

        Returns:
            For every input port whose frontier may have moved (internal location id), its
            frontier before the call; its current frontier is ``self._frontiers[loc]``.
        """
        pending = self._pending
        self._pending = {}
        self._pending_count = 0
        self._propagations += 1
        if len(self._times) > self.TIME_CACHE_SIZE:
            self._times.clear()  # the readers hold this dict
        if len(self._antichain_memo) > self.TIME_CACHE_SIZE:
            self._antichain_memo = {}
        heap = self._apply_pointstamps(pending)
        before: dict[int, list[Coords]] = {}
        self._pops += self._apply_implications(heap, before)
        return before

    def _apply_pointstamps(
        self, pending: dict[tuple[int, Coords], int]
    ) -> list[tuple[tuple[Any, ...], int, int]]:
        """Apply buffered changes to the pointstamps; return the worklist of implication changes.

        The worklist is a heap of ``(key, location, diff)``: the key is the time's coordinates,
        padded for locations of outer scopes (``_pads``, see ``__init__``).
        """
        heap: list[tuple[tuple[Any, ...], int, int]] = []
        all_stamps = self._stamps
        stamp_frontiers = self._stamp_frontiers
        occupied = self._occupied
        pads = self._pads
        stamp_targets = self._stamp_targets
        updaters = self._updaters
        for (loc, t), d in pending.items():
            if not d:
                continue
            frontier = stamp_frontiers[loc]
            was_empty = not frontier
            moved = updaters[loc](all_stamps[loc], frontier, t, d)
            if moved is not None:
                if was_empty:
                    occupied += 1
                elif not frontier:
                    occupied -= 1
                for target, results_in in stamp_targets[loc]:
                    pad = pads[target]
                    for t2, d2 in moved:
                        if results_in is not None:
                            t2 = results_in(t2)
                        heap.append((t2 + pad if pad else t2, target, d2))
        self._occupied = occupied
        heapq.heapify(heap)
        return heap

    def _apply_implications(
        self, heap: list[tuple[tuple[Any, ...], int, int]], before: dict[int, list[Coords]]
    ) -> int:
        """Apply the worklist ``heap`` to the implications, in (time, location) order.

        Records in ``before`` the frontier of every location it moves, as it was before this
        call. Returns the number of entries popped off the heap.
        """
        heappush = heapq.heappush
        heappop = heapq.heappop
        all_counts = self._counts
        all_frontiers = self._frontiers
        antichains = self._antichains
        ident_succ = self._ident_succ
        other_succ = self._other_succ
        chain_succ = self._chain_succ
        pads = self._pads
        updaters = self._updaters
        pops = 0
        # ``t, loc, d`` is the next change to apply: popped off the heap (summed with every
        # entry for the same time and location), or handed over directly by its predecessor.
        direct = False
        t: tuple[Any, ...] = ()
        loc = d = 0
        while True:
            if direct:
                direct = False
            elif heap:
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
                pad = pads[loc]
                if pad:
                    t = t[: -len(pad)]
            else:
                break
            frontier = all_frontiers[loc]
            if loc in before:
                moved = updaters[loc](all_counts[loc], frontier, t, d)
                if moved is None:
                    continue
            else:
                old = frontier[:]
                moved = updaters[loc](all_counts[loc], frontier, t, d)
                if moved is None:
                    continue
                before[loc] = old
            antichains[loc] = None
            succ = chain_succ[loc]
            pad = pads[loc]  # an identity successor's too: same depth
            if succ >= 0 and len(moved) == 1:
                # One change to the only successor: if nothing on the heap comes first, apply
                # it next without the heap (no entry for the same time and location exists).
                t2, d2 = moved[0]
                if heap:
                    k2 = t2 + pad if pad else t2
                    top = heap[0]
                    if not (k2 < top[0] or (k2 == top[0] and succ < top[1])):
                        heappush(heap, (k2, succ, d2))
                        continue
                t, loc, d = t2, succ, d2
                direct = True
                continue
            for succ in ident_succ[loc]:
                for t2, d2 in moved:
                    heappush(heap, (t2 + pad if pad else t2, succ, d2))
            for succ, results_in, pad2 in other_succ[loc]:
                for t2, d2 in moved:
                    k2 = results_in(t2)
                    heappush(heap, (k2 + pad2 if pad2 else k2, succ, d2))
        return pops

    # -- queries ------------------------------------------------------------------------------

    def _time_of(self, coords: Coords) -> Time:
        """The time with ``coords``: the one given to the tracker if remembered, else rebuilt."""
        if len(coords) == 1:
            return coords[0]
        time = self._times.get(coords)
        if time is None:
            time = self._times[coords] = from_coords(coords)
        return time

    def _antichain(self, loc: int) -> Antichain:
        """The implications frontier of internal location ``loc`` as an Antichain (cached)."""
        out = self._antichains[loc]
        if out is None:
            out = self._antichains[loc] = self._to_antichain(self._frontiers[loc], loc)
        return out

    def _to_antichain(self, frontier: list[Coords], loc: int) -> Antichain:
        """The Antichain of ``frontier``'s times at internal location ``loc``, comparing them
        by the location's domain; equal frontiers share one (memoized: equal coordinates
        have one depth)."""
        if not frontier:
            return _EMPTY
        # A frontier of one element is keyed by its coordinates, a larger one by the sorted
        # tuple of them (coordinate tuples sort exactly as the times do); the two never clash.
        n = len(frontier)
        key: Any
        if n == 1:
            key = frontier[0]
        elif n == 2:
            a, b = frontier
            key = (a, b) if a < b else (b, a)
        else:
            key = tuple(sorted(frontier))
        memo = self._antichain_memo
        out = memo.get(key)
        if out is None:
            time_of = self._time_of
            domain = self._domains[loc]
            if n == 1:
                out = Antichain.from_sorted((time_of(key),), domain)
            else:
                out = Antichain.from_sorted(tuple([time_of(c) for c in key]), domain)
            memo[key] = out
        return out

    def frontier(self, node: int, in_port: int) -> Antichain:
        """The frontier of input ``in_port`` of ``node``: minimal times that could still arrive.

        Raises:
            ValueError: if the port does not exist.

        Runtime complexity: O(1) when the frontier did not change since it was last asked for;
        O(size log size) otherwise.
        """
        loc = self._target_loc(node, in_port)
        if self._kept[self._graph_ids[loc]]:
            return self._antichain(loc)
        return self._to_antichain(self._implied(self._graph_ids[loc]), loc)

    def is_watched(self, node: int, in_port: int) -> bool:
        """True if the frontier of input ``in_port`` of ``node`` is kept between propagations
        and its changes reported (every input port not declared unwatched, and those that
        had to be kept after all to break a cycle).

        Raises:
            ValueError: if the port does not exist.
        """
        return self._kept[self._graph_ids[self._target_loc(node, in_port)]]

    def source_frontier(self, node: int, out_port: int) -> Antichain:
        """The minimal times that could still be sent from output ``out_port`` of ``node``.

        Includes the node's own capabilities there and everything its inputs could still
        receive, mapped through its summaries.

        Raises:
            ValueError: if the port does not exist.

        Runtime complexity: outputs keep no frontier (see the class docstring): it is made
        from the pointstamps and frontiers back to the nearest kept input ports, O(m log m)
        for the m elements gathered.
        """
        loc = self._source_loc(node, out_port)
        return self._to_antichain(self._implied(self._graph_ids[loc]), loc)

    def _source_loc(self, node: int, port: int) -> int:
        """The internal location of output ``port`` of ``node``; ValueError if there is none."""
        return self._port_loc(self._source_ids, "output", node, port)

    def _target_loc(self, node: int, port: int) -> int:
        """The internal location of input ``port`` of ``node``; ValueError if there is none."""
        return self._port_loc(self._target_ids, "input", node, port)

    @staticmethod
    def _port_loc(ids: dict[Port, int], kind: str, node: int, port: int) -> int:
        try:
            return ids[(node, port)]
        except KeyError:
            msg = f"no {kind} port {port!r} on node {node!r}"
            raise ValueError(msg) from None

    def _implied(self, g: int) -> list[Coords]:
        """The implications frontier of graph location ``g``, which is not kept: its own
        pointstamps and its predecessors' implications mapped along the arcs, made back to
        the nearest kept locations (those that are not kept form no cycle)."""
        internal = self._internal_ids
        kept = self._kept
        preds = self._preds
        made: dict[int, list[Coords]] = {}
        chain = postorder([g], lambda u: [p for p, _ in preds[u] if not kept[p]])
        for u in chain:
            times = list(self._stamp_frontiers[internal[u]])
            for p, results_in in preds[u]:
                before = self._frontiers[internal[p]] if kept[p] else made[p]
                times.extend(before if results_in is None else [results_in(c) for c in before])
            made[u] = minimal(times)
        return made[g]

    def domain_at(self, location: Location) -> TimeDomain | None:
        """The time domain ``location``'s times are read with (``None``: no node connected
        to it declared its depth, any flat time is taken).

        Raises:
            ValueError: if the port does not exist.
        """
        return self._domains[self._internal_ids[self.graph.location_id(location)]]

    def pointstamps(self, location: Location) -> Antichain:
        """The minimal times with a positive pointstamp count *at* ``location`` itself."""
        loc = self._internal_ids[self.graph.location_id(location)]
        return self._to_antichain(self._stamp_frontiers[loc], loc)

    def held(self) -> list[tuple[Location, Antichain]]:
        """Every location holding positive pointstamps, with their minimal times.

        Useful to see what holds a frontier back ("where is my dataflow stuck?").

        Runtime complexity: O(number of locations).
        """
        graph = self.graph
        internal = self._internal_ids
        stamp_frontiers = self._stamp_frontiers
        return [
            (graph.location(g), self._to_antichain(stamp_frontiers[internal[g]], internal[g]))
            for g in range(graph.location_count)
            if stamp_frontiers[internal[g]]
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

        Checks each location's pointstamp frontier against its counts, the implication counts
        against the frontiers they are derived from, every frontier against a walk of every
        pointstamp through all paths that keeps per location only the minimal times reached
        (an ``AssertionError`` after ``max_steps`` steps), and every cached frontier.
        """
        graph = self.graph
        n = graph.location_count
        internal = self._internal_ids
        seeds: list[tuple[int, Time]] = []
        occupied = 0
        for g in range(n):
            loc = internal[g]
            frontier = self._stamp_frontiers[loc]
            check_counted(self._stamps[loc], frontier, graph.describe(g))
            if frontier:
                occupied += 1
            seeds.extend((g, from_coords(c)) for c in frontier)
        assert occupied == self._occupied, (occupied, self._occupied)
        # Implication counts, kept at kept locations only: one per pointstamp frontier
        # element of each location whose pointstamps are carried there, plus one per
        # implication frontier element of each kept location carried there, each mapped
        # along the summary of its carried arc.
        expected_counts: list[dict[Coords, int]] = [{} for _ in range(n)]
        for arcs, frontiers in (
            (self._stamp_arcs, self._stamp_frontiers),
            (self._carried, self._frontiers),
        ):
            for g in range(n):
                for succ, summary in arcs[g]:
                    for c in frontiers[internal[g]]:
                        c2 = to_coords(summary.results_in(from_coords(c)))
                        expected_counts[succ][c2] = expected_counts[succ].get(c2, 0) + 1
        expected = _naive_frontiers(graph, seeds, max_steps)
        for g in range(n):
            loc = internal[g]
            counts, frontier = self._counts[loc], self._frontiers[loc]
            where = graph.describe(g)
            if not self._kept[g]:
                assert not counts and not frontier, (where, counts, frontier)
                got = {from_coords(c) for c in self._implied(g)}
                assert got == expected[g], (where, got, expected[g])
                continue
            assert counts == expected_counts[g], (where, counts, expected_counts[g])
            check_counted(counts, frontier, where)
            assert {from_coords(c) for c in frontier} == expected[g], (where, frontier, expected[g])
            cached = self._antichains[loc]
            if cached is not None:
                assert cached == self._to_antichain(frontier, loc), (where, cached, frontier)
                cached._check()
        for c, time in self._times.items():
            assert to_coords(time) == c, (c, time)

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
