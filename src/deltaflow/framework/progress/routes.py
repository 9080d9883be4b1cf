"""Where the tracker keeps implications, and along which arcs it carries changes between them.

Implications are kept at *watched* input ports only (:func:`kept_locations`); a change is
carried straight from one kept location to the next along the composed summaries of the
paths between them (:func:`carried_arcs`). Within one time, locations are visited in a
topological order of the arcs that can map a time to itself (:func:`same_time_order`).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ..summary import PathSummary
from .validation import strongly_connected

if TYPE_CHECKING:
    from .graph import Arc, Port, ProgressGraph

__all__ = ["carried_arcs", "kept_locations", "postorder", "same_time_order"]


def kept_locations(graph: ProgressGraph, unwatched: set[Port]) -> list[bool]:
    """Per location id, whether the tracker keeps its implications between propagations.

    Input ports are kept unless ``unwatched``; outputs never are (nothing reads them on the hot
    path). Every cycle must keep a location (a change is carried from one kept location to the
    next), so an input port on a cycle of locations that are not kept is kept after all.
    """
    n = graph.location_count
    kept = [
        not (loc.is_source or (loc.node, loc.port) in unwatched)
        for loc in (graph.location(g) for g in range(n))
    ]
    while True:
        succ = [[] if kept[u] else [v for v, _ in graph.arcs(u) if not kept[v]] for u in range(n)]
        cycles = [c for c in strongly_connected(n, succ) if len(c) > 1]
        if not cycles:
            return kept
        for component in cycles:
            kept[min(g for g in component if not graph.location(g).is_source)] = True


def carried_arcs(
    graph: ProgressGraph, kept: list[bool]
) -> tuple[list[tuple[Arc, ...]], list[tuple[Arc, ...]]]:
    """The arcs along which the tracker carries changes between the ``kept`` locations.

    Returns, per location id, ``(arcs, stamps)``: a kept location's ``arcs`` lead to the next
    kept locations along every path through locations that are not kept, with the summary of
    that path (none for the others: they keep no implications); ``stamps`` are where the
    location's own pointstamp frontier changes are applied (itself if kept, else the first kept
    locations after it). Equal ``(location, summary)`` pairs reached along several paths are
    listed once.
    """
    n = graph.location_count
    identity = PathSummary.identity()
    ahead: list[tuple[Arc, ...]] = [() for _ in range(n)]

    def onward(u: int) -> tuple[Arc, ...]:
        """The kept locations first reached after ``u``, with the path summaries (those of
        the locations after ``u`` that are not kept are in ``ahead`` already)."""
        found: dict[Arc, None] = {}
        for v, a in graph.arcs(u):
            if kept[v]:
                found[(v, a)] = None
            else:
                for k, s in ahead[v]:
                    found[(k, a.followed_by(s))] = None
        return tuple(found)

    # The locations that are not kept form no cycle: each one's successors come first.
    rest = [u for u in range(n) if not kept[u]]
    for u in postorder(rest, lambda u: [v for v, _ in graph.arcs(u) if not kept[v]]):
        ahead[u] = onward(u)
    arcs = [onward(g) if kept[g] else () for g in range(n)]
    stamps = [((g, identity),) if kept[g] else ahead[g] for g in range(n)]
    return arcs, stamps


def postorder(roots: Iterable[int], after: Callable[[int], list[int]]) -> list[int]:
    """Every location reachable from ``roots`` along ``after`` (which must form no cycle),
    each listed after all those it reaches; iterative, whatever the length of the chains."""
    done: set[int] = set()
    order: list[int] = []
    for root in roots:
        if root in done:
            continue
        done.add(root)
        stack = [(root, iter(after(root)))]
        while stack:
            u, it = stack[-1]
            for v in it:
                if v not in done:
                    done.add(v)
                    stack.append((v, iter(after(v))))
                    break
            else:
                stack.pop()
                order.append(u)
    return order


def same_time_order(arcs: list[tuple[Arc, ...]]) -> list[int]:
    """Location ids in a topological order of the ``arcs`` that can map a time to itself.

    Such arcs (identity, or resetting inner coordinates without adding) never form a cycle in a
    validated graph, so processing the locations of one time in this order visits each at most
    once. Any leftover locations (an unvalidated graph) follow in id order.
    """
    n = len(arcs)
    indegree = [0] * n
    succ: list[list[int]] = [[] for _ in range(n)]
    for u in range(n):
        for v, s in arcs[u]:
            if s.add == 0 and s.depth_change == 0:
                succ[u].append(v)
                indegree[v] += 1
    ready = [u for u in range(n) if not indegree[u]]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        u = heapq.heappop(ready)
        order.append(u)
        for v in succ[u]:
            indegree[v] -= 1
            if not indegree[v]:
                heapq.heappush(ready, v)
    if len(order) < n:
        placed = set(order)
        order.extend(u for u in range(n) if u not in placed)
    return order
