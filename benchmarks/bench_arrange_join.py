"""Benchmark arrangements and joins through the operators and the runtime: a script, not a test.

Prints one JSON line per figure:

Figures 1 and 2 measure traces, so their arrangements are *shared* (each read by two joins,
the second producing nothing): a join that alone reads an arrangement keeps that side in
memory instead, and the arrangement keeps no trace.

1. ``arrange_operator``: 1,000,000 ``(key, val)`` int updates (keys uniform in 0..100k, values
   uniform in 0..2**31) fed with ``insert_many`` at time 0 into joins of ``xs`` with an empty
   input: the joins force ``xs``'s trace to exist and output nothing. Reports updates/s from the
   first ``insert_many`` to ``advance_to(1)`` returning, and the spine's bytes per update
   (``statistics().nbytes / updates``) against the raw numpy size of 32 bytes per update
   (four int64 columns). Target: <= 60 bytes/update.
2. ``compaction_operator``: 100,000 rounds of insert-then-retract on 1,000 keys, interactive,
   ``xs.join(ys)`` keeping ``xs``'s arrangement read: round ``t`` inserts ``(t % 1000, t)`` and
   retracts the pair inserted in round ``t - 1``, then ``advance_to(t + 1)``. ``ys`` holds one
   row per key, plus one insert-then-retract per round on a key ``xs`` never uses (so both
   inputs of the join move every round). Reports the ``xs`` trace size every 10,000 rounds and
   the median per-round latency over rounds 900-1000 and over the last 100 rounds. Target: the
   late median within 1.2x of the early one.
   ``compaction_quiet_side`` is the same with ``ys`` static after round 0 (fewer rounds): it
   reports how many batches the quiet side's trace holds, and the same latency ratio.
3. ``join_batch`` / ``join_rounds``: a random graph of 100,000 edges on nodes 0..50,000 (numpy
   seed 7); ``edges.map(reverse).join(edges)`` lists the 2-paths ``a -> b -> c`` (output
   ``(b, (a, c))``); the total count of 2-paths is checked in plain Python from the output.
   Batch mode feeds every edge at time 0 (seconds, output updates/s). Rounds mode then inserts
   one new random edge per round, interactive (rounds/s, p50 and p90 latency).

Run: ``python benchmarks/bench_arrange_join.py`` (``--quick`` for smaller sizes, ``--profile``
to print a cProfile summary of the join rounds on stderr).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import trio

import deltaflow as df
from deltaflow.framework.trace.spine import Spine
from deltaflow.operators.arrange import ArrangeOperator
from deltaflow.scheduler.runtime import Job

KEYS = 100_000


def _pipeline(build: Callable[..., df.Collection]) -> df.Pipeline:
    return type("Bench", (df.Pipeline,), {"build": staticmethod(build)})()


def _input_spines(job: Job, name: str) -> list[Spine]:
    """Every worker's spine of the arrangement fed directly by input ``name``."""
    nodes = job.plan.nodes
    out = []
    for worker in job.workers:
        for actor in worker.actors:
            op = actor.operator
            if isinstance(op, ArrangeOperator):
                upstream = nodes[nodes[actor.index].inputs[0][0].node]
                if upstream.name == f"input:{name}":
                    out.append(op.spine)
    return out


# -- 1. arrangement build ---------------------------------------------------------------------


def _shared_join(xs: df.Collection, ys: df.Collection) -> df.Collection:
    """``xs.join(ys)`` with both arrangements read by a second join (which adds nothing), so
    both keep their traces."""
    xs_arr, ys_arr = xs.arrange_by_key(), ys.arrange_by_key()
    joined = xs_arr.join_core(ys_arr, lambda k, a, b: [(k, (a, b))])
    return joined.concat(xs_arr.join_core(ys_arr, lambda _k, _a, _b: ()))


