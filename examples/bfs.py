"""Breadth-first search distances on a random graph whose edges keep changing.

Every node reachable from the root gets its hop distance: start with ``(root, 0)``, and in
each ``iterate`` step follow the edges out of every reached node (``join_map``, distance
``+ 1``) and keep each node's smallest distance (``min``). A second output counts the nodes
at each distance (``count`` on ``(distance, node)``). Then each round retracts the
``--batch`` oldest edges and inserts as many new random ones, at its own logical time.

Run: ``python examples/bfs.py [--nodes 10000] [--edges 20000] [--rounds 50] [--batch 1]
[--workers 1] [--check]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter

import numpy as np
import trio

import deltaflow as df
from deltaflow.graphs import bfs, bfs_distances

Edge = tuple[int, int]


class Bfs(df.Pipeline):
    """``dists``: ``(node, distance)`` from the root; ``histogram``: ``(distance, nodes)``."""

    def build(self, roots: df.Collection, edges: df.Collection) -> dict[str, df.Collection]:
        dists = bfs(roots, edges)
        histogram = dists.map(lambda nd: (nd[1], nd[0])).count()
        return {"dists": dists, "histogram": histogram}


def generate(
    nodes: int, edges: int, rounds: int, batch: int, seed: int = 11
) -> tuple[list[Edge], list[list[tuple[Edge, Edge]]]]:
    """Random initial edges, and per round ``batch`` pairs ``(insert_edge, retract_edge)``."""
    rng = np.random.default_rng(seed)
    init: list[Edge] = [tuple(e) for e in rng.integers(0, nodes, size=(edges, 2)).tolist()]
    n = rounds * batch
    extra: list[Edge] = [tuple(e) for e in rng.integers(0, nodes, size=(n, 2)).tolist()]
    live = init + extra
    changes = [(extra[i], live[i]) for i in range(n)]
    return init, [changes[i : i + batch] for i in range(0, n, batch)]


async def run(
    root: int, init: list[Edge], rounds: list[list[tuple[Edge, Edge]]], workers: int
) -> tuple[dict[Edge, int], dict[Edge, int]]:
    """Load, run every round, return the ``dists`` and ``histogram`` outputs at the end."""
    async with df.open(Bfs(), workers=workers) as job:
        start = time.perf_counter()
        job.inputs["roots"].insert(root)
        job.inputs["edges"].insert_many(init)
        await job.advance_to(1)
        print(f"loaded {len(init)} edges in {time.perf_counter() - start:.2f} s")
        edges = job.inputs["edges"]
        lat = []
        for t, changes in enumerate(rounds, start=1):
            start = time.perf_counter()
            k = len(changes)
            edges.insert_many([c[0] for c in changes] + [c[1] for c in changes], [1] * k + [-1] * k)
            await job.advance_to(t + 1)
            lat.append(time.perf_counter() - start)
        last = len(rounds)
        dists: dict[Edge, int] = job.outputs["dists"].at(last)
        hist: dict[Edge, int] = job.outputs["histogram"].at(last)
    if lat:
        print(f"{len(lat)} rounds: median {statistics.median(lat) * 1e3:.2f} ms, "
              f"{len(lat) / sum(lat):.0f} rounds/s")  # fmt: skip
    return dists, hist


def main(argv: list[str] | None = None) -> dict[int, int]:
    """Parse the arguments, run, print the answer; returns ``{node: distance}``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--edges", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--batch", type=int, default=1, help="edge changes per round")
    parser.add_argument("--root", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--check", action="store_true", help="compare with plain Python")
    args = parser.parse_args(argv)
    init, rounds = generate(args.nodes, args.edges, args.rounds, args.batch)
    dists_out, hist_out = trio.run(run, args.root, init, rounds, args.workers)
    dists = {node: d for (node, d), n in dists_out.items() if n > 0}
    print("nodes per distance:", dict(sorted((d, n) for (d, n), _ in hist_out.items())))
    print(f"answer: {len(dists)} reached, sum of distances {sum(dists.values())}")
    if args.check:
        live = Counter(init)
        for changes in rounds:
            for new, old in changes:
                live[new] += 1
                live[old] -= 1
        ok = dists == bfs_distances([args.root], [e for e, n in live.items() if n > 0])
        print("check:", "ok" if ok else "MISMATCH")
    return dists


if __name__ == "__main__":
    main()
