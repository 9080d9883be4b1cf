"""Benchmark arrangement storage (``deltaflow.framework.trace``): a script, not a test.

Prints one JSON line per figure:

1. ``arrange``: arrange 1,000,000 ``(key, val)`` int updates (keys uniform in 0..100k, values
   uniform in 0..2**31, each batch's times uniform in its own window of 10 ticks) into a spine in
   batches of 10,000, with a reader holding compaction at the start (nothing cancels, so this
   measures raw storage). Reports updates/s and bytes per update: the trace's own estimate
   (``statistics().nbytes / updates``) and the ``tracemalloc`` peak over the whole run, against
   the raw numpy size of 32 bytes per update (four int64 columns). Target: <= 60 bytes/update.
2. ``compaction``: 100,000 rounds of insert-then-retract on 1,000 keys. Round ``t`` is its own
   time: it inserts ``(t % 1000, t)`` at ``t`` and retracts the datum inserted at ``t - 1``, as
   one small batch, then the reader's frontier follows to ``t``. Reports the trace size every
   10,000 rounds and the median per-round latency over rounds 900-1000 and over the last 100
   rounds. Target: the late median within 1.2x of the early one (latency stays flat).
3. ``product``: the storage of iterative computations, whose times are ``Product(round,
   iteration)``. (a) Arrange 200,000 int ``(key, val)`` updates (keys uniform in 0..10k) with
   ``Product(i, j)`` times (``i`` the batch, ``j`` uniform in 0..20) in batches of 1,000,
   a reader holding compaction one round behind (``{Product(i - 1, 0)}``, so merges advance
   times), once encoded (numpy code columns) and once forced onto the object path
   (``force_objects=True``, the layout every Product batch had before encoding): updates/s and
   bytes per update of each. (b) Read the encoded trace back: 2,000 rounds of 100 random keys,
   ``Spine.lookup_many`` against one ``Spine.lookup`` per key (keys/s each).

Run: ``python benchmarks/bench_trace.py`` (``--quick`` for a smaller, faster run).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import tracemalloc

import numpy as np

from deltaflow.framework.antichain import Antichain
from deltaflow.framework.lattice import Product
from deltaflow.framework.trace import Batch, Description, Spine

BATCH = 10_000
KEYS = 100_000
WINDOW = 10


def _arrange(n_updates: int, seed: int, trace_memory: bool) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    spine = Spine(Antichain([0]))
    reader = spine.reader()  # holds logical compaction at 0: every update is kept
    if trace_memory:
        tracemalloc.start()
    elapsed = 0.0
    for i in range(n_updates // BATCH):
        keys = rng.integers(0, KEYS, BATCH)
        vals = rng.integers(0, 2**31, BATCH)
        times = rng.integers(WINDOW * i, WINDOW * (i + 1), BATCH)
        diffs = np.ones(BATCH, dtype=np.int64)
        desc = Description(Antichain([WINDOW * i]), Antichain([WINDOW * (i + 1)]))
        start = time.perf_counter()
        spine.insert(Batch.from_columns(keys, vals, times, diffs, desc))
        elapsed += time.perf_counter() - start
        del keys, vals, times, diffs
    stats = spine.statistics()
    out = {
        "seconds": elapsed,
        "updates": stats.updates,
        "nbytes": stats.nbytes,
        "batches": stats.batches,
    }
    if trace_memory:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out["peak"] = peak
    reader.drop()
    return out


def figure_arrange(n_updates: int) -> dict[str, object]:
    timed = min((_arrange(n_updates, 1, False) for _ in range(3)), key=lambda r: r["seconds"])
    mem = _arrange(n_updates, 1, True)
    return {
        "figure": "arrange",
        "updates": n_updates,
        "batch": BATCH,
        "seconds": round(timed["seconds"], 3),
        "updates_per_s": round(n_updates / timed["seconds"]),
        "batches_at_end": timed["batches"],
        "trace_bytes_per_update": round(mem["nbytes"] / mem["updates"], 2),
        "peak_bytes_per_update": round(mem["peak"] / n_updates, 2),
        "raw_numpy_bytes_per_update": 32,
        "target_bytes_per_update": 60,
    }


def figure_compaction(rounds: int, keys: int = 1000) -> dict[str, object]:
    spine = Spine(Antichain([0]))
    reader = spine.reader()
    latencies: list[float] = []
    sizes: list[dict[str, int]] = []
    every = max(rounds // 10, 1)
    perf = time.perf_counter
    for t in range(rounds):
        start = perf()
        updates = [(t % keys, t, t, 1)]
        if t:
            updates.append(((t - 1) % keys, t - 1, t, -1))
        desc = Description(Antichain([t]), Antichain([t + 1]))
        spine.insert(Batch.from_updates(updates, desc))
        reader.set_logical_compaction(Antichain([t]))
        latencies.append(perf() - start)
        if (t + 1) % every == 0:
            s = spine.statistics()
            sizes.append({"round": t + 1, "updates": s.updates, "batches": s.batches})
    early = statistics.median(latencies[900:1000])
    late = statistics.median(latencies[-100:])
    return {
        "figure": "compaction",
        "rounds": rounds,
        "keys": keys,
        "sizes": sizes,
        "median_us_rounds_900_1000": round(early * 1e6, 2),
        "median_us_last_100_rounds": round(late * 1e6, 2),
        "late_over_early": round(late / early, 3),
        "target_ratio": 1.2,
        "mean_us_per_round": round(sum(latencies) / len(latencies) * 1e6, 2),
    }


PBATCH = 1_000
PKEYS = 10_000
INNER = 20


def _arrange_products(n_updates: int, force_objects: bool) -> tuple[dict[str, float], Spine]:
    rng = np.random.default_rng(3)
    spine = Spine(Antichain([Product(0, 0)]))
    reader = spine.reader()
    elapsed = 0.0
    perf = time.perf_counter
    for i in range(n_updates // PBATCH):
        keys = rng.integers(0, PKEYS, PBATCH).tolist()
        vals = rng.integers(0, 2**20, PBATCH).tolist()
        times = [Product(i, j) for j in rng.integers(0, INNER, PBATCH).tolist()]
        diffs = [1] * PBATCH
        desc = Description(Antichain([Product(i, 0)]), Antichain([Product(i + 1, 0)]))
        start = perf()
        batch = Batch.from_columns(keys, vals, times, diffs, desc, force_objects=force_objects)
        spine.insert(batch)
        if i:
            reader.set_logical_compaction(Antichain([Product(i - 1, 0)]))
        elapsed += perf() - start
    stats = spine.statistics()
    out = {"seconds": elapsed, "updates": stats.updates, "nbytes": stats.nbytes}
    return out, spine


def figure_product(n_updates: int, lookup_rounds: int) -> dict[str, object]:
    encoded, spine = _arrange_products(n_updates, False)
    objects, _ = _arrange_products(n_updates, True)
    rng = np.random.default_rng(4)
    probes = [rng.integers(0, PKEYS, 100).tolist() for _ in range(lookup_rounds)]
    perf = time.perf_counter
    start = perf()
    for keys in probes:
        spine.lookup_many(keys, sort=False)
    many_s = perf() - start
    lookup = spine.lookup
    start = perf()
    for keys in probes[: max(lookup_rounds // 10, 1)]:
        for k in keys:
            lookup(k)
    single_s = (perf() - start) * lookup_rounds / max(lookup_rounds // 10, 1)
    n_keys = 100 * lookup_rounds
    return {
        "figure": "product",
        "updates": n_updates,
        "batch": PBATCH,
        "encoded_updates_per_s": round(n_updates / encoded["seconds"]),
        "objects_updates_per_s": round(n_updates / objects["seconds"]),
        "encoded_bytes_per_update": round(encoded["nbytes"] / max(encoded["updates"], 1), 2),
        "objects_bytes_per_update": round(objects["nbytes"] / max(objects["updates"], 1), 2),
        "batches_at_end": len(spine.batches()),
        "lookup_many_keys_per_s": round(n_keys / many_s),
        "lookup_keys_per_s": round(n_keys / single_s),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args(argv)
    n_updates = 200_000 if args.quick else 1_000_000
    rounds = 20_000 if args.quick else 100_000
    env = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
    }
    p_updates = 50_000 if args.quick else 200_000
    p_rounds = 500 if args.quick else 2_000
    figures = (
        figure_arrange(n_updates),
        figure_compaction(rounds),
        figure_product(p_updates, p_rounds),
    )
    for fig in figures:
        fig.update(env)
        print(json.dumps(fig), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
