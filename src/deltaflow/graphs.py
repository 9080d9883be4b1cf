"""Graph algorithms on collections of edges, and their plain-Python answers.

Edges are ``(src, dst)`` pairs: a collection of them is an index by source, as ``join_map``
reads it. Each algorithm is a function over collections, for use inside a pipeline's
``build``, and a :class:`~deltaflow.Pipeline` with inputs ``roots`` and ``edges`` that runs it
alone. Each has a plain-Python twin computing the same answer from scratch, for checking
results (tests, ``--check`` in the examples, the benchmarks' recompute baseline).

* :func:`reachability` / :class:`Reachability`: ``(root, node)`` for every ``node`` reachable
  from a root (a root reaches itself), by ``iterate`` and ``distinct``;
  :func:`reachable_pairs` in plain Python.
* :func:`bfs` / :class:`Bfs`: ``(node, distance)``, the fewest hops from any root, by
  ``iterate`` and ``min``; :func:`bfs_distances` in plain Python.

    >>> import deltaflow as df
    >>> edges = [((0, 1), 0, 1), ((1, 2), 0, 1), ((1, 2), 1, -1)]
    >>> df.run(Reachability(), roots=[(0, 0, 1)], edges=edges)
    [((0, 0), 0, 1), ((0, 1), 0, 1), ((0, 2), 0, 1), ((0, 2), 1, -1)]
    >>> sorted(reachable_pairs([0], [(0, 1), (1, 2)]))
    [(0, 0), (0, 1), (0, 2)]
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TypeVar

from .operators.collection import Collection, Pipeline

__all__ = [
    "Bfs",
    "Reachability",
    "bfs",
    "bfs_distances",
    "reachability",
    "reachable_pairs",
]

Node = TypeVar("Node", bound=Hashable)


def reachability(roots: Collection, edges: Collection) -> Collection:
    """``(root, node)`` pairs with ``node`` reachable from ``root`` along ``edges``.

    Each round follows every edge out of the nodes reached so far: the pairs are turned to
    ``(node, root)`` to be joined with the edges by source.
    """

    def step(reach: Collection) -> Collection:
        return (
            reach.map(lambda rn: (rn[1], rn[0]))
            .join_map(edges, lambda node, root, dst: (root, dst))
            .concat(roots.map(lambda r: (r, r)))
            .distinct()
        )

    return roots.map(lambda r: (r, r)).iterate(step)


def bfs(roots: Collection, edges: Collection) -> Collection:
    """``(node, distance)``: the fewest hops from any of ``roots`` to each node they reach."""

    def step(dists: Collection) -> Collection:
        return (
            dists.join_map(edges, lambda src, d, dst: (dst, d + 1))
            .concat(roots.map(lambda r: (r, 0)))
            .min()
        )

    return roots.map(lambda r: (r, 0)).iterate(step)


class Reachability(Pipeline):
    """Pairs ``(root, node)`` such that ``node`` is reachable from ``root`` (see
    :func:`reachability`); inputs ``roots`` (nodes) and ``edges`` (``(src, dst)`` pairs)."""

    def build(self, roots: Collection, edges: Collection) -> Collection:
        return reachability(roots, edges)


class Bfs(Pipeline):
    """``(node, distance)`` for every node reached from a root, by breadth-first steps (see
    :func:`bfs`); inputs ``roots`` (nodes) and ``edges`` (``(src, dst)`` pairs)."""

    def build(self, roots: Collection, edges: Collection) -> Collection:
        return bfs(roots, edges)


def _adjacency(edges: Iterable[tuple[Node, Node]]) -> dict[Node, list[Node]]:
    """The destinations of each source, in edge order."""
    out: dict[Node, list[Node]] = {}
    for src, dst in edges:
        out.setdefault(src, []).append(dst)
    return out


def reachable_pairs(
    roots: Iterable[Node], edges: Iterable[tuple[Node, Node]]
) -> set[tuple[Node, Node]]:
    """:func:`reachability` in plain Python: a depth-first search from every root.

    >>> sorted(reachable_pairs([0], [(0, 1), (1, 2), (3, 0)]))
    [(0, 0), (0, 1), (0, 2)]
    """
    adj = _adjacency(edges)
    pairs: set[tuple[Node, Node]] = set()
    for r in roots:
        seen = {r}
        stack = [r]
        while stack:
            for m in adj.get(stack.pop(), ()):
                if m not in seen:
                    seen.add(m)
                    stack.append(m)
        pairs.update((r, n) for n in seen)
    return pairs


def bfs_distances(roots: Iterable[Node], edges: Iterable[tuple[Node, Node]]) -> dict[Node, int]:
    """:func:`bfs` in plain Python: breadth-first search from all roots at once.

    >>> bfs_distances([0], [(0, 1), (1, 2), (0, 2), (3, 0)])
    {0: 0, 1: 1, 2: 1}
    """
    adj = _adjacency(edges)
    dist = dict.fromkeys(roots, 0)
    frontier = list(dist)
    while frontier:
        nxt = []
        for n in frontier:
            for m in adj.get(n, ()):
                if m not in dist:
                    dist[m] = dist[n] + 1
                    nxt.append(m)
        frontier = nxt
    return dist
