"""Tests for deltaflow.framework.progress: graph validation and the progress tracker."""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from deltaflow.framework.antichain import Antichain
from deltaflow.framework.lattice import Product, Time, less_equal, sort_key
from deltaflow.framework.progress import (
    GraphBuilder,
    Location,
    ProgressGraph,
    ProgressGraphBuilder,
    ProgressStatistics,
    ProgressTracker,
)
from deltaflow.framework.summary import PathSummary

ENTER = {(0, 0): PathSummary.enter()}
LEAVE = {(0, 0): PathSummary.leave()}


def FEEDBACK(step: int = 1) -> dict[tuple[int, int], PathSummary]:
    return {(0, 0): PathSummary.feedback(step)}


def P(*coords: int) -> Time:
    """Product(Product(a, b), c) from P(a, b, c); a plain int from P(a)."""
    out: Time = coords[0]
    for c in coords[1:]:
        out = Product(out, c)
    return out


def A(*times: Time) -> Antichain:
    return Antichain(times)


def loc_order(loc: Location) -> tuple[int, int, bool]:
    return (loc.node, loc.port, loc.is_source)


# -- an independent model -----------------------------------------------------------------------


def naive_frontiers(
    graph: ProgressGraph, counts: dict[Location, Counter[Time]]
) -> dict[Location, set[Time]]:
    """Minimal times reachable at every location from the positive pointstamps, from scratch.

    Uses only the graph's public description (summaries per node, edges), walking times in
    sort order and skipping any time dominated by one already reached at that location.
    """
    succ: dict[Location, list[tuple[Location, PathSummary]]] = {}
    for node, mapping in enumerate(graph.summaries):
        for (i, o), s in mapping.items():
            succ.setdefault(Location.target(node, i), []).append((Location.source(node, o), s))
    for (sn, sp), (tn, tp) in graph.edges:
        succ.setdefault(Location.source(sn, sp), []).append(
            (Location.target(tn, tp), PathSummary.identity())
        )
    reached: dict[Location, list[Time]] = {}
    order = itertools.count()
    heap: list[tuple[tuple[int, ...], int, Location, Time]] = [
        (sort_key(t), next(order), loc, t)
        for loc, counter in counts.items()
        for t, c in counter.items()
        if c > 0
    ]
    heapq.heapify(heap)
    steps = 0
    while heap:
        steps += 1
        assert steps < 200_000
        _, _, loc, t = heapq.heappop(heap)
        current = reached.setdefault(loc, [])
        if any(less_equal(e, t) for e in current):
            continue
        current[:] = [e for e in current if not less_equal(t, e)]
        current.append(t)
        for nxt, s in succ.get(loc, ()):
            t2 = s.results_in(t)
            heapq.heappush(heap, (sort_key(t2), next(order), nxt, t2))
    return {loc: set(ts) for loc, ts in reached.items()}


def all_input_ports(graph: ProgressGraph) -> list[tuple[int, int]]:
    return [(n, p) for n in range(graph.node_count) for p in range(graph.input_counts[n])]


def assert_matches_naive(tracker: ProgressTracker, counts: dict[Location, Counter[Time]]) -> None:
    graph = tracker.graph
    expected = naive_frontiers(graph, counts)
    for node, port in all_input_ports(graph):
        want = expected.get(Location.target(node, port), set())
        assert set(tracker.frontier(node, port)) == want, (graph.names[node], port)
    for node in range(graph.node_count):
        for port in range(graph.output_counts[node]):
            want = expected.get(Location.source(node, port), set())
            assert set(tracker.source_frontier(node, port)) == want, (graph.names[node], port)


# -- fixtures: small graphs ---------------------------------------------------------------------


def chain(n: int) -> tuple[ProgressGraph, list[int]]:
    b = ProgressGraphBuilder()
    nodes = [b.add_node("input", 0, 1)]
    for i in range(n):
        nodes.append(b.add_node(f"op{i}", 1, 1))
        b.add_edge((nodes[-2], 0), (nodes[-1], 0))
    return b.build(), nodes


def wired(
    nodes: list[tuple[Any, ...]], edges: list[tuple[str, str, int]]
) -> tuple[ProgressGraphBuilder, dict[str, int]]:
    """A builder holding ``nodes`` (``(name, inputs, outputs[, summaries])``) wired by
    ``edges`` (``(source, target, target's port)``, each from its source's port 0), and the
    nodes' ids by name."""
    b = ProgressGraphBuilder()
    n = {node[0]: b.add_node(*node) for node in nodes}
    for src, dst, port in edges:
        b.add_edge((n[src], 0), (n[dst], port))
    return b, n


def loop_graph() -> tuple[ProgressGraph, dict[str, int]]:
    """input -> enter -> head(2 in) -> body -> feedback -> head.1; body -> leave -> sink."""
    b, n = wired(
        [
            ("input", 0, 1),
            ("enter", 1, 1, ENTER),
            ("head", 2, 1),
            ("body", 1, 1),
            ("feedback", 1, 1, FEEDBACK()),
            ("leave", 1, 1, LEAVE),
            ("sink", 1, 0),
        ],
        [
            ("input", "enter", 0),
            ("enter", "head", 0),
            ("head", "body", 0),
            ("body", "feedback", 0),
            ("feedback", "head", 1),
            ("body", "leave", 0),
            ("leave", "sink", 0),
        ],
    )
    return b.build(), n


def nested_loop_graph() -> tuple[ProgressGraph, dict[str, int]]:
    """An outer loop whose body contains an inner loop; times Product(Product(t, i), j)."""
    b, n = wired(
        [
            ("input", 0, 1),
            ("enter1", 1, 1, ENTER),
            ("head1", 2, 1),
            ("enter2", 1, 1, ENTER),
            ("head2", 2, 1),
            ("body2", 1, 1),
            ("fb2", 1, 1, FEEDBACK()),
            ("leave2", 1, 1, LEAVE),
            ("body1", 1, 1),
            ("fb1", 1, 1, FEEDBACK()),
            ("leave1", 1, 1, LEAVE),
            ("sink", 1, 0),
        ],
        [
            ("input", "enter1", 0),
            ("enter1", "head1", 0),
            ("head1", "enter2", 0),
            ("enter2", "head2", 0),
            ("head2", "body2", 0),
            ("body2", "fb2", 0),
            ("fb2", "head2", 1),
            ("body2", "leave2", 0),
            ("leave2", "body1", 0),
            ("body1", "fb1", 0),
            ("fb1", "head1", 1),
            ("body1", "leave1", 0),
            ("leave1", "sink", 0),
        ],
    )
    return b.build(), n


