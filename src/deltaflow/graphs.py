"""Graph algorithms on collections of edges, and their plain-Python answers.

Edges are ``(src, dst)`` pairs: a collection of them is an index by source, as ``join_map``
reads it. Each algorithm is a function over collections, for use inside a pipeline's
``build`` (inside a loop's step too: its loops nest in the step's), and a
:class:`~deltaflow.Pipeline` that runs it alone. Reachability and BFS have plain-Python twins
computing the same answer from scratch, which the examples' ``--check`` uses; the newer
algorithms are checked against networkx in the tests and benchmarks.

* :func:`reachability` / :class:`Reachability`: ``(root, node)`` for every ``node`` reachable
  from a root (a root reaches itself), by ``iterate`` and ``distinct``;
  :func:`reachable_pairs` in plain Python.
* :func:`bfs` / :class:`Bfs`: ``(node, distance)``, the fewest hops from any root, by
  ``iterate`` and ``min``; :func:`bfs_distances` in plain Python.
* :func:`propagate` / :class:`Propagate`: ``(node, label)``, the smallest label of the
  labelled nodes that reach ``node`` (itself included); :func:`propagate_at` lets labels enter
  the loop at rounds that grow with a priority of theirs, so that small labels spread first
  and fewer labels are ever replaced.
* :func:`scc` / :class:`Scc`: ``(node, label)`` for every node of the edges, the label the
  smallest node of its strongly connected component; :func:`strongly_connected` the edges
  inside components.
* :func:`connected_components` / :class:`ConnectedComponents`: the same for weakly connected
  components (edges read both ways).

    >>> import deltaflow as df
    >>> edges = [((0, 1), 0, 1), ((1, 2), 0, 1), ((1, 2), 1, -1)]
    >>> df.run(Reachability(), roots=[(0, 0, 1)], edges=edges)
    [((0, 0), 0, 1), ((0, 1), 0, 1), ((0, 2), 0, 1), ((0, 2), 1, -1)]
    >>> sorted(reachable_pairs([0], [(0, 1), (1, 2)]))
    [(0, 0), (0, 1), (0, 2)]
    >>> cycle = [((0, 1), 0, 1), ((1, 2), 0, 1), ((2, 0), 0, 1), ((2, 0), 1, -1)]
    >>> for update in df.run(Scc(), edges=cycle):
    ...     print(update)
    ((0, 0), 0, 1)
    ((1, 0), 0, 1)
    ((2, 0), 0, 1)
    ((1, 0), 1, -1)
    ((1, 1), 1, 1)
    ((2, 0), 1, -1)
    ((2, 2), 1, 1)
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

from .framework.tuning import ROUNDS_PER_LEVEL
from .operators.collection import Collection
from .operators.iterate import LoopScope, Variable
from .operators.pipeline import Pipeline

__all__ = [
    "ROUNDS_PER_LEVEL",
    "Bfs",
    "ConnectedComponents",
    "Propagate",
    "Reachability",
    "Scc",
    "bfs",
    "bfs_distances",
    "connected_components",
    "node_priority",
    "propagate",
    "propagate_at",
    "reachability",
    "reachable_pairs",
    "scc",
    "strongly_connected",
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


def _forward(_src: Any, label: Any, dst: Any) -> tuple[Any, Any]:
    return (dst, label)


def _swap(edge: tuple[Any, Any]) -> tuple[Any, Any]:
    return (edge[1], edge[0])


def _endpoints(edge: tuple[Any, Any]) -> tuple[tuple[Any, Any], tuple[Any, Any]]:
    return ((edge[0], edge[0]), (edge[1], edge[1]))


def _own_label(edge: tuple[Any, Any]) -> tuple[Any, Any]:
    return (edge[1], edge[1])


def node_priority(label: Any) -> int:
    """The default priority of a label (:func:`propagate_at`): a non-negative int is its own
    priority, anything else ``0`` (it enters at once).

    >>> node_priority(12), node_priority(-3), node_priority("a")
    (12, 0, 0)
    """
    return label if label.__class__ is int and label > 0 else 0


def _propagate_core(
    edges: Collection, nodes: Collection, priority: Callable[[Any], int] | None
) -> Collection:
    """Label propagation as differential dataflow writes it: the loop variable holds the
    proposals (empty at first, so only changes circulate and no ``consolidate`` is needed),
    the labels are the smallest of the proposals and the nodes' own labels, and a node's
    label is proposed to every node it has an edge to."""
    deeper = nodes if nodes.scope.depth >= edges.scope.depth else edges
    builder = nodes.builder
    parent = builder.loop_parent(deeper.scope, "propagate()")
    with LoopScope(parent=parent, name="propagate", builder=builder) as scope:
        proposals = Variable(scope)
        if priority is None:
            entered = nodes.enter(scope)
        else:

            def at(node_label: tuple[Any, Any]) -> int:
                return ROUNDS_PER_LEVEL * priority(node_label[1]).bit_length()

            entered = nodes.enter_at(scope, at)
        labels = proposals.concat(entered).min()
        proposals.set(labels.join_map(edges, _forward))
    return labels.leave()


def propagate(edges: Collection, nodes: Collection) -> Collection:
    """``(node, label)``: for every node reached from a labelled one (``nodes`` holds
    ``(node, label)`` pairs; ``edges`` ``(src, dst)`` pairs), the smallest label of the
    labelled nodes that reach it, itself included.

    Labels must be ordered by ``<``. Every label enters the loop at once; see
    :func:`propagate_at` for a prioritised version that usually does far less work.
    """
    return _propagate_core(edges, nodes, None)


def propagate_at(
    edges: Collection, nodes: Collection, priority: Callable[[Any], int] = node_priority
) -> Collection:
    """:func:`propagate`, each label entering the loop at a round that grows with
    ``priority(label)`` (a non-negative int): at round ``ROUNDS_PER_LEVEL * p.bit_length()``
    for priority ``p``.

    With priorities that grow with the labels (the default, :func:`node_priority`, for int
    labels), small labels spread before large ones enter: a node's label is replaced
    O(log n) times instead of once per larger label that reaches it first. The answer is the
    same whatever the priorities (the fixed point does not depend on when a label enters).
    """
    return _propagate_core(edges, nodes, priority)


def _trim_edges(
    cycle: Collection, edges: Collection, priority: Callable[[Any], int] | None
) -> Collection:
    """The edges of ``edges`` whose ends get one label from propagation along ``cycle`` (each
    node labelled by itself), reversed: ``(dst, src)``."""
    # Each node once: a change of in-degree alone then never reaches the propagation, whose
    # reductions would reconsider the node at every round its history holds.
    labels = _propagate_core(cycle, edges.map(_own_label).distinct(), priority)
    by_dst = edges.join_map(labels, _labelled_src).arrange_by_key()
    return by_dst.join_core(labels.arrange_by_key(), _same_label)


def _labelled_src(src: Any, dst: Any, label: Any) -> tuple[Any, tuple[Any, Any]]:
    return (dst, (src, label))


def _same_label(dst: Any, src_label: tuple[Any, Any], label: Any) -> tuple[tuple[Any, Any], ...]:
    return ((dst, src_label[0]),) if src_label[1] == label else ()


def strongly_connected(
    edges: Collection, priority: Callable[[Any], int] | None = node_priority
) -> Collection:
    """The edges of ``edges`` whose two ends lie in one strongly connected component.

    Differential dataflow's ``strongly_connected``: a loop that keeps an edge while forward
    propagation of the smallest node reaching each node (along the edges kept so far), then
    backward propagation along the reversed edges, label its two ends alike; each
    propagation a loop nested in it (prioritised with ``priority``, see
    :func:`propagate_at`; ``None``: every label at once).
    """

    def step(inner: Collection) -> Collection:
        forward = _trim_edges(inner, edges, priority)
        return _trim_edges(forward, edges.map(_swap), priority)

    return edges.iterate(step)


def scc(edges: Collection, priority: Callable[[Any], int] | None = node_priority) -> Collection:
    """``(node, label)`` for every node of ``edges``, ``label`` the smallest node of its
    strongly connected component (nodes are ordered by ``<``).

    The labels are propagated along :func:`strongly_connected`'s edges, prioritised with
    ``priority`` (see :func:`propagate_at`; ``None``: every label at once).
    """
    nodes = edges.flat_map(_endpoints).distinct()  # each once, as in _trim_edges
    return _propagate_core(strongly_connected(edges, priority), nodes, priority)


def connected_components(
    edges: Collection, priority: Callable[[Any], int] | None = node_priority
) -> Collection:
    """``(node, label)`` for every node of ``edges``, ``label`` the smallest node of its
    weakly connected component (``edges`` read both ways), prioritised with ``priority``
    (see :func:`propagate_at`; ``None``: every label at once)."""
    both = edges.concat(edges.map(_swap))
    nodes = edges.flat_map(_endpoints).distinct()  # each once, as in _trim_edges
    return _propagate_core(both, nodes, priority)


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


class Propagate(Pipeline):
    """``(node, label)``: the smallest label reaching each node (see :func:`propagate_at`);
    inputs ``nodes`` (``(node, label)`` pairs) and ``edges`` (``(src, dst)`` pairs)."""

    def build(self, nodes: Collection, edges: Collection) -> Collection:
        return propagate_at(edges, nodes)


class Scc(Pipeline):
    """``(node, label)``: each node of ``edges`` labelled with the smallest node of its
    strongly connected component (see :func:`scc`)."""

    def build(self, edges: Collection) -> Collection:
        return scc(edges)


class ConnectedComponents(Pipeline):
    """``(node, label)``: each node of ``edges`` labelled with the smallest node of its
    weakly connected component (see :func:`connected_components`)."""

    def build(self, edges: Collection) -> Collection:
        return connected_components(edges)


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
