"""What one loop iteration costs, whatever the number of keys it corrects.

A round of an iterative dataflow (W2's reachability) goes around its loop once per iteration
whose collections change: each such iteration is a worker step with a progress propagation
and an activation of every operator on the cycle, whatever the number of keys that change in
it. This script measures that fixed cost on its own, and how much of a W2 round it makes.
Figures (one JSON line each):

* ``iterate.path``: the W2 pipeline (``deltaflow.graphs.Reachability``) over a path
  ``0 -> 1 -> ... -> L`` with root 0; round ``t`` removes the edge ``(0, 1)`` (odd ``t``) or
  puts it back (even ``t``), so every iteration of a round changes exactly one reachable pair
  (at depth ``i``, in iteration ``i``). ``steps_per_round`` and ``activations_per_round``
  are the worker's counts (``Job.statistics``): a round takes ``L + 3`` steps, one per
  iteration and three more.
  ``per_step_us`` = median round latency / median steps: what a step costs, the one key it
  changes included (for ``L`` = 10, 40 and 160 it stays about the same: the cost is per
  iteration, not per length of the path).
* ``iterate.w2``: W2 interactive (``workloads.w2_reach``, the first 1,000 rounds) with the
  worker steps of each round: ``steps_per_round`` (one per iteration, and three), and
  ``iteration_share`` = ``per_step_us`` (the ``L = 40`` path's) x the steps of every round /
  the total round time: about the part of W2's interactive time that is the loop going
  around, the rest being the work for the keys that change (W2's iterations change many
  keys each, the path's one).

Every line carries ``"check": "ok"`` when the final output equals the from-scratch answer.

Run: ``python benchmarks/bench_iterate.py [--quick]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import trio
from bench_workloads import Reachability, emit
from workloads import Edge, live_multiset, w2_reach

import deltaflow as df
from deltaflow.graphs import reachable_pairs

__all__ = ["main", "path_rounds", "w2_rounds"]


Change = tuple[Edge, int]


async def _rounds(
    roots: list[int], edges: list[Edge], rounds: list[list[Change]]
) -> tuple[list[float], list[int], list[int], set[Edge]]:
    """Load ``roots`` and ``edges`` at time 0, then apply each round's ``(edge, diff)``
    changes at a time of its own, waiting for the output after each.

    Returns each round's latency (s), worker steps and activations, and the final pairs.
    """
    async with df.open(Reachability()) as job:
        job.inputs["roots"].insert_many(roots)
        job.inputs["edges"].insert_many(edges)
        await job.advance_to(1)
        handle = job.inputs["edges"]
        lat: list[float] = []
        steps: list[int] = []
        acts: list[int] = []
        for t, changes in enumerate(rounds, start=1):
            (before,) = job.statistics()["workers"]
            start = time.perf_counter()
            for edge, diff in changes:
                handle.update(edge, diff)
            await job.advance_to(t + 1)
            lat.append(time.perf_counter() - start)
            (after,) = job.statistics()["workers"]
            steps.append(after["steps"] - before["steps"])
            acts.append(after["activations"] - before["activations"])
        final = {pair for pair, n in job.output.at(len(rounds)).items() if n > 0}
    return lat, steps, acts, final


def path_rounds(length: int, rounds: int) -> dict[str, Any]:
    """The ``iterate.path`` figure for a path of ``length`` edges."""
    edges = [(i, i + 1) for i in range(length)]
    changes = [[((0, 1), -1 if t % 2 else 1)] for t in range(1, rounds + 1)]
    lat, steps, acts, final = trio.run(_rounds, [0], edges, changes)
    live = edges if rounds % 2 == 0 else edges[1:]
    p50 = statistics.median(lat)
    return {
        "figure": "iterate.path",
        "length": length,
        "rounds": rounds,
        "p50_ms": p50 * 1e3,
        "steps_per_round": statistics.mean(steps),
        "per_step_us": p50 / statistics.median(steps) * 1e6,
        "activations_per_round": statistics.mean(acts),
        "check": "ok" if final == reachable_pairs([0], live) else "mismatch",
    }


def w2_rounds(rounds: int, per_step_us: float) -> dict[str, Any]:
    """The ``iterate.w2`` figure: W2 interactive with the steps of each round."""
    roots, init, w2 = w2_reach()
    w2 = w2[:rounds]
    changes = [[(ins, 1), (ret, -1)] for ins, ret in w2]
    lat, steps, acts, final = trio.run(_rounds, roots, init, changes)
    live = [e for e, n in live_multiset(init, w2).items() if n > 0]
    total = sum(lat)
    return {
        "figure": "iterate.w2",
        "rounds": rounds,
        "rounds_per_s": rounds / total,
        "mean_ms": total / rounds * 1e3,
        "steps_per_round": statistics.mean(steps),
        "activations_per_round": statistics.mean(acts),
        "per_step_us": per_step_us,
        "iteration_share": per_step_us * 1e-6 * sum(steps) / total,
        "check": "ok" if final == reachable_pairs(roots, live) else "mismatch",
    }


def main(argv: list[str] | None = None) -> int:
    """Print the figures; exit status 1 if a check failed."""
    parser = argparse.ArgumentParser(description="The fixed cost of a loop iteration.")
    parser.add_argument("--quick", action="store_true", help="fewer rounds, for a smoke run")
    args = parser.parse_args(argv)
    rounds = 60 if args.quick else 400
    ok = True
    per_step = 0.0
    for length in (10, 40, 160):
        record = path_rounds(length, rounds)
        ok &= record["check"] == "ok"
        if length == 40:
            per_step = record["per_step_us"]
        emit(record)
    record = w2_rounds(100 if args.quick else 1_000, per_step)
    ok &= record["check"] == "ok"
    emit(record)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