# -- unit tests: chains and diamonds ------------------------------------------------------------


def test_chain_capability_moves_and_drops() -> None:
    """A capability moving t -> t+1 at the input moves every downstream frontier, then empties."""
    graph, nodes = chain(4)
    tracker = ProgressTracker(graph)
    assert tracker.is_complete()
    tracker.update_source(nodes[0], 0, 0, 1)
    changes = tracker.propagate()
    assert sorted(changes) == [(n, 0, 0, 1) for n in nodes[1:]]
    assert not tracker.is_complete()

    tracker.update_source(nodes[0], 0, 1, 1)
    tracker.update_source(nodes[0], 0, 0, -1)
    changes = tracker.propagate()
    assert sorted(changes) == sorted(
        [(n, 0, 0, -1) for n in nodes[1:]] + [(n, 0, 1, 1) for n in nodes[1:]]
    )
    assert all(tracker.frontier(n, 0) == A(1) for n in nodes[1:])
    assert tracker.source_frontier(nodes[-1], 0) == A(1)

    tracker.update_source(nodes[0], 0, 1, -1)
    changes = tracker.propagate()
    assert sorted(changes) == [(n, 0, 1, -1) for n in nodes[1:]]
    assert tracker.is_complete()
    assert all(tracker.frontier(n, 0).is_empty() for n in nodes[1:])
    tracker._check()


def test_messages_in_flight_hold_only_their_port_and_downstream() -> None:
    """A message at an input port holds that port and everything downstream, not upstream."""
    graph, nodes = chain(3)
    tracker = ProgressTracker(graph)
    tracker.update_source(nodes[0], 0, 5, 1)
    tracker.update_target(nodes[2], 0, 2, 1)
    tracker.propagate()
    assert tracker.frontier(nodes[1], 0) == A(5)
    assert tracker.frontier(nodes[2], 0) == A(2)
    assert tracker.frontier(nodes[3], 0) == A(2)
    tracker._check()


def test_diamond_takes_the_minimum_of_both_paths() -> None:
    """A join of two branches sees the least time either branch can still deliver."""
    b = GraphBuilder()
    src = b.add_node("input", 0, 1)
    left = b.add_node("left", 1, 1)
    right = b.add_node("right", 1, 1, {(0, 0): PathSummary.feedback(2)})  # a delay by 2
    join = b.add_node("join", 2, 1)
    sink = b.add_node("sink", 1, 0)
    b.add_edge((src, 0), (left, 0))
    b.add_edge((src, 0), (right, 0))
    b.add_edge((left, 0), (join, 0))
    b.add_edge((right, 0), (join, 1))
    b.add_edge((join, 0), (sink, 0))
    tracker = ProgressTracker(b.build())
    tracker.update_source(src, 0, 3, 1)
    tracker.propagate()
    assert tracker.frontier(join, 0) == A(3)
    assert tracker.frontier(join, 1) == A(5)
    assert tracker.frontier(sink, 0) == A(3)
    # The left branch holds a message at 1: only the left path and below move back.
    tracker.update_target(left, 0, 1, 1)
    changes = tracker.propagate()
    expected = [(n, 0, t, d) for n in (left, join, sink) for t, d in ((1, 1), (3, -1))]
    assert sorted(changes) == sorted(expected)
    assert tracker.frontier(join, 1) == A(5)
    tracker._check()


def test_product_frontiers_can_hold_incomparable_times() -> None:
    """Two incomparable pointstamps both stay in a downstream frontier."""
    graph, nodes = chain(2)
    tracker = ProgressTracker(graph)
    tracker.update_source(nodes[0], 0, Product(1, 5), 1)
    tracker.update_source(nodes[0], 0, Product(2, 3), 1)
    tracker.update_source(nodes[0], 0, Product(2, 6), 1)
    tracker.propagate()
    assert tracker.frontier(nodes[2], 0) == A(Product(1, 5), Product(2, 3))
    tracker.update_source(nodes[0], 0, Product(1, 5), -1)
    changes = tracker.propagate()
    assert (nodes[2], 0, Product(1, 5), -1) in changes
    assert tracker.frontier(nodes[2], 0) == A(Product(2, 3))
    tracker._check()


# -- counts: consolidation and negatives --------------------------------------------------------


def test_changes_cancelling_within_a_batch_report_nothing() -> None:
    """+1 and -1 at one time in the same propagate leave frontiers and the report unchanged."""
    graph, nodes = chain(2)
    tracker = ProgressTracker(graph)
    tracker.update_source(nodes[0], 0, 3, 1)
    tracker.propagate()
    tracker.update_target(nodes[1], 0, 1, 1)
    tracker.update_target(nodes[1], 0, 1, -1)
    tracker.update_source(nodes[0], 0, 2, 1)
    tracker.update_source(nodes[0], 0, 2, -1)
    assert tracker.has_pending()
    assert tracker.propagate() == []
    assert not tracker.has_pending()
    assert tracker.frontier(nodes[2], 0) == A(3)
    assert tracker.propagate() == []


def test_transiently_negative_counts_are_tolerated() -> None:
    """A consumed (-1) seen before its produced (+1) neither holds nor breaks any frontier."""
    graph, nodes = chain(2)
    tracker = ProgressTracker(graph)
    tracker.update_source(nodes[0], 0, 4, 1)
    tracker.propagate()
    tracker.update_target(nodes[1], 0, 2, -1)
    assert tracker.propagate() == []
    assert tracker.frontier(nodes[1], 0) == A(4)
    tracker._check()
    tracker.update_target(nodes[1], 0, 2, 1)
    assert tracker.propagate() == []
    assert tracker.frontier(nodes[2], 0) == A(4)
    # A second +1 makes the count positive and the time appears.
    tracker.update_target(nodes[1], 0, 2, 1)
    assert sorted(tracker.propagate()) == sorted(
        [(nodes[1], 0, 2, 1), (nodes[1], 0, 4, -1), (nodes[2], 0, 2, 1), (nodes[2], 0, 4, -1)]
    )
    tracker._check()


