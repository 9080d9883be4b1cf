"""Count of counts: the out-degree distribution of a changing set of edges.

``edges.count()`` gives every node's out-degree as ``(node, degree)``; counting those by
degree gives ``(degree, how many nodes have it)``. When one edge changes, one node's degree
moves by one, so at most two entries of the distribution change — and that is all the work
deltaflow does. Each round retracts the ``--batch`` oldest edges and inserts as many random
new ones, at its own logical time.

Run: ``python examples/degrees.py [--nodes 10000] [--edges 50000] [--rounds 100]
[--batch 10] [--workers 1] [--check]``.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import numpy as np
import trio

import deltaflow as df

Edge = tuple[int, int]


class Degrees(df.Pipeline):
    """``(degree, nodes)``: how many nodes have each (non-zero) out-degree."""

    def build(self, edges: df.Collection) -> df.Collection:
        degrees = edges.count()  # (src, dst) is (key, val): gives (src, out-degree)
        return degrees.map(lambda nd: (nd[1], nd[0])).count()


def generate(
    nodes: int, edges: int, rounds: int, batch: int, seed: int = 7
) -> tuple[list[Edge], list[list[tuple[Edge, Edge]]]]:
    """Random initial edges, and per round ``batch`` pairs ``(insert_edge, retract_edge)``."""
    rng = np.random.default_rng(seed)
    init: list[Edge] = [tuple(e) for e in rng.integers(0, nodes, size=(edges, 2)).tolist()]
    n = rounds * batch
    extra: list[Edge] = [tuple(e) for e in rng.integers(0, nodes, size=(n, 2)).tolist()]
    live = init + extra
    changes = [(extra[i], live[i]) for i in range(n)]
    return init, [changes[i : i + batch] for i in range(0, n, batch)]


def distribution(edges: list[Edge]) -> dict[int, int]:
    """The answer in plain Python: ``{degree: nodes}``."""
    return dict(Counter(Counter(s for s, _ in edges).values()))


async def run(
    init: list[Edge], rounds: list[list[tuple[Edge, Edge]]], workers: int
) -> dict[int, int]:
    """Load, run every round, return ``{degree: nodes}`` at the end."""
    async with df.open(Degrees(), workers=workers) as job:
        edges = job.inputs["edges"]
        start = time.perf_counter()
        edges.insert_many(init)
        await job.advance_to(1)
        print(f"loaded {len(init)} edges in {(time.perf_counter() - start) * 1e3:.1f} ms")
        start = time.perf_counter()
        for t, changes in enumerate(rounds, start=1):
            k = len(changes)
            edges.insert_many([c[0] for c in changes] + [c[1] for c in changes], [1] * k + [-1] * k)
            await job.advance_to(t + 1)
        if rounds:
            took = time.perf_counter() - start
            print(f"{len(rounds)} rounds in {took:.2f} s ({len(rounds) / took:.0f} rounds/s)")
        final = job.output.at(len(rounds))
    return {d: n for (d, n), c in final.items() if c > 0}


def main(argv: list[str] | None = None) -> dict[int, int]:
    """Parse the arguments, run, print the answer; returns ``{degree: nodes}``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--edges", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--batch", type=int, default=10, help="edge changes per round")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--check", action="store_true", help="compare with plain Python")
    args = parser.parse_args(argv)
    init, rounds = generate(args.nodes, args.edges, args.rounds, args.batch)
    result = trio.run(run, init, rounds, args.workers)
    print("answer: nodes per out-degree", dict(sorted(result.items())))
    if args.check:
        live = Counter(init)
        for changes in rounds:
            for new, old in changes:
                live[new] += 1
                live[old] -= 1
        ok = result == distribution(list(live.elements()))
        print("check:", "ok" if ok else "MISMATCH")
    return result


if __name__ == "__main__":
    main()
