"""What each level of loop nesting costs: reachability written as loops nested 1 to 5 deep.

``nested(1)`` is reachability by one ``iterate`` (join with the edges, ``distinct``);
``nested(d)`` iterates ``nested(d - 1)`` to a fixed point in a loop of its own. Every depth
computes the same answer; a level adds a coordinate to the times (``Product`` one deeper)
and a loop that goes round about twice (its inner loop has already closed what it is given).
The input is the one a new user would try: 12 nodes, 10 edges at time 0 and 3 more at each
of times 1-3, roots 0 and 5, all fed at once by ``df.run``.

Figures (one JSON line each):

* ``nested.d<N>``: ``cpu_s`` (median CPU seconds of ``df.run`` over the repeats, the
  dataflow's construction included), ``activations`` and ``steps`` (the worker's counts, from
  one run through ``df.open``), ``times`` (distinct times messages carried, every scope), and
  ``check`` (``"ok"`` when the answer equals the from-scratch reachability at every time).
* ``nested.ratios``: ``t(d+1)/t(d)`` for every measured depth ``d`` (keyed ``"d2"`` for
  ``t(3)/t(2)``) with ``target`` (below 4 for ``d`` = 2..4) and ``meets``.

Run: ``python benchmarks/bench_nested.py [--quick]`` (``--quick``: depths 1-4, one repeat).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from typing import Any

import trio
from bench_workloads import emit

import deltaflow as df
from deltaflow.graphs import reachable_pairs
from deltaflow.scheduler.local.actor import Actor
from deltaflow.testing import accumulate

__all__ = ["Nested", "main", "nested_input"]

RATIO_TARGET = 4.0
"""``t(d + 1) / t(d)`` must stay below this for ``d`` = 2..4."""

Update = tuple[Any, int, int]


def _to_node(_node: int, root: int, dst: int) -> tuple[int, int]:
    return (dst, root)


def nested(depth: int, x: df.Collection, edges: df.Collection) -> df.Collection:
    """``(node, root)`` pairs reachable from ``x``'s, by loops nested ``depth`` deep."""
    if depth == 1:
        return x.iterate(lambda y: y.join_map(edges, _to_node).concat(y).distinct())
    return x.iterate(lambda y: nested(depth - 1, y, edges).concat(y).distinct())


class Nested(df.Pipeline):
    """Reachability from ``roots`` over ``edges`` as loops nested ``depth`` deep."""

    def __init__(self, depth: int) -> None:
        self.depth = depth

    def build(self, roots: df.Collection, edges: df.Collection) -> df.Collection:
        return nested(self.depth, roots.map(lambda r: (r, r)), edges)


def nested_input(seed: int = 1) -> dict[str, list[Update]]:
    """Roots 0 and 5; 10 random edges over 12 nodes at time 0, 3 more at each of times 1-3."""
    rng = random.Random(seed)
    edges: list[Update] = []
    for t in range(4):
        for _ in range(10 if t == 0 else 3):
            edges.append(((rng.randrange(12), rng.randrange(12)), t, 1))
    return {"roots": [(0, 0, 1), (5, 0, 1)], "edges": edges}


def _check(out: list[Update], inputs: dict[str, list[Update]]) -> str:
    """``"ok"`` when ``out`` accumulates to the from-scratch reachability at every time."""
    times = sorted({t for ups in inputs.values() for _, t, _ in ups})
    for now in times:
        roots = [r for r, t, _ in inputs["roots"] if t <= now]
        edges = [e for e, t, _ in inputs["edges"] if t <= now]
        want = {(n, r) for r, n in reachable_pairs(roots, edges)}
        got = {d for d, n in accumulate(out, now).items() if n > 0}
        if got != want:
            return f"wrong at time {now}"
    return "ok"


async def _counted(depth: int, inputs: dict[str, list[Update]]) -> dict[str, int]:
    """Worker steps and activations, and the distinct times messages carried, in one run."""
    times: set[Any] = set()
    drain = Actor.messages

    def messages(actor: Actor, port: int) -> list[tuple[Any, Any]]:
        box = drain(actor, port)
        times.update(t for t, _ in box)
        return box

    Actor.messages = messages  # type: ignore[method-assign]
    try:
        async with df.open(Nested(depth)) as job:
            for name, ups in inputs.items():
                for data, t, diff in ups:
                    job.inputs[name].update_at(data, t, diff)
    finally:
        Actor.messages = drain  # type: ignore[method-assign]
    (counts,) = job.statistics()["workers"]
    return {"activations": counts["activations"], "steps": counts["steps"], "times": len(times)}


def depth_record(depth: int, repeats: int, inputs: dict[str, list[Update]]) -> dict[str, Any]:
    """The ``nested.d<depth>`` figure."""
    cpu: list[float] = []
    out: list[Update] = []
    for _ in range(repeats):
        start = time.process_time()
        out = df.run(Nested(depth), **inputs)
        cpu.append(time.process_time() - start)
    return {
        "figure": f"nested.d{depth}",
        "depth": depth,
        "cpu_s": statistics.median(cpu),
        **trio.run(_counted, depth, inputs),
        "check": _check(out, inputs),
    }


def main(argv: list[str] | None = None) -> int:
    """Print the figures; exit status 1 if a check failed."""
    parser = argparse.ArgumentParser(description="The cost of each level of loop nesting.")
    parser.add_argument("--quick", action="store_true", help="depths 1-4, one repeat")
    args = parser.parse_args(argv)
    inputs = nested_input()
    depths = range(1, 5 if args.quick else 6)
    cpu: dict[int, float] = {}
    ok = True
    for depth in depths:
        record = depth_record(depth, 1 if args.quick else 3, inputs)
        ok &= record["check"] == "ok"
        cpu[depth] = record["cpu_s"]
        emit(record)
    ratios = {f"d{d}": cpu[d + 1] / cpu[d] for d in depths if d + 1 in cpu and cpu[d] > 0}
    judged = [ratios[f"d{d}"] for d in (2, 3, 4) if f"d{d}" in ratios]
    emit(
        {
            "figure": "nested.ratios",
            **ratios,
            "target": RATIO_TARGET,
            "meets": all(r < RATIO_TARGET for r in judged) if judged else None,
        }
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