def test_batch_update_accepts_locations_and_tuples() -> None:
    """update() takes Location objects or (node, port, is_source) tuples, and skips zeros."""
    graph, nodes = chain(2)
    tracker = ProgressTracker(graph)
    tracker.update(
        [
            (Location.source(nodes[0], 0), 7, 1),
            ((nodes[2], 0, False), 3, 1),
            (Location.target(nodes[1], 0), 1, 0),
        ]
    )
    assert tracker.statistics().pending == 2
    tracker.propagate()
    assert tracker.frontier(nodes[1], 0) == A(7)
    assert tracker.frontier(nodes[2], 0) == A(3)
    assert tracker.pointstamps(Location.target(nodes[2], 0)) == A(3)
    assert tracker.held() == [
        (Location.source(nodes[0], 0), A(7)),
        (Location.target(nodes[2], 0), A(3)),
    ]
    stats = tracker.statistics()
    assert isinstance(stats, ProgressStatistics)
    assert stats.propagations == 1 and stats.pending == 0 and stats.occupied_locations == 2
    assert stats.frontier_changes == 2 and stats.worklist_pops > 0


def test_unknown_ports_are_rejected() -> None:
    """Updates and queries naming a port that does not exist raise ValueError."""
    graph, nodes = chain(1)
    tracker = ProgressTracker(graph)
    with pytest.raises(ValueError, match="no output port 1"):
        tracker.update_source(nodes[0], 1, 0, 1)
    with pytest.raises(ValueError, match="no input port 0 on node 0"):
        tracker.update_target(nodes[0], 0, 0, 1)
    with pytest.raises(ValueError, match="no input port"):
        tracker.update([((nodes[1], 3, False), 0, 1)])
    with pytest.raises(ValueError, match="no input port"):
        tracker.frontier(nodes[0], 0)
    with pytest.raises(ValueError, match="no output port"):
        tracker.source_frontier(nodes[1], 1)
    assert not tracker.has_pending()


def test_times_must_use_the_flat_encoding() -> None:
    """Times whose inner coordinate is not an int (or bools) are rejected when buffered."""
    graph, nodes = chain(1)
    tracker = ProgressTracker(graph)
    with pytest.raises(ValueError, match="Product\\(Product\\(t, i\\), j\\)"):
        tracker.update_source(nodes[0], 0, Product(1, Product(2, 3)), 1)
    with pytest.raises(ValueError, match="progress times"):
        tracker.update_target(nodes[1], 0, True, 1)
    with pytest.raises(ValueError, match="progress times"):
        tracker.update([(Location.source(nodes[0], 0), Product("a", 1), 1)])
    assert not tracker.has_pending()
    tracker.update_source(nodes[0], 0, Product(Product(1, 2), 3), 1)
    tracker.propagate()
    assert tracker.frontier(nodes[1], 0) == A(P(1, 2, 3))


def test_declared_depths_fix_every_connected_locations_domain() -> None:
    """One node's declared depth fixes the depth of every location connected to it, through
    enter and leave; the tracker reads each with its domain and rejects another shape there,
    naming the port; a component no node declared takes any flat time."""
    b = ProgressGraphBuilder()
    inp = b.add_node("input", 0, 1)
    enter = b.add_node("enter", 1, 1, ENTER)
    enter2 = b.add_node("enter2", 1, 1, ENTER, depth=2)
    leave2 = b.add_node("leave2", 1, 1, LEAVE)
    sink = b.add_node("sink", 1, 0)
    alone = b.add_node("alone", 0, 1)
    for src, dst in [(inp, enter), (enter, enter2), (enter2, leave2), (leave2, sink)]:
        b.add_edge((src, 0), (dst, 0))
    graph = b.build()
    locations = map(graph.location, range(graph.location_count))
    depth = {loc: graph.depths[graph.location_id(loc)] for loc in locations}
    assert depth == {
        Location.source(inp, 0): 0,
        Location.target(enter, 0): 0,
        Location.source(enter, 0): 1,
        Location.target(enter2, 0): 1,
        Location.source(enter2, 0): 2,
        Location.target(leave2, 0): 2,
        Location.source(leave2, 0): 1,
        Location.target(sink, 0): 1,
        Location.source(alone, 0): None,
    }
    tracker = ProgressTracker(graph)
    names = [None, "int", "pair", "general"]
    for loc, d in depth.items():
        domain = tracker.domain_at(loc)
        assert (domain and domain.name) == (None if d is None else names[d + 1]), loc
    with pytest.raises(ValueError, match="progress times at 'enter' output 0 must be a flat"):
        tracker.update_source(enter, 0, 3, 1)
    with pytest.raises(ValueError, match="progress times at 'leave2' input 0 must be"):
        tracker.update_target(leave2, 0, P(1, 2), 1)
    with pytest.raises(ValueError, match="progress times at 'input' output 0 must be an int"):
        tracker.update_pointstamps([(True, inp, 0, 1, 1), (True, inp, 0, P(1, 2), 1)])
    tracker.update_source(alone, 0, P(1, 2, 3, 4), 1)
    tracker.update_source(enter2, 0, P(0, 0, 0), 1)
    assert tracker.statistics().pending == 3  # the int before the bad pair stays buffered
    tracker.propagate()
    assert tracker.frontier(sink, 0) == A(P(0, 0))
    assert tracker.frontier(enter2, 0) == A(P(1, 0))
    tracker._check()


def test_declared_depths_must_agree() -> None:
    """Two nodes whose declared depths disagree along the summaries between them, or a
    declared depth that would leave some location below the top scope, are rejected."""
    b = ProgressGraphBuilder()
    inp = b.add_node("input", 0, 1, depth=0)
    enter = b.add_node("enter", 1, 1, ENTER, depth=2)
    b.add_edge((inp, 0), (enter, 0))
    with pytest.raises(ValueError, match="'enter' is declared at depth 2, which disagrees by"):
        b.build()
    b = ProgressGraphBuilder()
    inp = b.add_node("input", 0, 1)
    enter = b.add_node("enter", 1, 1, ENTER, depth=0)
    b.add_edge((inp, 0), (enter, 0))
    with pytest.raises(ValueError, match="'input' output 0 would see times of depth -1"):
        b.build()
    with pytest.raises(ValueError, match="depth must be a non-negative int or None"):
        b.add_node("bad", 1, 1, depth=-1)


def test_bulk_updates_match_single_updates() -> None:
    """update_pointstamps takes the workers' (is_source, node, port, time, delta) tuples."""
    graph, n = loop_graph()
    changes = [
        (True, n["input"], 0, 0, 1),
        (False, n["body"], 0, P(0, 2), 1),
        (False, n["body"], 0, P(0, 2), -1),
        (True, n["body"], 0, P(0, 1), 2),
        (False, n["sink"], 0, 4, 0),
    ]
    bulk, single = ProgressTracker(graph), ProgressTracker(graph)
    bulk.update_pointstamps(changes)
    for is_source, node, port, time, delta in changes:
        (single.update_source if is_source else single.update_target)(node, port, time, delta)
    assert bulk.statistics().pending == single.statistics().pending == 4
    assert sorted(bulk.propagate()) == sorted(single.propagate())
    for node, port in all_input_ports(graph):
        assert bulk.frontier(node, port) == single.frontier(node, port)
    bulk._check()


