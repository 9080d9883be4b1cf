"""The W1-W4 workload benchmarks: deltaflow against a from-scratch recompute.

Each workload (see ``workloads.py``, which follows the shared workload spec) loads an
initial collection at time 0, then runs *rounds*, one logical time each. Every workload runs
in its own child process (so ``max_rss_mb`` is that workload's peak) and prints one JSON line
per figure:

* ``wN.naive`` — the query recomputed with plain Python after every round (``naive.py``),
  in the same process, for a time budget split in two windows, one just before the
  interactive run and one just after it (the machine's speed drifts): rounds/s pooled over
  both (``parts_rounds_per_s``: each window's), and the first window's latency.
* ``wN.interactive`` — ``df.open()``: the initial load (``load_s``: time 0 fed and complete),
  then per round the change is fed and ``await job.advance_to(t + 1)`` returns when the
  output is complete for ``t``. ``rounds_per_s`` = rounds / wall time of the round loop;
  ``p50_ms``/``p90_ms``/``p99_ms`` per round; ``vs_naive`` = rounds/s over the naive rate.
* ``wN.static`` — one ``df.run()`` over the load and every round, each at its own time.
  ``load_s`` is a separate ``df.run()`` of the load alone; ``rounds_per_s`` = rounds /
  (``total_s`` - ``load_s`` = ``rounds_s``), the rate of the rounds once loaded (``null``
  when the rounds are lost in the noise of the load); ``rounds_per_s_incl_load`` = rounds /
  ``total_s``. The figures are those of the median of three such runs (``runs_rounds_per_s``
  lists all three).
* ``w2.paired`` — W2 interactive and its naive recompute over *the same* rounds (all of
  them), taken in turn ``PAIR_CHUNK`` rounds at a time so that both see the same machine:
  wall and CPU rounds/s of each and ``vs_naive`` / ``cpu_vs_naive`` (the ``wN.naive``
  windows above cover only the rounds that fit their time budget, the first and cheapest).
* ``w2.batched`` — W2's changes grouped 1, 10 and 100 per round (same total work): throughput
  against batch size; the batch-100 line has ``growth`` (its changes/s over batch 1's).
  ``w2.sustained`` — p50 latency of the first and the last 100 rounds; with ``--long`` a
  20,000-round run. Its last 100 rounds (19,900-20,000) are taken in turn, round by round,
  with a second job at rounds 900-1,000 (``paired_late_over_early``: the same rounds on the
  same machine at the same moment; timed one after the other, a minute apart, the two
  windows differed by the machine's drift more than by anything else), and with the same
  rounds in a fresh job loaded with the edges live before them, also in turn
  (``paired_late_over_fresh``: what the accumulated history costs, whatever the graph's
  shape).
* ``w3.*`` — triangles by binary joins, a delta query and a worst-case optimal delta query,
  interactive and static, their memory per edge at two sizes, and a growing hub (``w3.py``).

Every deltaflow figure carries ``"check": "ok"`` when its final answer equals the
from-scratch answer (and, at full size, the expected figures of the spec), else the
mismatch; the ``target`` fields are the goals the figures are measured against.

Run: ``python benchmarks/bench_workloads.py [--quick] [--only w1,w2] [--long] [--profile]``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import trio
from naive import NaiveRecompute, measure, naive_w1, naive_w2, naive_w4, pooled
from workloads import (
    EXPECTED,
    Edge,
    batched,
    w1_count,
    w1_expected,
    w2_expected,
    w2_reach,
    w4_bfs,
    w4_expected,
)

import deltaflow as df
from deltaflow.graphs import Bfs, Reachability

WORKLOADS = ("w1", "w2", "w3", "w4")
QUICK_ROUNDS = {"w1": 1_000, "w2": 200, "w4": 20}
STATIC_RUNS = 3
#: Rounds each side runs before the other takes its turn in ``w2.paired``.
PAIR_CHUNK = 50
LONG_ROUNDS, QUICK_LONG_ROUNDS = 20_000, 2_000
TARGETS: dict[str, dict[str, float]] = {
    "w1": {"interactive_rounds_per_s": 2_000, "static_rounds_per_s": 15_000},
    "w2": {
        "interactive_rounds_per_s": 300,
        "vs_naive": 2.0,
        "static_rounds_per_s": 650,
        "batched_growth": 5.0,
    },
    "w4": {"load_s_max": 5.0, "interactive_rounds_per_s": 250},
}

Round = list[tuple[Any, Any]]


# -- pipelines (the public contract) -------------------------------------------------------
class KeyCount(df.Pipeline):
    """W1: how many live records each key has, as ``(key, n)``."""

    def build(self, records: df.Collection) -> df.Collection:
        return records.map(lambda k: (k, k)).count()


NEEDS = {
    "w1": ("count",),
    "w2": ("join_map", "iterate", "distinct"),
    "w4": ("join_map", "iterate", "min"),
}


# -- answers -------------------------------------------------------------------------------
def _as_set(out: dict[Any, int]) -> tuple[set[Any], str | None]:
    bad = [(d, n) for d, n in out.items() if n != 1]
    return set(out), (f"counts other than 1: {bad[:3]}" if bad else None)


def answer_w1(out: dict[Any, int]) -> dict[str, Any]:
    """``{keys, checksum}`` of W1's output collection ``{(key, n): 1}``."""
    data, bad = _as_set(out)
    ans: dict[str, Any] = {"keys": len(data), "checksum": sum(k * n for k, n in data)}
    if bad:
        ans["error"] = bad
    return ans


