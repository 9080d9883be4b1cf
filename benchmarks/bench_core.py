"""Runtime overhead: a chain of ten ``map`` operators.

Figures (one JSON line each):

* ``core.rounds``: single-record rounds, each at its own time (``insert`` then ``await
  advance_to``): rounds/s — the latency a live application sees per change;
* ``core.batch``: one batch of 1,000,000 ints through the same chain: records/s;
* both with ``workers=2`` (an ``exchange`` before the chain, so records really move between
  workers) and with fusion off (one actor per ``map``), to show what each costs.

Run: ``python benchmarks/bench_core.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import trio

import deltaflow as df


class MapChain(df.Pipeline):
    def __init__(self, length: int = 10, exchange: bool = False) -> None:
        self.length = length
        self.exchange = exchange

    def build(self, xs: df.Collection) -> df.Collection:
        if self.exchange:
            xs = xs.exchange()
        for _ in range(self.length):
            xs = xs.map(_inc)
        return xs


def _inc(x: int) -> int:
    return x + 1


async def rounds(n: int, workers: int, exchange: bool, fuse: bool) -> dict[str, float]:
    lat = []
    async with df.open(MapChain(exchange=exchange), workers=workers, fuse=fuse) as job:
        xs = job.inputs["xs"]
        for t in range(1, n + 1):
            start = time.perf_counter()
            xs.insert(t)
            await job.advance_to(t)
            lat.append(time.perf_counter() - start)
        assert job.output.at(n - 1) == {t + 10: 1 for t in range(1, n + 1)}
    total = sum(lat)
    return {
        "rounds_per_s": n / total,
        "p50_us": statistics.median(lat) * 1e6,
        "p99_us": sorted(lat)[int(0.99 * len(lat))] * 1e6,
    }


async def batch(n: int, workers: int, exchange: bool, fuse: bool) -> dict[str, float]:
    data = list(range(n))
    async with df.open(MapChain(exchange=exchange), workers=workers, fuse=fuse) as job:
        start = time.perf_counter()
        job.inputs["xs"].insert_many(data)
        await job.advance_to(1)
        elapsed = time.perf_counter() - start
        out = job.output.at(0)
        assert len(out) == n and out.get(10) == 1
    return {"records_per_s": n / elapsed, "seconds": elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    n_rounds = 500 if args.quick else 5_000
    n_batch = 100_000 if args.quick else 1_000_000
    for workers, exchange in ((1, False), (2, True)):
        for fuse in (True, False):
            tag = {"workers": workers, "exchange": exchange, "fused": fuse}
            r = trio.run(rounds, n_rounds, workers, exchange, fuse)
            print(json.dumps({"figure": "core.rounds", **tag, "rounds": n_rounds, **r}))
            b = trio.run(batch, n_batch, workers, exchange, fuse)
            print(json.dumps({"figure": "core.batch", **tag, "records": n_batch, **b}))


if __name__ == "__main__":
    main()
