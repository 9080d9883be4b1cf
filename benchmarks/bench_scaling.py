"""What more workers buy: each workload at one worker, two workers in one process, and two
processes (one worker each), side by side in one run, with the machine's capacity beside them.

* ``capacity`` — a pure-Python loop alone, then in two processes at once (2.0 on an idle
  2-core machine; the figures below mean something only where it reads 1.8 or more). It is
  taken at the start and at the end of the run.
* ``scaling.w2.static`` — W2's load and 1,000 single-edge rounds known up front (one
  ``df.run``): rounds/s of the rounds (the load's own ``df.run`` subtracted).
* ``scaling.w2.interactive`` — W2, one round at a time (``df.open``): rounds/s.
* ``scaling.w4x10.load`` — W4 at ten times its size (1,000,000 nodes, 2,000,000 edges): the
  initial load's seconds, from the job open to time 0 complete.
* ``scaling.w1.static`` — W1's 10,000 single-record rounds known up front: rounds/s.

Each figure gives ``one`` (workers=1), ``workers_2`` (one process) and ``processes_2``, their
ratios to ``one`` (``speedup_*``: above 1 is faster), and the single-update throughput per
worker (``per_worker``: rounds/s per worker). Every configuration runs in a child process of
its own, in turn, so each has the machine to itself as far as the others go.

    python benchmarks/bench_scaling.py [--quick] [--only w2s,w2i,w4,w1]

Prints one JSON line per figure.

``--work`` counts instead of timing (deterministic, so it holds on any machine): for W1 and
W2 with their rounds known up front and for the W4 load, at 1, 2, 4 and 8 workers in one
process, the data messages and pointstamp changes per round (``scaling.work.*``), the steps
of the busiest worker per round (``exchanges_per_round``: with workers in processes, each
step ends in one progress exchange with every peer) and the busiest worker's share of the
CPU time the workers' steps took (``max_share``), all over the whole run (rounds known up
front go through the loop with the load); with ``--callgrind`` also the
instructions (valgrind's callgrind, every process summed) of the rounds alone, the work of
the run without them (the load; for W4, generating the graph) subtracted, and their ratio
to one worker's (``work_ratio``).

The projection to as many cores as workers (docs/architecture.md, "What more workers buy"):
a round's critical path is the busiest worker's work plus one exchange per step,
``T(p) = I(p) * max_share(p) / R + exchanges_per_round(p) * L``, where ``R`` is a core's
instructions per second (measured: the one-worker run's instructions over its CPU time)
and ``L`` one exchange's latency between executors. ``projected_speedup`` is
``T(1) / T(p)`` with ``L = 0`` (work alone), ``projected_speedup_lan`` with
``L = LAN_EXCHANGE_S`` (one step's progress and data to every peer over a network, as
between Spark executors: the executors are the cores).

    python benchmarks/bench_scaling.py --work [--callgrind] [--quick] [--only w1,w2s,w4]

``--repeat N`` runs the three configurations in turn N times (one A B C A B C ... order,
so a drift in the machine's speed reaches every configuration alike) and reports each
figure's median and the speed-ups of the medians, with the load average (``os.getloadavg``)
at the start and the end beside the capacity: on a shared machine, read the figures
against both.

``--syscalls`` counts instead of timing, for W2 interactive: the system calls per round of
every process of the job (``strace -f -c``; the job with one round subtracted from the job
with ``--rounds``), one process against ``processes=2``: the writes, reads and scheduler
waits (``epoll_wait``) a round costs, which hold on any machine.

    python benchmarks/bench_scaling.py --syscalls [--rounds 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import trio
from bench_processes import bench_capacity
from bench_workloads import (
    Bfs,
    KeyCount,
    Reachability,
    _singles,
    _static_inputs,
    accumulate,
    answer_w4,
)
from workloads import w1_count, w2_reach, w4_bfs

import deltaflow as df

CONFIGS = {"one": (1, 1), "workers_2": (2, 1), "processes_2": (2, 2)}


def emit(record: dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


# -- one measurement, in the child ---------------------------------------------------------
def _static(make: Any, load: dict[str, list[Any]], changing: str, rounds: Any, cfg: Any) -> Any:
    workers, processes = cfg
    load_only: Any = _static_inputs(load, changing, [])
    start = time.perf_counter()
    df.run(make(), workers, processes=processes, **load_only)
    load_s = time.perf_counter() - start
    everything: Any = _static_inputs(load, changing, rounds)
    start = time.perf_counter()
    out = df.run(make(), workers, processes=processes, **everything)
    total_s = time.perf_counter() - start
    return {"rounds_per_s": len(rounds) / max(total_s - load_s, 1e-9), "load_s": load_s,
            "total_s": total_s, "answer": len(accumulate(out))}  # fmt: skip


async def _interactive(cfg: Any, rounds: Any) -> dict[str, Any]:
    workers, processes = cfg
    roots, init, _ = w2_reach()
    async with df.open(Reachability(), workers, processes=processes) as job:
        job.inputs["roots"].insert_many(roots)
        job.inputs["edges"].insert_many(init)
        await job.advance_to(1)
        edges = job.inputs["edges"]
        start = time.perf_counter()
        for t, ((ins, ret),) in enumerate(rounds, start=1):
            edges.insert(ins)
            edges.remove(ret)
            await job.advance_to(t + 1)
        elapsed = time.perf_counter() - start
        pairs = len(job.output.at(len(rounds)))
    return {"rounds_per_s": len(rounds) / elapsed, "answer": pairs}


async def _w4_load(cfg: Any, root: int, edges: list[Any]) -> dict[str, Any]:
    workers, processes = cfg
    async with df.open(Bfs(), workers, processes=processes) as job:
        start = time.perf_counter()
        job.inputs["roots"].insert(root)
        job.inputs["edges"].insert_many(edges)
        await job.advance_to(1)
        load_s = time.perf_counter() - start
        answer = answer_w4(job.output.at(0))
    return {"load_s": load_s, "answer": answer["reached"]}


def measure(what: str, config: str, quick: bool, count: int | None = None) -> dict[str, Any]:
    cfg = CONFIGS[config]
    if what == "w2s":
        roots, init, rounds = w2_reach()
        singles = _singles(rounds[: 200 if quick else 1000])
        return _static(Reachability, {"roots": roots, "edges": init}, "edges", singles, cfg)
    if what == "w2i":
        _, _, w2_rounds = w2_reach()
        if count is None:
            count = 100 if quick else 500
        return trio.run(_interactive, cfg, _singles(w2_rounds[:count]))
    if what == "w4":
        nodes = 100_000 if quick else 1_000_000
        root, edges, _ = w4_bfs(nodes=nodes, edges=2 * nodes, rounds=1)
        return trio.run(_w4_load, cfg, root, edges)
    assert what == "w1"
    init, rounds = w1_count()
    singles = _singles(rounds[: 2_000 if quick else 10_000])
    return _static(KeyCount, {"records": init}, "records", singles, cfg)


# -- work and messages per round (``--work``) ---------------------------------------------
WORK_WORKERS = (1, 2, 4, 8)
WORK_FIGURES = {"w1": "scaling.work.w1.static", "w2s": "scaling.work.w2.static",
                "w4": "scaling.work.w4.load"}  # fmt: skip


def _work_inputs(what: str, quick: bool, with_rounds: bool) -> tuple[Any, dict[str, Any], int]:
    """The pipeline, its inputs as ``(data, time, diff)`` and the rounds they hold."""
    if what == "w2s":
        roots, init, rounds = w2_reach()
        singles = _singles(rounds[: 100 if quick else 300]) if with_rounds else []
        load = {"roots": roots, "edges": init}
        return Reachability(), _static_inputs(load, "edges", singles), max(len(singles), 1)
    if what == "w1":
        init, rounds = w1_count()
        singles = _singles(rounds[: 1_000 if quick else 3_000]) if with_rounds else []
        return (
            KeyCount(),
            _static_inputs({"records": init}, "records", singles),
            max(len(singles), 1),
        )
    assert what == "w4"
    nodes = 10_000 if quick else 30_000
    root, edges, _ = w4_bfs(nodes=nodes, edges=2 * nodes, rounds=1)
    if not with_rounds:  # the driver's own work: generating the graph
        return Bfs(), {}, 1
    return Bfs(), {"roots": [(root, 0, 1)], "edges": [(e, 0, 1) for e in edges]}, 1


#: One exchange between executors on a network: a step's progress (and data) to every
#: peer and theirs back, as the projection counts it (``--work``).
LAN_EXCHANGE_S = 100e-6


def _timing_steps() -> dict[int, float]:
    """Time every worker step from now on (CPU time of the thread: the workers of one
    process step in turn on it): seconds per worker index."""
    from deltaflow.scheduler.local.worker import Worker

    busy: dict[int, float] = {}
    step = Worker.step
    clock = time.thread_time

    def timed(self: Worker) -> bool:
        start = clock()
        try:
            return step(self)
        finally:
            busy[self.index] = busy.get(self.index, 0.0) + clock() - start

    Worker.step = timed  # type: ignore[method-assign]
    return busy


async def _work_run(pipeline: Any, workers: int, inputs: dict[str, Any]) -> dict[str, Any]:
    busy = _timing_steps()
    cpu = time.process_time()
    async with df.open(pipeline, workers) as job:
        for name, updates in inputs.items():
            by_time: dict[int, tuple[list[Any], list[int]]] = {}
            for d, t, r in updates:
                data, diffs = by_time.setdefault(t, ([], []))
                data.append(d)
                diffs.append(r)
            for t in sorted(by_time):
                job.inputs[name].extend(*by_time[t], time=t)
        await job.close()
        stats = job.statistics()["workers"]
    out: dict[str, Any] = {
        k: sum(w.get(k, 0) for w in stats) for k in ("messages", "pointstamps", "steps")
    }
    out["max_steps"] = max(w["steps"] for w in stats)
    out["busy_s"] = [busy.get(w, 0.0) for w in range(workers)]
    out["cpu_s"] = time.process_time() - cpu
    return out


def work_child(what: str, workers: int, with_rounds: bool, quick: bool) -> dict[str, Any]:
    pipeline, inputs, rounds = _work_inputs(what, quick, with_rounds)
    out: dict[str, Any] = {"rounds": rounds}
    if inputs:
        out.update(trio.run(_work_run, pipeline, workers, inputs))
    out["process_cpu_s"] = time.process_time()  # the whole process, as callgrind counts it
    return out


def _instructions(stderr: str) -> int:
    """Callgrind's instruction count, summed over every process it traced."""
    counts = [int(line.rsplit(":", 1)[1]) for line in stderr.splitlines() if "Collected :" in line]
    if not counts:
        msg = f"no instruction count in callgrind's output: {stderr[-500:]!r}"
        raise RuntimeError(msg)
    return sum(counts)