def test_bulk_updates_validate_and_keep_earlier_changes() -> None:
    """A bad port or time raises; the changes before it stay buffered."""
    graph, nodes = chain(1)
    tracker = ProgressTracker(graph)
    with pytest.raises(ValueError, match="no input port 2 on node 1"):
        tracker.update_pointstamps([(True, nodes[0], 0, 3, 1), (False, nodes[1], 2, 3, 1)])
    with pytest.raises(ValueError, match="no output port 1 on node 1"):
        tracker.update_pointstamps([(True, nodes[1], 1, 3, 1)])
    with pytest.raises(ValueError, match="progress times"):
        tracker.update_pointstamps([(True, nodes[0], 0, Product(1, Product(2, 3)), 1)])
    assert tracker.statistics().pending == 1
    assert tracker.propagate() == [(nodes[1], 0, 3, 1)]


def test_propagate_inputs_lists_exactly_the_ports_that_moved() -> None:
    """Ports whose frontier moves and moves back within one propagation are not listed."""
    graph, n = loop_graph()
    tracker = ProgressTracker(graph)
    tracker.update_source(n["input"], 0, 0, 1)
    tracker.update_source(n["body"], 0, P(0, 0), 1)
    assert sorted(tracker.propagate_inputs()) == all_input_ports(graph)
    tracker.update_source(n["input"], 0, 0, -1)
    assert sorted(tracker.propagate_inputs()) == [(n["enter"], 0), (n["head"], 0), (n["body"], 0)]
    assert tracker.frontier(n["head"], 0).is_empty()
    assert tracker.frontier(n["sink"], 0) == A(0)
    # The body moves from (0, 0) to (0, 1): the loop's ports move; the sink sees 0 either way
    # (it loses 0 when (0, 0) leaves the loop and gets it back when (0, 1) arrives).
    tracker.update_source(n["body"], 0, P(0, 1), 1)
    tracker.update_source(n["body"], 0, P(0, 0), -1)
    moved = tracker.propagate_inputs()
    assert sorted(moved) == [(n["head"], 1), (n["body"], 0), (n["feedback"], 0), (n["leave"], 0)]
    assert tracker.frontier(n["head"], 1) == A(P(0, 2))
    assert tracker.frontier(n["leave"], 0) == A(P(0, 1))
    assert tracker.propagate_inputs() == []
    tracker._check()


def test_frontiers_are_cached_until_they_move() -> None:
    """frontier() gives the same object while the frontier stands, a new one once it moves."""
    graph, nodes = chain(3)
    tracker = ProgressTracker(graph)
    tracker.update_source(nodes[0], 0, Product(1, 5), 1)
    tracker.update_source(nodes[0], 0, Product(2, 3), 1)
    tracker.propagate()
    first = tracker.frontier(nodes[1], 0)
    assert tracker.frontier(nodes[1], 0) is first
    assert tracker.frontier(nodes[3], 0) == first
    tracker.update_target(nodes[3], 0, Product(2, 2), 1)
    tracker.propagate()
    assert tracker.frontier(nodes[1], 0) is first
    assert tracker.frontier(nodes[3], 0) == A(Product(1, 5), Product(2, 2))
    tracker._check()


def test_unvalidated_graph_with_an_identity_cycle() -> None:
    """A graph built without validation still gets a tracker; its cycle's times settle.

    (Retractions around such a cycle are another matter: the cycle supports itself, which is
    why ``build()`` rejects it.)
    """
    ident = PathSummary.identity()
    graph = ProgressGraph(
        ("a", "b", "sink"),
        (1, 1, 1),
        (1, 1, 0),
        ({(0, 0): ident}, {(0, 0): ident}, {}),
        (((0, 0), (1, 0)), ((1, 0), (0, 0)), ((1, 0), (2, 0))),
    )
    tracker = ProgressTracker(graph)
    tracker.update_source(0, 0, 4, 1)
    tracker.update_target(0, 0, 6, 1)
    tracker.propagate()
    assert [tracker.frontier(node, 0) for node in range(3)] == [A(4)] * 3
    tracker.update_target(2, 0, 3, 1)
    assert tracker.propagate_inputs() == [(2, 0)]
    assert tracker.frontier(2, 0) == A(3)


def test_graph_accessors() -> None:
    """Locations have dense ids that round-trip; arcs follow edges and summaries."""
    graph, n = loop_graph()
    assert graph.node_count == 7
    assert graph.location_count == sum(graph.input_counts) + sum(graph.output_counts)
    for i in range(graph.location_count):
        assert graph.location_id(graph.location(i)) == i
    head_in1 = graph.location_id(Location.target(n["head"], 1))
    fb_out = graph.location_id(Location.source(n["feedback"], 0))
    assert graph.arcs(fb_out) == ((head_in1, PathSummary.identity()),)
    fb_in = graph.location_id(Location.target(n["feedback"], 0))
    assert graph.arcs(fb_in) == ((fb_out, PathSummary.feedback()),)
    assert graph.describe(head_in1) == "'head' input 1"
    with pytest.raises(ValueError, match="no output port 3"):
        graph.location_id(Location.source(n["head"], 3))
    assert "nodes=7" in repr(graph)


# -- loops --------------------------------------------------------------------------------------


def test_loop_frontiers_follow_the_outer_capability() -> None:
    """At a loop head, the entry sees (t, 0) and the feedback (t, 1); both move with t."""
    graph, n = loop_graph()
    tracker = ProgressTracker(graph)
    tracker.update_source(n["input"], 0, 0, 1)
    tracker.propagate()
    assert tracker.frontier(n["head"], 0) == A(P(0, 0))
    assert tracker.frontier(n["head"], 1) == A(P(0, 1))
    assert tracker.frontier(n["leave"], 0) == A(P(0, 0))
    assert tracker.frontier(n["sink"], 0) == A(0)

    tracker.update_source(n["input"], 0, 1, 1)
    tracker.update_source(n["input"], 0, 0, -1)
    changes = tracker.propagate()
    assert (n["head"], 0, P(0, 0), -1) in changes
    assert (n["head"], 0, P(1, 0), 1) in changes
    assert (n["sink"], 0, 1, 1) in changes
    assert tracker.frontier(n["head"], 1) == A(P(1, 1))
    assert tracker.frontier(n["sink"], 0) == A(1)
    tracker._check()


