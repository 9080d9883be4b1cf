"""Reductions on the W1 workload: a keyed ``count()`` under a FIFO sliding window.

100,000 records over 10,000 keys are loaded at time 0; then each of 10,000 rounds inserts one
record and retracts the oldest (``workloads.w1_count``). The pipeline is
``records.map(lambda k: (k, k)).count()``. Figures (one JSON line each):

* ``reduce.w1.interactive``: ``df.open()``, one ``await job.advance_to(t + 1)`` per round;
  ``rounds_per_s`` over the round loop, ``load_s`` for the initial load, latency percentiles.
* ``reduce.w1.static``: one ``df.run()`` over the load and every round (each its own time);
  ``rounds_per_s`` = rounds / (total - load), the load timed by a separate run.
* each with ``total_order`` on (the int-time fast path, the default) and off (the general
  interesting-times path), and ``fast_path_speedup`` (ratio of CPU-time rates) on the "on"
  lines. ``rounds_per_s`` is wall-clock, ``rounds_per_s_cpu`` the same over process CPU time
  (steadier when other processes share the machine).

* ``reduce.bfs.load``: reductions inside a loop, on ``Product`` times. The W4 breadth-first
  search (``workloads.w4_bfs``: 100,000 nodes, 200,000 edges; ``--quick``: 25,000 nodes,
  50,000 edges) loaded at time 0 and run to its fixed point with ``min()`` in ``iterate``,
  every time of a key on the line ``Product(0, _)``. ``load_s`` with the one-line fast path on
  and off (every key through ``paths.general_only`` with no line shortcut), and
  ``line_path_speedup`` on the "on" line (whole dataflow, CPU time).

Every line carries ``"check": "ok"`` when the final output equals the from-scratch answer.
``--profile`` prints the top cProfile entries of the interactive mode (fast path) to stderr.

Run: ``python benchmarks/bench_reduce.py [--quick] [--profile]``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import subprocess
import sys
import time
from typing import Any

import trio
from workloads import w1_count, w1_expected, w4_bfs

import deltaflow as df
from deltaflow.graphs import Bfs, bfs_distances
from deltaflow.operators import reduce as R
from deltaflow.operators.reduce import operator as reduce_operator
from deltaflow.operators.reduce.interesting_times import InterestingTimes
from deltaflow.operators.reduce.paths import general_only


def _pair(k: int) -> tuple[int, int]:
    return (k, k)


class KeyCount(df.Pipeline):
    """W1: ``(key, n)`` for every key with live records (``count()``, fast path on or off)."""

    def __init__(self, total_order: bool) -> None:
        self.total_order = total_order

    def build(self, records: df.Collection) -> df.Collection:
        arranged = records.map(_pair).arrange_by_key()
        out, _ = R.reduce_core(
            arranged,
            R._count_logic,
            name="count",
            positive_only=False,
            total_order=self.total_order,
            arrange_output=False,
        )
        return out


def answer(out: dict[Any, int]) -> dict[str, int]:
    """``{keys, checksum}`` of the output collection ``{(key, n): 1}``."""
    return {"keys": len(out), "checksum": sum(k * n for k, n in out)}


class _Clock:
    """Wall-clock and CPU time together (CPU time is steadier on a shared machine)."""

    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.cpu = time.process_time()

    def lap(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


async def interactive(
    init: list[int], rounds: list[tuple[int, int]], total_order: bool
) -> tuple[dict[str, float], dict[Any, int]]:
    async with df.open(KeyCount(total_order)) as job:
        clock = _Clock()
        job.inputs["records"].insert_many(init)
        await job.advance_to(1)
        load_s = clock.lap()[0]
        handle = job.inputs["records"]
        lat = []
        loop = _Clock()
        for t, (ins, ret) in enumerate(rounds, start=1):
            start = time.perf_counter()
            handle.insert(ins)
            handle.remove(ret)
            await job.advance_to(t + 1)
            lat.append(time.perf_counter() - start)
        wall, cpu = loop.lap()
        final = job.output.at(len(rounds))
    ordered = sorted(lat)
    figures = {
        "load_s": load_s,
        "rounds_per_s": len(rounds) / wall,
        "rounds_per_s_cpu": len(rounds) / cpu,
        "p50_us": statistics.median(lat) * 1e6,
        "p99_us": ordered[int(0.99 * (len(ordered) - 1))] * 1e6,
    }
    return figures, final


def static(
    init: list[int], rounds: list[tuple[int, int]], total_order: bool
) -> tuple[dict[str, float], dict[Any, int]]:
    load = [(k, 0, 1) for k in init]
    changes = [
        u for t, (ins, ret) in enumerate(rounds, start=1) for u in ((ins, t, 1), (ret, t, -1))
    ]
    clock = _Clock()
    df.run(KeyCount(total_order), records=load)
    load_wall, load_cpu = clock.lap()
    clock = _Clock()
    out = df.run(KeyCount(total_order), records=load + changes)
    total_wall, total_cpu = clock.lap()
    final: dict[Any, int] = {}
    for d, _t, r in out:
        final[d] = final.get(d, 0) + r
    figures = {
        "load_s": load_wall,
        "total_s": total_wall,
        "rounds_per_s": len(rounds) / max(total_wall - load_wall, 1e-9),
        "rounds_per_s_cpu": len(rounds) / max(total_cpu - load_cpu, 1e-9),
    }
    return figures, {d: r for d, r in final.items() if r}


async def bfs_load(edges: list[tuple[int, int]], root: int) -> tuple[float, float, Any]:
    """Load ``edges`` and ``root`` at time 0 and complete it: ``(wall, cpu, output)``."""
    async with df.open(Bfs()) as job:
        clock = _Clock()
        job.inputs["edges"].insert_many(edges)
        job.inputs["roots"].insert(root)
        await job.advance_to(1)
        wall, cpu = clock.lap()
        return wall, cpu, job.output.at(0)


def measure_bfs(lines: bool, quick: bool) -> dict[str, Any]:
    """The loop figure, measured in this process."""
    root, edges, _ = w4_bfs(nodes=25_000, edges=50_000, rounds=0) if quick else w4_bfs(rounds=0)
    if not lines:
        # Every reduction of this process takes the general search with no line shortcut.
        general = general_only(InterestingTimes(line_fast_path=False))
        reduce_operator.path_for = lambda lower: general
    wall, cpu, out = trio.run(bfs_load, edges, root)
    dist = bfs_distances([root], edges)
    ok = out == dict.fromkeys(dist.items(), 1)
    return {
        "figure": "reduce.bfs.load",
        "line_fast_path": lines,
        "edges": len(edges),
        "load_s": round(wall, 4),
        "load_s_cpu": round(cpu, 4),
        "reached": len(dist),
        "check": "ok" if ok else f"got {len(out)} reached",
    }


def measure(mode: str, total_order: bool, n_rounds: int) -> dict[str, Any]:
    """One figure, measured in this process."""
    init, rounds = w1_count(rounds=10_000)
    rounds = rounds[:n_rounds]
    if mode == "interactive":
        figures, final = trio.run(interactive, init, rounds, total_order)
    else:
        figures, final = static(init, rounds, total_order)
    expected = w1_expected(init, rounds)
    return {
        "figure": f"reduce.w1.{mode}",
        "total_order": total_order,
        "rounds": n_rounds,
        **{k: round(v, 4) for k, v in figures.items()},
        "check": "ok" if answer(final) == expected else f"got {answer(final)}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="1,000 rounds instead of 10,000")
    parser.add_argument("--profile", action="store_true", help="cProfile the interactive mode")
    parser.add_argument("--one", nargs=2, metavar=("MODE", "TOTAL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    n_rounds = 1_000 if args.quick else 10_000
    if args.one:
        mode, total = args.one
        if mode == "bfs":
            print(json.dumps(measure_bfs(total == "1", args.quick)))
        else:
            print(json.dumps(measure(mode, total == "1", n_rounds)))
        return
    for mode in ("interactive", "static"):
        rates: dict[bool, float] = {}
        for total_order in (False, True):
            # A fresh process per figure: the garbage of one run must not slow the next.
            cmd = [sys.executable, __file__, "--one", mode, str(int(total_order))]
            if args.quick:
                cmd.append("--quick")
            proc = subprocess.run(cmd, check=True, capture_output=True, text=True)
            line = json.loads(proc.stdout)
            rates[total_order] = line["rounds_per_s_cpu"]
            if total_order:
                line["fast_path_speedup"] = round(rates[True] / rates[False], 3)
            print(json.dumps(line), flush=True)
    cpu: dict[bool, float] = {}
    for lines in (False, True):
        cmd = [sys.executable, __file__, "--one", "bfs", str(int(lines))]
        if args.quick:
            cmd.append("--quick")
        proc = subprocess.run(cmd, check=True, capture_output=True, text=True)
        line = json.loads(proc.stdout)
        cpu[lines] = line["load_s_cpu"]
        if lines:
            line["line_path_speedup"] = round(cpu[False] / cpu[True], 3)
        print(json.dumps(line), flush=True)
    if args.profile:
        init, rounds = w1_count(rounds=10_000)
        prof = cProfile.Profile()
        prof.enable()
        trio.run(interactive, init, rounds[:2_000], True)
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
        print(buf.getvalue(), file=sys.stderr)


if __name__ == "__main__":
    main()
