"""W3 triangles for ``bench_workloads.py``: binary joins, delta query, WCOJ delta query.

The pipelines are those of ``examples/triangles.py``; the data are ``workloads.w3_triangles``
(one round per source node, in node order). Each run is a child process of its own, so that
its peak memory is its own:

* ``w3.<version>.interactive`` — ``df.open()``, one ``advance_to`` per round: rounds/s by the
  wall clock and by this process's CPU time (the machine is shared), latency percentiles, the
  slowest round against the median, and what the slowest is made of. The first rounds hold
  the hubs' thousands of edges and the median round one edge, so the overall ratio measures
  the workload's skew; the engine's own pauses (garbage collection, index compaction) show
  in ``one_edge_cpu_slowest_over_median``, the slowest one-edge round against the median
  one-edge round (the same data work each); ``cpu_slowest_round_gc_ms`` is the collector's
  share of the slowest round and ``cpu_gc_ms`` its total.
* ``w3.<version>.static`` — one ``df.run()`` of every round (median of three; the plain delta
  query once, its hub round being quadratic).
* ``w3.<version>.memory`` — the resident memory the job holds at the end of an interactive
  run with its output counted (``Counted``: the output's history grows with the triangles,
  not the edges), and the peak grown during it, at 25,000 and 50,000 edges asked for;
  ``w3.memory`` compares MB held per 1,000 edges at the two sizes (proportional: within 20%).
* ``w3.hub`` — a star whose hub gains one edge per round (2,000 rounds), WCOJ: the slowest
  round against the median (wall clock and CPU time: the target "the slowest round within
  10x of the median on the hub"), and proposals at 500 and 2,000 edges.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import trio
from workloads import w3_expected, w3_triangles

import deltaflow as df

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from triangles import VERSIONS, rss_mb

SIZES = (25_000, 50_000)
TARGETS = {"interactive_rounds_per_s": 700, "static_rounds_per_s": 1_400, "slowest_over_median": 10}
QUICK_ROUNDS = 300


def _answer(out: dict[Any, int]) -> dict[str, int]:
    return {"triangles": sum(out.values())}


class Counted(df.Pipeline):
    """A version whose output is only how many triangles there are: what the query holds,
    without the output's own history (which grows with the triangles, not the edges)."""

    def __init__(self, version: str) -> None:
        self.inner = VERSIONS[version]()

    def build(self, edges: df.Collection) -> df.Collection:
        return self.inner.build(edges).map(lambda _tri: (0, 1)).count()