def test_loop_inner_rounds_advance_the_feedback_frontier() -> None:
    """With the input closed, a capability in the body at (t, r) sets the head to (t, r + 1)."""
    graph, n = loop_graph()
    tracker = ProgressTracker(graph)
    tracker.update_source(n["input"], 0, 0, 1)
    tracker.update_source(n["body"], 0, P(0, 0), 1)
    tracker.propagate()
    tracker.update_source(n["input"], 0, 0, -1)
    tracker.propagate()
    assert tracker.frontier(n["head"], 0).is_empty()
    assert tracker.frontier(n["head"], 1) == A(P(0, 1))
    assert tracker.frontier(n["sink"], 0) == A(0)
    for r in range(3):
        tracker.update_source(n["body"], 0, P(0, r + 1), 1)
        tracker.update_source(n["body"], 0, P(0, r), -1)
        changes = tracker.propagate()
        assert (n["head"], 1, P(0, r + 2), 1) in changes
        assert tracker.frontier(n["head"], 1) == A(P(0, r + 2))
        assert tracker.frontier(n["leave"], 0) == A(P(0, r + 1))
        assert tracker.frontier(n["sink"], 0) == A(0)
        tracker._check()
    tracker.update_source(n["body"], 0, P(0, 3), -1)
    changes = tracker.propagate()
    assert (n["sink"], 0, 0, -1) in changes
    assert tracker.is_complete()
    assert all(tracker.frontier(*port).is_empty() for port in all_input_ports(graph))


def test_unwatched_inputs_are_made_on_request_and_never_reported() -> None:
    """A loop whose feedback and leave inputs nobody reads: their frontiers are still right
    when asked for, but the tracker neither keeps nor reports them."""
    graph, n = loop_graph()
    unwatched = {(n["feedback"], 0), (n["leave"], 0), (n["enter"], 0)}
    tracker = ProgressTracker(graph, unwatched)
    assert [port for port in all_input_ports(graph) if not tracker.is_watched(*port)] == sorted(
        unwatched
    )
    tracker.update_source(n["input"], 0, 0, 1)
    tracker.update_source(n["body"], 0, P(0, 0), 1)
    changes = tracker.propagate()
    assert {(node, port) for node, port, _, _ in changes}.isdisjoint(unwatched)
    assert tracker.frontier(n["feedback"], 0) == A(P(0, 0))
    assert tracker.frontier(n["head"], 1) == A(P(0, 1))
    assert tracker.frontier(n["sink"], 0) == A(0)
    tracker.update_source(n["input"], 0, 0, -1)
    tracker.propagate()
    tracker.update_source(n["body"], 0, P(0, 1), 1)
    tracker.update_source(n["body"], 0, P(0, 0), -1)
    moved = tracker.propagate_inputs()
    assert sorted(moved) == sorted([(n["head"], 1), (n["body"], 0)])
    assert tracker.frontier(n["feedback"], 0) == A(P(0, 1))
    assert tracker.frontier(n["leave"], 0) == A(P(0, 1))
    assert tracker.frontier(n["head"], 1) == A(P(0, 2))
    assert tracker.frontier(n["sink"], 0) == A(0)
    tracker._check()
    with pytest.raises(ValueError, match="no input port 3"):
        ProgressTracker(graph, {(n["sink"], 3)})


def test_long_chains_of_unwatched_inputs() -> None:
    """Thousands of operators that read nothing in a row: built and queried without recursion."""
    graph, nodes = chain(3000)
    tracker = ProgressTracker(graph, [(node, 0) for node in nodes[1:-1]])
    tracker.update_source(nodes[0], 0, 4, 1)
    tracker.update_target(nodes[1500], 0, 2, 1)
    tracker.propagate()
    assert tracker.frontier(nodes[-1], 0) == A(2)
    assert tracker.frontier(nodes[1000], 0) == A(4)
    assert tracker.frontier(nodes[2000], 0) == A(2)
    assert tracker.source_frontier(nodes[-2], 0) == A(2)


def test_a_cycle_of_unwatched_inputs_keeps_one_of_them() -> None:
    """Changes travel from one kept input to the next, so a loop needs one kept somewhere."""
    graph, n = loop_graph()
    everything = set(all_input_ports(graph))
    tracker = ProgressTracker(graph, everything)
    kept = [port for port in all_input_ports(graph) if tracker.is_watched(*port)]
    assert len(kept) == 1 and kept[0][0] in (n["head"], n["body"], n["feedback"])
    tracker.update_source(n["input"], 0, 0, 1)
    tracker.propagate()
    tracker.update_source(n["head"], 0, P(0, 0), 1)
    tracker.update_source(n["input"], 0, 0, -1)
    tracker.propagate()
    assert tracker.frontier(n["sink"], 0) == A(0)
    tracker.update_source(n["head"], 0, P(0, 0), -1)
    tracker.propagate()
    assert tracker.is_complete()
    assert all(tracker.frontier(*port).is_empty() for port in everything)
    tracker._check()


def test_retracting_the_only_pointstamp_in_a_loop_terminates() -> None:
    """Retracting a loop's only pointstamp empties every frontier in a few steps.

    Removing (0, 0) at the head exposes the (0, 1) that the feedback still reports; a
    first-in-first-out worklist would chase that time around the loop for ever. In time order
    the retraction of (0, 1) arrives before anything at (0, 2) is looked at.
    """
    graph, n = loop_graph()
    tracker = ProgressTracker(graph)
    tracker.update_source(n["head"], 0, P(0, 0), 1)
    tracker.propagate()
    assert tracker.frontier(n["head"], 1) == A(P(0, 1))
    assert tracker.frontier(n["body"], 0) == A(P(0, 0))
    before = tracker.statistics().worklist_pops
    tracker.update_source(n["head"], 0, P(0, 0), -1)
    changes = tracker.propagate()
    assert tracker.statistics().worklist_pops - before < 30
    assert tracker.is_complete()
    assert all(tracker.frontier(*port).is_empty() for port in all_input_ports(graph))
    assert all(d == -1 for *_, d in changes)
    tracker._check()


