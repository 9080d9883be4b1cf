"""Durable state: what a checkpoint costs to write, to keep and to resume from.

* ``checkpoint.w4x10`` — W4 (BFS) at ten times its size (1,000,000 nodes, 2,000,000 edges,
  ``workloads.w4_bfs``) in one process: the initial load (``load_s``, open to time 0
  complete), then a checkpoint of the loaded job (``write_s``; ``bytes``: the location's size
  on disk), one edge changed and a second checkpoint (``second_s``, ``second_bytes``: the
  data file it added), and in a fresh process the resume from that location (``resume_s``:
  ``df.open`` entered, the state in place; the answer at ``T - 1`` checked against the
  uninterrupted job's). Ratios: ``write_over_load``, ``resume_over_load``,
  ``second_over_write``, ``bytes_over_inputs`` (the inputs as an Arrow table: one ``int64``
  column per field of a datum, ``inputs_arrow_bytes``).
* ``checkpoint.w2`` — W2 interactive rounds/s without checkpoints and with one every 100
  rounds (``with_over_without``; ``cpu_with_over_without`` by the process's CPU time, which
  the machine's other jobs disturb less), taken in turn, 100 rounds at a time, in one job
  each, so both see the same machine (each checkpoint waits until its data file and
  manifest are on disk). ``checkpoint_cpu_over_rounds``: the checkpoints' CPU time over the
  rounds' of the job without (what the checkpoints cost, apart from what the checkpointing
  job's rounds cost).

* ``checkpoint.clickstream`` — a clickstream app (200,000 events of 5,000 users on 500
  pages in 288 batches of five minutes: per-page counts over sliding windows, each user's
  sessions and longest session, hourly distinct users per category through a join with the
  page table) without checkpoints and with one every 10 batches, taken in turn 10 batches at
  a time as for W2 (``with_over_without``, ``cpu_with_over_without``); each checkpoint's
  seconds and the bytes of the data file it wrote: ``first_s``/``last_s`` (medians of the
  first and last five) and ``first_bytes``/``last_bytes`` (the same), ``last_over_first``.

Each phase runs in a child process of its own (the figures are whole-process: start-up of
the interpreter excluded, everything from ``df.open`` on included).

    python benchmarks/bench_checkpoint.py [--quick] [--only w4x10,w2,clickstream]

Prints one JSON line per figure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio
from bench_workloads import Bfs, Reachability, _singles, answer_w4
from workloads import w2_reach, w4_bfs

import deltaflow as df


def emit(record: dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


def _size(location: Path) -> int:
    return sum(p.stat().st_size for p in location.rglob("*") if p.is_file())


def _arrow_bytes(edges: list[tuple[int, int]]) -> int:
    """The inputs as an Arrow table: the edges' two ``int64`` columns (and the root's)."""
    import numpy as np
    import pyarrow as pa

    cols = np.asarray(edges, dtype=np.int64)
    table = pa.table({"src": cols[:, 0], "dst": cols[:, 1]})
    return int(table.nbytes) + 8


# -- W4x10: write, second write, resume -----------------------------------------------------
async def _w4_write(location: Path, nodes: int, n_edges: int) -> dict[str, Any]:
    root, edges, rounds = w4_bfs(nodes=nodes, edges=n_edges, rounds=1)
    async with df.open(Bfs(), checkpoint=location) as job:
        start = time.perf_counter()
        job.inputs["roots"].insert(root)
        job.inputs["edges"].insert_many(edges)
        await job.advance_to(1)
        load_s = time.perf_counter() - start
        start = time.perf_counter()
        await job.checkpoint()
        write_s = time.perf_counter() - start
        written = _size(location)
        before = {p.name for p in (location / "data").iterdir()}
        ((new, old),) = rounds[0:1]
        job.inputs["edges"].insert(new)
        job.inputs["edges"].remove(old)
        await job.advance_to(2)
        start = time.perf_counter()
        await job.checkpoint()
        second_s = time.perf_counter() - start
        added = sum(p.stat().st_size for p in (location / "data").iterdir() if p.name not in before)
        answer = answer_w4(job.output.at(1))
    return {"load_s": load_s, "write_s": write_s, "bytes": written, "second_s": second_s,
            "second_bytes": added, "answer": answer,
            "inputs_arrow_bytes": _arrow_bytes(edges)}  # fmt: skip


async def _w4_resume(location: Path) -> dict[str, Any]:
    start = time.perf_counter()
    async with df.open(Bfs(), checkpoint=location) as job:
        resume_s = time.perf_counter() - start
        at = job.resumed_at
        assert at is not None
        answer = answer_w4(job.output.at(at - 1))
    return {"resume_s": resume_s, "answer": answer}


def bench_w4x10(quick: bool) -> None:
    nodes, n_edges = (100_000, 200_000) if quick else (1_000_000, 2_000_000)
    location = Path(tempfile.mkdtemp(prefix="deltaflow-bench-"))
    try:
        write = _child("w4-write", str(location), str(nodes), str(n_edges))
        resume = _child("w4-resume", str(location))
    finally:
        shutil.rmtree(location, ignore_errors=True)
    load = write["load_s"]
    emit({"figure": "checkpoint.w4x10", "nodes": nodes, "edges": n_edges, **write,
          "resume_s": resume["resume_s"], "same_answer": resume["answer"] == write["answer"],
          "write_over_load": write["write_s"] / load, "resume_over_load": resume["resume_s"] / load,
          "second_over_write": write["second_s"] / write["write_s"],
          "bytes_over_inputs": write["bytes"] / write["inputs_arrow_bytes"],
          "targets": {"write_over_load": 0.2, "resume_over_load": 0.3,
                      "second_over_write": 0.05, "bytes_over_inputs": 2.0}})  # fmt: skip


# -- W2 interactive, with and without checkpoints -------------------------------------------
CHUNK = 100


async def _w2_pair(location: Path, rounds: list[Any]) -> dict[str, Any]:
    """Two W2 jobs, one checkpointing every ``CHUNK`` rounds, the other not, fed the same
    rounds ``CHUNK`` at a time in turn."""
    roots, init, _ = w2_reach()
    spent = {"with": 0.0, "without": 0.0}
    cpu = {"with": 0.0, "without": 0.0, "checkpoints": 0.0}
    async with (
        df.open(Reachability(), checkpoint=location) as kept,
        df.open(Reachability()) as plain,
    ):
        for job in (kept, plain):
            job.inputs["roots"].insert_many(roots)
            job.inputs["edges"].insert_many(init)
            await job.advance_to(1)
        await kept.checkpoint()
        for lo in range(0, len(rounds), CHUNK):
            chunk = rounds[lo : lo + CHUNK]
            for name, job in (("with", kept), ("without", plain)):
                edges = job.inputs["edges"]
                start, start_cpu = time.perf_counter(), time.process_time()
                for t, ((ins, ret),) in enumerate(chunk, start=lo + 1):
                    edges.insert(ins)
                    edges.remove(ret)
                    await job.advance_to(t + 1)
                if job is kept:
                    before = time.process_time()
                    await job.checkpoint()
                    cpu["checkpoints"] += time.process_time() - before
                spent[name] += time.perf_counter() - start
                cpu[name] += time.process_time() - start_cpu
        same = kept.output.at(len(rounds)) == plain.output.at(len(rounds))
    n = len(rounds)
    return {"rounds": n, "with_rounds_per_s": n / spent["with"],
            "without_rounds_per_s": n / spent["without"],
            "with_over_without": spent["without"] / spent["with"],
            "cpu_with_over_without": cpu["without"] / cpu["with"],
            "checkpoint_cpu_over_rounds": cpu["checkpoints"] / cpu["without"], "same_answer": same,
            "checkpoints": n // CHUNK}  # fmt: skip


def bench_w2(quick: bool) -> None:
    location = Path(tempfile.mkdtemp(prefix="deltaflow-bench-"))
    try:
        result = _child("w2", str(location), "200" if quick else "1000")
    finally:
        shutil.rmtree(location, ignore_errors=True)
    emit({"figure": "checkpoint.w2", **result, "target": 0.9})


# -- a clickstream app, with and without a checkpoint every 10 batches -----------------------
class Clickstream(df.Pipeline):
    """Events ``(user, page, second)`` and pages ``(page, category)``."""

    def build(self, events: df.Collection, pages: df.Collection) -> dict[str, df.Collection]:
        per_page = events.window(df.sliding(600, 300), at=lambda e: e[2])
        sessions = events.window(df.session(1800), at=lambda e: e[2], key=lambda e: e[0])
        spans = sessions.map(lambda s: (s[0], s[1][0])).distinct()
        by_page = events.map(lambda e: (e[1], (e[0], e[2] // 3600))).join(pages)
        hourly = by_page.map(lambda kv: ((kv[1][0][1], kv[1][1]), kv[1][0][0])).distinct()
        return {
            "per_page": per_page.map(lambda we: ((we[0], we[1][1]), 1)).count(),
            "longest": spans.map(lambda s: (s[1], s[0][1] - s[0][0])).max(),
            "hourly": hourly.map(lambda kv: (kv[0], 1)).count(),
        }


def clickstream_data(events: int, batches: int) -> tuple[list[Any], list[list[Any]]]:
    import random

    rng = random.Random(1)
    pages = [(f"/p{p}", f"c{p % 20}") for p in range(500)]
    per = events // batches
    rows = [
        [(f"u{rng.randrange(5000)}", f"/p{rng.randrange(500)}", b * 300 + rng.randrange(300))
         for _ in range(per)]
        for b in range(batches)
    ]  # fmt: skip
    return pages, rows


EVERY = 10


async def _clickstream_pair(location: Path, events: int, batches: int) -> dict[str, Any]:
    import statistics

    pages, rows = clickstream_data(events, batches)
    spent = {"with": 0.0, "without": 0.0}
    cpu = {"with": 0.0, "without": 0.0}
    seconds: list[float] = []
    written: list[int] = []
    async with (
        df.open(Clickstream(), checkpoint=location) as kept,
        df.open(Clickstream()) as plain,
    ):
        for job in (kept, plain):
            job.inputs["pages"].insert_many(pages)
        for lo in range(0, batches, EVERY):
            for name, job in (("with", kept), ("without", plain)):
                start, start_cpu = time.perf_counter(), time.process_time()
                for t in range(lo, min(lo + EVERY, batches)):
                    job.inputs["events"].insert_many(rows[t])
                    await job.advance_to(t + 1)
                if job is kept:
                    before = {p.name for p in (location / "data").iterdir()} if lo else set()
                    begin = time.perf_counter()
                    await job.checkpoint()
                    seconds.append(time.perf_counter() - begin)
                    new = [p for p in (location / "data").iterdir() if p.name not in before]
                    written.append(sum(p.stat().st_size for p in new))
                spent[name] += time.perf_counter() - start
                cpu[name] += time.process_time() - start_cpu
        same = all(kept.outputs[n].at(batches - 1) == plain.outputs[n].at(batches - 1)
                   for n in ("per_page", "longest", "hourly"))  # fmt: skip
    first_s, last_s = statistics.median(seconds[:5]), statistics.median(seconds[-5:])
    first_b, last_b = statistics.median(written[:5]), statistics.median(written[-5:])
    return {"events": events, "batches": batches, "checkpoints": len(seconds),
            "with_over_without": spent["with"] / spent["without"],
            "cpu_with_over_without": cpu["with"] / cpu["without"],
            "first_s": first_s, "last_s": last_s, "last_over_first": last_s / first_s,
            "first_bytes": first_b, "last_bytes": last_b, "same_answer": same}  # fmt: skip


def bench_clickstream(quick: bool) -> None:
    location = Path(tempfile.mkdtemp(prefix="deltaflow-bench-"))
    events, batches = (60_000, 96) if quick else (200_000, 288)
    try:
        result = _child("clickstream", str(location), str(events), str(batches))
    finally:
        shutil.rmtree(location, ignore_errors=True)
    emit({"figure": "checkpoint.clickstream", **result, "target": 1.2})


# -- child processes ------------------------------------------------------------------------
def _child(*args: str) -> dict[str, Any]:
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run(
        [sys.executable, os.path.join(here, "bench_checkpoint.py"), "--child", *args],
        check=True, capture_output=True, text=True, cwd=here,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _run_child(args: list[str]) -> None:
    kind, location, *rest = args
    if kind == "w4-write":
        result = trio.run(_w4_write, Path(location), int(rest[0]), int(rest[1]))
    elif kind == "w4-resume":
        result = trio.run(_w4_resume, Path(location))
    elif kind == "clickstream":
        result = trio.run(_clickstream_pair, Path(location), int(rest[0]), int(rest[1]))
    else:
        _, _, rounds = w2_reach()
        result = trio.run(_w2_pair, Path(location), _singles(rounds[: int(rest[0])]))
    print(json.dumps(result), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="W4 size; 200 W2 rounds")
    parser.add_argument(
        "--only", default="w4x10,w2,clickstream", help="comma-separated: w4x10, w2, clickstream"
    )
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _run_child(args.child)
        return
    only = set(args.only.split(","))
    if "w4x10" in only:
        bench_w4x10(args.quick)
    if "w2" in only:
        bench_w2(args.quick)
    if "clickstream" in only:
        bench_clickstream(args.quick)


if __name__ == "__main__":
    main()