def _work_measure(what: str, workers: int, with_rounds: bool, quick: bool, grind: bool) -> Any:
    command = [sys.executable, __file__, "--work-child", what, str(workers),
               "rounds" if with_rounds else "base"] + (["--quick"] if quick else [])  # fmt: skip
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    if grind:
        command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                   "--trace-children=yes", *command]  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    record = json.loads(out.stdout.strip().splitlines()[-1])
    if grind:
        record["instructions"] = _instructions(out.stderr)
    return record


def bench_work(what: str, quick: bool, grind: bool, counts: tuple[int, ...]) -> None:
    record: dict[str, Any] = {"figure": WORK_FIGURES[what]}
    # W4's load is its whole run: its base is generating the graph (no job), once.
    graph = _work_measure(what, 1, False, quick, grind) if grind and what == "w4" else None
    for workers in counts:
        full = _work_measure(what, workers, True, quick, grind)
        rounds = record["rounds"] = full["rounds"]
        # Messages, steps and the balance of the whole run (rounds known up front ride
        # through the loop with the load), per round.
        busy = full["busy_s"]
        row: dict[str, Any] = {
            "messages_per_round": full["messages"] / rounds,
            "pointstamps_per_round": full["pointstamps"] / rounds,
            "exchanges_per_round": full["max_steps"] / rounds if workers > 1 else 0.0,
            "max_share": max(busy) / max(sum(busy), 1e-12),
        }
        if grind:
            # The load at as many workers, so that only the rounds remain.
            base = graph or _work_measure(what, workers, False, quick, grind)
            row["instructions"] = full["instructions"] - base["instructions"]
            if workers == 1:  # a core's speed: the same run, untraced, over its CPU time
                plain = _work_measure(what, 1, True, quick, False)
                record["instructions_per_s"] = full["instructions"] / plain["process_cpu_s"]
        record[f"workers_{workers}"] = row
    if grind:
        _project(record, counts)
    emit(record)