def test_nested_loops() -> None:
    """Nested loops: times Product(Product(t, i), j); inner and outer feedback frontiers."""
    graph, n = nested_loop_graph()
    tracker = ProgressTracker(graph)
    tracker.update_source(n["input"], 0, 0, 1)
    tracker.propagate()
    assert tracker.frontier(n["head1"], 0) == A(P(0, 0))
    assert tracker.frontier(n["head1"], 1) == A(P(0, 1))
    assert tracker.frontier(n["head2"], 0) == A(P(0, 0, 0))
    assert tracker.frontier(n["head2"], 1) == A(P(0, 0, 1))
    assert tracker.frontier(n["sink"], 0) == A(0)
    tracker._check()

    # The input closes while the inner body holds ((0, 2), 5).
    tracker.update_source(n["body2"], 0, P(0, 2, 5), 1)
    tracker.update_source(n["input"], 0, 0, -1)
    tracker.propagate()
    assert tracker.frontier(n["leave2"], 0) == A(P(0, 2, 5), P(0, 3, 0))
    assert tracker.frontier(n["body1"], 0) == A(P(0, 2))
    assert tracker.frontier(n["head1"], 1) == A(P(0, 3))
    # The next outer round re-enters at ((0, 3), 0), incomparable with ((0, 2), 6).
    assert tracker.frontier(n["head2"], 0) == A(P(0, 3, 0))
    assert tracker.frontier(n["head2"], 1) == A(P(0, 2, 6), P(0, 3, 1))
    assert tracker.frontier(n["body2"], 0) == A(P(0, 2, 6), P(0, 3, 0))
    assert tracker.frontier(n["sink"], 0) == A(0)
    tracker._check()

    tracker.update_source(n["body2"], 0, P(0, 2, 5), -1)
    tracker.propagate()
    assert tracker.is_complete()
    assert all(tracker.frontier(*port).is_empty() for port in all_input_ports(graph))
    tracker._check()


# -- graph validation ---------------------------------------------------------------------------


def test_identity_cycle_rejected_naming_operators() -> None:
    """A cycle of identities is rejected; the message names the operators on it."""
    b, _ = wired(
        [("source", 0, 1), ("concat", 2, 1), ("map", 1, 1)],
        [("source", "concat", 0), ("concat", "map", 0), ("map", "concat", 1)],
    )
    with pytest.raises(ValueError, match="does not advance times") as info:
        b.build()
    message = str(info.value)
    assert "'concat'" in message and "'map'" in message and "'source'" not in message
    assert "itself" in message


def inner_cycle_through(*outer: Any) -> tuple[ProgressGraphBuilder, dict[str, int]]:
    """head -> leave -> the node ``outer`` (``(name, inputs, outputs[, summaries])``) ->
    enter -> head.1: a cycle leaving a loop and entering it again."""
    name = outer[0]
    return wired(
        [("head", 2, 1), ("leave", 1, 1, LEAVE), outer, ("enter", 1, 1, ENTER)],
        [("head", "leave", 0), ("leave", name, 0), (name, "enter", 0), ("enter", "head", 1)],
    )


def test_leave_then_enter_without_outer_feedback_rejected() -> None:
    """An inner cycle through leave and enter but no outer feedback does not advance times."""
    b, _ = inner_cycle_through("outer_map", 1, 1)
    with pytest.raises(ValueError, match="does not advance times") as info:
        b.build()
    assert "'outer_map'" in str(info.value)
    assert "PathSummary(pop=1, add=0, push=(0,))" in str(info.value)


def test_outer_feedback_through_nested_loop_is_accepted() -> None:
    """(t, i, j) -> (t, i + 1, 0) through an outer feedback is a valid cycle."""
    b, n = inner_cycle_through("outer_feedback", 1, 1, FEEDBACK())
    head = n["head"]
    tracker = ProgressTracker(b.build())
    tracker.update_source(head, 0, P(0, 2, 7), 1)
    tracker.propagate()
    assert tracker.frontier(head, 1) == A(P(0, 3, 0))
    tracker._check()
    nested_loop_graph()  # builds without error


def test_cycle_changing_depth_rejected() -> None:
    """A cycle that enters a loop and never leaves it changes depth and is rejected."""
    b, _ = wired(
        [("head", 2, 1), ("enter", 1, 1, ENTER), ("fb", 1, 1, FEEDBACK())],
        [("head", "enter", 0), ("enter", "fb", 0), ("fb", "head", 1)],
    )
    with pytest.raises(ValueError, match=r"nesting depth of times by \+1") as info:
        b.build()
    assert "'enter'" in str(info.value)


def test_mixed_depths_without_a_cycle_rejected() -> None:
    """Combining an outer collection with an inner one without enter/leave is rejected."""
    b, _ = wired(
        [("source", 0, 1), ("enter", 1, 1, ENTER), ("concat", 2, 1)],
        [("source", "enter", 0), ("enter", "concat", 0), ("source", "concat", 1)],
    )
    with pytest.raises(ValueError, match="different nesting depths"):
        b.build()


def test_feedback_cycle_in_a_node_summary_is_accepted() -> None:
    """A node whose own summary advances time may feed itself."""
    b = GraphBuilder()
    x = b.add_node("iterate_step", 1, 1, FEEDBACK())
    b.add_edge((x, 0), (x, 0))
    tracker = ProgressTracker(b.build())
    tracker.update_target(x, 0, 4, 1)
    tracker.propagate()
    assert tracker.frontier(x, 0) == A(4)
    assert tracker.source_frontier(x, 0) == A(5)


def test_builder_validates_ports_and_summaries() -> None:
    """Bad nodes, ports, summary keys and duplicate edges raise ValueError at once."""
    b = GraphBuilder()
    a = b.add_node("a", 1, 2, {(0, 1): PathSummary.identity()})
    c = b.add_node("c", 1, 1)
    with pytest.raises(ValueError, match="no node 5"):
        b.add_edge((5, 0), (c, 0))
    with pytest.raises(ValueError, match="'a' has no output port 2"):
        b.add_edge((a, 2), (c, 0))
    with pytest.raises(ValueError, match="'c' has no input port 1"):
        b.add_edge((a, 0), (c, 1))
    with pytest.raises(ValueError, match="summary key"):
        b.add_node("bad", 1, 1, {(1, 0): PathSummary.identity()})
    with pytest.raises(ValueError, match="must be a PathSummary"):
        b.add_node("bad", 1, 1, {(0, 0): 3})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="port counts"):
        b.add_node("bad", -1, 1)
    b.add_edge((a, 0), (c, 0))
    with pytest.raises(ValueError, match="already added"):
        b.add_edge((a, 0), (c, 0))
    graph = b.build()
    assert graph.summaries[a] == {(0, 1): PathSummary.identity()}
    assert graph.targets_of(a, 0) == ((c, 0),)
    assert graph.sources_of(c, 0) == ((a, 0),)
    assert graph.targets_of(a, 1) == ()


