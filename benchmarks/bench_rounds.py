"""Single-update rounds after the load, apart from the load, for W1-W4, against another tree.

A faster load can hide slower rounds in a figure that times both; this one times them apart.
Each workload (``workloads.py``) is loaded at time 0 into ``df.open()``, then fed its
single-update rounds, one time each, and every line reports:

* ``load_s`` — the load (time 0 fed and complete);
* ``rounds_per_s``, ``p50_ms``, ``p99_ms`` — of the rounds alone (wall clock), and
  ``cpu_rounds_per_s`` by this process's CPU time (the machine is shared).

W3 (triangles by binary joins, no load in its spec) is loaded with the edges of its first
``W3_LOADED`` source nodes at time 0; its remaining rounds, one source node's edges each,
are the rounds timed.

With ``--against REV`` (a git revision of this repository, or the path of another tree),
the same driver runs in turn with ``PYTHONPATH=<that tree>/src`` and with this tree, each
in a child process of its own, ``--repeat`` times (alternating, the other tree first every
other time), and a ``<wN>.rounds.ratio`` line gives this tree's median rate over the
other's, of the rounds and of the load (above 1: this tree is faster).

Run: ``python benchmarks/bench_rounds.py [--quick] [--only w1,w4] [--against 01116a2]``;
a single run of one tree: ``python benchmarks/bench_rounds.py --child w4 --rounds 100``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORKLOADS = ("w1", "w2", "w3", "w4")
#: Rounds timed per workload (``--quick``: the second figure).
ROUNDS = {"w1": (2_000, 300), "w2": (1_000, 200), "w3": (461, 200), "w4": (100, 20)}
#: W3's source nodes loaded at time 0 (of 1,461): the rest are its rounds.
W3_LOADED = 1_000


def _workload(wid: str, n: int) -> tuple[Any, dict[str, list[Any]], str, list[Any], Any]:
    """``(pipeline, load, changing input, rounds, expected)``: each round a list of
    ``(datum, diff)`` fed at its own time."""
    sys.path.insert(0, str(HERE))
    import workloads as w

    import deltaflow as df
    from deltaflow.graphs import Bfs, Reachability

    def pairs(rounds: list[tuple[Any, Any]]) -> list[list[tuple[Any, int]]]:
        return [[(ins, 1), (ret, -1)] for ins, ret in rounds]

    if wid == "w1":

        class KeyCount(df.Pipeline):
            def build(self, records: df.Collection) -> df.Collection:
                return records.map(lambda k: (k, k)).count()

        init, rounds = w.w1_count()
        rounds = rounds[:n]
        return KeyCount(), {"records": init}, "records", pairs(rounds), w.w1_expected(init, rounds)
    if wid == "w2":
        roots, init2, rounds2 = w.w2_reach()
        rounds2 = rounds2[:n]
        expected = w.w2_expected(roots, init2, rounds2)
        load = {"roots": roots, "edges": init2}
        return Reachability(), load, "edges", pairs(rounds2), expected
    if wid == "w3":
        sys.path.insert(0, str(ROOT / "examples"))
        from triangles import VERSIONS

        sources = w.w3_triangles()
        kept = sources[: W3_LOADED + n]
        expected = w.w3_expected(kept)
        loaded = [e for batch in kept[:W3_LOADED] for e in batch]
        timed = [[(e, 1) for e in batch] for batch in kept[W3_LOADED:]]
        return VERSIONS["binary"](), {"edges": loaded}, "edges", timed, expected
    root, init4, rounds4 = w.w4_bfs(rounds=n)
    expected = w.w4_expected(root, init4, rounds4)
    return Bfs(), {"roots": [root], "edges": init4}, "edges", pairs(rounds4), expected


def _answer(wid: str, final: dict[Any, int]) -> dict[str, int]:
    if wid == "w1":
        return {"keys": len(final), "checksum": sum(k * c for (k, c), r in final.items() if r)}
    if wid == "w2":
        return {"pairs": len(final)}
    if wid == "w3":
        return {"triangles": sum(final.values())}
    return {"reached": len(final), "dist_sum": sum(d for (_, d) in final)}


async def _run(pipeline: Any, load: dict[str, list[Any]], changing: str, rounds: list[Any]) -> Any:
    import deltaflow as df

    async with df.open(pipeline) as job:
        start = time.perf_counter()
        for name, data in load.items():
            job.inputs[name].insert_many(data)
        await job.advance_to(1)
        load_s = time.perf_counter() - start
        handle = job.inputs[changing]
        wall, cpu = [], []
        for t, changes in enumerate(rounds, start=1):
            w, c = time.perf_counter(), time.process_time()
            handle.insert_many([d for d, _ in changes], [r for _, r in changes])
            await job.advance_to(t + 1)
            wall.append(time.perf_counter() - w)
            cpu.append(time.process_time() - c)
        final = job.output.at(len(rounds))
    return load_s, wall, cpu, final


def child(wid: str, n: int) -> dict[str, Any]:
    """Load ``wid``, run ``n`` of its rounds and measure them (this process's deltaflow)."""
    import trio

    import deltaflow

    pipeline, load, changing, rounds, expected = _workload(wid, n)
    load_s, wall, cpu, final = trio.run(_run, pipeline, load, changing, rounds)
    got = _answer(wid, final)
    ordered = sorted(wall)
    out: dict[str, Any] = {
        "figure": f"{wid}.rounds",
        "tree": str(Path(deltaflow.__file__).resolve().parent.parent.parent),
        "rounds": len(rounds),
        "load_s": load_s,
    }
    if rounds:
        out |= {
            "rounds_per_s": len(rounds) / sum(wall),
            "cpu_rounds_per_s": len(rounds) / sum(cpu) if sum(cpu) else None,
            "p50_ms": statistics.median(wall) * 1e3,
            "p99_ms": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1e3,
        }
    out["check"] = "ok" if got == expected else f"got {got}, expected {expected}"
    return out


def emit(record: dict[str, Any]) -> None:
    """Print one figure as a JSON line (floats rounded for reading)."""
    clean = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in record.items()}
    print(json.dumps(clean), flush=True)