def figure_arrange(n_updates: int) -> dict[str, object]:
    rng = np.random.default_rng(1)
    keys = rng.integers(0, KEYS, n_updates).tolist()
    vals = rng.integers(0, 2**31, n_updates).tolist()
    data = list(zip(keys, vals))
    del keys, vals
    result: dict[str, Any] = {}

    async def main() -> None:
        pipe = _pipeline(_shared_join)
        async with df.open(pipe) as job:
            start = time.perf_counter()
            job.inputs["xs"].insert_many(data)
            await job.advance_to(1)
            result["seconds"] = time.perf_counter() - start
            (spine,) = _input_spines(job, "xs")
            stats = spine.statistics()
            result["stats"] = stats
            assert job.output.at(0) == {}

    trio.run(main)
    stats = result["stats"]
    return {
        "figure": "arrange_operator",
        "updates": n_updates,
        "seconds": round(result["seconds"], 3),
        "updates_per_s": round(n_updates / result["seconds"]),
        "trace_updates": stats.updates,
        "trace_batches": stats.batches,
        "trace_bytes_per_update": round(stats.nbytes / max(stats.updates, 1), 2),
        "raw_numpy_bytes_per_update": 32,
        "target_bytes_per_update": 60,
    }


# -- 2. compaction ----------------------------------------------------------------------------


def figure_compaction(rounds: int, keys: int = 1000, quiet: bool = False) -> dict[str, object]:
    latencies: list[float] = []
    sizes: list[dict[str, int]] = []
    quiet_batches: list[int] = []
    every = max(rounds // 10, 1)

    async def main() -> None:
        pipe = _pipeline(_shared_join)
        async with df.open(pipe) as job:
            (xs_spine,) = _input_spines(job, "xs")
            (ys_spine,) = _input_spines(job, "ys")
            xs, ys = job.inputs["xs"], job.inputs["ys"]
            ys.insert_many([(k, "y") for k in range(keys)])
            perf = time.perf_counter
            for t in range(rounds):
                start = perf()
                xs.insert((t % keys, t))
                if t:
                    xs.remove(((t - 1) % keys, t - 1))
                if not quiet:
                    ys.insert((-1, t))
                    if t:
                        ys.remove((-1, t - 1))
                await job.advance_to(t + 1)
                latencies.append(perf() - start)
                if (t + 1) % every == 0:
                    s = xs_spine.statistics()
                    sizes.append({"round": t + 1, "updates": s.updates, "batches": s.batches})
                    quiet_batches.append(ys_spine.statistics().batches)
            assert job.output.at(rounds - 1) == {((rounds - 1) % keys, (rounds - 1, "y")): 1}

    trio.run(main)
    early = statistics.median(latencies[900:1000])
    late = statistics.median(latencies[-100:])
    out: dict[str, object] = {
        "figure": "compaction_quiet_side" if quiet else "compaction_operator",
        "rounds": rounds,
        "keys": keys,
        "sizes": sizes,
        "median_us_rounds_900_1000": round(early * 1e6, 1),
        "median_us_last_100_rounds": round(late * 1e6, 1),
        "late_over_early": round(late / early, 3),
        "target_ratio": 1.2,
        "mean_us_per_round": round(sum(latencies) / len(latencies) * 1e6, 1),
    }
    if quiet:
        out["ys_trace_batches"] = quiet_batches
    return out


# -- 3. join ----------------------------------------------------------------------------------


def _graph(n_edges: int, nodes: int, seed: int = 7) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, nodes, n_edges).tolist()
    dst = rng.integers(0, nodes, n_edges).tolist()
    return list(zip(src, dst))


def _two_paths(edges: list[tuple[int, int]]) -> int:
    """The number of 2-paths a -> b -> c, counting multiplicity: sum of in(b) * out(b)."""
    indeg: dict[int, int] = {}
    outdeg: dict[int, int] = {}
    for a, b in edges:
        outdeg[a] = outdeg.get(a, 0) + 1
        indeg[b] = indeg.get(b, 0) + 1
    return sum(n * outdeg.get(b, 0) for b, n in indeg.items())


def _reverse(e: tuple[int, int]) -> tuple[int, int]:
    return (e[1], e[0])


