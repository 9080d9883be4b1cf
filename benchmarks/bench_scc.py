"""Strongly connected components kept up to date under single-edge changes, beside networkx
recomputing them from scratch after each change, in the same run.

A random directed graph (``nodes`` nodes, ``edges`` random edges) is loaded, then changed 100
times, one edge at a time (about half deletions of a live edge, half insertions); after each
change the job is advanced and its output read. Two formulations of ``deltaflow.graphs.scc``:

* ``at``: the default, labels entering the propagation loops at rounds that grow with them
  (``propagate_at``);
* ``all``: ``priority=None``, every label entering at once (differential dataflow's
  ``strongly_connected`` as a user first writes it).

networkx keeps the same graph (``DiGraph``, edges added and removed as they change) and
recomputes ``strongly_connected_components`` and the smallest node of each after every change.

Figures (one JSON line each):

* ``scc.<formulation>.n<nodes>``: ``load_s`` (wall seconds from the first edge to the first
  output), ``p50_ms`` / ``p99_ms`` per change (wall, from the change to its output),
  ``nx_p50_ms`` / ``nx_p99_ms`` (networkx's recompute of the same graphs in the same run),
  ``ratio_p50`` (deltaflow's p50 over networkx's), ``p99_over_p50``, the same per change in
  CPU seconds of this process (``cpu_p50_ms``, ``cpu_p99_ms``, ``nx_cpu_p50_ms``,
  ``cpu_ratio_p50``: on a shared machine a change that spans several time slices waits
  between them, which a recompute shorter than one slice does not), the targets where the
  issue set them (judged on wall ``ratio_p50``), and ``check`` (``"ok"`` when every output
  equals networkx's labels);
* ``scc.<formulation>.n<nodes>.counts``: per change, medians over the changes of the
  workers' ``activations`` and progress ``steps``, reduction key ``evaluations`` and the
  distinct times per loop depth that messages carried (``times_depth<d>``), from a second
  run with the same changes (not with ``--processes``, whose work is in other processes).

Run: ``python benchmarks/bench_scc.py [--quick] [--sizes 300,3000] [--changes 100]
[--workers 1] [--processes 0]`` (``--quick``: 300 and 3,000 nodes, 30 changes).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections import Counter
from typing import Any

import networkx as nx
import trio
from bench_workloads import emit

import deltaflow as df
from deltaflow.framework.lattice import Product
from deltaflow.graphs import scc
from deltaflow.operators.reduce.operator import ReduceOperator
from deltaflow.scheduler.local.actor import Actor

__all__ = ["SccAll", "SccAt", "graph", "main"]

Edge = tuple[int, int]

#: Targets from the issue: (formulation, nodes) -> (p50 ratio to networkx, load seconds).
TARGETS: dict[tuple[str, int], tuple[float, float | None]] = {
    ("at", 3_000): (0.2, None),
    ("at", 30_000): (0.005, 5.0),
    ("all", 3_000): (0.5, None),
    ("all", 30_000): (0.1, 20.0),
}
P99_OVER_P50 = 10.0
EDGES_PER_NODE = {300: 2.5, 3_000: 2.5, 30_000: 2.5}


class SccAt(df.Pipeline):
    """``graphs.scc`` with its default priorities."""

    def build(self, edges: df.Collection) -> df.Collection:
        return scc(edges)


class SccAll(df.Pipeline):
    """``graphs.scc`` with every label entering at once."""

    def build(self, edges: df.Collection) -> df.Collection:
        return scc(edges, priority=None)


PIPELINES = {"at": SccAt, "all": SccAll}


def graph(
    nodes: int, seed: int = 1, changes: int = 100
) -> tuple[list[Edge], list[tuple[Edge, int]]]:
    """``nodes * 2.5`` random edges and ``changes`` single-edge changes ``(edge, diff)``."""
    rng = random.Random(seed)
    count = int(nodes * EDGES_PER_NODE.get(nodes, 2.5))
    initial = [(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(count)]
    live = Counter(initial)
    steps: list[tuple[Edge, int]] = []
    for _ in range(changes):
        if rng.random() < 0.5:
            edge, diff = rng.choice(initial), -1
            if live[edge] <= 0:
                edge, diff = (rng.randrange(nodes), rng.randrange(nodes)), 1
        else:
            edge, diff = (rng.randrange(nodes), rng.randrange(nodes)), 1
        live[edge] += diff
        steps.append((edge, diff))
    return initial, steps


def nx_labels(g: nx.DiGraph) -> dict[int, int]:
    """Each node with the smallest node of its strongly connected component."""
    out: dict[int, int] = {}
    for component in nx.strongly_connected_components(g):
        smallest = min(component)
        for n in component:
            out[n] = smallest
    return out


def recompute(
    initial: list[Edge], steps: list[tuple[Edge, int]]
) -> tuple[list[float], list[float], list[dict[int, int]]]:
    """networkx's per-change wall and CPU seconds, and its answers (the load's first)."""
    live = Counter(initial)
    g = nx.DiGraph()
    g.add_edges_from(live)
    answers = [nx_labels(g)]
    seconds, cpu = [], []
    for edge, diff in steps:
        live[edge] += diff
        start, cpu_start = time.perf_counter(), time.process_time()
        if diff > 0:
            g.add_edge(*edge)
        elif live[edge] == 0:
            g.remove_edge(*edge)
            for n in edge:
                if g.degree(n) == 0:
                    g.remove_node(n)
        answers.append(nx_labels(g))
        seconds.append(time.perf_counter() - start)
        cpu.append(time.process_time() - cpu_start)
    return seconds, cpu, answers


def _labels(out: dict[Any, int]) -> dict[int, int] | None:
    if any(n != 1 for n in out.values()):
        return None
    return dict(out.keys())


async def incremental(
    formulation: str, initial: list[Edge], steps: list[tuple[Edge, int]], config: dict[str, int]
) -> tuple[float, list[float], list[float], list[dict[int, int] | None]]:
    """deltaflow's load seconds, per-change wall and CPU seconds, and its answers."""
    answers: list[dict[int, int] | None] = []
    seconds, cpu = [], []
    async with df.open(PIPELINES[formulation](), **config) as job:
        start = time.perf_counter()
        job.inputs["edges"].insert_many(initial)
        await job.advance_to(1)
        load = time.perf_counter() - start
        answers.append(_labels(job.output.at(0)))
        for t, (edge, diff) in enumerate(steps, 1):
            start, cpu_start = time.perf_counter(), time.process_time()
            job.inputs["edges"].insert_many([edge], [diff])
            await job.advance_to(t + 1)
            seconds.append(time.perf_counter() - start)
            cpu.append(time.process_time() - cpu_start)
            answers.append(_labels(job.output.at(t)))
    return load, seconds, cpu, answers


