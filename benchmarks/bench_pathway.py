"""W1, W2 and W3 (binary joins) side by side with Pathway, in one run (issue #35's targets).

Pathway is not a dependency of deltaflow: give the path of an interpreter that has it in
``DELTAFLOW_PATHWAY_PYTHON`` (or ``--pathway``); without one every figure says
``"skipped"``. The data are written once per workload to an ``.npz`` file (from
``workloads.py``) and both systems read that file, each in a fresh process
(``pathway_workloads.py`` for Pathway, this script's ``--side deltaflow`` for deltaflow), so
that they run exactly the same updates. For each workload and mode the two systems run in
turn, ``--runs`` times (the first to go alternates), and the figure ``pathway.<wN>.<mode>``
gives each side's rounds/s (the median of the runs, and every run), the ratio of the
medians (``df_over_pathway``) and the median of the runs' ratios (each pair taken within a
minute of each other: ``paired_ratio``). Every run's answer is checked against the
from-scratch one (``check``). Modes, one worker each:

* ``interactive``: the load, then one round per logical time, each fed once the output of the
  previous one is complete (deltaflow: ``await job.advance_to``; Pathway: its output's
  ``on_time_end``); rounds/s over the round loop.
* ``static``: every round known at once, each at its own time (deltaflow: one ``df.run``;
  Pathway: one ``pw.run`` over ``table_from_pandas`` with ``__time__``/``__diff__``);
  rounds/s = rounds / (seconds of load and rounds - seconds of a run of the load alone).
* ``streamed`` (Pathway only; ``--modes`` to add it): rounds fed as one commit each without
  waiting for their output.

The targets (issue #35, static against Pathway static): W1 >= 3x, W2 >= 2x, W3 >= 2x.

Run: ``DELTAFLOW_PATHWAY_PYTHON=/path/to/venv/bin/python python benchmarks/bench_pathway.py
[--quick] [--only w1,w2,w3] [--modes interactive,static] [--runs 3]``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from workloads import (
    w1_count,
    w1_expected,
    w2_expected,
    w2_reach,
    w3_expected,
    w3_triangles,
)

HERE = Path(__file__).resolve().parent
WORKLOADS = ("w1", "w2", "w3")
MODES = ("interactive", "static")
QUICK_ROUNDS = {"w1": 1_000, "w2": 200, "w3": 300}
CHILD_S = 3_600  # one run of either system; past it the run is an error, not a hang
TARGETS = {"w1": 3.0, "w2": 2.0, "w3": 2.0}  # static, deltaflow over Pathway


def emit(record: dict[str, Any]) -> None:
    """Print one figure as a JSON line (floats rounded for reading)."""

    def clean(v: Any) -> Any:
        if isinstance(v, float):
            return round(v, 3)
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v

    print(json.dumps({k: clean(v) for k, v in record.items()}), flush=True)


# -- the data ------------------------------------------------------------------------------
def write_data(wid: str, quick: bool, path: Path) -> dict[str, int]:
    """Write ``wid``'s data to ``path`` (see ``pathway_workloads.py``); its expected answer."""
    n = QUICK_ROUNDS[wid] if quick else None
    if wid == "w3":
        rounds3 = w3_triangles()[:n]
        edges = [e for r in rounds3 for e in r]
        at = [t for t, r in enumerate(rounds3, start=1) for _ in r]
        np.savez(path, edges=np.array(edges, dtype=np.int64), round=np.array(at))
        return w3_expected(rounds3)
    if wid == "w1":
        init1, rounds1 = w1_count()
        rounds1 = rounds1[:n]
        np.savez(path, items=np.array(init1 + [i for i, _ in rounds1]), window=len(init1))
        return w1_expected(init1, rounds1)
    roots, init2, rounds2 = w2_reach()
    rounds2 = rounds2[:n]
    items = np.array(init2 + [i for i, _ in rounds2], dtype=np.int64)
    np.savez(path, items=items, window=len(init2), roots=np.array(roots))
    return w2_expected(roots, init2, rounds2)


def read_data(wid: str, path: Path) -> tuple[dict[str, list[Any]], list[list[Any]]]:
    """deltaflow's view of the file: ``(load, rounds)``, a round a list of ``(datum, diff)``.

    W1's records are keys, W2's and W3's edges ``(src, dst)`` tuples; W1 and W2 rounds insert
    the next item of the window and retract its oldest.
    """
    with np.load(path) as data:
        if wid == "w3":
            rounds: list[list[Any]] = [[] for _ in range(int(data["round"].max(initial=0)))]
            for (a, b), t in zip(data["edges"].tolist(), data["round"].tolist()):
                rounds[t - 1].append(((a, b), 1))
            return {"edges": []}, rounds
        raw = data["items"].tolist()
        items = raw if wid == "w1" else [(a, b) for a, b in raw]
        window = int(data["window"])
        load: dict[str, list[Any]] = {"records" if wid == "w1" else "edges": items[:window]}
        if wid == "w2":
            load["roots"] = data["roots"].tolist()
    rounds = [
        [(items[window + t - 1], 1), (items[t - 1], -1)] for t in range(1, len(items) - window + 1)
    ]
    return load, rounds