def answer_w2(out: dict[Any, int]) -> dict[str, Any]:
    """``{pairs}`` of W2's output collection ``{(root, node): 1}``."""
    data, bad = _as_set(out)
    ans: dict[str, Any] = {"pairs": len(data)}
    if bad:
        ans["error"] = bad
    return ans


def answer_w4(out: dict[Any, int]) -> dict[str, Any]:
    """``{reached, dist_sum}`` of W4's output collection ``{(node, dist): 1}``."""
    data, bad = _as_set(out)
    ans: dict[str, Any] = {"reached": len(data), "dist_sum": sum(d for _, d in data)}
    if len({n for n, _ in data}) != len(data):
        ans["error"] = "a node has several distances"
    if bad:
        ans["error"] = bad
    return ans


def check(got: dict[str, Any], expected: dict[str, Any]) -> str:
    """``"ok"`` or a description of the mismatch."""
    return "ok" if got == expected else f"mismatch: got {got}, expected {expected}"


def accumulate(updates: list[tuple[Any, Any, int]]) -> dict[Any, int]:
    """The collection after every update of a ``df.run`` result (all times are <= the last)."""
    acc: dict[Any, int] = {}
    for d, _t, r in updates:
        acc[d] = acc.get(d, 0) + r
    return {d: r for d, r in acc.items() if r}


# -- the two deltaflow modes ---------------------------------------------------------------
def _percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _latency(lat: list[float]) -> dict[str, float]:
    ordered = sorted(lat)
    return {
        "p50_ms": statistics.median(lat) * 1e3,
        "p90_ms": _percentile(ordered, 0.90) * 1e3,
        "p99_ms": _percentile(ordered, 0.99) * 1e3,
    }


async def _load(job: Any, load: dict[str, list[Any]]) -> float:
    """Feed ``load`` at time 0 and wait for it: the seconds it took."""
    start = time.perf_counter()
    for name, data in load.items():
        job.inputs[name].insert_many(data)
    await job.advance_to(1)
    return time.perf_counter() - start


async def _round(job: Any, handle: Any, t: int, changes: Round) -> float:
    """Feed one round's ``(insert, retract)`` pairs at time ``t`` and wait for it: seconds."""
    start = time.perf_counter()
    if len(changes) == 1:
        ins, ret = changes[0]
        handle.insert(ins)
        handle.remove(ret)
    else:
        k = len(changes)
        handle.insert_many([c[0] for c in changes] + [c[1] for c in changes], [1] * k + [-1] * k)
    await job.advance_to(t + 1)
    return time.perf_counter() - start


async def _interactive(
    pipeline: df.Pipeline, load: dict[str, list[Any]], changing: str, rounds: list[Round]
) -> tuple[float, list[float], dict[Any, int]]:
    async with df.open(pipeline) as job:
        load_s = await _load(job, load)
        handle = job.inputs[changing]
        lat = [await _round(job, handle, t, c) for t, c in enumerate(rounds, start=1)]
        final = job.output.at(len(rounds))
    return load_s, lat, final