class Collections:
    """CPU seconds the garbage collector spent, in total so far (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.spent = 0.0
        self.began = 0.0

    def __call__(self, phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            self.began = time.process_time()
        else:
            self.spent += time.process_time() - self.began


async def _interactive(
    pipeline: df.Pipeline, rounds: list[list[Any]]
) -> tuple[list[float], list[float], list[float], dict[Any, int], float]:
    """Wall and CPU seconds per round (the machine is shared: a round preempted by another
    process is slow on the wall clock only), the collector's CPU seconds per round, the final
    output, and the MB the process holds more at the end than at the start."""
    before = rss_mb()
    collections = Collections()
    gc.callbacks.append(collections)
    try:
        async with df.open(pipeline) as job:
            edges = job.inputs["edges"]
            await job.advance_to(1)
            lat, cpu, in_gc = [], [], []
            for t, batch in enumerate(rounds, start=1):
                start, start_cpu, start_gc = (
                    time.perf_counter(), time.process_time(), collections.spent
                )  # fmt: skip
                edges.insert_many(batch)
                await job.advance_to(t + 1)
                lat.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
                in_gc.append(collections.spent - start_gc)
            final = job.output.at(len(rounds))
            held = rss_mb() - before
    finally:
        gc.callbacks.remove(collections)
    return lat, cpu, in_gc, final, held


def _static(version: str, rounds: list[list[Any]]) -> tuple[float, float, dict[Any, int]]:
    """Wall and CPU seconds of one ``df.run`` of every round, and the final collection."""
    ups = [(e, t, 1) for t, batch in enumerate(rounds, start=1) for e in batch]
    start, start_cpu = time.perf_counter(), time.process_time()
    out = df.run(VERSIONS[version](), edges=ups)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    acc: dict[Any, int] = {}
    for d, _, r in out:
        acc[d] = acc.get(d, 0) + r
    return elapsed, cpu, {d: r for d, r in acc.items() if r}


def memory(version: str, edges: int, quick: bool) -> None:
    """``w3.<version>.memory``: what the counted version holds after running interactively
    (resident memory at the end less at the start) and the peak grown during the run."""
    from bench_workloads import check, emit, max_rss_mb

    rounds = w3_triangles(edges=edges)[: QUICK_ROUNDS if quick else None]
    n_edges = sum(map(len, rounds))
    peak = max_rss_mb()
    _, _, _, final, held = trio.run(_interactive, Counted(version), rounds)
    emit({
        "figure": f"w3.{version}.memory",
        "edges": n_edges,
        "held_mb": held,
        "mb_per_k_edges": held / n_edges * 1e3,
        "peak_grown_mb": max_rss_mb() - peak,
        "check": check({"triangles": next(iter(final))[1] if final else 0}, w3_expected(rounds)),
    })  # fmt: skip


def speed(version: str, quick: bool) -> None:
    """``w3.<version>.interactive`` and ``.static`` on W3."""
    from bench_workloads import _latency, check, emit, max_rss_mb

    rounds = w3_triangles()[: QUICK_ROUNDS if quick else None]
    expected = w3_expected(rounds)
    lat, cpu, in_gc, final, _ = trio.run(_interactive, VERSIONS[version](), rounds)
    median = statistics.median(lat)
    slowest = cpu.index(max(cpu))
    one_edge = [c for c, batch in zip(cpu, rounds) if len(batch) == 1]
    figure: dict[str, Any] = {
        "figure": f"w3.{version}.interactive",
        "edges": sum(map(len, rounds)),
        "rounds": len(rounds),
        "rounds_per_s": len(rounds) / sum(lat),
        "cpu_rounds_per_s": len(rounds) / sum(cpu),
        **_latency(lat),
        "max_ms": max(lat) * 1e3,
        "slowest_round": lat.index(max(lat)) + 1,
        "slowest_over_median": max(lat) / median,
        "cpu_slowest_over_median": max(cpu) / statistics.median(cpu),
        "cpu_slowest_round": slowest + 1,
        "cpu_slowest_round_edges": len(rounds[slowest]),
        "cpu_slowest_round_gc_ms": in_gc[slowest] * 1e3,
        "median_round_edges": statistics.median(map(len, rounds)),
        "one_edge_rounds": len(one_edge),
        "one_edge_cpu_slowest_over_median": (
            max(one_edge) / statistics.median(one_edge) if one_edge else None
        ),
        "cpu_gc_ms": sum(in_gc) * 1e3,
        "check": check(_answer(final), expected),
        "max_rss_mb": max_rss_mb(),
    }
    if version == "wcoj":
        figure["target_rounds_per_s"] = TARGETS["interactive_rounds_per_s"]
        figure["meets_target"] = figure["rounds_per_s"] >= TARGETS["interactive_rounds_per_s"]
    emit(figure)
    runs = sorted(_static(version, rounds) for _ in range(1 if version == "delta" else 3))
    elapsed, cpu_s, out = runs[len(runs) // 2]
    stat: dict[str, Any] = {
        "figure": f"w3.{version}.static",
        "rounds": len(rounds),
        "total_s": elapsed,
        "rounds_per_s": len(rounds) / elapsed,
        "cpu_rounds_per_s": len(rounds) / cpu_s,
        "runs_rounds_per_s": [len(rounds) / e for e, _, _ in runs],
        "check": check(_answer(out), expected),
    }
    if version == "wcoj":
        stat["target_rounds_per_s"] = TARGETS["static_rounds_per_s"]
        stat["meets_target"] = stat["rounds_per_s"] >= TARGETS["static_rounds_per_s"]
    emit(stat)


async def _hub(k: int) -> tuple[list[float], list[float], list[int]]:
    """A star whose hub gains ``k`` edges one round at a time: wall and CPU seconds per round,
    and proposals so far after each round."""
    async with df.open(VERSIONS["wcoj"]()) as job:
        edges = job.inputs["edges"]
        lat, cpu, proposals = [], [], []
        for x in range(1, k + 1):
            start, start_cpu = time.perf_counter(), time.process_time()
            edges.insert((0, x))
            await job.advance_to(x)
            lat.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
            proposals.append(job.statistics()["proposals"])
    return lat, cpu, proposals


def hub() -> None:
    """The ``w3.hub`` figure: the slowest round against the median, by the wall clock and by
    CPU time, and the proposals at 500 and 2,000 hub edges."""
    from bench_workloads import emit

    lat, cpu, proposals = trio.run(_hub, 2_000)
    median, cpu_median = statistics.median(lat), statistics.median(cpu)
    emit({
        "figure": "w3.hub",
        "rounds": len(lat),
        "p50_ms": median * 1e3,
        "max_ms": max(lat) * 1e3,
        "slowest_over_median": max(lat) / median,
        "cpu_p50_ms": cpu_median * 1e3,
        "cpu_max_ms": max(cpu) * 1e3,
        "cpu_slowest_over_median": max(cpu) / cpu_median,
        "target_slowest_over_median": TARGETS["slowest_over_median"],
        "meets_target": max(lat) / median <= TARGETS["slowest_over_median"],
        "meets_target_cpu": max(cpu) / cpu_median <= TARGETS["slowest_over_median"],
        "proposals_at_500": proposals[499],
        "proposals_at_2000": proposals[-1],
        "proposals_ratio": proposals[-1] / proposals[499],
    })  # fmt: skip


def run(args: argparse.Namespace) -> None:
    """Every version at both sizes (children), then the memory comparison and the hub."""
    from bench_workloads import emit

    if args.w3_version:
        if args.w3_edges:
            memory(args.w3_version, args.w3_edges, args.quick)
        else:
            speed(args.w3_version, args.quick)
        return
    mem: dict[str, dict[int, float]] = {}
    for version in VERSIONS:
        for edges in (*SIZES, 0):
            cmd = [sys.executable, sys.argv[0], "--child", "w3", "--w3-version", version,
                   "--w3-edges", str(edges), *(["--quick"] if args.quick else [])]  # fmt: skip
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            sys.stderr.write(proc.stderr)
            for line in proc.stdout.splitlines():
                print(line, flush=True)
                record = json.loads(line)
                if "mb_per_k_edges" in record:
                    mem.setdefault(version, {})[edges] = record["mb_per_k_edges"]
            if proc.returncode:
                emit({"figure": f"w3.{version}", "error": f"exited with status {proc.returncode}"})
    emit({
        "figure": "w3.memory",
        **{
            f"{v}_mb_per_k_edges": {str(k): round(x, 3) for k, x in sizes.items()}
            for v, sizes in mem.items()
        },
        **{
            f"{v}_ratio": sizes[SIZES[1]] / sizes[SIZES[0]]
            for v, sizes in mem.items()
            if len(sizes) == 2 and sizes[SIZES[0]]
        },
        "target_ratio_within": 0.2,
    })  # fmt: skip
    hub()