def _tree(rev: str, scratch: Path) -> Path:
    """The tree to compare against: a path as it is, else ``rev`` of this repository
    exported (``git archive``) into ``scratch``."""
    path = Path(rev)
    if (path / "src" / "deltaflow").is_dir():
        return path.resolve()
    archive = scratch / "tree.tar"
    with archive.open("wb") as f:
        subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], stdout=f, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(scratch / "tree", filter="data")
    return scratch / "tree"


def _spawn(tree: Path, wid: str, n: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    args = [sys.executable, __file__, "--child", wid, "--rounds", str(n)]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    if proc.returncode:
        return {"figure": f"{wid}.rounds", "error": proc.stderr.strip().splitlines()[-1:]}
    line: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return line


def compare(wid: str, n: int, other: Path, repeat: int) -> None:
    """Alternate this tree and ``other`` on ``wid``, ``repeat`` runs each; print every run
    and the ratio of the medians."""
    runs: dict[str, list[dict[str, Any]]] = {"this": [], "other": []}
    trees = {"this": ROOT, "other": other}
    for i in range(repeat):
        for which in ("other", "this") if i % 2 == 0 else ("this", "other"):
            got = _spawn(trees[which], wid, n)
            emit({**got, "which": which})
            runs[which].append(got)
    if any("error" in r for rs in runs.values() for r in rs):
        return

    def median(which: str, field: str) -> float:
        return statistics.median(r[field] for r in runs[which])

    emit({
        "figure": f"{wid}.rounds.ratio",
        "against": str(other),
        "rounds": n,
        "runs": repeat,
        "rounds_per_s": median("this", "rounds_per_s"),
        "other_rounds_per_s": median("other", "rounds_per_s"),
        "ratio": median("this", "rounds_per_s") / median("other", "rounds_per_s"),
        "cpu_ratio": median("this", "cpu_rounds_per_s") / median("other", "cpu_rounds_per_s"),
        "p50_ratio": median("other", "p50_ms") / median("this", "p50_ms"),
        "p99_ratio": median("other", "p99_ms") / median("this", "p99_ms"),
        "load_ratio": median("other", "load_s") / median("this", "load_s"),
    })  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Run the selected workloads' rounds, each in a child process (in turn with the other
    tree's with ``--against``)."""
    parser = argparse.ArgumentParser(description="W1-W4 rounds after the load (JSON lines).")
    parser.add_argument("--quick", action="store_true", help="fewer rounds, for a smoke run")
    parser.add_argument("--only", default=",".join(WORKLOADS), help="e.g. w1,w4")
    parser.add_argument("--against", help="a git revision or the path of another tree")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each tree (--against)")
    parser.add_argument("--rounds", type=int, help="rounds timed (default: per workload)")
    parser.add_argument("--child", choices=WORKLOADS, help=argparse.SUPPRESS)
    args, _ = parser.parse_known_args(argv)  # (``make bench`` passes flags to every script)
    if args.child:
        emit(child(args.child, ROUNDS[args.child][0] if args.rounds is None else args.rounds))
        return 0
    selected = [w.strip() for w in args.only.split(",") if w.strip()]
    unknown = sorted(set(selected) - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown workload(s) {unknown}; choose from {', '.join(WORKLOADS)}")
    with tempfile.TemporaryDirectory() as scratch:
        other = _tree(args.against, Path(scratch)) if args.against else None
        for wid in selected:
            n = args.rounds if args.rounds is not None else ROUNDS[wid][int(args.quick)]
            if other is None:
                emit(_spawn(ROOT, wid, n))
            else:
                compare(wid, n, other, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