# -- deltaflow's side (a child process) ----------------------------------------------------
def _pipeline(wid: str) -> Any:
    from bench_workloads import KeyCount

    from deltaflow.graphs import Reachability

    if wid == "w1":
        return KeyCount()
    if wid == "w2":
        return Reachability()
    sys.path.insert(0, str(HERE.parent / "examples"))
    triangles: Any = importlib.import_module("triangles")
    return triangles.BinaryTriangles()


def _answer(wid: str, out: dict[Any, int]) -> dict[str, Any]:
    from bench_workloads import answer_w1, answer_w2

    if wid == "w1":
        return answer_w1(out)
    if wid == "w2":
        return answer_w2(out)
    bad = [(d, n) for d, n in out.items() if n != 1]
    ans: dict[str, Any] = {"triangles": len(out)}
    if bad:
        ans["error"] = f"counts other than 1: {bad[:3]}"
    return ans


async def _df_interactive(wid: str, load: dict[str, list[Any]], rounds: list[list[Any]]) -> Any:
    import deltaflow as df

    changing = "records" if wid == "w1" else "edges"
    async with df.open(_pipeline(wid)) as job:
        start = time.perf_counter()
        for name, data in load.items():
            job.inputs[name].insert_many(data)
        await job.advance_to(1)
        load_s = time.perf_counter() - start
        handle = job.inputs[changing]
        lat = []
        for t, batch in enumerate(rounds, start=1):
            s = time.perf_counter()
            if len(batch) == 2 and batch[0][1] == 1 and batch[1][1] == -1:
                handle.insert(batch[0][0])
                handle.remove(batch[1][0])
            else:
                handle.insert_many([d for d, _ in batch], [r for _, r in batch])
            await job.advance_to(t + 1)
            lat.append(time.perf_counter() - s)
        final = job.output.at(len(rounds))
    rounds_s = sum(lat)
    return {
        "rounds": len(rounds),
        "load_s": load_s,
        "rounds_s": rounds_s,
        "rounds_per_s": len(rounds) / rounds_s if rounds_s else None,
        "p50_ms": statistics.median(lat) * 1e3 if lat else None,
        "p99_ms": sorted(lat)[int(0.99 * len(lat))] * 1e3 if lat else None,
        "answer": _answer(wid, final),
    }


def _df_static(
    wid: str, load: dict[str, list[Any]], rounds: list[list[Any]], load_only: bool
) -> dict[str, Any]:
    import deltaflow as df

    changing = "records" if wid == "w1" else "edges"
    inputs: dict[str, list[Any]] = {name: [(d, 0, 1) for d in data] for name, data in load.items()}
    ups = inputs.setdefault(changing, [])
    if not load_only:
        ups.extend((d, t, r) for t, batch in enumerate(rounds, start=1) for d, r in batch)
    start = time.perf_counter()
    feeds: Any = inputs
    out = df.run(_pipeline(wid), **feeds)
    total = time.perf_counter() - start
    acc: dict[Any, int] = {}
    for d, _t, r in out:
        acc[d] = acc.get(d, 0) + r
    final = {d: r for d, r in acc.items() if r}
    return {
        "rounds": 0 if load_only else len(rounds),
        "total_s": total,
        "answer": _answer(wid, final),
    }


def deltaflow_side(wid: str, mode: str, path: Path, load_only: bool) -> dict[str, Any]:
    """One deltaflow run, as ``pathway_workloads.py`` makes one Pathway run."""
    import trio

    load, rounds = read_data(wid, path)
    if mode == "static":
        return _df_static(wid, load, rounds, load_only)
    result: dict[str, Any] = trio.run(_df_interactive, wid, load, rounds)
    return result


# -- running both in turn ------------------------------------------------------------------
def pathway_python(given: str | None) -> tuple[str | None, str | None]:
    """The Pathway interpreter to use, or ``None`` and why not."""
    path = given or os.environ.get("DELTAFLOW_PATHWAY_PYTHON")
    if not path:
        return None, "no Pathway interpreter: set DELTAFLOW_PATHWAY_PYTHON (or --pathway)"
    if not Path(path).is_file() or not os.access(path, os.X_OK):
        return None, f"Pathway interpreter {path!r} not found (DELTAFLOW_PATHWAY_PYTHON)"
    return path, None


