"""Sustained latency: W2 single-edge rounds after many updates against after 1,000.

The roadmap's first benchmark (issue #35): for reachability on 1,000 nodes and 2,000 edges
under a sliding window of edges, "the latency distribution after one million updates should
be pretty much the same as the distribution after one thousand updates". One job (the *long*
one) runs ``--updates`` single-edge rounds (each inserts a new edge and retracts the oldest),
then its next ``--span`` rounds are timed round by round **in turn** with two controls, so
that all three see the same machine at the same moment (this machine is shared and its speed
drifts over a long run by more than the difference sought):

* *early*: a second job on the same data, at rounds 1,000 to 1,000 + ``span`` (after 1,000
  updates);
* *fresh*: a job loaded with the edges live after ``--updates`` rounds and no history at
  all, running the same rounds as the long job (what the accumulated history costs,
  whatever the graph's shape).

Each side's wall and CPU latency per round (p50, p90, p99, max) and the late/early and
late/fresh ratios are printed as ``w2.sustained_long``; the long job's own stretches (rounds
1,000-2,000, 10,000-11,000, ... timed alone as it ran), its resident memory (``/proc``, at
every power of ten) and its peak are in the same line. Every job's answer is checked against
reachability recomputed from scratch. All jobs keep two times of output history
(``history=2``), so that the output of a million rounds takes bounded memory.

Progress goes to stderr every ``--progress`` rounds (rounds done, rounds/s, RSS).

Run: ``python benchmarks/bench_sustained.py [--quick] [--updates N | --million] [--span N]``
(``make bench`` runs the default 20,000 updates; ``--million`` takes about an hour).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from collections import deque
from typing import Any

import trio
from w2_stream import W2Stream

import deltaflow as df
from deltaflow.graphs import Reachability, reachable_pairs

EARLY = 1_000  # the control's rounds start after this many updates
HISTORY = 2


def rss_mb() -> float:
    """Resident memory of this process now (MB)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def distribution(lat: list[float]) -> dict[str, float]:
    """p50, p90, p99 and max of ``lat`` (seconds), in milliseconds.

    >>> distribution([0.001 * i for i in range(1, 101)])["p99_ms"]
    100.0
    """
    ordered = sorted(lat)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3

    return {
        "p50_ms": statistics.median(ordered) * 1e3,
        "p90_ms": pct(0.90),
        "p99_ms": pct(0.99),
        "max_ms": ordered[-1] * 1e3,
    }


def ratios(late: dict[str, float], base: dict[str, float]) -> dict[str, float]:
    """``late[k] / base[k]`` for each percentile ``k`` (``p50_ms`` → ``p50``).

    >>> ratios({"p50_ms": 3.0}, {"p50_ms": 2.0})
    {'p50': 1.5}
    """
    return {k.removesuffix("_ms"): late[k] / base[k] for k in late if base.get(k)}


class Side:
    """One job stepping through rounds, timing each (wall and CPU seconds): the last
    ``keep`` rounds' latencies, and the wall seconds of every round in all (``spent``).

    Only a bounded window is kept so that the benchmark's own memory stays flat over a
    million rounds (a float a round in a list would be 32 bytes a round of resident memory
    beside the job's).
    """

    def __init__(self, job: Any, stream: W2Stream, t: int, keep: int) -> None:
        self.job, self.stream, self.t = job, stream, t
        self.edges = job.inputs["edges"]
        self.wall: deque[float] = deque(maxlen=keep)
        self.cpu: deque[float] = deque(maxlen=keep)
        self.spent = 0.0

    async def step(self, t: int | None = None) -> None:
        """Run the next round (round ``t`` of the stream, by default the side's next)."""
        data_t = self.t + 1 if t is None else t
        ins, ret = self.stream.round(data_t)
        self.t += 1
        w, c = time.perf_counter(), time.process_time()
        self.edges.insert(ins)
        self.edges.remove(ret)
        await self.job.advance_to(self.t + 1)
        spent = time.perf_counter() - w
        self.cpu.append(time.process_time() - c)
        self.wall.append(spent)
        self.spent += spent


async def _load(job: Any, roots: list[int], edges: list[Any]) -> None:
    job.inputs["roots"].insert_many(roots)
    job.inputs["edges"].insert_many(edges)
    await job.advance_to(1)


def _check(job: Any, t: int, expected: set[Any]) -> str:
    out = job.output.at(t)
    got = {d for d, n in out.items() if n == 1}
    if len(got) != len(out) or got != expected:
        return f"mismatch at round {t}: {len(out)} pairs, expected {len(expected)}"
    return "ok"