# -- system calls per W2 interactive round (``--syscalls``) --------------------------------
SYSCALLS = ("writev", "write", "read", "epoll_wait", "epoll_ctl")


def _strace_counts(config: str, rounds: int) -> dict[str, int]:
    """``strace -f -c``'s call counts over every process of one W2 interactive job."""
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        command = ["strace", "-f", "-c", "-o", out.name, sys.executable, __file__, "--child",
                   "w2i", config, "--rounds", str(rounds)]  # fmt: skip
        subprocess.run(command, capture_output=True, text=True, check=True)
        counts: dict[str, int] = {}
        for line in out.read().splitlines():
            fields = line.split()
            if len(fields) >= 5 and fields[-1] in SYSCALLS and fields[3].isdigit():
                counts[fields[-1]] = int(fields[3])
        return counts


def bench_syscalls(rounds: int) -> None:
    record: dict[str, Any] = {"figure": "scaling.w2.interactive.syscalls", "rounds": rounds}
    for config in ("one", "processes_2"):
        base, full = _strace_counts(config, 1), _strace_counts(config, rounds + 1)
        record[config] = {
            f"{call}_per_round": (full.get(call, 0) - base.get(call, 0)) / rounds
            for call in SYSCALLS
        }
    emit(record)


def _project(record: dict[str, Any], counts: tuple[int, ...]) -> None:
    """Each row's work ratio and the speedups the model projects (module docstring):
    ``T(p)`` over all the rounds, the busiest worker's instructions at ``R`` plus one
    exchange per step of the busiest worker."""
    one = record["workers_1"]["instructions"]
    rate = record["instructions_per_s"]
    rounds = record["rounds"]
    for workers in counts:
        row = record[f"workers_{workers}"]
        row["work_ratio"] = row["instructions"] / one
        path = row["instructions"] * row["max_share"]
        row["projected_speedup"] = one / path
        exchanges = row["exchanges_per_round"] * rounds * LAN_EXCHANGE_S
        row["projected_speedup_lan"] = (one / rate) / (path / rate + exchanges)


