"""Validation of a progress graph: every cycle must strictly advance times.

:func:`validate` rejects a graph in which some cycle does not strictly advance times (around
it the composed summary must keep the nesting depth and add a positive amount: a loop's
feedback), or in which one location would see times of different nesting depths. Without
that, no frontier on the cycle could ever pass a time, or times could not be compared.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..summary import PathSummary

if TYPE_CHECKING:
    from .graph import Port, ProgressGraph

__all__ = ["levels_above_deepest", "location_depths", "strongly_connected", "validate"]


def validate(graph: ProgressGraph) -> None:
    """Raise ValueError unless every cycle of ``graph`` strictly advances times at one depth.

    Raises:
        ValueError: naming the operators on a cycle that does not strictly advance times (or
            that changes the nesting depth of times), or the location that would see times of
            different nesting depths.
    """
    n = graph.location_count
    succ = [[v for v, _ in graph.arcs(u)] for u in range(n)]
    for component in strongly_connected(n, succ):
        if len(component) > 1:
            _check_depth_cycles(graph, component)
            _check_advancing_cycles(graph, component)
    _check_depth_consistency(graph)


def strongly_connected(n: int, succ: list[list[int]]) -> list[list[int]]:
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
        node = graph.location(loc_id).node
        if node != last:
            names.append(repr(graph.names[node]))
            last = node
    if len(names) == 1:
        names.append(names[0])
    return " -> ".join(names)


def _compose(graph: ProgressGraph, walk: list[int]) -> PathSummary:
    summary = PathSummary.identity()
    for u, v in itertools.pairwise(walk):
        for w, s in graph.arcs(u):
            if w == v:
                summary = summary.followed_by(s)
                break
    return summary


def _check_depth_cycles(graph: ProgressGraph, component: list[int]) -> None:
    """Every cycle inside ``component`` must keep the nesting depth of times."""
    members = set(component)
    arcs = graph.arcs
    root = component[0]
    potential = {root: 0}
    forward_parent: dict[int, int] = {}
    queue = deque([root])
    while queue:
        u = queue.popleft()
        for v, s in arcs(u):
            if v in members and v not in potential:
                potential[v] = potential[u] + s.depth_change
                forward_parent[v] = u
                queue.append(v)
    for u in component:
        for v, s in arcs(u):
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
        for b, _ in graph.arcs(a):
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
    arcs = graph.arcs
    for start in component:
        if graph.location(start).is_source:
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

        for v, s in arcs(start):
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
            for v, a in arcs(u):
                if v in members:
                    offer(v, s.followed_by(a), (u, s))


def _depth_potentials(
    graph: ProgressGraph,
) -> tuple[list[int], list[int], tuple[int, int, int] | None]:
    """Each location's nesting depth relative to its connected component's first location.

    Returns ``(potential, component, conflict)``: ``component[u]`` is the first location of
    ``u``'s component; ``conflict`` is ``(u, v, by)`` for the first arc ``u -> v`` (or back)
    whose depth change disagrees with another path to ``v`` by ``by`` levels, else None.
    """
    n = graph.location_count
    neighbours: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for u in range(n):
        for v, s in graph.arcs(u):
            neighbours[u].append((v, s.depth_change))
            neighbours[v].append((u, -s.depth_change))
    potential = [0] * n
    component = [-1] * n
    for root in range(n):
        if component[root] >= 0:
            continue
        component[root] = root
        queue = deque([root])
        while queue:
            u = queue.popleft()
            for v, change in neighbours[u]:
                expected = potential[u] + change
                if component[v] < 0:
                    component[v] = root
                    potential[v] = expected
                    queue.append(v)
                elif potential[v] != expected:
                    return potential, component, (u, v, expected - potential[v])
    return potential, component, None


def _check_depth_consistency(graph: ProgressGraph) -> None:
    """Each location must see times of a single nesting depth."""
    conflict = _depth_potentials(graph)[2]
    if conflict is not None:
        u, v, by = conflict
        msg = (
            f"{graph.describe(v)} would see times of different nesting depths "
            f"(paths through {graph.describe(u)} and elsewhere disagree by "
            f"{by:+d} level(s)); collections from different "
            "loop levels must be combined only through enter/leave"
        )
        raise ValueError(msg)


def levels_above_deepest(graph: ProgressGraph) -> list[int]:
    """Per location, how many nesting levels fewer its times have than those of the deepest
    location connected to it (all 0 if the graph's depths disagree: it was not validated)."""
    potential, component, conflict = _depth_potentials(graph)
    if conflict is not None:
        return [0] * len(potential)
    deepest: dict[int, int] = {}
    for p, c in zip(potential, component):
        if p > deepest.get(c, p - 1):
            deepest[c] = p
    return [deepest[c] - p for p, c in zip(potential, component)]


def location_depths(graph: ProgressGraph, node_depths: Sequence[int | None]) -> list[int | None]:
    """Per location, the nesting depth of its times: fixed by the depth declared for any node
    connected to it (the depth of the node's outputs, or of its inputs if it has none) and
    the summaries in between; ``None`` where no connected node declares one.

    Raises:
        ValueError: naming the node whose declared depth disagrees with another's, or that
            would make some location's depth negative.
    """
    potential, component, _ = _depth_potentials(graph)
    offset: dict[int, tuple[int, int]] = {}  # component -> (offset, declaring node)
    for node, depth in enumerate(node_depths):
        if depth is None:
            continue
        port: Port = (node, 0)
        ids = graph.source_ids if graph.output_counts[node] else graph.target_ids
        if port not in ids:
            continue  # no ports: nothing to anchor
        loc = ids[port]
        c = component[loc]
        mine = depth - potential[loc]
        found = offset.setdefault(c, (mine, node))
        if found[0] != mine:
            other = graph.names[found[1]]
            msg = (
                f"node {graph.names[node]!r} is declared at depth {depth}, which disagrees "
                f"by {mine - found[0]:+d} level(s) with node {other!r}'s declared depth"
            )
            raise ValueError(msg)
    out: list[int | None] = []
    for loc, (p, c) in enumerate(zip(potential, component)):
        if c not in offset:
            out.append(None)
            continue
        d = p + offset[c][0]
        if d < 0:
            msg = f"{graph.describe(loc)} would see times of depth {d} from the declared depths"
            raise ValueError(msg)
        out.append(d)
    return out
