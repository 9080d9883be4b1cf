"""Reachability on Spark: edges and roots as DataFrames in, reachable pairs as a DataFrame out.

The W2 graph of ``reachability.py`` (``--nodes`` nodes, ``--edges`` random edges, nodes
``0..roots-1`` as roots) with ``--changes`` rounds of its sliding window: at time ``t`` the
oldest edge is retracted and a new one inserted. The edge DataFrame holds every change as a
row ``(src, dst, time, diff)``; the roots DataFrame has no ``time``/``diff`` columns (all
inserted at time 0). ``dfspark.run`` runs the pipeline in one Spark barrier job of
``--partitions`` tasks and returns the output updates as a DataFrame ``(root, node, time,
diff)``; the program prints how many pairs change at each time and the final answer
(checked against a plain-Python search with ``--check``).

Run (from the repository, after ``make .venv/.installed``)::

    SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=.venv/bin/python \\
        .venv/bin/python examples/spark_reachability.py --partitions 2 --check

Options: ``[--nodes 1000] [--edges 2000] [--roots 10] [--changes 20] [--partitions 2]
[--master local[2]] [--check]``.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from typing import Any

import reachability  # the data of examples/reachability.py

from deltaflow.graphs import Reachability, reachable_pairs


def edge_updates(
    nodes: int, edges: int, changes: int, seed: int
) -> list[tuple[int, int, int, int]]:
    """``(src, dst, time, diff)``: the initial edges at time 0, then one window move per time."""
    init, rounds = reachability.generate(nodes, edges, changes, seed)
    rows = [(s, d, 0, 1) for s, d in init]
    for t, (new, old) in enumerate(rounds, start=1):
        rows += [(*new, t, 1), (*old, t, -1)]
    return rows


def main(argv: list[str] | None = None, spark: Any = None) -> set[reachability.Edge]:
    """Parse the arguments, run on Spark (``spark``, or a session of its own), print the
    answer; returns the final reachable pairs."""
    from deltaflow.adapters import spark as dfspark

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--edges", type=int, default=2000)
    parser.add_argument("--roots", type=int, default=10, help="nodes 0..roots-1 are roots")
    parser.add_argument("--changes", type=int, default=20, help="window moves, one per time")
    parser.add_argument("--partitions", type=int, default=2, help="workers (barrier tasks)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--seed", type=int, default=reachability.SEED)
    parser.add_argument("--check", action="store_true", help="compare with plain Python")
    args = parser.parse_args(argv)
    own = spark is None
    if own:
        spark = dfspark.local_session(args.master, "deltaflow-reachability")
    try:
        updates = edge_updates(args.nodes, args.edges, args.changes, args.seed)
        roots = list(range(args.roots))
        edges_df = spark.createDataFrame(updates, "src long, dst long, time long, diff long")
        roots_df = spark.createDataFrame([(r,) for r in roots], "root long")
        start = time.perf_counter()
        out = dfspark.run(
            Reachability(),
            spark,
            roots=roots_df,
            edges=edges_df,
            schema="root long, node long",
            partitions=args.partitions,
        )
        print(f"dfspark.run: {time.perf_counter() - start:.1f} s on {args.partitions} partitions")
        per_time = out.groupBy("time").count().orderBy("time").collect()
        print("changed pairs per time:", {r["time"]: r["count"] for r in per_time})
        final = out.groupBy("root", "node").sum("diff").where("`sum(diff)` > 0").collect()
        pairs = {(r["root"], r["node"]) for r in final}
    finally:
        if own:
            spark.stop()
    print("reachable per root:", dict(sorted(Counter(r for r, _ in pairs).items())))
    print(f"answer: {len(pairs)} reachable pairs")
    if args.check:
        live: Counter[reachability.Edge] = Counter()
        for s, d, _, diff in updates:
            live[(s, d)] += diff
        ok = pairs == reachable_pairs(roots, [e for e, n in live.items() if n > 0])
        print("check:", "ok" if ok else "MISMATCH")
    return pairs


if __name__ == "__main__":
    main()
