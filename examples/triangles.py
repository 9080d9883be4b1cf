"""Triangles of a growing skewed graph: binary joins against delta queries.

A directed graph of ``--nodes`` nodes and ``--edges`` distinct edges whose sources follow a
Zipf law (a few hubs hold most edges) is loaded one source node per round, in node order,
each round its own logical time. The query is every triangle ``a→b, b→c, a→c``, kept up to
date three ways:

* ``binary`` — ``join`` then ``semijoin``: keeps the 2-paths ``a→b→c``, which grow with the
  sum of the squared degrees;
* ``delta`` — a delta query written with the public pieces (``index_by_key`` and prefix
  extenders, ``propose`` then ``validate``): one rule per use of ``edges``, keeping only
  two indexes of ``edges``, but each rule's proposer fixed in advance;
* ``wcoj`` — ``df.multiway_join``: the same delta rules, where per prefix the index with the
  fewest candidates proposes (worst-case optimal), so a hub never makes a round quadratic.

For each it prints the latency of every ``--report-every`` rounds, the slowest round, and
the memory the job holds at the end, then the answer. The data are the W3 benchmark's: with
all rounds (the default) the answer is 151,802 triangles.

Run: ``python examples/triangles.py [--rounds N] [--nodes 5000] [--edges 50000]
[--versions binary,delta,wcoj] [--workers 1] [--report-every 500] [--check]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import trio

import deltaflow as df

SEED = 20161126 + 3

Edge = tuple[int, int]


class BinaryTriangles(df.Pipeline):
    """Triangles by binary joins: 2-paths ``(a, b, c)`` semijoined with the edges."""

    def build(self, edges: df.Collection) -> df.Collection:
        two_paths = edges.map(lambda ab: (ab[1], ab[0])).join_map(
            edges, lambda b, a, c: ((a, c), b)
        )
        return two_paths.semijoin(edges).map(lambda acb: (acb[0][0], acb[1], acb[0][1]))


class DeltaTriangles(df.Pipeline):
    """Triangles by a delta query with fixed proposers (dogs3's ``delta_query``).

    Rule ``i`` reacts to changes of the ``i``-th use of ``edges``: it looks the uses before it
    up as of the change's time and the uses after it strictly before, so that a change
    meeting itself is counted once.
    """

    def build(self, edges: df.Collection) -> df.Collection:
        forward = edges.index_by_key()  # a -> b
        reverse = edges.map(lambda ab: (ab[1], ab[0])).index_by_key()  # b -> a
        # d(a, b): c from edge(b, c), then edge(a, c); both uses come after: strictly before.
        d1 = forward.extend_using(lambda ab: ab[0], strict=True).validate(
            forward.extend_using(lambda ab: ab[1], strict=True).propose(edges)
        )
        # d(b, c): a from edge(a, b) (before: not after), then edge(a, c) (after: strictly).
        d2 = reverse.extend_using(lambda bc: bc[1], strict=True).validate(
            reverse.extend_using(lambda bc: bc[0]).propose(edges)
        )
        # d(a, c): b from edge(a, b), then edge(b, c); both before: not after.
        d3 = reverse.extend_using(lambda ac: ac[1]).validate(
            forward.extend_using(lambda ac: ac[0]).propose(edges)
        )
        return (
            d1.map(lambda p: (p[0][0], p[0][1], p[1]))
            .concat(d2.map(lambda p: (p[1], p[0][0], p[0][1])))
            .concat(d3.map(lambda p: (p[0][0], p[1], p[0][1])))
        )


class WcojTriangles(df.Pipeline):
    """Triangles by worst-case optimal delta queries (``df.multiway_join``)."""

    def build(self, edges: df.Collection) -> df.Collection:
        return df.multiway_join(
            ("a", "b", "c"), (edges, ("a", "b")), (edges, ("b", "c")), (edges, ("a", "c"))
        )


VERSIONS = {"binary": BinaryTriangles, "delta": DeltaTriangles, "wcoj": WcojTriangles}


def generate(nodes: int = 5_000, edges: int = 50_000, seed: int = SEED) -> list[list[Edge]]:
    """The rounds: one list of edges per source node, in node order (W3's data)."""
    rng = np.random.default_rng(seed)
    src = np.minimum(rng.zipf(1.6, size=edges * 2) - 1, nodes - 1)
    dst = rng.integers(0, nodes, size=edges * 2)
    seen: set[Edge] = set()
    for s, d in zip(src.tolist(), dst.tolist()):
        if s != d and (s, d) not in seen:
            seen.add((s, d))
            if len(seen) == edges:
                break
    by_src: dict[int, list[Edge]] = {}
    for e in seen:
        by_src.setdefault(e[0], []).append(e)
    return [sorted(by_src[s]) for s in sorted(by_src)]


def triangles(edges: list[Edge]) -> int:
    """The answer in plain Python: for each ``a``, the out-neighbours of its out-neighbours
    that it also points to."""
    out: dict[int, set[int]] = {}
    for a, b in edges:
        out.setdefault(a, set()).add(b)
    return sum(len(out.get(b, set()) & bs) for bs in out.values() for b in bs)


def rss_mb() -> float:
    """The process's resident memory now (Linux ``/proc``), in MB."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * 4096 / 2**20


def _ms(lat: list[float], q: float) -> float:
    ordered = sorted(lat)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3


async def run(
    version: str, rounds: list[list[Edge]], workers: int, report_every: int
) -> tuple[int, list[float], float]:
    """Run ``version`` interactively, one round per source node: ``(triangles, latencies,
    MB the job holds at the end)``."""
    before = rss_mb()
    lat: list[float] = []
    async with df.open(VERSIONS[version](), workers=workers) as job:
        edges = job.inputs["edges"]
        await job.advance_to(1)
        for t, batch in enumerate(rounds, start=1):
            start = time.perf_counter()
            edges.insert_many(batch)
            await job.advance_to(t + 1)
            lat.append(time.perf_counter() - start)
            if t % report_every == 0 or t == len(rounds):
                window = lat[-report_every:]
                print(
                    f"{version:>6} rounds {t - len(window) + 1:>5}-{t:<5} "
                    f"p50 {_ms(window, 0.5):7.2f} ms  p99 {_ms(window, 0.99):7.2f} ms  "
                    f"max {max(window) * 1e3:8.2f} ms"
                )
        found = sum(job.output.at(len(rounds)).values())
        held = rss_mb() - before
    return found, lat, held


def main(argv: list[str] | None = None) -> dict[str, int]:
    """Parse the arguments, run each version, print the answers; returns them by version."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=None, help="source nodes (default all)")
    parser.add_argument("--nodes", type=int, default=5_000)
    parser.add_argument("--edges", type=int, default=50_000)
    parser.add_argument("--versions", default="binary,delta,wcoj")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--report-every", type=int, default=500, metavar="N")
    parser.add_argument("--check", action="store_true", help="compare with plain Python")
    args = parser.parse_args(argv)
    rounds = generate(args.nodes, args.edges)[: args.rounds]
    n_edges = sum(map(len, rounds))
    print(f"{len(rounds)} rounds, {n_edges} edges; the largest round has {max(map(len, rounds))}")
    answers: dict[str, int] = {}
    for version in args.versions.split(","):
        found, lat, held = trio.run(run, version, rounds, args.workers, max(1, args.report_every))
        median = statistics.median(lat)
        print(
            f"{version:>6}: {len(lat) / sum(lat):.0f} rounds/s, median {median * 1e3:.2f} ms, "
            f"slowest {max(lat) * 1e3:.1f} ms ({max(lat) / median:.0f}x the median), "
            f"memory held {held:.1f} MB"
        )
        answers[version] = found
    for version, found in answers.items():
        print(f"answer: {version} {found} triangles")
    if args.check:
        expected = triangles([e for r in rounds for e in r])
        ok = all(found == expected for found in answers.values())
        print("check:", "ok" if ok else f"MISMATCH (expected {expected})")
    return answers


if __name__ == "__main__":
    main()