def figure_join(n_edges: int, nodes: int, n_rounds: int, profile: bool) -> list[dict[str, object]]:
    edges = _graph(n_edges, nodes)
    rng = np.random.default_rng(8)
    extra = list(
        zip(rng.integers(0, nodes, n_rounds).tolist(), rng.integers(0, nodes, n_rounds).tolist())
    )
    result: dict[str, Any] = {}
    profiler = cProfile.Profile() if profile else None

    async def main() -> None:
        pipe = _pipeline(lambda edges: edges.map(_reverse).join(edges))
        async with df.open(pipe) as job:
            handle = job.inputs["edges"]
            start = time.perf_counter()
            handle.insert_many(edges)
            await job.advance_to(1)
            result["batch_seconds"] = time.perf_counter() - start
            out0 = job.output.updates()
            result["batch_outputs"] = len(out0)
            result["batch_paths"] = sum(r for _d, _t, r in out0)
            latencies = []
            perf = time.perf_counter
            if profiler is not None:
                profiler.enable()
            rounds_start = perf()
            for i, edge in enumerate(extra):
                begin = perf()
                handle.insert(edge)
                await job.advance_to(i + 2)
                latencies.append(perf() - begin)
            result["rounds_seconds"] = perf() - rounds_start
            if profiler is not None:
                profiler.disable()
            result["latencies"] = latencies
            result["final_paths"] = sum(r for _d, _t, r in job.output.updates())

    trio.run(main)
    expected0 = _two_paths(edges)
    expected1 = _two_paths(edges + extra)
    assert result["batch_paths"] == expected0, (result["batch_paths"], expected0)
    assert result["final_paths"] == expected1, (result["final_paths"], expected1)
    lat = sorted(result["latencies"])
    batch = {
        "figure": "join_batch",
        "edges": n_edges,
        "nodes": nodes,
        "two_paths": expected0,
        "output_updates": result["batch_outputs"],
        "seconds": round(result["batch_seconds"], 3),
        "output_updates_per_s": round(result["batch_outputs"] / result["batch_seconds"]),
        "input_updates_per_s": round(n_edges / result["batch_seconds"]),
    }
    rounds = {
        "figure": "join_rounds",
        "rounds": n_rounds,
        "rounds_per_s": round(n_rounds / result["rounds_seconds"], 1),
        "p50_us": round(lat[len(lat) // 2] * 1e6, 1),
        "p90_us": round(lat[int(len(lat) * 0.9)] * 1e6, 1),
        "max_us": round(lat[-1] * 1e6, 1),
        "two_paths_at_end": expected1,
        "profiled": profile,
    }
    if profiler is not None:
        buf = io.StringIO()
        pstats.Stats(profiler, stream=buf).sort_stats("tottime").print_stats(25)
        print(buf.getvalue(), file=sys.stderr)
    return [batch, rounds]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile the join rounds (summary on stderr)"
    )
    parser.add_argument(
        "--only",
        choices=["arrange", "compaction", "quiet", "join"],
        action="append",
        help="run only these figures (repeatable)",
    )
    args = parser.parse_args(argv)
    quick = args.quick
    only = set(args.only or ["arrange", "compaction", "quiet", "join"])
    env = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
        "quick": quick,
    }
    figures: list[Callable[[], list[dict[str, object]]]] = []
    if "arrange" in only:
        figures.append(lambda: [figure_arrange(200_000 if quick else 1_000_000)])
    if "compaction" in only:
        figures.append(lambda: [figure_compaction(20_000 if quick else 100_000)])
    if "quiet" in only:
        figures.append(lambda: [figure_compaction(2_000 if quick else 5_000, quiet=True)])
    if "join" in only:
        figures.append(
            lambda: figure_join(
                20_000 if quick else 100_000,
                10_000 if quick else 50_000,
                500 if quick else 2_000,
                args.profile,
            )
        )
    for make in figures:
        for fig in make():
            fig.update(env)
            print(json.dumps(fig), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