def test_missing_summary_pair_means_not_connected() -> None:
    """Only the declared (input, output) pairs carry times through a node."""
    b = GraphBuilder()
    src = b.add_node("source", 0, 1)
    split = b.add_node("split", 1, 2, {(0, 1): PathSummary.identity()})
    left = b.add_node("left", 1, 0)
    right = b.add_node("right", 1, 0)
    b.add_edge((src, 0), (split, 0))
    b.add_edge((split, 0), (left, 0))
    b.add_edge((split, 1), (right, 0))
    tracker = ProgressTracker(b.build())
    tracker.update_source(src, 0, 2, 1)
    tracker.propagate()
    assert tracker.frontier(left, 0).is_empty()
    assert tracker.frontier(right, 0) == A(2)


# -- random graphs: cycle validation against simple-cycle enumeration ---------------------------


Port = tuple[int, int]
RawGraph = tuple[list[dict[Port, PathSummary]], list[tuple[Port, Port]]]


def simple_cycle_summaries(raw: RawGraph) -> Iterable[PathSummary]:
    """Composed summaries of every simple cycle (exponential; small graphs only)."""
    summaries, edges = raw
    succ: dict[Location, list[tuple[Location, PathSummary]]] = {}
    for node, mapping in enumerate(summaries):
        for (i, o), s in mapping.items():
            succ.setdefault(Location.target(node, i), []).append((Location.source(node, o), s))
    for (sn, sp), (tn, tp) in edges:
        succ.setdefault(Location.source(sn, sp), []).append(
            (Location.target(tn, tp), PathSummary.identity())
        )
    order = {loc: k for k, loc in enumerate(sorted(succ, key=loc_order))}

    def walk(start: Location, at: Location, acc: PathSummary, seen: set[Location]) -> Iterable[Any]:
        for nxt, s in succ.get(at, ()):
            if nxt == start:
                yield acc.followed_by(s)
            elif nxt in order and order[nxt] > order[start] and nxt not in seen:
                seen.add(nxt)
                yield from walk(start, nxt, acc.followed_by(s), seen)
                seen.discard(nxt)

    for start in order:
        yield from walk(start, start, PathSummary.identity(), {start})


@st.composite
def depth_preserving_graphs(draw: st.DrawFn) -> tuple[GraphBuilder, RawGraph]:
    """Random small graphs whose summaries all keep depth (so only advancement matters)."""
    summary = st.one_of(
        st.just(PathSummary.identity()),
        st.integers(1, 2).map(PathSummary.feedback),
        st.builds(PathSummary, st.just(1), st.integers(0, 1), st.tuples(st.integers(0, 1))),
    )
    b = GraphBuilder()
    all_summaries: list[dict[Port, PathSummary]] = []
    shapes = draw(st.lists(st.tuples(st.integers(1, 2), st.integers(1, 2)), min_size=1, max_size=5))
    for k, (ins, outs) in enumerate(shapes):
        pairs = [(i, o) for i in range(ins) for o in range(outs)]
        chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=len(pairs)))
        all_summaries.append({p: draw(summary) for p in chosen})
        b.add_node(f"n{k}", ins, outs, all_summaries[-1])
    sources = [(n, p) for n, (_, outs) in enumerate(shapes) for p in range(outs)]
    targets = [(n, p) for n, (ins, _) in enumerate(shapes) for p in range(ins)]
    edges = draw(
        st.lists(
            st.tuples(st.sampled_from(sources), st.sampled_from(targets)), unique=True, max_size=8
        )
    )
    for src, dst in edges:
        b.add_edge(src, dst)
    return b, (all_summaries, edges)


@settings(max_examples=100, deadline=None)
@given(depth_preserving_graphs())
def test_build_rejects_exactly_the_graphs_with_a_non_advancing_cycle(
    case: tuple[GraphBuilder, RawGraph],
) -> None:
    """build() fails iff some simple cycle's composed summary does not add a positive amount."""
    b, raw = case
    bad = [s for s in simple_cycle_summaries(raw) if not (s.depth_change == 0 and s.add > 0)]
    if bad:
        with pytest.raises(ValueError, match="does not advance times"):
            b.build()
    else:
        b.build()


# -- random well-formed graphs with loops: stateful comparison with the naive model --------------


@st.composite
def dataflows(
    draw: st.DrawFn, declare: str | None = None
) -> tuple[ProgressGraph, dict[Location, int]]:
    """Random well-formed dataflow graphs with loops nested up to three deep (times up to
    ``Product(Product(Product(t, i), j), k)``); returns each port's depth. Each node declares
    its depth (that of its outputs, or inputs if it has none) or not, at random: a location's
    tracker then reads its times with the domain of its depth (int, pair or general), or, where
    no connected node declared one, with none."""
    b = GraphBuilder()
    depth_of: dict[Location, int] = {}
    if declare is None:
        declare = draw(st.sampled_from(["all", "some", "none"]))

    def node(name: str, in_depths: list[int], out_depths: list[int], summaries: Any = None) -> int:
        own = (out_depths or in_depths)[0]
        known = declare == "all" or (declare == "some" and draw(st.booleans()))
        k = b.add_node(name, len(in_depths), len(out_depths), summaries, own if known else None)
        for p, d in enumerate(in_depths):
            depth_of[Location.target(k, p)] = d
        for p, d in enumerate(out_depths):
            depth_of[Location.source(k, p)] = d
        return k

    def connect(src: tuple[int, int], dst: tuple[int, int]) -> None:
        b.add_edge(src, dst)

    def scope(d: int, available: list[tuple[int, int]], budget: int) -> list[tuple[int, int]]:
        available = list(available)
        kinds = ["unary", "binary", "split", "delay", "sink"] + (["loop", "loop"] if d < 3 else [])
        for _ in range(draw(st.integers(1, budget))):
            kind = draw(st.sampled_from(kinds))
            pick = st.sampled_from(available)
            if kind == "unary":
                k = node("map", [d], [d])
                connect(draw(pick), (k, 0))
                available.append((k, 0))
            elif kind == "binary":
                k = node("join", [d, d], [d])
                connect(draw(pick), (k, 0))
                connect(draw(pick), (k, 1))
                available.append((k, 0))
            elif kind == "split":
                pairs = draw(st.sampled_from([[(0, 0), (0, 1)], [(0, 1)], [(0, 0)]]))
                k = node("split", [d], [d, d], {p: PathSummary.identity() for p in pairs})
                connect(draw(pick), (k, 0))
                available.extend([(k, 0), (k, 1)])
            elif kind == "delay":
                k = node("delay", [d], [d], {(0, 0): PathSummary.feedback(draw(st.integers(1, 2)))})
                connect(draw(pick), (k, 0))
                available.append((k, 0))
            elif kind == "sink":
                k = node("sink", [d], [])
                connect(draw(pick), (k, 0))
            else:
                enter = node("enter", [d], [d + 1], ENTER)
                connect(draw(pick), (enter, 0))
                head = node("head", [d + 1, d + 1], [d + 1])
                connect((enter, 0), (head, 0))
                inner = scope(d + 1, [(head, 0)], max(1, budget - 1))
                fb = node("feedback", [d + 1], [d + 1], FEEDBACK(draw(st.integers(1, 2))))
                connect(draw(st.sampled_from(inner)), (fb, 0))
                connect((fb, 0), (head, 1))
                leave = node("leave", [d + 1], [d], LEAVE)
                connect(draw(st.sampled_from(inner)), (leave, 0))
                available.append((leave, 0))
        return available

    inputs = [(node("input", [], [0]), 0) for _ in range(draw(st.integers(1, 2)))]
    scope(0, inputs, 5)
    return b.build(), depth_of