# -- the runner ------------------------------------------------------------------------------
FIGURES = {"w2s": "scaling.w2.static", "w2i": "scaling.w2.interactive",
           "w4": "scaling.w4x10.load", "w1": "scaling.w1.static"}  # fmt: skip
TARGETS = {"w2s": {"processes_2": 1.7, "workers_2": 0.95}, "w2i": {"processes_2": 0.8,
           "workers_2": 0.95}, "w4": {"processes_2": 1.7, "workers_2": 0.95},
           "w1": {"workers_2": 0.95}}  # fmt: skip


def _child(what: str, config: str, quick: bool) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", what, config] + (["--quick"] if quick else [])
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per key, the median of ``runs`` (the answer of the first: all must agree)."""
    out: dict[str, Any] = {"runs": len(runs)}
    for key, value in runs[0].items():
        if key == "answer" or not isinstance(value, (int, float)):
            out[key] = value
        else:
            out[key] = statistics.median(r[key] for r in runs)
    out["answers_agree"] = len({r["answer"] for r in runs}) == 1
    return out


def bench(what: str, quick: bool, repeat: int = 1) -> None:
    if repeat > 1:
        runs: dict[str, list[dict[str, Any]]] = {config: [] for config in CONFIGS}
        for _ in range(repeat):
            for config in CONFIGS:
                runs[config].append(_child(what, config, quick))
        results = {config: _median_of(r) for config, r in runs.items()}
    else:
        results = {config: _child(what, config, quick) for config in CONFIGS}
    answers = {r["answer"] for r in results.values()}
    record: dict[str, Any] = {"figure": FIGURES[what], **results, "same_answer": len(answers) == 1}
    for config in ("workers_2", "processes_2"):
        if "rounds_per_s" in results["one"]:
            ratio = results[config]["rounds_per_s"] / results["one"]["rounds_per_s"]
        else:
            ratio = results["one"]["load_s"] / results[config]["load_s"]
        record[f"speedup_{config}"] = ratio
    if "rounds_per_s" in results["one"]:
        record["per_worker"] = {c: results[c]["rounds_per_s"] / CONFIGS[c][0] for c in CONFIGS}
    record["targets"] = TARGETS[what]
    emit(record)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        given = int(args[args.index("--rounds") + 1]) if "--rounds" in args else None
        emit(measure(args[1], args[2], "--quick" in args, given))
        return 0
    if args[:1] == ["--work-child"]:
        emit(work_child(args[1], int(args[2]), args[3] == "rounds", "--quick" in args))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer rounds")
    parser.add_argument("--only", default=None)
    parser.add_argument("--work", action="store_true", help="messages and work per round")
    parser.add_argument("--callgrind", action="store_true", help="with --work: instructions")
    parser.add_argument("--workers", default="1,2,4,8", help="with --work: worker counts")
    parser.add_argument("--repeat", type=int, default=1, help="alternating runs: medians")
    parser.add_argument("--syscalls", action="store_true", help="W2 interactive: syscalls")
    parser.add_argument("--rounds", type=int, default=200, help="with --syscalls: rounds")
    ns = parser.parse_args(args)
    if ns.syscalls:
        bench_syscalls(ns.rounds)
        return 0
    if ns.work:
        for what in (ns.only or "w1,w2s,w4").split(","):
            counts = tuple(int(w) for w in ns.workers.split(","))
            bench_work(what, ns.quick, ns.callgrind, counts)
        return 0
    ns.only = ns.only or "w2s,w2i,w4,w1"
    emit({"figure": "load", "at": "start", "loadavg": os.getloadavg()})
    bench_capacity()
    for what in ns.only.split(","):
        bench(what, ns.quick, ns.repeat)
    bench_capacity()
    emit({"figure": "load", "at": "end", "loadavg": os.getloadavg()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