async def counts(
    formulation: str, initial: list[Edge], steps: list[tuple[Edge, int]], config: dict[str, int]
) -> dict[str, Any]:
    """Medians over the changes of activations, progress steps, reduction key evaluations
    (``logic`` runs, every reduction together) and the distinct times per loop depth that
    messages carried."""
    seen: list[set[Any]] = [set()]
    drain = Actor.messages

    def messages(actor: Actor, port: int) -> list[tuple[Any, Any]]:
        box = drain(actor, port)
        seen[-1].update(t for t, _ in box)
        return box

    evaluate = ReduceOperator.evaluate
    evaluations = [0]

    def counted(op: ReduceOperator, key: Any, acc: dict[Any, int]) -> dict[Any, int]:
        evaluations[0] += 1
        return evaluate(op, key, acc)

    per: dict[str, list[int]] = {"activations": [], "steps": [], "evaluations": []}
    depths: dict[int, list[int]] = {}
    Actor.messages = messages  # type: ignore[method-assign]
    ReduceOperator.evaluate = counted  # type: ignore[method-assign]
    try:
        async with df.open(PIPELINES[formulation](), **config) as job:
            job.inputs["edges"].insert_many(initial)
            await job.advance_to(1)
            for t, (edge, diff) in enumerate(steps, 1):
                before = [(w["activations"], w["steps"]) for w in job.statistics()["workers"]]
                seen.append(set())
                evaluations[0] = 0
                job.inputs["edges"].insert_many([edge], [diff])
                await job.advance_to(t + 1)
                after = [(w["activations"], w["steps"]) for w in job.statistics()["workers"]]
                per["activations"].append(sum(a for a, _ in after) - sum(a for a, _ in before))
                per["steps"].append(sum(s for _, s in after) - sum(s for _, s in before))
                per["evaluations"].append(evaluations[0])
                by_depth = Counter(_depth(x) for x in seen[-1])
                for d in range(3):
                    depths.setdefault(d, []).append(by_depth.get(d, 0))
    finally:
        Actor.messages = drain  # type: ignore[method-assign]
        ReduceOperator.evaluate = evaluate  # type: ignore[method-assign]
    return {
        **{k: statistics.median(v) for k, v in per.items()},
        **{f"times_depth{d}": statistics.median(v) for d, v in depths.items()},
    }