async def _paired(
    pipeline: df.Pipeline,
    load: dict[str, list[Any]],
    changing: str,
    rounds: list[Round],
    naive: NaiveRecompute,
) -> dict[str, Any]:
    """Interactive rounds and the naive recompute of the same rounds, ``PAIR_CHUNK`` of them
    at a time in turn: wall and CPU seconds of each side, and the job's final answer."""
    wall = {"df": 0.0, "naive": 0.0}
    cpu = {"df": 0.0, "naive": 0.0}
    clock, cpu_clock = time.perf_counter, time.process_time
    async with df.open(pipeline) as job:
        await _load(job, load)
        handle = job.inputs[changing]
        for lo in range(0, len(rounds), PAIR_CHUNK):
            chunk = rounds[lo : lo + PAIR_CHUNK]
            w, c = clock(), cpu_clock()
            for t, changes in enumerate(chunk, start=lo + 1):
                await _round(job, handle, t, changes)
            wall["df"] += clock() - w
            cpu["df"] += cpu_clock() - c
            w, c = clock(), cpu_clock()
            for changes in chunk:
                naive.round(changes)
            wall["naive"] += clock() - w
            cpu["naive"] += cpu_clock() - c
        final = job.output.at(len(rounds))
    n = len(rounds)
    return {
        "rounds": n,
        "rounds_per_s": n / wall["df"],
        "naive_rounds_per_s": n / wall["naive"],
        "vs_naive": wall["naive"] / wall["df"],
        "cpu_rounds_per_s": n / cpu["df"],
        "cpu_naive_rounds_per_s": n / cpu["naive"],
        "cpu_vs_naive": cpu["naive"] / cpu["df"],
        "final": final,
    }


async def _sustained(
    roots: list[int], init: list[Edge], rounds: list[Round], lo: int, span: int = 100
) -> dict[str, Any]:
    """W2 over all ``rounds`` in one job, its last ``span`` rounds timed against two
    controls in the same stretch of time, round by round in turn: a second job at rounds
    ``lo`` to ``lo + span`` (same inputs, so the same rounds as the long job's own), and a
    fresh job loaded with the edges live before the last rounds (no history at all).

    Measured one after the other, the early and the late rounds lie a minute or more apart,
    and this machine's speed drifts by more than the difference sought; taken in turn, the
    three see the same machine. (Each of them then finds the caches cold, so their
    latencies are higher than in a run alone: compare them with each other.)
    """
    n = len(rounds)
    load = {"roots": roots, "edges": init}
    async with df.open(Reachability()) as long_job:
        await _load(long_job, load)
        handle = long_job.inputs["edges"]
        lat = [await _round(long_job, handle, t, c) for t, c in enumerate(rounds[: n - span], 1)]
        live = NaiveRecompute(lambda _edges: None, init)
        for changes in rounds[: n - span]:
            live.round(changes)
        async with df.open(Reachability()) as early_job, df.open(Reachability()) as fresh_job:
            await _load(early_job, load)
            early_handle = early_job.inputs["edges"]
            for t, changes in enumerate(rounds[:lo], start=1):
                await _round(early_job, early_handle, t, changes)
            await _load(fresh_job, {"roots": roots, "edges": list(live.live.elements())})
            fresh_handle = fresh_job.inputs["edges"]
            late: list[float] = []
            early: list[float] = []
            fresh: list[float] = []
            for i in range(span):
                turns = [
                    (late, long_job, handle, n - span + i + 1, rounds[n - span + i]),
                    (early, early_job, early_handle, lo + i + 1, rounds[lo + i]),
                    (fresh, fresh_job, fresh_handle, i + 1, rounds[n - span + i]),
                ]
                for out, job, h, t, changes in turns[i % 3 :] + turns[: i % 3]:
                    out.append(await _round(job, h, t, changes))
        lat.extend(late)
        final = long_job.output.at(n)
    p50 = statistics.median
    return {
        "rounds_per_s": n / sum(lat),
        f"p50_ms_rounds_{lo}_{lo + span}_alone": p50(lat[lo : lo + span]) * 1e3,
        f"paired_p50_ms_rounds_{lo}_{lo + span}": p50(early) * 1e3,
        f"paired_p50_ms_rounds_{n - span}_{n}": p50(late) * 1e3,
        "paired_late_over_early": p50(late) / p50(early),
        f"paired_fresh_p50_ms_rounds_{n - span}_{n}": p50(fresh) * 1e3,
        "paired_late_over_fresh": p50(late) / p50(fresh),
        "final": final,
    }