def _child(cmd: list[str]) -> dict[str, Any]:
    env = {**os.environ, "PATHWAY_THREADS": "1"}  # one worker (Pathway's default, made sure)
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, check=False, cwd=HERE, env=env, timeout=CHILD_S
        )
    except subprocess.TimeoutExpired:
        return {"error": f"no answer after {CHILD_S} s: {' '.join(cmd[1:])}"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return {"error": f"exit {proc.returncode}: {' | '.join(tail)}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def one_run(system: str, pathway: str, wid: str, mode: str, path: Path) -> dict[str, Any]:
    """One measured run of ``system``: rounds/s (static: a run of the load alone too)."""
    if system == "pathway":
        base = [pathway, str(HERE / "pathway_workloads.py"), str(path), wid]
    else:
        base = [sys.executable, str(Path(__file__).resolve()), "--side", "deltaflow",
                "--data", str(path), "--only", wid]  # fmt: skip
    run_mode = "interactive" if mode == "streamed" and system == "deltaflow" else mode
    cmd = base + (["--modes", run_mode] if system == "deltaflow" else [run_mode])
    full = _child(cmd)
    if "error" in full or mode != "static":
        return full
    alone = _child([*cmd, "--load-only"])
    if "error" in alone:
        return alone
    rounds_s = full["total_s"] - alone["total_s"]
    full["load_s"] = alone["total_s"]
    full["rounds_s"] = rounds_s
    full["rounds_per_s"] = full["rounds"] / rounds_s if rounds_s > 0 else None
    return full


def _median(xs: list[float | None]) -> float | None:
    got = [x for x in xs if x is not None]
    return statistics.median(got) if got else None


def side_by_side(
    pathway: str, wid: str, mode: str, path: Path, expected: dict[str, int], runs: int
) -> None:
    """``runs`` pairs of runs, the first to go alternating: the ``pathway.<wid>.<mode>`` figure."""
    systems = ("deltaflow", "pathway") if mode != "streamed" else ("pathway",)
    results: dict[str, list[dict[str, Any]]] = {s: [] for s in systems}
    for i in range(runs):
        order = systems if i % 2 == 0 else systems[::-1]
        for system in order:
            results[system].append(one_run(system, pathway, wid, mode, path))
    rates = {s: [r.get("rounds_per_s") for r in results[s]] for s in systems}
    checks = {
        s: [
            (
                "ok"
                if r.get("answer") == expected
                else r.get("error") or f"mismatch: {r.get('answer')}"
            )
            for r in results[s]
        ]
        for s in systems
    }
    record: dict[str, Any] = {
        "figure": f"pathway.{wid}.{mode}",
        "rounds": results[systems[0]][0].get("rounds"),
    }
    for s in systems:
        record[f"{s}_rounds_per_s"] = _median(rates[s])
        record[f"{s}_runs"] = rates[s]
        lat = [r["p50_ms"] for r in results[s] if r.get("p50_ms") is not None]
        if lat:
            record[f"{s}_p50_ms"] = statistics.median(lat)
        loads = [r["load_s"] for r in results[s] if r.get("load_s") is not None]
        if loads:
            record[f"{s}_load_s"] = statistics.median(loads)
    if len(systems) == 2:
        df_rate, pw_rate = record["deltaflow_rounds_per_s"], record["pathway_rounds_per_s"]
        record["df_over_pathway"] = df_rate / pw_rate if df_rate and pw_rate else None
        pairs = [a / b for a, b in zip(rates["deltaflow"], rates["pathway"]) if a and b]
        record["paired_ratio"] = statistics.median(pairs) if pairs else None
        if mode == "static":
            record["target"] = TARGETS[wid]
            record["meets_target"] = (
                record["df_over_pathway"] >= TARGETS[wid] if record["df_over_pathway"] else None
            )
    all_ok = all(c == "ok" for s in systems for c in checks[s])
    record["check"] = "ok" if all_ok else checks
    emit(record)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, for a smoke run")
    parser.add_argument("--only", default=",".join(WORKLOADS))
    parser.add_argument("--modes", default=",".join(MODES), help="interactive,static,streamed")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pathway", help="Pathway's interpreter (else DELTAFLOW_PATHWAY_PYTHON)")
    parser.add_argument("--side", choices=["deltaflow"], help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--load-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    selected = [w for w in args.only.split(",") if w]
    modes = [m for m in args.modes.split(",") if m]
    if args.side:
        result = deltaflow_side(selected[0], modes[0], args.data, args.load_only)
        print(json.dumps({"system": "deltaflow", **result}), flush=True)
        return 0
    pathway, why = pathway_python(args.pathway)
    if pathway is None:
        for wid in selected:
            for mode in modes:
                emit({"figure": f"pathway.{wid}.{mode}", "skipped": why})
        return 0
    with tempfile.TemporaryDirectory(prefix="deltaflow-pathway-") as tmp:
        for wid in selected:
            path = Path(tmp) / f"{wid}.npz"
            expected = write_data(wid, args.quick, path)
            for mode in modes:
                side_by_side(pathway, wid, mode, path, expected, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
