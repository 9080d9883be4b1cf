"""The W1-W4 benchmark workloads: deterministic data every measured system runs.

This is deltaflow's copy of the shared reference generator: the same seeds, the same numpy
calls in the same order, so the data (and therefore the expected answers below) are exactly
those every other system is measured on. Each generator returns plain Python data: the
initial collection (loaded at time 0) and a list of *rounds*, ``rounds[t - 1]`` being the
change applied at time ``t`` (one logical time per round).

    W1 count      keyed count under a FIFO sliding window of single records
    W2 reach      roadmap: 1,000 nodes / 2,000 edges, 10 roots, sliding window of edges
    W3 triangles  skewed graph loaded one source node per round
    W4 bfs        BFS distances on a 100k node / 200k edge graph, then edge changes

Footgun: only the *default* sizes give the figures in :data:`EXPECTED`. Smaller runs (the
benchmarks' ``--quick``) generate the full data and keep a prefix of the rounds, so their
answers come from the ``*_expected`` functions (a from-scratch recompute), not the table.

    >>> init, rounds = w1_count(keys=10, initial=20, rounds=5)
    >>> len(init), len(rounds), rounds[0][1] == init[0]
    (20, 5, True)
    >>> w2_expected(*w2_reach(nodes=4, edges=3, roots=1, rounds=2))["pairs"] >= 1
    True
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from deltaflow.graphs import bfs_distances, reachable_pairs

__all__ = [
    "EXPECTED",
    "SEED",
    "batched",
    "live_multiset",
    "w1_count",
    "w1_expected",
    "w2_expected",
    "w2_reach",
    "w3_expected",
    "w3_triangles",
    "w4_bfs",
    "w4_expected",
]

SEED = 20161126

Edge = tuple[int, int]

#: The final answers of the default-size workloads (the shared spec's table).
EXPECTED: dict[str, dict[str, int]] = {
    "w1": {"keys": 10_000, "checksum": 500_865_700},
    "w2": {"pairs": 6_573},
    "w3": {"triangles": 151_802},
    "w4": {"reached": 79_692, "dist_sum": 1_171_600},
}


def w1_count(
    keys: int = 10_000, initial: int = 100_000, rounds: int = 10_000, seed: int = SEED
) -> tuple[list[int], list[tuple[int, int]]]:
    """Return ``(initial_keys, rounds)`` with ``rounds[t-1] = (insert_key, retract_key)``.

    The window is FIFO: round ``t`` retracts the oldest live record and inserts a new one.
    """
    rng = np.random.default_rng(seed)
    init: list[int] = rng.integers(0, keys, size=initial).tolist()
    new: list[int] = rng.integers(0, keys, size=rounds).tolist()
    live = list(init)
    out = []
    head = 0
    for t in range(rounds):
        old = live[head]
        head += 1  # noqa: SIM113 - kept as in the shared reference generator
        live.append(new[t])
        out.append((new[t], old))
    return init, out


def live_multiset(init: list[Any], rounds: list[tuple[Any, Any]]) -> Counter[Any]:
    """The live multiset after every ``(insert, retract)`` round (zero counts dropped)."""
    c = Counter(init)
    for ins, ret in rounds:
        c[ins] += 1
        c[ret] -= 1
    return Counter({k: v for k, v in c.items() if v})


def w1_expected(init: list[int], rounds: list[tuple[int, int]]) -> dict[str, int]:
    """The W1 answer recomputed from scratch: distinct keys and ``sum(key * count)``."""
    c = live_multiset(init, rounds)
    return {"keys": len(c), "checksum": sum(k * v for k, v in c.items())}


def w2_reach(
    nodes: int = 1000, edges: int = 2000, roots: int = 10, rounds: int = 1000, seed: int = SEED
) -> tuple[list[int], list[Edge], list[tuple[Edge, Edge]]]:
    """Return ``(roots, initial_edges, rounds)``: ``rounds[t-1] = (insert_edge, retract_edge)``."""
    rng = np.random.default_rng(seed + 2)
    init: list[Edge] = [tuple(e) for e in rng.integers(0, nodes, size=(edges, 2)).tolist()]
    extra: list[Edge] = [tuple(e) for e in rng.integers(0, nodes, size=(rounds, 2)).tolist()]
    live = list(init)
    out = []
    for t in range(rounds):
        out.append((extra[t], live[t]))
        live.append(extra[t])
    return list(range(roots)), init, out


def w2_expected(
    roots: list[int], init: list[Edge], rounds: list[tuple[Edge, Edge]]
) -> dict[str, int]:
    """The W2 answer recomputed from scratch: how many reachable pairs."""
    e = live_multiset(init, rounds)
    return {"pairs": len(reachable_pairs(roots, [k for k, v in e.items() if v > 0]))}


def w3_triangles(nodes: int = 5_000, edges: int = 50_000, seed: int = SEED) -> list[list[Edge]]:
    """Skewed directed graph, no self loops, no duplicate edges.

    Returns the rounds: one edge list per distinct source node, in node order (nodes are
    introduced one at a time).
    """
    rng = np.random.default_rng(seed + 3)
    src = np.minimum(rng.zipf(1.6, size=edges * 2) - 1, nodes - 1)
    dst = rng.integers(0, nodes, size=edges * 2)
    seen: set[Edge] = set()
    es: list[Edge] = []
    for s, d in zip(src.tolist(), dst.tolist()):
        if s != d and (s, d) not in seen:
            seen.add((s, d))
            es.append((s, d))
            if len(es) == edges:
                break
    by_src: dict[int, list[Edge]] = {}
    for s, d in es:
        by_src.setdefault(s, []).append((s, d))
    return [by_src[s] for s in sorted(by_src)]


def w3_expected(rounds: list[list[Edge]]) -> dict[str, int]:
    """The W3 answer recomputed from scratch: directed triangles ``a→b, b→c, a→c``."""
    es = {e for r in rounds for e in r}
    out: dict[int, set[int]] = {}
    for a, b in es:
        out.setdefault(a, set()).add(b)
    tri = 0
    for bs in out.values():
        for b in bs:
            for c in out.get(b, ()):
                if c in bs:
                    tri += 1
    return {"triangles": tri}


def w4_bfs(
    nodes: int = 100_000, edges: int = 200_000, rounds: int = 100, seed: int = SEED
) -> tuple[int, list[Edge], list[tuple[Edge, Edge]]]:
    """Return ``(root, initial_edges, rounds)``: ``rounds[t-1] = (insert_edge, retract_edge)``."""
    rng = np.random.default_rng(seed + 4)
    init: list[Edge] = [tuple(e) for e in rng.integers(0, nodes, size=(edges, 2)).tolist()]
    extra: list[Edge] = [tuple(e) for e in rng.integers(0, nodes, size=(rounds, 2)).tolist()]
    live = list(init)
    out = []
    for t in range(rounds):
        out.append((extra[t], live[t]))
        live.append(extra[t])
    return 0, init, out


def w4_expected(root: int, init: list[Edge], rounds: list[tuple[Edge, Edge]]) -> dict[str, int]:
    """The W4 answer recomputed from scratch: reached nodes and the sum of their distances."""
    e = live_multiset(init, rounds)
    d = bfs_distances([root], [k for k, v in e.items() if v > 0])
    return {"reached": len(d), "dist_sum": sum(d.values())}


def batched(rounds: list[tuple[Any, Any]], size: int) -> list[list[tuple[Any, Any]]]:
    """Group consecutive single-change rounds into rounds of ``size`` changes (same total work).

    >>> batched([(1, 0), (2, 1), (3, 2)], 2)
    [[(1, 0), (2, 1)], [(3, 2)]]
    """
    return [rounds[i : i + size] for i in range(0, len(rounds), size)]


if __name__ == "__main__":
    import json
    import time

    t0 = time.perf_counter()
    print("w1", json.dumps(w1_expected(*w1_count())))
    print("w2", json.dumps(w2_expected(*w2_reach())))
    print("w3", json.dumps(w3_expected(w3_triangles())), "rounds", len(w3_triangles()))
    print("w4", json.dumps(w4_expected(*w4_bfs())))
    print(f"generated+checked in {time.perf_counter() - t0:.1f}s")