def run_interactive(
    pipeline: df.Pipeline,
    load: dict[str, list[Any]],
    changing: str,
    rounds: list[Round],
    *,
    profile: bool = False,
) -> tuple[float, list[float], dict[Any, int]]:
    """Load at time 0, then one ``advance_to`` per round: ``(load_s, latencies, final)``."""
    if not profile:
        return trio.run(_interactive, pipeline, load, changing, rounds)
    prof = cProfile.Profile()
    result = prof.runcall(trio.run, _interactive, pipeline, load, changing, rounds)
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
    print(text.getvalue(), file=sys.stderr)
    return result


def _static_inputs(
    load: dict[str, list[Any]], changing: str, rounds: list[Round]
) -> dict[str, list[tuple[Any, int, int]]]:
    inputs = {name: [(d, 0, 1) for d in data] for name, data in load.items()}
    ups = inputs.setdefault(changing, [])
    for t, changes in enumerate(rounds, start=1):
        for ins, ret in changes:
            ups.append((ins, t, 1))
            ups.append((ret, t, -1))
    return inputs


def run_static(
    pipeline_factory: Callable[[], df.Pipeline],
    load: dict[str, list[Any]],
    changing: str,
    rounds: list[Round],
) -> tuple[float, float, dict[Any, int]]:
    """``(load_s, total_s, final)``: ``df.run`` of the load alone, then of load and rounds."""
    load_only: Any = _static_inputs(load, changing, [])
    start = time.perf_counter()
    df.run(pipeline_factory(), **load_only)
    load_s = time.perf_counter() - start
    everything: Any = _static_inputs(load, changing, rounds)
    start = time.perf_counter()
    out = df.run(pipeline_factory(), **everything)
    total_s = time.perf_counter() - start
    return load_s, total_s, accumulate(out)


# -- reporting -----------------------------------------------------------------------------
def max_rss_mb() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def emit(record: dict[str, Any]) -> None:
    """Print one figure as a JSON line (floats rounded for reading)."""
    clean = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in record.items()}
    print(json.dumps(clean), flush=True)


def _meets(value: float | None, goal: float, *, at_most: bool = False) -> bool | None:
    if value is None:
        return None
    return value <= goal if at_most else value >= goal


