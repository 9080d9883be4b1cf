"""The columnar kernels against the general path, in one process: a script, not a test.

Each figure runs the same job with ``DELTAFLOW_KERNELS`` ``never`` and ``auto`` in turn (the
order swapped every pair, so a drift of the machine's speed falls on both), and reports the
median CPU seconds of each and their ratio (``auto / never``: below 1, the kernels pay):

* ``kernels.w3_binary`` — W3's triangles by binary joins, every round at once (one
  ``df.run``; the semijoin of the 2-paths with the edges takes the join kernel);
* ``kernels.w4_load`` — W4's initial load (the BFS of ``--nodes`` nodes and twice as many
  edges, ``bench_processes``' job; the loop's join of distances with the edges takes the join
  kernel);
* ``kernels.join_sizes`` — one ``join_map`` of an arriving batch of ``n`` updates (one time)
  with a side of 20,000 keys holding ``deg`` updates each, loaded before (and read once),
  half the arriving keys meeting nothing: the CPU of that round alone, ``never`` against
  ``always`` (so that every size takes the kernel), medians of 7: where the kernel starts to
  pay;
* ``kernels.join_bytes`` — bytes per update a join keeps of an int side: its history (dict of
  lists of tuples) and its column runs.

Run: ``python benchmarks/bench_kernels.py [--quick] [--only w2,w3,w4,sizes,bytes]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import trio
from bench_processes import _w4_load
from bench_workloads import Reachability, _singles, _static_inputs
from w3 import VERSIONS, w3_triangles
from workloads import w2_reach, w4_bfs

import deltaflow as df
from deltaflow.framework import kernels
from deltaflow.framework.lattice import Product
from deltaflow.operators.arrange import RawBatch
from deltaflow.operators.join.history import KeyedHistory
from deltaflow.operators.join.kernel import SortedRuns


def emit(record: dict[str, Any]) -> None:
    clean = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in record.items()}
    print(json.dumps(clean), flush=True)


def alternate(run: Callable[[], Any], pairs: int, modes: tuple[str, str]) -> dict[str, Any]:
    """CPU seconds of ``run`` under each mode, alternating; medians and their ratio."""
    cpu: dict[str, list[float]] = {m: [] for m in modes}
    answers = {}
    previous = kernels.mode()
    try:
        for i in range(pairs):
            for m in modes if i % 2 == 0 else modes[::-1]:
                kernels.set_mode(m)
                gc.collect()
                start = time.process_time()
                answers[m] = run()
                cpu[m].append(time.process_time() - start)
    finally:
        kernels.set_mode(previous)
    a, b = (statistics.median(cpu[m]) for m in modes)
    return {
        f"{modes[0]}_cpu_s": a,
        f"{modes[1]}_cpu_s": b,
        "ratio": b / a,
        "runs": {m: [round(x, 3) for x in cpu[m]] for m in modes},
        "same_answer": answers[modes[0]] == answers[modes[1]],
    }


def bench_w3(quick: bool) -> None:
    rounds = w3_triangles()[: 300 if quick else None]
    ups = [(e, t, 1) for t, batch in enumerate(rounds, start=1) for e in batch]

    def run() -> int:
        acc: dict[Any, int] = {}
        for d, _, r in df.run(VERSIONS["binary"](), edges=ups):
            acc[d] = acc.get(d, 0) + r
        return sum(1 for r in acc.values() if r)

    emit({"figure": "kernels.w3_binary", "rounds": len(rounds),
          **alternate(run, 2 if quick else 5, ("never", "auto"))})  # fmt: skip


def bench_w2(quick: bool) -> None:
    """W2 static: the load and 1,000 rounds (300 quick) at once, one ``df.run``; its
    ``distinct`` runs in the loop at ``Product(round, iteration)`` times."""
    roots, init, rounds = w2_reach()
    n = 300 if quick else 1_000
    inputs = _static_inputs({"roots": roots, "edges": init}, "edges", _singles(rounds[:n]))

    def run() -> int:
        acc: dict[Any, int] = {}
        for d, _, r in df.run(Reachability(), **inputs):
            acc[d] = acc.get(d, 0) + r
        return sum(1 for r in acc.values() if r)

    emit({"figure": "kernels.w2_static", "rounds": n,
          **alternate(run, 2 if quick else 5, ("never", "auto"))})  # fmt: skip


def bench_w4(quick: bool, nodes: int) -> None:
    nodes = 20_000 if quick else nodes
    root, edges, _ = w4_bfs(nodes=nodes, edges=2 * nodes, rounds=1)

    def run() -> tuple[int, int]:
        r = trio.run(_w4_load, 1, root, edges)
        return r["reached"], r["dist_sum"]

    emit({"figure": "kernels.w4_load", "nodes": nodes,
          **alternate(run, 1 if quick else 3, ("never", "auto"))})  # fmt: skip


class _JoinMap(df.Pipeline):
    def build(self, xs: df.Collection, ys: df.Collection) -> df.Collection:
        return xs.join_map(ys, lambda k, a, b: (b, a + 1))


async def _arrive(ys: list[Any], xs: list[Any]) -> float:
    """CPU seconds of one batch ``xs`` joined with ``ys``, loaded before (and read once by
    a batch like it, so that what is built on a first read is built already)."""
    async with df.open(_JoinMap()) as job:
        job.inputs["ys"].insert_many(ys)
        await job.advance_to(1)
        job.inputs["xs"].insert_many([(k + 1, v) for k, v in xs])
        await job.advance_to(2)
        start = time.process_time()
        job.inputs["xs"].insert_many(xs)
        await job.advance_to(3)
        return time.process_time() - start


def bench_sizes(quick: bool) -> None:
    rng = np.random.default_rng(1)
    keys = 20_000
    for deg in (2, 8) if quick else (1, 2, 4, 8, 16):
        ys = [(k, int(v)) for k in range(keys) for v in rng.integers(0, 10**6, deg)]
        for n in (64, 1_024) if quick else (16, 256, 1_024, 4_096, 32_768):
            xs = [(int(k), 3) for k in rng.integers(0, 2 * keys, n)]
            cpu: dict[str, list[float]] = {"never": [], "always": []}
            previous = kernels.mode()
            try:
                for i in range(3 if quick else 7):
                    for m in ("never", "always") if i % 2 == 0 else ("always", "never"):
                        kernels.set_mode(m)
                        gc.collect()
                        cpu[m].append(trio.run(_arrive, ys, xs))
            finally:
                kernels.set_mode(previous)
            a, b = (statistics.median(cpu[m]) for m in ("never", "always"))
            emit({"figure": "kernels.join_sizes", "n": n, "deg": deg, "never_ms": a * 1e3,
                  "always_ms": b * 1e3, "ratio": b / a})  # fmt: skip


def bench_bytes(quick: bool) -> None:
    n_edges = 20_000 if quick else 200_000
    _, edges, _ = w4_bfs(nodes=n_edges // 2, edges=n_edges, rounds=1)
    t = Product(0, 0)
    batch = RawBatch([a for a, _ in edges], [b for _, b in edges], [t] * len(edges),
                     [1] * len(edges))  # fmt: skip
    sizes = []
    for keep in ("history", "runs"):
        gc.collect()
        tracemalloc.start()
        if keep == "history":
            held: Any = KeyedHistory()
            held.extend(batch.updates())
        else:
            held = SortedRuns()
            held.add(batch)
            held.runs()
            batch_ref = held._pending  # (empty once read: the runs hold their own columns)
            assert not batch_ref
        gc.collect()
        sizes.append(tracemalloc.get_traced_memory()[0] / len(edges))
        tracemalloc.stop()
        del held
    emit({"figure": "kernels.join_bytes", "updates": len(edges),
          "history_bytes_per_update": sizes[0], "runs_bytes_per_update": sizes[1]})  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--only", default="w2,w3,w4,sizes,bytes")
    parser.add_argument("--nodes", type=int, default=100_000, help="W4's nodes (W4x10: 10**6)")
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    if "bytes" in only:
        bench_bytes(args.quick)
    if "w2" in only:
        bench_w2(args.quick)
    if "w3" in only:
        bench_w3(args.quick)
    if "w4" in only:
        bench_w4(args.quick, args.nodes)
    if "sizes" in only:
        bench_sizes(args.quick)


if __name__ == "__main__":
    main()
