"""Memory of a long-running job: W1 rounds with a bounded output history (``history=h``).

W1 (a keyed count under a FIFO window of single records, see ``workloads.py``) runs
interactively, one round per logical time. With the default unbounded history the output
keeps every update ever published, so memory grows with the rounds; with ``history=h`` it
keeps the collection and ``h`` times of changes. This prints the process's resident memory
(current, not peak) after the load and at two checkpoints, and their ratio
(``rss_ratio`` = RSS at the end / RSS at the first checkpoint; the goal with a bounded
history is at most 1.1 from 100,000 to 1,000,000 rounds).

Rounds are generated as they are fed (same distribution as ``w1_count``), so the benchmark's
own data do not grow with the rounds.

Run: ``python benchmarks/bench_history.py [--quick] [--rounds N] [--checkpoint N]
[--history H | --unbounded]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from collections import deque

import numpy as np
import trio
from bench_workloads import KeyCount, emit
from workloads import SEED

import deltaflow as df

KEYS, INITIAL = 10_000, 100_000
CHUNK = 10_000


def rss_mb() -> float:
    """The resident set size now, in MB (Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


async def measure(rounds: int, checkpoint: int, history: int | None) -> dict[str, object]:
    rng = np.random.default_rng(SEED)
    live = deque(rng.integers(0, KEYS, size=INITIAL).tolist())
    figures: dict[str, object] = {}
    async with df.open(KeyCount(), history=history) as job:
        records = job.inputs["records"]
        records.insert_many(live)
        await job.advance_to(1)
        gc.collect()
        figures["rss_load_mb"] = rss_mb()
        start = time.perf_counter()
        t = 1
        while t <= rounds:
            for key in rng.integers(0, KEYS, size=CHUNK).tolist():
                records.insert(key)
                records.remove(live.popleft())
                live.append(key)
                t += 1
                await job.advance_to(t)
                if t - 1 == checkpoint:
                    gc.collect()
                    figures["rss_checkpoint_mb"] = rss_mb()
                if t > rounds:
                    break
        gc.collect()
        figures["rss_end_mb"] = rss_mb()
        figures["rounds_per_s"] = rounds / (time.perf_counter() - start)
        figures["answer_keys"] = len(job.output.at(t - 1))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 rounds, checkpoint 2,000")
    parser.add_argument("--rounds", type=int, default=1_000_000)
    parser.add_argument("--checkpoint", type=int, default=100_000)
    parser.add_argument("--history", type=int, default=100)
    parser.add_argument("--unbounded", action="store_true", help="keep the whole history")
    args = parser.parse_args()
    rounds, checkpoint = (20_000, 2_000) if args.quick else (args.rounds, args.checkpoint)
    history = None if args.unbounded else args.history
    figures = trio.run(measure, rounds, checkpoint, history)
    ratio = figures["rss_end_mb"] / figures["rss_checkpoint_mb"]  # type: ignore[operator]
    emit({
        "figure": "w1.history",
        "history": history,
        "rounds": rounds,
        "checkpoint": checkpoint,
        **figures,
        "rss_ratio": ratio,
        "target_rss_ratio_max": 1.1,
        "meets": ratio <= 1.1 if history is not None else None,
    })  # fmt: skip


if __name__ == "__main__":
    main()