def times_of_depth(d: int) -> st.SearchStrategy[Time]:
    coord = st.integers(0, 3)
    strategy: st.SearchStrategy[Any] = coord
    for _ in range(d):
        strategy = st.builds(Product, strategy, coord)
    return strategy


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_each_domain_keeps_the_naive_frontiers_as_times_come_and_go(data: st.DataObject) -> None:
    """Every node declares its depth, so each location keeps its frontiers by its domain's
    rule (ints, pairs, general up to depth 3). Counts stay non-negative and each location
    holds several times at once, so retractions expose the times they hid: after every batch,
    every frontier equals the from-scratch walk of the positive pointstamps."""
    graph, depth_of = data.draw(dataflows(declare="all"))
    tracker = ProgressTracker(graph)
    locations = sorted(depth_of, key=loc_order)
    counts: dict[Location, Counter[Time]] = {loc: Counter() for loc in locations}
    for _ in range(data.draw(st.integers(1, 8))):
        batch = []
        for _ in range(data.draw(st.integers(1, 6))):
            loc = data.draw(st.sampled_from(locations))
            held = sorted(+counts[loc], key=sort_key)
            if held and data.draw(st.booleans()):
                time, delta = data.draw(st.sampled_from(held)), -1
            else:
                time, delta = data.draw(times_of_depth(depth_of[loc])), 1
            counts[loc][time] += delta
            batch.append((loc.is_source, loc.node, loc.port, time, delta))
        tracker.update_pointstamps(batch)
        tracker.propagate()
        assert_matches_naive(tracker, counts)
        tracker._check()


class TrackerMachine(RuleBasedStateMachine):
    """Random pointstamp updates on random loop graphs; frontiers must match the naive model."""

    def __init__(self) -> None:
        super().__init__()
        self.tracker: ProgressTracker
        self.depth_of: dict[Location, int] = {}
        self.counts: dict[Location, Counter[Time]] = {}
        self.mirror: dict[tuple[int, int], set[Time]] = {}

    @initialize(data=st.data())
    def build(self, data: st.DataObject) -> None:
        graph, self.depth_of = data.draw(dataflows())
        for loc, d in self.depth_of.items():
            assert graph.depths[graph.location_id(loc)] in (d, None), (loc, d)
        # Some inputs unwatched: their frontiers are made on request, never reported.
        ports = all_input_ports(graph)
        unwatched = data.draw(st.sets(st.sampled_from(ports)) if ports else st.just(set()))
        self.tracker = ProgressTracker(graph, unwatched)
        self.locations = sorted(self.depth_of, key=loc_order)

    @rule(data=st.data(), delta=st.sampled_from([-2, -1, 1, 1, 2]))
    def update(self, data: st.DataObject, delta: int) -> None:
        loc = data.draw(st.sampled_from(self.locations))
        time = data.draw(times_of_depth(self.depth_of[loc]))
        how = data.draw(st.sampled_from(["single", "location", "tuple", "bulk"]))
        if how == "bulk":
            self.tracker.update_pointstamps([(loc.is_source, loc.node, loc.port, time, delta)])
        elif how == "single":
            if loc.is_source:
                self.tracker.update_source(loc.node, loc.port, time, delta)
            else:
                self.tracker.update_target(loc.node, loc.port, time, delta)
        elif how == "location":
            self.tracker.update([(loc, time, delta)])
        else:
            self.tracker.update([((loc.node, loc.port, loc.is_source), time, delta)])
        self.counts.setdefault(loc, Counter())[time] += delta

    @precondition(lambda self: any(+c for c in self.counts.values()))
    @rule(data=st.data())
    def retract_everything_at_one_location(self, data: st.DataObject) -> None:
        held = sorted((k for k, c in self.counts.items() if +c), key=loc_order)
        loc = data.draw(st.sampled_from(held))
        changes = [(loc, t, -c) for t, c in self.counts[loc].items() if c]
        self.tracker.update(changes)
        self.counts[loc] = Counter()

    @rule()
    def propagate(self) -> None:
        for node, port, time, delta in self.tracker.propagate():
            seen = self.mirror.setdefault((node, port), set())
            if delta == 1:
                assert time not in seen
                seen.add(time)
            else:
                assert delta == -1 and time in seen
                seen.remove(time)
        self.check_frontiers()

    @rule()
    def propagate_inputs(self) -> None:
        changed = self.tracker.propagate_inputs()
        assert len(changed) == len(set(changed))
        for node, port in changed:
            new = set(self.tracker.frontier(node, port))
            assert new != self.mirror.get((node, port), set()), "listed an unchanged port"
            self.mirror[(node, port)] = new
        self.check_frontiers()

    def check_frontiers(self) -> None:
        assert_matches_naive(self.tracker, self.counts)
        graph = self.tracker.graph
        for node, port in all_input_ports(graph):
            if self.tracker.is_watched(node, port):
                frontier = set(self.tracker.frontier(node, port))
                assert self.mirror.get((node, port), set()) == frontier
            else:
                assert (node, port) not in self.mirror, "reported an unwatched port"
        positive = any(c > 0 for counter in self.counts.values() for c in counter.values())
        assert self.tracker.is_complete() == (not positive)
        self.tracker._check()


TrackerMachine.TestCase.settings = settings(
    max_examples=80,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
test_tracker_matches_naive_model = TrackerMachine.TestCase