def bench_workload(
    wid: str,
    make: Callable[[], df.Pipeline],
    load: dict[str, list[Any]],
    changing: str,
    rounds: list[Round],
    naive: Callable[[], NaiveRecompute],
    answer: Callable[[dict[Any, int]], dict[str, Any]],
    expected: dict[str, Any],
    args: argparse.Namespace,
    *,
    judge_vs_naive: bool = True,
) -> dict[str, Any]:
    """Naive, interactive and static figures of one workload; returns the interactive one.

    ``naive`` makes a fresh naive recompute at the initial load (one per time window).
    ``judge_vs_naive=False`` leaves the ``vs_naive`` target to a figure that times the naive
    over the same rounds (W2's ``w2.paired``): the windows cover only the first rounds.
    """
    targets = TARGETS.get(wid, {})
    window = 0.25 if args.quick else 1.0
    before = measure(naive(), rounds, budget_s=window)
    before.pop("answer")
    load_s, lat, final = run_interactive(make(), load, changing, rounds, profile=args.profile)
    after = measure(naive(), rounds, budget_s=window)
    nv = {**before, **pooled(before, after)}
    emit({"figure": f"{wid}.naive", **nv})

    elapsed = sum(lat)
    rate = len(rounds) / elapsed if elapsed else None
    inter: dict[str, Any] = {
        "figure": f"{wid}.interactive",
        "rounds": len(rounds),
        "load_s": load_s,
        "rounds_per_s": rate,
        **_latency(lat),
        "naive_rounds_per_s": nv["rounds_per_s"],
        "vs_naive": rate / nv["rounds_per_s"] if rate and nv["rounds_per_s"] else None,
        "check": check(answer(final), expected),
        "max_rss_mb": max_rss_mb(),
    }
    if "interactive_rounds_per_s" in targets:
        goal = targets["interactive_rounds_per_s"]
        inter["target_rounds_per_s"] = goal
        inter["meets_target"] = _meets(rate, goal)
    if "vs_naive" in targets and judge_vs_naive:
        inter["target_vs_naive"] = targets["vs_naive"]
        inter["meets_vs_naive"] = _meets(inter["vs_naive"], targets["vs_naive"])
    if "load_s_max" in targets:
        inter["target_load_s"] = targets["load_s_max"]
        inter["meets_load"] = _meets(load_s, targets["load_s_max"], at_most=True)
    emit(inter)

    # The median of a few static runs (by the rounds' time): one is short enough for a
    # passing slowdown of the machine to move it by a quarter.
    runs = sorted(
        (run_static(make, load, changing, rounds) for _ in range(STATIC_RUNS)),
        key=lambda run: run[1] - run[0],
    )
    s_load, s_total, s_final = runs[len(runs) // 2]
    s_rounds = s_total - s_load
    stat: dict[str, Any] = {
        "figure": f"{wid}.static",
        "rounds": len(rounds),
        "load_s": s_load,
        "total_s": s_total,
        "rounds_s": s_rounds,
        "rounds_per_s": len(rounds) / s_rounds if s_rounds > 0 else None,
        "rounds_per_s_incl_load": len(rounds) / s_total,
        "runs_rounds_per_s": [len(rounds) / (t - lo) if t > lo else None for lo, t, _ in runs],
        "check": check(answer(s_final), expected),
        "max_rss_mb": max_rss_mb(),
    }
    if "static_rounds_per_s" in targets:
        stat["target_rounds_per_s"] = targets["static_rounds_per_s"]
        stat["meets_target"] = _meets(stat["rounds_per_s"], targets["static_rounds_per_s"])
    emit(stat)
    inter["latencies"] = lat
    return inter


def _expected(wid: str, computed: dict[str, int], full: bool) -> dict[str, int]:
    """The from-scratch answer, cross-checked against the spec's table at full size."""
    if full and computed != EXPECTED[wid]:
        msg = f"{wid}: generator gives {computed}, the spec says {EXPECTED[wid]}"
        raise AssertionError(msg)
    return computed


def _skip_missing(wid: str) -> bool:
    missing = [m for m in NEEDS[wid] if not hasattr(df.Collection, m)]
    if missing:
        emit({"figure": wid, "skipped": f"Collection lacks {', '.join(missing)} (not built yet)"})
    return bool(missing)


def _singles(rounds: list[tuple[Any, Any]]) -> list[Round]:
    return [[r] for r in rounds]


def run_w1(args: argparse.Namespace) -> None:
    """W1 count: 100,000 records over 10,000 keys, a FIFO window of single records."""
    if _skip_missing("w1"):
        return
    init, rounds = w1_count()
    if args.quick:
        rounds = rounds[: QUICK_ROUNDS["w1"]]
    expected = _expected("w1", w1_expected(init, rounds), not args.quick)
    bench_workload(
        "w1", KeyCount, {"records": init}, "records", _singles(rounds),
        lambda: naive_w1(init), answer_w1, expected, args,
    )  # fmt: skip


def _changes_rate(groups: list[Round], nv: dict[str, Any]) -> float | None:
    """Changes per second of a naive measurement over the first ``nv["rounds"]`` groups."""
    if not nv["rounds_per_s"]:
        return None
    changes = sum(len(g) for g in groups[: nv["rounds"]])
    return float(changes / (nv["rounds"] / nv["rounds_per_s"]))


def run_w2(args: argparse.Namespace) -> None:
    """W2 reach: reachability from 10 roots under a sliding window of edges, plus extras."""
    if _skip_missing("w2"):
        return
    roots, init, rounds = w2_reach()
    if args.quick:
        rounds = rounds[: QUICK_ROUNDS["w2"]]
    expected = _expected("w2", w2_expected(roots, init, rounds), not args.quick)
    load: dict[str, list[Any]] = {"roots": roots, "edges": init}
    inter = bench_workload(
        "w2", Reachability, load, "edges", _singles(rounds),
        lambda: naive_w2(roots, init), answer_w2, expected, args, judge_vs_naive=False,
    )  # fmt: skip
    lat = inter["latencies"]
    first, last = lat[:100], lat[-100:]
    emit({
        "figure": "w2.sustained",
        "rounds": len(lat),
        "first100_p50_ms": statistics.median(first) * 1e3,
        "last100_p50_ms": statistics.median(last) * 1e3,
        "last_over_first": statistics.median(last) / statistics.median(first),
    })  # fmt: skip

    paired = trio.run(
        _paired, Reachability(), load, "edges", _singles(rounds), naive_w2(roots, init)
    )
    final = paired.pop("final")
    emit({
        "figure": "w2.paired",
        "chunk": PAIR_CHUNK,
        **paired,
        "target_vs_naive": TARGETS["w2"]["vs_naive"],
        "meets_vs_naive": _meets(paired["vs_naive"], TARGETS["w2"]["vs_naive"]),
        "check": check(answer_w2(final), expected),
    })  # fmt: skip

    single_rate: float | None = None
    for size in (1, 10, 100):
        groups = batched(rounds, size)
        _, blat, final = run_interactive(Reachability(), load, "edges", groups)
        nv = measure(naive_w2(roots, init), groups, budget_s=0.5 if args.quick else 1.0)
        spent = sum(blat)
        rate = len(rounds) / spent
        if size == 1:
            single_rate = rate
        extra: dict[str, Any] = {}
        if size == 100 and single_rate:
            goal = TARGETS["w2"]["batched_growth"]
            extra = {"growth": rate / single_rate, "target_growth": goal,
                     "meets_growth": _meets(rate / single_rate, goal)}  # fmt: skip
        emit({
            "figure": "w2.batched",
            "batch": size,
            "rounds": len(groups),
            "changes": len(rounds),
            "rounds_per_s": len(groups) / spent,
            "changes_per_s": rate,
            "p50_ms": statistics.median(blat) * 1e3,
            "naive_changes_per_s": _changes_rate(groups, nv),
            **extra,
            "check": check(answer_w2(final), expected),
        })  # fmt: skip

    if args.long:
        n = QUICK_LONG_ROUNDS if args.quick else LONG_ROUNDS
        roots, init, long_rounds = w2_reach(rounds=n)
        long_expected = w2_expected(roots, init, long_rounds)
        lo = 900 if n >= 1_100 else 0  # rounds 900-1,000: past the start-up transients
        figures = trio.run(_sustained, roots, init, _singles(long_rounds), lo)
        final = figures.pop("final")
        emit({
            "figure": "w2.long",
            "rounds": n,
            **figures,
            "check": check(answer_w2(final), long_expected),
            "max_rss_mb": max_rss_mb(),
        })  # fmt: skip


def run_w3(args: argparse.Namespace) -> None:
    """W3 triangles: binary joins, delta query and WCOJ delta query (see ``w3.py``)."""
    if not hasattr(df, "multiway_join"):
        emit({"figure": "w3", "skipped": "no df.multiway_join (delta queries) yet"})
        return
    import w3  # imports this module: only once it is loaded

    w3.run(args)


def run_w4(args: argparse.Namespace) -> None:
    """W4 bfs: BFS distances on 100,000 nodes / 200,000 edges, then single edge changes."""
    if _skip_missing("w4"):
        return
    root, init, rounds = w4_bfs()
    if args.quick:
        rounds = rounds[: QUICK_ROUNDS["w4"]]
    expected = _expected("w4", w4_expected(root, init, rounds), not args.quick)
    bench_workload(
        "w4", Bfs, {"roots": [root], "edges": init}, "edges", _singles(rounds),
        lambda: naive_w4(root, init), answer_w4, expected, args,
    )  # fmt: skip


RUNNERS: dict[str, Callable[[argparse.Namespace], None]] = {
    "w1": run_w1,
    "w2": run_w2,
    "w3": run_w3,
    "w4": run_w4,
}


def main(argv: list[str] | None = None) -> int:
    """Run the selected workloads, each in a child process of its own."""
    parser = argparse.ArgumentParser(description="W1-W4 workload benchmarks (JSON lines).")
    parser.add_argument("--quick", action="store_true", help="fewer rounds, for a smoke run")
    parser.add_argument("--only", default=",".join(WORKLOADS), help="e.g. w1,w2")
    parser.add_argument("--long", action="store_true", help="also W2 over 20,000 rounds")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile the interactive runs (to stderr)"
    )
    parser.add_argument("--child", choices=WORKLOADS, help=argparse.SUPPRESS)
    parser.add_argument("--w3-version", help=argparse.SUPPRESS)
    parser.add_argument("--w3-edges", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        RUNNERS[args.child](args)
        return 0
    selected = [w.strip() for w in args.only.split(",") if w.strip()]
    unknown = sorted(set(selected) - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown workload(s) {unknown}; choose from {', '.join(WORKLOADS)}")
    flags = [f for f, on in (("--quick", args.quick), ("--long", args.long),
                             ("--profile", args.profile)) if on]  # fmt: skip
    status = 0
    for wid in selected:
        proc = subprocess.run([sys.executable, __file__, "--child", wid, *flags], check=False)
        if proc.returncode:
            emit({"figure": wid, "error": f"exited with status {proc.returncode}"})
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