async def sustained(updates: int, span: int, progress: int) -> dict[str, Any]:
    """The ``w2.sustained_long`` figure: ``updates`` rounds, then ``span`` in turn."""
    if updates < EARLY + span:
        msg = f"--updates must be at least {EARLY} + span ({EARLY + span}), not {updates}"
        raise ValueError(msg)
    stream = W2Stream(rounds=updates + span)
    roots = stream.roots
    stretches: dict[str, dict[str, float]] = {}
    rss: dict[str, float] = {"loaded": 0.0}
    started = time.perf_counter()
    async with df.open(Reachability(), history=HISTORY) as long_job:
        await _load(long_job, roots, stream.initial)
        rss["loaded"] = rss_mb()
        long = Side(long_job, stream, 0, max(EARLY, progress, span))
        mark, window_start = 10, time.perf_counter()
        while long.t < updates:
            await long.step()
            t = long.t
            if t == mark:
                rss[str(t)] = rss_mb()
                mark *= 10
            if t % EARLY == 0 and t // EARLY in (2, 11, 101, 1_001, 10_001):
                # the last 1,000 rounds ran alone: rounds t - 1,000 .. t
                stretches[f"{t - EARLY}_{t}"] = distribution(list(long.wall)[-EARLY:])
            if t % progress == 0:
                now = time.perf_counter()
                rate = progress / (now - window_start)
                window_start = now
                sys.stderr.write(
                    f"rounds {t:,}: {rate:.0f}/s over the last {progress:,}, "
                    f"p50 {statistics.median(list(long.wall)[-progress:]) * 1e3:.2f} ms, "
                    f"RSS {rss_mb():.0f} MB, {now - started:.0f} s\n"
                )
                sys.stderr.flush()
        rss[str(updates)] = rss_mb()
        alone_rounds_per_s = updates / long.spent
        long.wall.clear()
        long.cpu.clear()
        async with (
            df.open(Reachability(), history=HISTORY) as early_job,
            df.open(Reachability(), history=HISTORY) as fresh_job,
        ):
            await _load(early_job, roots, stream.initial)
            early = Side(early_job, stream, 0, span)
            while early.t < EARLY:
                await early.step()
            early.wall.clear()
            early.cpu.clear()
            await _load(fresh_job, roots, stream.live(updates))
            fresh = Side(fresh_job, stream, 0, span)
            for i in range(span):
                turns = [
                    long.step(),
                    early.step(),
                    fresh.step(updates + i + 1),
                ]
                k = i % 3
                for turn in turns[k:] + turns[:k]:
                    await turn
            checks = {
                "long": _check(long_job, long.t, reachable_pairs(roots, stream.live(long.t))),
                "early": _check(early_job, early.t, reachable_pairs(roots, stream.live(early.t))),
                "fresh": _check(fresh_job, fresh.t, reachable_pairs(roots, stream.live(long.t))),
            }
        rss["end"] = rss_mb()
    late_d, early_d, fresh_d = (distribution(list(s.wall)) for s in (long, early, fresh))
    late_c, early_c, fresh_c = (distribution(list(s.cpu)) for s in (long, early, fresh))
    bad = {k: v for k, v in checks.items() if v != "ok"}
    return {
        "figure": "w2.sustained_long",
        "updates": updates,
        "span": span,
        "late": {"rounds": f"{updates}_{updates + span}", **late_d},
        "early": {"rounds": f"{EARLY}_{EARLY + span}", **early_d},
        "fresh": fresh_d,
        "late_over_early": ratios(late_d, early_d),
        "late_over_fresh": ratios(late_d, fresh_d),
        "cpu_late": late_c,
        "cpu_early": early_c,
        "cpu_fresh": fresh_c,
        "cpu_late_over_early": ratios(late_c, early_c),
        "long_rounds_per_s_alone": alone_rounds_per_s,
        "long_stretches_alone": stretches,
        "rss_mb": rss,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "seconds": time.perf_counter() - started,
        "check": bad if bad else "ok",
    }


def _rounded(x: Any) -> Any:
    if isinstance(x, float):
        return round(x, 3)
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    return x


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3,000 updates, span 500")
    parser.add_argument("--updates", type=int, default=20_000)
    parser.add_argument("--million", action="store_true", help="1,000,000 updates")
    parser.add_argument("--span", type=int, default=1_000, help="rounds timed in turn")
    parser.add_argument("--progress", type=int, default=50_000, help="stderr every N rounds")
    args = parser.parse_args(argv)
    updates = 1_000_000 if args.million else args.updates
    span = args.span
    if args.quick:
        updates, span = 3_000, 500
    figure = trio.run(sustained, updates, span, args.progress)
    print(json.dumps(_rounded(figure)), flush=True)
    return 0 if figure["check"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