def _depth(t: Any) -> int:
    d = 0
    while isinstance(t, Product):
        d += 1
        t = t.outer
    return d


def _ms(seconds: list[float], q: float) -> float:
    ordered = sorted(seconds)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_size(formulation: str, nodes: int, changes: int, config: dict[str, int]) -> bool:
    """Emit the two figures of one formulation at one size; ``True`` if the check passed."""
    initial, steps = graph(nodes, changes=changes)
    nx_seconds, nx_cpu, want = recompute(initial, steps)
    load, seconds, cpu, got = trio.run(incremental, formulation, initial, steps, config)
    wrong = [i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w]
    p50, p99, nx50 = _ms(seconds, 0.5), _ms(seconds, 0.99), _ms(nx_seconds, 0.5)
    target, load_target = TARGETS.get((formulation, nodes), (None, None))
    record: dict[str, Any] = {
        "figure": f"scc.{formulation}.n{nodes}",
        "nodes": nodes,
        "edges": len(initial),
        "changes": changes,
        **config,
        "load_s": load,
        "p50_ms": p50,
        "p99_ms": p99,
        "nx_p50_ms": nx50,
        "nx_p99_ms": _ms(nx_seconds, 0.99),
        "ratio_p50": p50 / nx50,
        "p99_over_p50": p99 / p50,
        "cpu_p50_ms": _ms(cpu, 0.5),
        "cpu_p99_ms": _ms(cpu, 0.99),
        "nx_cpu_p50_ms": _ms(nx_cpu, 0.5),
        "cpu_ratio_p50": _ms(cpu, 0.5) / max(_ms(nx_cpu, 0.5), 1e-6),
    }
    if "processes" in config:  # the work is in the worker processes: this one only waits
        for name in ("cpu_p50_ms", "cpu_p99_ms", "cpu_ratio_p50"):
            del record[name]
    if target is not None:
        record.update(target_ratio=target, meets_ratio=p50 / nx50 <= target)
    if load_target is not None:
        record.update(target_load_s=load_target, meets_load=load <= load_target)
    record["check"] = "ok" if not wrong else f"wrong after changes {wrong[:5]}"
    emit(record)
    if "processes" not in config:  # the counters are this process's
        emit(
            {
                "figure": f"scc.{formulation}.n{nodes}.counts",
                **trio.run(counts, formulation, initial, steps, config),
            }
        )
    return not wrong


def main(argv: list[str] | None = None) -> int:
    """Print the figures; exit status 1 if a check failed."""
    parser = argparse.ArgumentParser(description="SCC under single-edge changes vs networkx.")
    parser.add_argument("--quick", action="store_true", help="300 and 3,000 nodes, 30 changes")
    parser.add_argument("--sizes", default=None, help="comma-separated node counts")
    parser.add_argument("--changes", type=int, default=None)
    parser.add_argument("--formulations", default="at,all")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--processes", type=int, default=0)
    args = parser.parse_args(argv)
    sizes = [
        int(s) for s in (args.sizes or ("300,3000" if args.quick else "300,3000,30000")).split(",")
    ]
    changes = args.changes or (30 if args.quick else 100)
    config = {"workers": args.workers}
    if args.processes:
        config["processes"] = args.processes
    ok = True
    for nodes in sizes:
        for formulation in args.formulations.split(","):
            ok &= run_size(formulation, nodes, changes, config)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
